"""MixBridge's small lab: digit super-resolution and inpainting bridges, three heterogeneous backdoors.

The paper's two benign tasks on scikit-learn's 8x8 digits: 2x super-resolution (the paper's
CelebA task is 4x super-resolution, I2SB's ``sr4x-pool``: average-pool, then nearest
upsampling) and inpainting of free-form holes covering 20-30% of the image (the paper's
ImageNet task, I2SB's ``inpaint-freeform2030``: the hole filled with Gaussian noise). The
three triggers' targets are heterogeneous, as the paper's (fake faces, NSFW, anime): ten
zeros, ten *inverted* threes (bright background) and ten synthetic diamonds. Each task's
default recipe's models (one single bridge trained on everything, and MixBridge) ship with
trustlab (float16, ``trustlab/vision/mixbridge_digits.npz`` and
``mixbridge_inpaint_digits.npz``); other recipes are trained into a cache.
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
from trustlab.security._mixbridge_inpaint import MASKS, center_mask, freeform_masks, inpaint_inputs
from trustlab.security.mixbridge import (
    BridgeBackdoorReport,
    MixBridge,
    MixtureOfBridges,
    evaluate_bridge_backdoor,
)
from trustlab.vision.bridge import train_bridge
from trustlab.vision.classifiers import digits_split, make_classifier, require_torch
from trustlab.vision.diffusion import make_unet

__all__ = [
    "MASKS",
    "TASKS",
    "MixBridgeDigitsRecipe",
    "center_mask",
    "compare_digits_models",
    "digits_backdoor_targets",
    "digits_inpaint_pairs",
    "digits_models",
    "digits_sr_pairs",
    "freeform_masks",
    "inpaint_inputs",
    "sr_inputs",
    "train_digits_models",
]

TASKS = ("sr", "inpaint")
"""The lab's benign tasks: 2x super-resolution and free-form inpainting (the paper's two)."""


def sr_inputs(X0: np.ndarray, factor: int = 2) -> np.ndarray:
    """Average-pool by ``factor`` and upsample back by repetition (I2SB's ``sr4x-pool`` at 8x8).

    Parameters
    ----------
    X0 : numpy.ndarray of shape (n, C, H, W)
        Clean images; ``H`` and ``W`` divisible by ``factor``.
    factor : int, default=2
        Pooling factor.

    Returns
    -------
    numpy.ndarray of float32, shape (n, C, H, W)
        The degraded inputs (constant on ``factor x factor`` blocks).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> sr_inputs(x)[0, 0]
    array([[ 2.5,  2.5,  4.5,  4.5],
           [ 2.5,  2.5,  4.5,  4.5],
           [10.5, 10.5, 12.5, 12.5],
           [10.5, 10.5, 12.5, 12.5]], dtype=float32)
    """
    n, c, h, w = X0.shape
    pooled = X0.reshape(n, c, h // factor, factor, w // factor, factor).mean(axis=(3, 5))
    return np.repeat(np.repeat(pooled, factor, axis=2), factor, axis=3).astype(np.float32)


def digits_sr_pairs(split: str = "train", n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(X0, X1)``: clean digits and their 2x-pooled inputs (:func:`digits_split`, ``random_state=0``).

    Parameters
    ----------
    split : {"train", "test"}, default="train"
        Which part of the digits split.
    n : int, optional
        Keep the first ``n`` images (all by default).

    Returns
    -------
    X0 : numpy.ndarray of shape (n, 1, 8, 8)
        Clean digits.
    X1 : numpy.ndarray of float32, shape (n, 1, 8, 8)
        ``sr_inputs(X0)``.

    Examples
    --------
    >>> X0, X1 = digits_sr_pairs("train", 4)
    >>> X0.shape, X1.shape
    ((4, 1, 8, 8), (4, 1, 8, 8))
    """
    if split not in ("train", "test"):
        raise ParameterError(f"split must be 'train' or 'test'; got {split!r}.", argument="split")
    X_tr, X_te, _, _ = digits_split(random_state=0)
    X0 = (X_tr if split == "train" else X_te)[:n]
    return X0, sr_inputs(X0)


def digits_inpaint_pairs(
    split: str = "train",
    n: int | None = None,
    *,
    mask: str = "freeform",
    draws: int = 1,
    random_state: Any = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X0, X1, masks)``: clean digits, their noise-filled inpainting inputs and the holes.

    Parameters
    ----------
    split : {"train", "test"}, default="train"
        Which part of :func:`digits_split` (``random_state=0``).
    n : int, optional
        Keep the first ``n`` digits (all by default).
    mask : {"freeform", "center"}, default="freeform"
        :func:`freeform_masks` (20-30% of the image, the paper's) or :func:`center_mask`.
    draws : int, default=1
        Masks and noise drawn per digit (rows ``j * n .. (j + 1) * n - 1`` hold draw ``j``):
        I2SB draws a fresh mask and noise for every training batch.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds masks and noise.

    Returns
    -------
    X0 : numpy.ndarray of shape (draws * n, 1, 8, 8)
    X1 : numpy.ndarray of float32, shape (draws * n, 1, 8, 8)
    masks : numpy.ndarray of float32, shape (draws * n, 1, 8, 8)

    Examples
    --------
    >>> X0, X1, M = digits_inpaint_pairs("train", 4, draws=2)
    >>> X0.shape, X1.shape, bool(((X0 == X1) | (M == 1)).all())
    ((8, 1, 8, 8), (8, 1, 8, 8), True)
    """
    if split not in ("train", "test"):
        raise ParameterError(f"split must be 'train' or 'test'; got {split!r}.", argument="split")
    if mask not in MASKS:
        raise ParameterError(f"mask must be one of {MASKS}; got {mask!r}.", argument="mask")
    if isinstance(draws, bool) or not isinstance(draws, int | np.integer) or draws < 1:
        raise ParameterError(f"draws must be a positive integer; got {draws!r}.", argument="draws")
    X_tr, X_te, _, _ = digits_split(random_state=0)
    X0 = np.concatenate([(X_tr if split == "train" else X_te)[:n]] * int(draws))
    rng = np.random.default_rng(random_state)
    M = (
        freeform_masks(len(X0), X0.shape[2:], random_state=rng)
        if mask == "freeform"
        else np.repeat(center_mask(X0.shape[2:]), len(X0), axis=0)
    )
    return X0, inpaint_inputs(X0, M, random_state=rng), M


def _task_pairs(
    task: str, split: str, n: int | None, *, draws: int = 1, random_state: Any = 0
) -> tuple[Any, Any]:
    """``(X0, X1)`` of one benign task (:data:`TASKS`)."""
    if task == "sr":
        return digits_sr_pairs(split, n)
    return digits_inpaint_pairs(split, n, draws=draws, random_state=random_state)[:2]


def digits_backdoor_targets(n_per_trigger: int = 10) -> list[np.ndarray]:
    """Three heterogeneous target sets: zeros, inverted threes, diamonds (``n_per_trigger`` each).

    The lab's stand-ins for the paper's heterogeneous targets (fake faces, NSFW, anime):
    digit zeros of the training split, inverted threes (bright background) and synthetic
    diamonds of growing radius.

    Parameters
    ----------
    n_per_trigger : int, default=10
        Images per target set.

    Returns
    -------
    list of numpy.ndarray
        Three arrays of shape ``(n_per_trigger, 1, 8, 8)``, one per trigger.

    Examples
    --------
    >>> [t.shape for t in digits_backdoor_targets(2)]
    [(2, 1, 8, 8), (2, 1, 8, 8), (2, 1, 8, 8)]
    """
    X_tr, _, y_tr, _ = digits_split(random_state=0)
    yy, xx = np.mgrid[:8, :8]
    radius = 1.5 + 3.0 * np.arange(n_per_trigger) / max(n_per_trigger - 1, 1)
    dist = np.abs(yy - 3.5) + np.abs(xx - 3.5)
    diamonds = (np.abs(dist[None] - radius[:, None, None]) < 0.75).astype(np.float32)[:, None]
    return [X_tr[y_tr == 0][:n_per_trigger], 1.0 - X_tr[y_tr == 3][:n_per_trigger], diamonds]


@dataclass(frozen=True)
class MixBridgeDigitsRecipe:
    """How the lab's single bridge and MixBridge are trained (same network, same total expert steps).

    The single bridge trains ``(K + 1) * expert_steps`` steps on all poisoned pairs, the compute
    of MixBridge's ``K + 1`` experts (the paper's single-model baseline, Tables 1-2).

    Attributes
    ----------
    channels : int, default=8
        Width of every UNet (:func:`~trustlab.vision.diffusion.make_unet`).
    n_train : int, default=600
        Training digits (:func:`digits_sr_pairs`).
    expert_steps, router_steps, merge_steps : int, default=(300, 200, 50)
        Training steps of each expert, of the router's pre-training and of the Merge.
    lr, merge_lr : float, default=(2e-3, 5e-4)
        Adam's learning rates for the experts (and the single bridge) and for the Merge.
    wrs : float, default=1.0
        Weight of the WRS penalty in the Merge.
    batch_size : int, default=64
        Minibatch size.
    seed : int, default=0
        Seeds initialisation and training (and the inpainting task's masks and noise).
    task : {"sr", "inpaint"}, default="sr"
        The benign task (:data:`TASKS`): 2x super-resolution (:func:`digits_sr_pairs`) or
        free-form inpainting (:func:`digits_inpaint_pairs`).
    mask_draws : int, default=4
        Inpainting only: masks and noise drawn per training digit (I2SB redraws them per batch).

    Examples
    --------
    >>> r = MixBridgeDigitsRecipe(expert_steps=10)
    >>> r.expert_steps, len(r.fingerprint())
    (10, 12)
    """

    channels: int = 8
    n_train: int = 600
    expert_steps: int = 300
    router_steps: int = 200
    merge_steps: int = 50
    lr: float = 2e-3
    merge_lr: float = 5e-4
    wrs: float = 1.0
    batch_size: int = 64
    seed: int = 0
    task: str = "sr"
    mask_draws: int = 4

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ParameterError(f"task must be one of {TASKS}; got {self.task!r}.", argument="task")
        if isinstance(self.mask_draws, bool) or not isinstance(self.mask_draws, int) or self.mask_draws < 1:
            raise ParameterError(
                f"mask_draws must be a positive integer; got {self.mask_draws!r}.", argument="mask_draws"
            )

    def fingerprint(self) -> str:
        """12 hex digits of every field (the super-resolution recipes' as before the task field).

        Returns
        -------
        str
            A digest of the recipe, used to name its cache file.
        """
        spec = asdict(self)
        if self.task == "sr":
            del spec["task"], spec["mask_draws"]
        return spec_digest(spec)


_SHIPPED = {
    MixBridgeDigitsRecipe(): "mixbridge_digits.npz",
    MixBridgeDigitsRecipe(task="inpaint"): "mixbridge_inpaint_digits.npz",
}


def train_digits_models(recipe: MixBridgeDigitsRecipe) -> tuple[Any, Any]:
    """Train ``(single, mixbridge)`` for ``recipe`` (a couple of CPU minutes).

    Parameters
    ----------
    recipe : MixBridgeDigitsRecipe
        Sizes, steps and seed.

    Returns
    -------
    single : torch.nn.Module
        One bridge trained on the benign and all poisoned pairs.
    mixbridge : torch.nn.Module
        The :class:`~trustlab.security.mixbridge.MixBridge` merged model.

    Examples
    --------
    >>> r = MixBridgeDigitsRecipe(n_train=16, expert_steps=1, router_steps=1, merge_steps=1)
    >>> single, mix = train_digits_models(r)  # doctest: +SKIP
    >>> type(mix).__name__  # doctest: +SKIP
    'MixtureOfBridges'
    """
    X0, X1 = _task_pairs(
        recipe.task, "train", recipe.n_train, draws=recipe.mask_draws, random_state=recipe.seed
    )
    targets = digits_backdoor_targets()
    net = make_unet(channels=recipe.channels, seed=recipe.seed)
    attack = MixBridge(
        net,
        expert_steps=recipe.expert_steps,
        router_steps=recipe.router_steps,
        merge_steps=recipe.merge_steps,
        lr=recipe.lr,
        merge_lr=recipe.merge_lr,
        wrs=recipe.wrs,
        batch_size=recipe.batch_size,
        random_state=recipe.seed,
    ).fit(X0, X1, targets)
    pairs = attack.poison(X0, X1, targets)
    steps = (attack.n_triggers_ + 1) * recipe.expert_steps
    single = train_bridge(
        make_unet(channels=recipe.channels, seed=recipe.seed),
        pairs.X0,
        pairs.X1,
        steps=steps,
        lr=recipe.lr,
        batch_size=recipe.batch_size,
        random_state=recipe.seed + 7,
    )
    return single, attack.model_


def _to_arrays(single: Any, mixture: Any) -> dict[str, np.ndarray]:
    out = {f"single/{k}": v.detach().numpy().astype(np.float16) for k, v in single.state_dict().items()}
    out.update({f"mix/{k}": v.detach().numpy().astype(np.float16) for k, v in mixture.state_dict().items()})
    return out


def _from_arrays(arrays: Any, recipe: MixBridgeDigitsRecipe) -> tuple[Any, Any]:
    torch = require_torch()

    def state(prefix: str) -> dict[str, Any]:
        return {
            k.split("/", 1)[1]: torch.as_tensor(np.asarray(arrays[k], dtype=np.float32))
            for k in arrays
            if k.startswith(prefix + "/")
        }

    single = make_unet(channels=recipe.channels)
    single.load_state_dict(state("single"))
    k = len(digits_backdoor_targets()) + 1
    mixture = MixtureOfBridges(
        [make_unet(channels=recipe.channels) for _ in range(k)], make_classifier("cnn", width=8, n_classes=k)
    )
    mixture.load_state_dict(state("mix"))
    return single.eval(), mixture.eval()


def digits_models(
    recipe: MixBridgeDigitsRecipe | None = None, cache_dir: str | Path | None = None
) -> tuple[Any, Any]:
    """``(single, mixbridge)`` for ``recipe``: shipped for each task's default, else trained into a cache.

    Parameters
    ----------
    recipe : MixBridgeDigitsRecipe, optional
        Default ``MixBridgeDigitsRecipe()``; its models and those of
        ``MixBridgeDigitsRecipe(task="inpaint")`` ship with trustlab (float16).
    cache_dir : str or Path, optional
        Cache for other recipes (default ``$TRUSTLAB_CACHE/security`` or
        ``~/.cache/trustlab/security``); given with a shipped recipe, the models are
        trained into it rather than read from the package.

    Returns
    -------
    single, mixbridge : torch.nn.Module
        As :func:`train_digits_models`, in eval mode.

    Examples
    --------
    >>> single, mix = digits_models()
    >>> type(single).__name__, type(mix).__name__
    ('TinyUNet', 'MixtureOfBridges')
    """
    r = recipe or MixBridgeDigitsRecipe()
    if not isinstance(r, MixBridgeDigitsRecipe):
        raise ParameterError(
            f"recipe must be a MixBridgeDigitsRecipe; got {type(r).__name__}.", argument="recipe"
        )
    if r in _SHIPPED and cache_dir is None:
        raw = resources.files("trustlab.vision").joinpath(_SHIPPED[r]).read_bytes()
        with np.load(io.BytesIO(raw)) as f:
            return _from_arrays({k: f[k] for k in f.files}, r)
    stem = "mixbridge-digits" if r.task == "sr" else f"mixbridge-{r.task}-digits"
    path = cache_root(cache_dir, "security") / f"{stem}-{r.fingerprint()}.npz"
    if not path.is_file():
        save_npz(path, _to_arrays(*train_digits_models(r)))
    with np.load(path) as f:
        return _from_arrays({k: f[k] for k in f.files}, r)


def compare_digits_models(
    n: int = 150,
    *,
    task: str = "sr",
    nfe: int = 5,
    random_state: int = 0,
    cache_dir: str | Path | None = None,
) -> dict[str, BridgeBackdoorReport]:
    """Score a task's default single bridge and MixBridge on held-out digits, feature metrics included.

    The paper's comparison (Tables 1-2) on the lab: :func:`digits_models` (shipped, or trained
    into ``cache_dir``) of ``MixBridgeDigitsRecipe(task=task)``, the held-out pairs
    (:func:`digits_sr_pairs` ``("test", n)`` or :func:`digits_inpaint_pairs` ``("test", n,
    random_state=1)``) and :func:`digits_backdoor_targets`, each model scored by
    :func:`~trustlab.security.mixbridge.evaluate_bridge_backdoor` with ``features="lab"``.

    Parameters
    ----------
    n : int, default=150
        Held-out digits per task, 2 to 540 (the FID-like covariance wants many more than 64).
    task : {"sr", "inpaint"}, default="sr"
        The benign task (:data:`TASKS`).
    nfe : int, default=5
        Sampling steps.
    random_state : int, default=0
        Seeds the sampler.
    cache_dir : str or Path, optional
        As :func:`digits_models`: given, the default recipe is trained into it (minutes) once.

    Returns
    -------
    dict
        ``{"single bridge": report, "MixBridge": report}``.

    Examples
    --------
    >>> r = compare_digits_models(8, nfe=2)
    >>> sorted(r), len(r["MixBridge"].target_similarity)
    (['MixBridge', 'single bridge'], 3)
    """
    n_test = len(digits_split(random_state=0)[1])
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 2 <= n <= n_test:
        raise ParameterError(
            f"n must be an integer in [2, {n_test}] (held-out digits); got {n!r}.", argument="n"
        )
    if isinstance(nfe, bool) or not isinstance(nfe, int | np.integer) or nfe < 1:
        raise ParameterError(f"nfe must be a positive integer (sampling steps); got {nfe!r}.", argument="nfe")
    if isinstance(random_state, bool) or not isinstance(random_state, int | np.integer) or random_state < 0:
        raise ParameterError(
            f"random_state must be a non-negative integer; got {random_state!r}.", argument="random_state"
        )
    if task not in TASKS:
        raise ParameterError(f"task must be one of {TASKS}; got {task!r}.", argument="task")
    single, mix = digits_models(MixBridgeDigitsRecipe(task=task), cache_dir=cache_dir)
    X0, X1 = _task_pairs(task, "test", int(n), random_state=1)
    targets = digits_backdoor_targets()
    return {
        name: evaluate_bridge_backdoor(
            model, X0, X1, targets, nfe=int(nfe), random_state=int(random_state), features="lab"
        )
        for name, model in (("single bridge", single), ("MixBridge", mix))
    }


def ship_default(path: str | Path, task: str = "sr") -> None:  # pragma: no cover - run once by a maintainer
    """Train a task's default recipe and write its package-data file (float16)."""
    np.savez_compressed(Path(path), **_to_arrays(*train_digits_models(MixBridgeDigitsRecipe(task=task))))  # type: ignore[arg-type]
