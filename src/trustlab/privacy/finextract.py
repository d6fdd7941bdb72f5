"""FineXtract: extract fine-tuning images from a fine-tuned diffusion model and its base.

Wu, Zhang and Wu (ICML 2025) model few-shot fine-tuning as a shift of the learned
distribution from the pretrained model's ``p_theta`` toward the fine-tuning data ``q``,
``p_theta' ∝ p_theta^(1 - lambda) q^lambda``. Solving for ``q`` gives its score, and in
noise-prediction form the *model guidance*

    eps~(x_t, t) = eps_theta(x_t, t) + w' (eps_theta'(x_t, t) - eps_theta(x_t, t)) + k eps_theta(x_t, t),

with ``w' = 1 / lambda`` (extrapolation past the fine-tuned model, away from the base) and
``k`` the paper's correction term. Sampling with ``eps~`` concentrates the generations on
the fine-tuning images; a clique clustering of the generations (similarity graph, greedy
largest cliques, threshold raised until there are ``N0`` cliques) then returns one
candidate per clique. See docs/privacy/finextract.md for the method and every divergence.

Works on any pair of denoisers ``eps(x, t)`` (``torch.nn.Module``) sharing a DDPM noise
schedule, or on two unconditional ``diffusers`` pipelines (``.unet`` and ``.scheduler``).
This is an attack (an audit of what a released checkpoint leaks): it spends no privacy
budget and draws its sampling noise from a seeded torch generator.

References
----------
X. Wu, J. Zhang, Z. S. Wu, "Leveraging Model Guidance to Extract Training Data from
Personalized Diffusion Models", ICML 2025 (arXiv:2410.03039).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.vision.classifiers import check_images, one_thread, require_torch, torch_generator
from trustlab.vision.diffusion import DDPMSchedule, ddim_loop, ddim_timesteps

__all__ = [
    "ClusterResult",
    "ExtractionScore",
    "FineXtractResult",
    "cluster_generations",
    "extraction_score",
    "finextract",
    "guided_eps",
    "model_guided_sample",
]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]
_REAL = [Interval(numbers.Real, None, None, closed="neither")]

DEFAULT_GUIDANCE_SCALE = 3.0
"""``w'`` of the paper's released runs for full (DreamBooth) fine-tuning (5.0 for LoRA)."""

DIGITS_THRESHOLD = 0.075
"""Per-pixel RMS distance (pixels in [0, 1]) under which a candidate counts as an extracted
8x8 digit: below the 1st percentile (0.078-0.087) of the distance from a real digit to the
nearest *other* digit of its class in scikit-learn's digits."""


@validate_params({"guidance_scale": _REAL, "correction": _REAL})
def guided_eps(
    eps_finetuned: Any, eps_pretrained: Any, guidance_scale: float, correction: float = 0.0
) -> Any:
    """The FineXtract guidance ``eps_pre + w' (eps_ft - eps_pre) + k eps_pre``.

    Parameters
    ----------
    eps_finetuned, eps_pretrained : array or tensor
        The two models' noise predictions at the same ``(x_t, t)``.
    guidance_scale : float
        ``w' = 1 / lambda``; 1 gives the fine-tuned prediction itself.
    correction : float, default=0.0
        ``k``, the paper's correction term (its code adds ``k`` times the base prediction).

    Returns
    -------
    array or tensor
        Same type as the inputs.

    Examples
    --------
    >>> float(guided_eps(np.float64(1.0), np.float64(0.5), 3.0))
    2.0
    """
    return eps_pretrained + guidance_scale * (eps_finetuned - eps_pretrained) + correction * eps_pretrained


@dataclass
class _Denoiser:
    eps: Callable[[Any, Any], Any]
    module: Any
    alphas_cumprod: np.ndarray | None
    shape: tuple[int, ...] | None


def _denoiser(obj: Any, name: str) -> _Denoiser:
    torch = require_torch()
    if hasattr(obj, "unet") and hasattr(obj, "scheduler"):  # a diffusers pipeline
        unet, sched = obj.unet, obj.scheduler
        pred = getattr(getattr(sched, "config", None), "prediction_type", "epsilon")
        if pred != "epsilon":
            raise ModelError(
                f"{name}: its scheduler predicts {pred!r}; FineXtract needs an epsilon-predicting model.",
                argument=name,
            )
        cfg = unet.config
        size = cfg.sample_size if isinstance(cfg.sample_size, tuple | list) else (cfg.sample_size,) * 2
        return _Denoiser(
            eps=lambda x, t: unet(x, t).sample,
            module=unet,
            alphas_cumprod=np.asarray(sched.alphas_cumprod, dtype=np.float64),
            shape=(int(cfg.in_channels), int(size[0]), int(size[1])),
        )
    if isinstance(obj, torch.nn.Module):

        def eps(x: Any, t: Any) -> Any:
            out = obj(x, t)
            return getattr(out, "sample", out)

        return _Denoiser(eps=eps, module=obj, alphas_cumprod=None, shape=None)
    raise ModelError(
        f"{name} must be a torch.nn.Module eps(x, t) or a diffusers pipeline with .unet and .scheduler; "
        f"got {type(obj).__name__}.",
        argument=name,
    )


def _same_architecture(a: Any, b: Any) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    if list(sa) != list(sb) or any(tuple(sa[k].shape) != tuple(sb[k].shape) for k in sa):
        raise ModelError(
            "pretrained: its architecture differs from finetuned's (parameter names or shapes); pass the "
            "base model the fine-tuned one was fine-tuned from.",
            argument="pretrained",
        )


def _setup(finetuned: Any, pretrained: Any, schedule: Any, shape: Any) -> tuple[Any, Any, np.ndarray, tuple]:
    ft = _denoiser(finetuned, "finetuned")
    pre = _denoiser(pretrained, "pretrained") if pretrained is not None else None
    if pre is not None:
        _same_architecture(ft.module, pre.module)
    if schedule is not None and not isinstance(schedule, DDPMSchedule):
        raise ParameterError(
            f"schedule must be a DDPMSchedule; got {type(schedule).__name__}.", argument="schedule"
        )
    acp = ft.alphas_cumprod
    if acp is None:
        acp = (schedule or DDPMSchedule()).alphas_cumprod
    if pre is not None and pre.alphas_cumprod is not None and not np.allclose(pre.alphas_cumprod, acp):
        raise ModelError(
            "pretrained: its noise schedule differs from finetuned's; both must share one DDPM schedule.",
            argument="pretrained",
        )
    if shape is None:
        shape = ft.shape or (1, 8, 8)
    try:
        shape = tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        shape = ()
    if len(shape) != 3 or min(shape) < 1:
        raise ParameterError(f"shape must be (C, H, W) of positive ints; got {shape!r}.", argument="shape")
    return ft, pre, acp, shape


@validate_params(
    {
        "n": _POS_INT,
        "num_inference_steps": _POS_INT,
        "batch_size": _POS_INT,
        "guidance_scale": _REAL,
        "correction": _REAL,
        "clip_denoised": ["boolean"],
    }
)
def model_guided_sample(
    finetuned: Any,
    pretrained: Any,
    n: int,
    *,
    guidance_scale: float = DEFAULT_GUIDANCE_SCALE,
    correction: float = 0.0,
    num_inference_steps: int = 50,
    schedule: DDPMSchedule | None = None,
    shape: tuple[int, ...] | None = None,
    clip_denoised: bool = True,
    batch_size: int = 256,
    random_state: Any = 0,
) -> np.ndarray:
    """Sample ``n`` images by DDIM with FineXtract's model guidance; images in [0, 1].

    Parameters
    ----------
    finetuned : torch.nn.Module or diffusers pipeline
        The fine-tuned denoiser ``eps_theta'(x, t)``.
    pretrained : torch.nn.Module, diffusers pipeline or None
        Its base ``eps_theta``, same architecture. ``None`` samples the fine-tuned model alone
        (then ``guidance_scale`` must be 1 and ``correction`` 0).
    n : int
        Number of generations.
    guidance_scale : float, default=3.0
        ``w'`` (the paper's released setting for full fine-tuning).
    correction : float, default=0.0
        ``k`` (the paper's code uses -0.02 with a text prompt, 0 for LoRA).
    num_inference_steps : int, default=50
        DDIM steps (the paper's 50).
    schedule : DDPMSchedule, optional
        The models' schedule when they are torch modules; default :class:`DDPMSchedule()`.
        A pipeline's own scheduler is used otherwise.
    shape : tuple of int, optional
        ``(C, H, W)``; default the pipeline's, or ``(1, 8, 8)`` for modules.
    clip_denoised : bool, default=True
        Clip each predicted ``x_0`` to [-1, 1].
    batch_size : int, default=256
        Images per forward pass.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the starting noise (the same seed gives the same starts to every arm).

    Returns
    -------
    numpy.ndarray of shape (n, C, H, W)
        float32 in [0, 1].

    Examples
    --------
    >>> from trustlab.vision.diffusion import make_unet
    >>> model_guided_sample(make_unet(channels=4, seed=1), make_unet(channels=4), 3,
    ...                     num_inference_steps=4).shape
    (3, 1, 8, 8)
    """
    torch = require_torch()
    ft, pre, acp, shp = _setup(finetuned, pretrained, schedule, shape)
    if pre is None and (guidance_scale != 1.0 or correction != 0.0):
        raise ParameterError(
            "pretrained is None (direct sampling), so guidance_scale must be 1.0 and correction 0.0; pass "
            "the base model to extrapolate.",
            argument="pretrained",
        )
    if num_inference_steps > len(acp):
        raise ParameterError(
            f"num_inference_steps must be at most the schedule's {len(acp)} steps; "
            f"got {num_inference_steps}.",
            argument="num_inference_steps",
        )

    def eps(x: Any, t: Any) -> Any:
        e_ft = ft.eps(x, t)
        if pre is None:
            return e_ft
        return guided_eps(e_ft, pre.eps(x, t), float(guidance_scale), float(correction))

    modules = [ft.module] + ([pre.module] if pre is not None else [])
    modes = [m.training for m in modules]
    for m in modules:
        m.eval()
    x_T = torch.randn((int(n), *shp), generator=torch_generator(random_state))
    steps = ddim_timesteps(len(acp), int(num_inference_steps))
    out = []
    try:
        with one_thread():
            for start in range(0, int(n), int(batch_size)):
                try:
                    x0 = ddim_loop(
                        eps, x_T[start : start + int(batch_size)], acp, steps, clip_denoised=clip_denoised
                    )
                except (RuntimeError, TypeError) as exc:
                    raise ModelError(
                        f"finetuned/pretrained could not denoise images of shape {shp} ({exc}); pass "
                        "shape=(C, H, W) of the models' input, and unconditional models eps(x, t).",
                        argument="finetuned",
                    ) from None
                out.append(((x0.clamp(-1, 1) + 1) / 2).float().numpy())
    finally:
        for m, mode in zip(modules, modes, strict=True):
            m.train(mode)
    return np.concatenate(out).astype(np.float32)


@dataclass(frozen=True)
class ClusterResult:
    """The clique clustering of generations.

    Attributes
    ----------
    representatives : numpy.ndarray of int
        Index (into the generations) of each kept clique's member nearest its mean feature,
        largest clique first.
    sizes : numpy.ndarray of int
        The kept cliques' sizes.
    threshold : float
        The similarity threshold the scan stopped at (edges join pairs at or above it).
    n_cliques : int
        Cliques at that threshold (at least ``n_clusters``; the largest ``n_clusters`` kept).
    """

    representatives: np.ndarray
    sizes: np.ndarray
    threshold: float
    n_cliques: int


def _clique_partition(adj: np.ndarray) -> list[list[int]]:
    """Greedy: take a maximum clique, remove it, repeat until no node is left.

    Done per connected component (cliques never span two, so the cliques are the same as
    on the whole graph); singletons and complete components need no search.
    """
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(len(adj)))
    rows, cols = np.nonzero(np.triu(adj, 1))
    graph.add_edges_from(zip(rows.tolist(), cols.tolist(), strict=True))
    parts: list[list[int]] = []
    for nodes in sorted((sorted(c) for c in nx.connected_components(graph)), key=lambda c: c[0]):
        sub = graph.subgraph(nodes).copy()
        while sub.number_of_nodes():
            n = sub.number_of_nodes()
            if sub.number_of_edges() == n * (n - 1) // 2:
                clique = list(sub.nodes)
            else:
                clique, _ = nx.max_weight_clique(sub, weight=None)
            parts.append(sorted(clique))
            sub.remove_nodes_from(clique)
    return sorted(parts, key=lambda c: (-len(c), c[0]))


def _default_features(images: np.ndarray) -> np.ndarray:
    return images.reshape(len(images), -1).astype(np.float64)


@validate_params({"n_clusters": _POS_INT})
def cluster_generations(
    images: Any, n_clusters: int, *, features: Callable[[np.ndarray], Any] | None = None
) -> ClusterResult:
    """FineXtract's clustering: the ``n_clusters`` largest cliques of a similarity graph.

    Cosine similarities of the images' features; the threshold starts at the 25th
    percentile of the pairwise similarities (rounded down to 0.01) and rises by 0.01. At
    each threshold the graph joining pairs at or above it is split greedily into cliques
    (the largest, removed, again); the scan stops at the first threshold with at least
    ``n_clusters`` cliques. Each of the largest ``n_clusters`` cliques is represented by its
    member nearest the clique's mean feature.

    Parameters
    ----------
    images : array-like of shape (n, C, H, W)
        Generations in [0, 1]; ``n >= n_clusters``.
    n_clusters : int
        ``N0``, the number of images to extract (the size of the fine-tuning set, or a guess).
    features : callable, optional
        Maps the image array to ``(n, d)`` features (the paper uses SSCD copy-detection
        embeddings); default the raw pixels.

    Returns
    -------
    ClusterResult

    Examples
    --------
    >>> imgs = np.repeat(np.eye(4, 64).reshape(4, 1, 8, 8), 3, axis=0)
    >>> cluster_generations(imgs, 4).sizes.tolist()
    [3, 3, 3, 3]
    """
    arr = check_images(images, "images")
    if len(arr) < n_clusters:
        raise DataError(
            f"images holds {len(arr)} generations, fewer than n_clusters={n_clusters}; generate more.",
            argument="images",
        )
    feats = np.asarray(features(arr) if features is not None else _default_features(arr), dtype=np.float64)
    if feats.ndim != 2 or len(feats) != len(arr) or not np.all(np.isfinite(feats)):
        raise DataError(
            "features must return finite (n, d) features, one row per image.", argument="features"
        )
    norms = np.linalg.norm(feats, axis=1, keepdims=True)
    unit = feats / np.where(norms > 0, norms, 1.0)
    sim = unit @ unit.T
    np.fill_diagonal(sim, 0.0)
    off = sim[np.triu_indices(len(sim), 1)] if len(sim) > 1 else np.zeros(1)
    k_low = math.floor(float(np.quantile(off, 0.25)) / 0.01 + 1e-9)
    k = max(k_low, math.floor(float(off.max()) / 0.01 + 1e-9) + 1)  # above every pair: all singletons
    parts = [[i] for i in range(len(sim))]
    while k > k_low:  # downward: the first threshold (from below) with >= n_clusters cliques
        lower = _clique_partition(sim >= (k - 1) * 0.01 - 1e-12)
        if len(lower) < n_clusters:
            break
        k, parts = k - 1, lower
    thr = k * 0.01
    order = sorted(range(len(parts)), key=lambda i: -len(parts[i]))[:n_clusters]
    reps, sizes = [], []
    for i in order:
        members = np.asarray(parts[i])
        centre = feats[members].mean(axis=0)
        reps.append(int(members[np.argmin(np.linalg.norm(feats[members] - centre, axis=1))]))
        sizes.append(len(members))
    return ClusterResult(np.asarray(reps), np.asarray(sizes), round(thr, 2), len(parts))


@dataclass(frozen=True)
class FineXtractResult:
    """What :func:`finextract` extracted.

    Attributes
    ----------
    candidates : numpy.ndarray of shape (n_images, C, H, W)
        The extracted images in [0, 1], largest cluster first.
    cluster_sizes : numpy.ndarray of int
        How many generations each candidate's clique held.
    generations : numpy.ndarray of shape (n_generations, C, H, W)
        Every guided generation.
    threshold : float
        The clustering's final similarity threshold.
    guidance_scale, correction : float
        ``w'`` and ``k`` used (1 and 0 for direct sampling).
    """

    candidates: np.ndarray
    cluster_sizes: np.ndarray
    generations: np.ndarray
    threshold: float
    guidance_scale: float
    correction: float


@validate_params(
    {
        "n_images": _POS_INT,
        "n_generations": [None, *_POS_INT],
        "guidance_scale": [None, *_REAL],
        "correction": _REAL,
        "num_inference_steps": _POS_INT,
    }
)
def finextract(
    finetuned: Any,
    pretrained: Any,
    n_images: int,
    *,
    n_generations: int | None = None,
    guidance_scale: float | None = None,
    correction: float = 0.0,
    num_inference_steps: int = 50,
    schedule: DDPMSchedule | None = None,
    shape: tuple[int, ...] | None = None,
    features: Callable[[np.ndarray], Any] | None = None,
    random_state: Any = 0,
) -> FineXtractResult:
    """Extract ``n_images`` candidate fine-tuning images: guided sampling, then clustering.

    Parameters
    ----------
    finetuned : torch.nn.Module or diffusers pipeline
        The fine-tuned denoiser ``eps(x, t)``.
    pretrained : torch.nn.Module, diffusers pipeline or None
        Its base model (same architecture). ``None`` gives the paper's baseline: sampling
        the fine-tuned model alone, then the same clustering.
    n_images : int
        ``N0``, how many images to extract (the fine-tuning set's size, or a guess).
    n_generations : int, optional
        ``N``; default ``50 * n_images`` (the paper's N = 500 for N0 = 10).
    guidance_scale : float, optional
        ``w'``; default 3.0 with a pretrained model, 1.0 without.
    correction : float, default=0.0
        ``k``.
    num_inference_steps : int, default=50
        DDIM steps.
    schedule : DDPMSchedule, optional
        The schedule of torch-module denoisers; default :class:`DDPMSchedule()`.
    shape : tuple of int, optional
        ``(C, H, W)``; default the pipeline's or ``(1, 8, 8)``.
    features : callable, optional
        Image features for the clustering (default raw pixels).
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the starting noise.

    Returns
    -------
    FineXtractResult

    Examples
    --------
    >>> from trustlab.vision.diffusion import digits_ddpm_pair
    >>> pre, ft = digits_ddpm_pair()
    >>> res = finextract(ft, pre, 2, n_generations=8, num_inference_steps=5)
    >>> res.candidates.shape
    (2, 1, 8, 8)
    """
    n_gen = 50 * int(n_images) if n_generations is None else int(n_generations)
    if n_gen < n_images:
        raise ParameterError(
            f"n_generations ({n_gen}) must be at least n_images ({n_images}).", argument="n_generations"
        )
    w = (
        (DEFAULT_GUIDANCE_SCALE if pretrained is not None else 1.0)
        if guidance_scale is None
        else guidance_scale
    )
    gens = model_guided_sample(
        finetuned,
        pretrained,
        n_gen,
        guidance_scale=w,
        correction=correction,
        num_inference_steps=num_inference_steps,
        schedule=schedule,
        shape=shape,
        random_state=random_state,
    )
    clusters = cluster_generations(gens, int(n_images), features=features)
    return FineXtractResult(
        candidates=gens[clusters.representatives],
        cluster_sizes=clusters.sizes,
        generations=gens,
        threshold=clusters.threshold,
        guidance_scale=float(w),
        correction=float(correction),
    )


@dataclass(frozen=True)
class ExtractionScore:
    """How many training images a set of candidates recovers.

    Attributes
    ----------
    distances : numpy.ndarray
        For each training image, the per-pixel RMS distance to its nearest candidate.
    extracted : numpy.ndarray of bool
        ``distances < threshold``.
    rate : float
        The share extracted (the paper's extraction success rate, with a pixel distance in
        place of its SSCD similarity).
    threshold : float
        The distance threshold.
    """

    distances: np.ndarray
    extracted: np.ndarray
    rate: float
    threshold: float


@validate_params({"threshold": [Interval(numbers.Real, 0, None, closed="neither")]})
def extraction_score(
    candidates: Any, training_images: Any, *, threshold: float = DIGITS_THRESHOLD
) -> ExtractionScore:
    """Score candidates against the true fine-tuning images (nearest-candidate distance).

    Parameters
    ----------
    candidates : array-like of shape (k, C, H, W)
        Extracted images in [0, 1].
    training_images : array-like of shape (n, C, H, W)
        The fine-tuning images in [0, 1].
    threshold : float, default=0.075
        Per-pixel RMS distance under which an image counts as extracted (see
        :data:`DIGITS_THRESHOLD` for why 0.075 on 8x8 digits).

    Returns
    -------
    ExtractionScore

    Examples
    --------
    >>> train = np.zeros((2, 1, 8, 8)); train[1] += 1
    >>> extraction_score(np.zeros((1, 1, 8, 8)), train).rate
    0.5
    """
    cand = check_images(candidates, "candidates")
    train = check_images(training_images, "training_images")
    if cand.shape[1:] != train.shape[1:]:
        raise DataError(
            f"candidates have image shape {cand.shape[1:]} but training_images {train.shape[1:]}; pass both "
            "at the same resolution.",
            argument="candidates",
        )
    c = cand.reshape(len(cand), -1).astype(np.float64)
    t = train.reshape(len(train), -1).astype(np.float64)
    d2 = (t**2).sum(1)[:, None] + (c**2).sum(1)[None, :] - 2 * t @ c.T
    dist = np.sqrt(np.maximum(d2, 0.0).min(axis=1) / c.shape[1])
    hit = dist < threshold
    return ExtractionScore(dist, hit, float(hit.mean()), float(threshold))
