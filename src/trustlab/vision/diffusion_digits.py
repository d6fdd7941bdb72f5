"""The vision lab's digit DDPM pair: a "pretrained" and a "fine-tuned" tiny DDPM, shipped or cached.

The pretrained model learns scikit-learn's digits of some classes; the fine-tuned one is a
copy fine-tuned on a few images of another class (the few-shot personalisation setting
FineXtract attacks, :mod:`trustlab.privacy.finextract`). Built on :mod:`trustlab.vision.diffusion`.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import cache_root, save_npz, spec_digest
from trustlab.errors import ParameterError
from trustlab.vision.classifiers import require_torch
from trustlab.vision.diffusion import make_unet, train_ddpm

__all__ = [
    "DigitsDDPMRecipe",
    "digits_ddpm_pair",
    "digits_finetune_images",
    "train_digits_ddpm_pair",
]


@dataclass(frozen=True)
class DigitsDDPMRecipe:
    """How the lab's "pretrained" and "fine-tuned" digit DDPMs are trained.

    The pretrained model learns the digits of ``pretrain_classes`` (all of scikit-learn's
    1,797 images of those classes); the fine-tuned model is a copy fine-tuned on
    ``n_finetune`` images of ``finetune_class`` (picked by ``seed``), the few-shot setting of
    DreamBooth-style personalisation at 8x8.

    Parameters
    ----------
    pretrain_classes : tuple of int, default=(0, 1, 2, 3, 4, 5)
        Digits the pretrained model learns.
    finetune_class : int, default=9
        The held-out digit fine-tuned on (not in ``pretrain_classes``).
    n_finetune : int, default=8
        How many of its images.
    channels : int, default=16
        UNet width (:func:`~trustlab.vision.diffusion.make_unet`).
    pretrain_steps, pretrain_lr : int and float, default=(3000, 2e-3)
        Adam steps and learning rate of pretraining.
    finetune_steps, finetune_lr : int and float, default=(800, 1e-3)
        Adam steps and learning rate of fine-tuning (100 per image by default).
    batch_size : int, default=64
        Minibatch size (capped at the number of images).
    seed : int, default=0
        Seeds the weights, batches and the choice of fine-tuning images.

    Examples
    --------
    >>> DigitsDDPMRecipe().fingerprint() == DigitsDDPMRecipe().fingerprint()
    True
    """

    pretrain_classes: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    finetune_class: int = 9
    n_finetune: int = 8
    channels: int = 16
    pretrain_steps: int = 3000
    pretrain_lr: float = 2e-3
    finetune_steps: int = 800
    finetune_lr: float = 1e-3
    batch_size: int = 64
    seed: int = 0

    def pretrain_fingerprint(self) -> str:
        """A hash of the fields that decide the pretrained model.

        Returns
        -------
        str
            12 hex digits.
        """
        keys = ("pretrain_classes", "channels", "pretrain_steps", "pretrain_lr", "batch_size", "seed")
        return spec_digest({k: asdict(self)[k] for k in keys})

    def fingerprint(self) -> str:
        """A hash of every field (decides the fine-tuned model).

        Returns
        -------
        str
            12 hex digits.
        """
        return spec_digest(asdict(self))


def _check_recipe(recipe: Any) -> DigitsDDPMRecipe:
    if recipe is None:
        return DigitsDDPMRecipe()
    if not isinstance(recipe, DigitsDDPMRecipe):
        raise ParameterError(
            f"recipe must be a DigitsDDPMRecipe; got {type(recipe).__name__}.", argument="recipe"
        )
    if not 0 <= recipe.finetune_class <= 9 or recipe.finetune_class in recipe.pretrain_classes:
        raise ParameterError(
            "recipe.finetune_class must be a digit 0-9 outside recipe.pretrain_classes.", argument="recipe"
        )
    if not recipe.pretrain_classes or any(not 0 <= c <= 9 for c in recipe.pretrain_classes):
        raise ParameterError("recipe.pretrain_classes must be digits 0-9.", argument="recipe")
    if recipe.n_finetune < 1:
        raise ParameterError("recipe.n_finetune must be at least 1.", argument="recipe")
    return recipe


def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return (bunch.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8), bunch.target.astype(np.int64)


def digits_finetune_images(recipe: DigitsDDPMRecipe | None = None) -> np.ndarray:
    """The few images the recipe's fine-tuned model is fine-tuned on (the extraction target).

    Parameters
    ----------
    recipe : DigitsDDPMRecipe, optional
        Default :class:`DigitsDDPMRecipe()`.

    Returns
    -------
    numpy.ndarray of shape (n_finetune, 1, 8, 8)
        float32 in [0, 1].

    Examples
    --------
    >>> digits_finetune_images().shape
    (8, 1, 8, 8)
    """
    r = _check_recipe(recipe)
    X, y = _digits()
    pool = np.flatnonzero(y == r.finetune_class)
    pick = np.random.default_rng(r.seed).choice(pool, size=min(r.n_finetune, len(pool)), replace=False)
    return X[np.sort(pick)]


def _train_pretrained(r: DigitsDDPMRecipe) -> Any:
    X, y = _digits()
    net = make_unet(channels=r.channels, seed=r.seed)
    Xp = X[np.isin(y, r.pretrain_classes)]
    return train_ddpm(
        net, Xp, steps=r.pretrain_steps, lr=r.pretrain_lr, batch_size=r.batch_size, random_state=r.seed
    )


def _finetune(r: DigitsDDPMRecipe, pretrained: Any) -> Any:
    import copy

    net = copy.deepcopy(pretrained)
    return train_ddpm(
        net,
        digits_finetune_images(r),
        steps=r.finetune_steps,
        lr=r.finetune_lr,
        batch_size=r.batch_size,
        random_state=r.seed + 1,
    )


def train_digits_ddpm_pair(recipe: DigitsDDPMRecipe | None = None) -> tuple[Any, Any]:
    """Train the recipe's pretrained DDPM and fine-tune a copy (about a minute on one CPU thread).

    Parameters
    ----------
    recipe : DigitsDDPMRecipe, optional
        Default :class:`DigitsDDPMRecipe()` (the weights :func:`digits_ddpm_pair` ships).

    Returns
    -------
    pretrained, finetuned : torch.nn.Module
        In eval mode.

    Examples
    --------
    >>> pre, ft = train_digits_ddpm_pair()  # doctest: +SKIP
    """
    r = _check_recipe(recipe)
    pre = _train_pretrained(r)
    return pre, _finetune(r, pre)


_SHIPPED = "ddpm_digits.npz"


class _Arrays(dict[str, np.ndarray]):
    """A dict with ``.files``, read like an ``np.load`` archive."""

    @property
    def files(self) -> list[str]:
        return list(self)


def _state_to_arrays(model: Any, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": v.detach().numpy().astype(np.float16) for k, v in model.state_dict().items()}


def _arrays_to_model(arrays: Any, prefix: str, channels: int) -> Any:
    torch = require_torch()
    net = make_unet(channels=channels)
    state = {
        k.split("/", 1)[1]: torch.as_tensor(np.asarray(arrays[k], dtype=np.float32))
        for k in arrays.files
        if k.startswith(prefix + "/")
    }
    net.load_state_dict(state)
    return net.eval()


def digits_ddpm_pair(
    recipe: DigitsDDPMRecipe | None = None, *, cache_dir: str | Path | None = None
) -> tuple[Any, Any]:
    """The lab's pretrained and fine-tuned digit DDPMs (shipped, or trained into a cache once).

    The default recipe's weights ship with trustlab (float16, package data), so no test
    trains them; any other recipe is trained by :func:`train_digits_ddpm_pair` on first use
    and kept in ``cache_dir`` (default ``$TRUSTLAB_CACHE/vision`` or
    ``~/.cache/trustlab/vision``), the pretrained model under a hash of its own fields (so
    recipes that differ only in the fine-tuning share it) and the fine-tuned one under a
    hash of the whole recipe. Weights are stored as float16 and loaded back as float32, so a
    cached model is the same whether it was just trained or read.

    Parameters
    ----------
    recipe : DigitsDDPMRecipe, optional
        Default :class:`DigitsDDPMRecipe()`.
    cache_dir : str or Path, optional
        Where trained pairs are kept.

    Returns
    -------
    pretrained, finetuned : torch.nn.Module
        ``make_unet(channels=recipe.channels)`` noise predictors, in eval mode. The images
        the fine-tuned one saw are :func:`digits_finetune_images` ``(recipe)``.

    Examples
    --------
    >>> from trustlab.vision.diffusion import ddim_sample
    >>> pre, ft = digits_ddpm_pair()
    >>> ddim_sample(ft, 2, num_inference_steps=5).shape
    (2, 1, 8, 8)
    """
    r = _check_recipe(recipe)
    shipped = None
    if r.pretrain_fingerprint() == DigitsDDPMRecipe().pretrain_fingerprint():
        raw = resources.files("trustlab.vision").joinpath(_SHIPPED).read_bytes()
        with np.load(io.BytesIO(raw)) as f:
            shipped = _Arrays({k: f[k] for k in f.files})
        if r == DigitsDDPMRecipe():
            return _arrays_to_model(shipped, "pretrained", r.channels), _arrays_to_model(
                shipped, "finetuned", r.channels
            )
    root = cache_root(cache_dir, "vision")
    if shipped is not None:  # the shipped pretrained model, fine-tuned another way
        pre = _arrays_to_model(shipped, "pretrained", r.channels)
    else:
        pre_path = root / f"ddpm-pretrained-{r.pretrain_fingerprint()}.npz"
        if not pre_path.is_file():
            save_npz(pre_path, _state_to_arrays(_train_pretrained(r), "pretrained"))
        with np.load(pre_path) as f:
            pre = _arrays_to_model(f, "pretrained", r.channels)
    ft_path = root / f"ddpm-finetuned-{r.fingerprint()}.npz"
    if not ft_path.is_file():  # fine-tuned from the float16-rounded pretrained model, as shipped
        save_npz(ft_path, _state_to_arrays(_finetune(r, pre), "finetuned"))
    with np.load(ft_path) as f:
        ft = _arrays_to_model(f, "finetuned", r.channels)
    return pre, ft


def ship_default_pair(path: str | Path) -> None:  # pragma: no cover - run once by a maintainer
    """Train the default recipe's pair and write the package-data file (``tools`` use only)."""
    r = DigitsDDPMRecipe()
    pre_arrays = _state_to_arrays(_train_pretrained(r), "pretrained")
    pre = _arrays_to_model(_Arrays(pre_arrays), "pretrained", r.channels)
    arrays = {**pre_arrays, **_state_to_arrays(_finetune(r, pre), "finetuned")}
    np.savez_compressed(Path(path), **arrays)  # type: ignore[arg-type]
