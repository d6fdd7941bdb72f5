"""A class-conditional tiny DDPM on scikit-learn's digits, with classifier-free guidance.

The "prompted" model of the vision lab: the digit class plays the part of a text prompt, so
methods written for text-to-image diffusion (SAeUron's concept unlearning,
:mod:`trustlab.unlearning.saeuron`) have a concept to condition on. The network is the lab's
:func:`~trustlab.vision.diffusion.make_unet` with a learned class embedding added to its time
embedding; a learned "null" class (index ``n_classes``) is the unconditional branch, trained by
dropping the label with probability ``p_uncond`` (Ho and Salimans' classifier-free guidance).
The call signature ``model(x, t, class_labels=y)`` is ``diffusers``' ``UNet2DModel``'s, so code
written for this model runs on a user's class-conditional ``UNet2DModel`` too.

The default recipe's weights ship with trustlab (``ddpm_digits_cond.npz``, float16, about
150 KB); another recipe is trained on first use into ``~/.cache/trustlab/vision``.

References
----------
J. Ho, T. Salimans, "Classifier-Free Diffusion Guidance", NeurIPS 2021 Workshop on Deep
Generative Models and Downstream Applications.
"""

from __future__ import annotations

import functools
import io
import numbers
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import cache_root, save_npz, spec_digest
from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ParameterError
from trustlab.vision.classifiers import check_labels, check_model, require_torch
from trustlab.vision.diffusion import DDPMSchedule, _fit_noise_predictor, _to_model_space, _unet_class

__all__ = [
    "ConditionalDDPMRecipe",
    "digits_conditional_ddpm",
    "make_conditional_unet",
    "train_conditional_ddpm",
]

_SHIPPED = "ddpm_digits_cond.npz"


@functools.cache
def _cond_unet_class() -> Any:
    torch = require_torch()

    class ConditionalUNet(_unet_class()):  # type: ignore[misc]
        """The lab's TinyUNet with a class embedding added to the time embedding."""

        def __init__(self, channels: int, in_channels: int, n_classes: int) -> None:
            super().__init__(channels, in_channels)
            self.n_classes = n_classes
            self.class_embedding = torch.nn.Embedding(n_classes + 1, self.t_dim)

        def forward(self, x: Any, t: Any, class_labels: Any = None) -> Any:
            t = torch.as_tensor(t)
            if t.ndim == 0:
                t = t.expand(x.shape[0])
            if class_labels is None:
                class_labels = torch.full((x.shape[0],), self.n_classes, dtype=torch.long)
            temb = self._embed(t) + self.class_embedding(torch.as_tensor(class_labels, dtype=torch.long))
            h1 = self.down1(self.inp(x), temb)
            h = self.mid(self.down2(self.downsample(h1), temb), temb)
            h = self.up1(torch.cat([self.upsample(h), h1], dim=1), temb)
            return self.out(h)

    return ConditionalUNet


@validate_params(
    {
        "channels": [Interval(numbers.Integral, 2, None, closed="left")],
        "in_channels": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_classes": [Interval(numbers.Integral, 1, None, closed="left")],
    }
)
def make_conditional_unet(
    *, channels: int = 16, in_channels: int = 1, n_classes: int = 10, seed: int = 0
) -> Any:
    """A class-conditional UNet noise predictor ``model(x, t, class_labels=y) -> eps``.

    :func:`~trustlab.vision.diffusion.make_unet`'s network plus an embedding of ``y`` in
    ``0 .. n_classes`` (``n_classes`` is the null class; ``class_labels=None`` means it)
    added to the time embedding.

    Parameters
    ----------
    channels, in_channels : int, default=(16, 1)
        As in :func:`~trustlab.vision.diffusion.make_unet`.
    n_classes : int, default=10
        Number of real classes.
    seed : int, default=0
        Seeds the initial weights (torch's global generator is restored).

    Returns
    -------
    torch.nn.Module

    Examples
    --------
    >>> torch = require_torch()
    >>> net = make_conditional_unet(channels=4)
    >>> tuple(net(torch.zeros(2, 1, 8, 8), torch.tensor([5, 5]), class_labels=torch.tensor([3, 10])).shape)
    (2, 1, 8, 8)
    """
    torch = require_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return _cond_unet_class()(int(channels), int(in_channels), int(n_classes))


@validate_params(
    {
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "p_uncond": [Interval(numbers.Real, 0, 1, closed="left")],
    }
)
def train_conditional_ddpm(
    model: Any,
    X: Any,
    y: Any,
    *,
    steps: int = 4000,
    lr: float = 2e-3,
    batch_size: int = 64,
    p_uncond: float = 0.1,
    schedule: DDPMSchedule | None = None,
    random_state: Any = 0,
) -> Any:
    """Train a class-conditional noise predictor in place; return it in eval mode.

    Ho et al.'s simple loss with the label replaced by the null class with probability
    ``p_uncond`` (classifier-free guidance training, Ho and Salimans).

    Parameters
    ----------
    model : torch.nn.Module
        ``model(x, t, class_labels=y)`` (e.g. :func:`make_conditional_unet`).
    X : array-like of shape (n, C, H, W)
        Images in [0, 1].
    y : array-like of shape (n,)
        Integer labels in ``0 .. model.n_classes - 1``.
    steps, lr, batch_size : int, float, int, default=(4000, 2e-3, 64)
        Adam steps, learning rate and minibatch size.
    p_uncond : float in [0, 1), default=0.1
        Label-dropout probability.
    schedule : DDPMSchedule, optional
    random_state : None, int or numpy.random.Generator, default=0

    Returns
    -------
    torch.nn.Module
        ``model``, trained, in eval mode.

    Examples
    --------
    >>> X = np.random.default_rng(0).random((8, 1, 8, 8)).astype(np.float32)
    >>> net = train_conditional_ddpm(make_conditional_unet(channels=4), X, np.arange(8) % 2, steps=2)
    >>> net.training
    False
    """
    torch = require_torch()
    check_model(model)
    x0 = _to_model_space(X, "X")
    n_classes = int(getattr(model, "n_classes", 0))
    if n_classes < 1:
        raise ParameterError("model must have an int n_classes (make_conditional_unet's).", argument="model")
    labels = torch.as_tensor(check_labels(y, len(x0), n_classes, "y"))

    def class_dropout(idx: Any, gen: Any) -> dict[str, Any]:
        drop = torch.rand(len(idx), generator=gen) < float(p_uncond)  # classifier-free guidance's null class
        return {"class_labels": torch.where(drop, torch.full_like(labels[idx], n_classes), labels[idx])}

    sched = schedule or DDPMSchedule()
    return _fit_noise_predictor(model, x0, steps, lr, batch_size, sched, random_state, class_dropout)


@dataclass(frozen=True)
class ConditionalDDPMRecipe:
    """How the lab's class-conditional digit DDPM is trained (all 1,797 digits, 10 classes).

    Parameters
    ----------
    channels : int, default=16
    steps, lr, batch_size : int, float, int, default=(4000, 2e-3, 64)
    p_uncond : float, default=0.1
    seed : int, default=0

    Examples
    --------
    >>> len(ConditionalDDPMRecipe().fingerprint())
    12
    """

    channels: int = 16
    steps: int = 4000
    lr: float = 2e-3
    batch_size: int = 64
    p_uncond: float = 0.1
    seed: int = 0

    def fingerprint(self) -> str:
        """A hash of every field.

        Returns
        -------
        str
            12 hex digits.
        """
        return spec_digest(asdict(self))


def _train_recipe(r: ConditionalDDPMRecipe) -> Any:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    X = (bunch.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    net = make_conditional_unet(channels=r.channels, seed=r.seed)
    return train_conditional_ddpm(
        net,
        X,
        bunch.target,
        steps=r.steps,
        lr=r.lr,
        batch_size=r.batch_size,
        p_uncond=r.p_uncond,
        random_state=r.seed,
    )


def _load(arrays: Any, channels: int) -> Any:
    torch = require_torch()
    net = make_conditional_unet(channels=channels)
    net.load_state_dict({k: torch.as_tensor(np.asarray(arrays[k], dtype=np.float32)) for k in arrays.files})
    return net.eval()


def _arrays(model: Any) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().astype(np.float16) for k, v in model.state_dict().items()}


def digits_conditional_ddpm(
    recipe: ConditionalDDPMRecipe | None = None, *, cache_dir: str | Path | None = None
) -> Any:
    """The lab's class-conditional digit DDPM (shipped, or trained into a cache once).

    Parameters
    ----------
    recipe : ConditionalDDPMRecipe, optional
        Default :class:`ConditionalDDPMRecipe()`, whose weights ship with trustlab.
    cache_dir : str or Path, optional
        Where other recipes' weights are kept (default ``$TRUSTLAB_CACHE/vision`` or
        ``~/.cache/trustlab/vision``).

    Returns
    -------
    torch.nn.Module
        ``model(x, t, class_labels=y)``, in eval mode, ``n_classes = 10`` (null class 10).

    Examples
    --------
    >>> net = digits_conditional_ddpm()
    >>> net.n_classes
    10
    """
    r = recipe if recipe is not None else ConditionalDDPMRecipe()
    if not isinstance(r, ConditionalDDPMRecipe):
        raise ParameterError(
            f"recipe must be a ConditionalDDPMRecipe; got {type(r).__name__}.", argument="recipe"
        )
    if r == ConditionalDDPMRecipe():
        raw = resources.files("trustlab.vision").joinpath(_SHIPPED).read_bytes()
        with np.load(io.BytesIO(raw)) as f:
            return _load(f, r.channels)
    path = cache_root(cache_dir, "vision") / f"ddpm-conditional-{r.fingerprint()}.npz"
    if not path.is_file():
        save_npz(path, _arrays(_train_recipe(r)))
    with np.load(path) as f:
        return _load(f, r.channels)


def ship_default_model(path: str | Path) -> None:  # pragma: no cover - run once by a maintainer
    """Train the default recipe and write the package-data file (``tools`` use only)."""
    np.savez_compressed(Path(path), **_arrays(_train_recipe(ConditionalDDPMRecipe())))  # type: ignore[arg-type]
