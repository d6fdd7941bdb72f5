"""The vision lab's *conditional* digit DDPM pair: a class-conditional base and its fine-tuned copy.

The text-to-image analogue of :mod:`trustlab.vision.diffusion_digits` for conditional
FineXtract (:mod:`trustlab.privacy.finextract_conditional`). The digit class plays the part of
a text prompt and the null class (index ``n_classes``) the part of the empty prompt. The
pretrained model learns the digits of ``pretrain_classes`` with classifier-free guidance's
label dropout, so it has an unconditional branch; it never sees ``finetune_class``, whose
label embedding stays untrained, like DreamBooth's rare identifier token. The fine-tuned copy
is fine-tuned DreamBooth-style on ``n_finetune`` images of ``finetune_class`` *with that
label* (no dropout). The default recipe's weights ship with trustlab
(``ddpm_digits_cond_pair.npz``, float16); other recipes are trained once (about 30 s on one
CPU thread) into ``~/.cache/trustlab/vision``.

References
----------
J. Ho, T. Salimans, "Classifier-Free Diffusion Guidance", NeurIPS 2021 Workshop.
N. Ruiz et al., "DreamBooth: Fine Tuning Text-to-Image Diffusion Models for Subject-Driven
Generation", CVPR 2023.
"""

from __future__ import annotations

import copy
import io
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import cache_root, save_npz, spec_digest
from trustlab.errors import ParameterError
from trustlab.vision.classifiers import require_torch
from trustlab.vision.diffusion_conditional import make_conditional_unet, train_conditional_ddpm
from trustlab.vision.diffusion_digits import DigitsDDPMRecipe, _check_recipe, _digits, digits_finetune_images

__all__ = [
    "ConditionalDigitsPairRecipe",
    "conditional_digits_finetune_images",
    "digits_conditional_ddpm_pair",
]

_SHIPPED = "ddpm_digits_cond_pair.npz"


@dataclass(frozen=True)
class ConditionalDigitsPairRecipe:
    """How the lab's conditional "pretrained" and "fine-tuned" digit DDPMs are trained.

    Parameters
    ----------
    pretrain_classes : tuple of int, default=(0, 1, 2, 3, 4, 5)
        Digits the pretrained model learns (all of scikit-learn's images of them).
    finetune_class : int, default=9
        The held-out digit fine-tuned on, also its "prompt" (label).
    n_finetune : int, default=8
        How many of its images (the same ones :func:`digits_finetune_images` picks).
    channels : int, default=16
        UNet width.
    pretrain_steps, pretrain_lr, p_uncond : int, float, float, default=(4000, 2e-3, 0.1)
        Pretraining: Adam steps, learning rate, label-dropout probability.
    finetune_steps, finetune_lr : int and float, default=(800, 1e-3)
        Fine-tuning (100 steps per image, always with the label).
    batch_size : int, default=64
    seed : int, default=0

    Examples
    --------
    >>> len(ConditionalDigitsPairRecipe().fingerprint())
    12
    """

    pretrain_classes: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    finetune_class: int = 9
    n_finetune: int = 8
    channels: int = 16
    pretrain_steps: int = 4000
    pretrain_lr: float = 2e-3
    p_uncond: float = 0.1
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
        keys = (
            "pretrain_classes",
            "channels",
            "pretrain_steps",
            "pretrain_lr",
            "p_uncond",
            "batch_size",
            "seed",
        )
        return spec_digest({"conditional": True, **{k: asdict(self)[k] for k in keys}})

    def fingerprint(self) -> str:
        """A hash of every field (decides the fine-tuned model).

        Returns
        -------
        str
            12 hex digits.
        """
        return spec_digest({"conditional": True, **asdict(self)})

    def _unconditional(self) -> DigitsDDPMRecipe:
        return DigitsDDPMRecipe(
            pretrain_classes=self.pretrain_classes,
            finetune_class=self.finetune_class,
            n_finetune=self.n_finetune,
            seed=self.seed,
        )


def _check(recipe: Any) -> ConditionalDigitsPairRecipe:
    r = ConditionalDigitsPairRecipe() if recipe is None else recipe
    if not isinstance(r, ConditionalDigitsPairRecipe):
        raise ParameterError(
            f"recipe must be a ConditionalDigitsPairRecipe; got {type(r).__name__}.", argument="recipe"
        )
    _check_recipe(r._unconditional())  # the same classes and images as the unconditional pair
    return r


def conditional_digits_finetune_images(recipe: ConditionalDigitsPairRecipe | None = None) -> np.ndarray:
    """The images the recipe's fine-tuned model saw (with the label ``recipe.finetune_class``).

    Parameters
    ----------
    recipe : ConditionalDigitsPairRecipe, optional

    Returns
    -------
    numpy.ndarray of shape (n_finetune, 1, 8, 8)
        float32 in [0, 1].

    Examples
    --------
    >>> conditional_digits_finetune_images().shape
    (8, 1, 8, 8)
    """
    return digits_finetune_images(_check(recipe)._unconditional())


def _pretrain(r: ConditionalDigitsPairRecipe) -> Any:
    X, y = _digits()
    keep = np.isin(y, r.pretrain_classes)
    net = make_conditional_unet(channels=r.channels, seed=r.seed)
    return train_conditional_ddpm(
        net,
        X[keep],
        y[keep],
        steps=r.pretrain_steps,
        lr=r.pretrain_lr,
        batch_size=r.batch_size,
        p_uncond=r.p_uncond,
        random_state=r.seed,
    )


def _finetune(r: ConditionalDigitsPairRecipe, pretrained: Any) -> Any:
    imgs = conditional_digits_finetune_images(r)
    return train_conditional_ddpm(
        copy.deepcopy(pretrained),
        imgs,
        np.full(len(imgs), r.finetune_class),
        steps=r.finetune_steps,
        lr=r.finetune_lr,
        batch_size=r.batch_size,
        p_uncond=0.0,  # DreamBooth fine-tunes with the prompt every step
        random_state=r.seed + 1,
    )


def _to_arrays(model: Any, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": v.detach().numpy().astype(np.float16) for k, v in model.state_dict().items()}


def _from_arrays(arrays: Any, prefix: str, channels: int) -> Any:
    torch = require_torch()
    net = make_conditional_unet(channels=channels)
    net.load_state_dict(
        {
            k.split("/", 1)[1]: torch.as_tensor(np.asarray(arrays[k], dtype=np.float32))
            for k in arrays
            if k.startswith(prefix + "/")
        }
    )
    return net.eval()


def _read(path: Any) -> dict[str, np.ndarray]:
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def digits_conditional_ddpm_pair(
    recipe: ConditionalDigitsPairRecipe | None = None, *, cache_dir: str | Path | None = None
) -> tuple[Any, Any]:
    """The lab's conditional pretrained and fine-tuned digit DDPMs (shipped, or trained once).

    Both are :func:`~trustlab.vision.diffusion_conditional.make_conditional_unet` models
    ``model(x, t, class_labels=y)`` with ``n_classes = 10`` (null class 10). The pretrained
    model is stored under a hash of its own fields, so recipes differing only in the
    fine-tuning share it; weights are float16 on disk, and the fine-tuning starts from the
    float16-rounded pretrained model, so a cached pair equals a freshly trained one.

    Parameters
    ----------
    recipe : ConditionalDigitsPairRecipe, optional
        Default :class:`ConditionalDigitsPairRecipe()` (shipped).
    cache_dir : str or Path, optional
        Default ``$TRUSTLAB_CACHE/vision`` or ``~/.cache/trustlab/vision``.

    Returns
    -------
    pretrained, finetuned : torch.nn.Module
        In eval mode.

    Examples
    --------
    >>> pre, ft = digits_conditional_ddpm_pair()
    >>> ft.n_classes
    10
    """
    r = _check(recipe)
    root = cache_root(cache_dir, "vision")
    if r.pretrain_fingerprint() == ConditionalDigitsPairRecipe().pretrain_fingerprint():
        arrays = _read(io.BytesIO(resources.files("trustlab.vision").joinpath(_SHIPPED).read_bytes()))
        pre = _from_arrays(arrays, "pretrained", r.channels)
        if r == ConditionalDigitsPairRecipe():
            return pre, _from_arrays(arrays, "finetuned", r.channels)
    else:
        pre_path = root / f"ddpm-cond-pretrained-{r.pretrain_fingerprint()}.npz"
        if not pre_path.is_file():
            save_npz(pre_path, _to_arrays(_pretrain(r), "pretrained"))
        pre = _from_arrays(_read(pre_path), "pretrained", r.channels)
    ft_path = root / f"ddpm-cond-finetuned-{r.fingerprint()}.npz"
    if not ft_path.is_file():
        save_npz(ft_path, _to_arrays(_finetune(r, pre), "finetuned"))
    return pre, _from_arrays(_read(ft_path), "finetuned", r.channels)


def ship_default_pair(path: str | Path) -> None:  # pragma: no cover - run once by a maintainer
    """Write the default recipe's pair as package data (``tools`` use only)."""
    r = ConditionalDigitsPairRecipe()
    pre_arrays = _to_arrays(_pretrain(r), "pretrained")
    pre = _from_arrays(pre_arrays, "pretrained", r.channels)
    np.savez_compressed(Path(path), **pre_arrays, **_to_arrays(_finetune(r, pre), "finetuned"))  # type: ignore[arg-type]
