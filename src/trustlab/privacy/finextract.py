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

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ModelError, ParameterError, TrustlabError
from trustlab.privacy._finextract_cluster import (
    DIGITS_THRESHOLD,
    ClusterResult,
    ExtractionScore,
    cluster_generations,
    extraction_score,
)
from trustlab.vision._pipeline import is_pipeline, pipeline_parts
from trustlab.vision.classifiers import require_torch
from trustlab.vision.diffusion import DDPMSchedule, _ddim_images

__all__ = [
    "DIGITS_THRESHOLD",
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
    # a diffusers pipeline: its .unet, and its .scheduler's alphas_cumprod (shared reader)
    parts = pipeline_parts(obj, name, "FineXtract") if is_pipeline(obj) else None
    module = parts.unet if parts is not None else obj
    if parts is None and not isinstance(module, torch.nn.Module):
        raise ModelError(
            f"{name} must be a torch.nn.Module eps(x, t) or a diffusers pipeline with .unet and "
            f".scheduler; got {type(obj).__name__}.",
            argument=name,
        )

    def eps(x: Any, t: Any) -> Any:
        out = module(x, t)
        return getattr(out, "sample", out)

    return _Denoiser(
        eps=eps,
        module=module,
        alphas_cumprod=None if parts is None else parts.alphas_cumprod,
        shape=None if parts is None else parts.shape,
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
    require_torch()
    ft, pre, acp, shp = _setup(finetuned, pretrained, schedule, shape)
    if pre is None and (guidance_scale != 1.0 or correction != 0.0):
        raise ParameterError(
            "pretrained is None (direct sampling), so guidance_scale must be 1.0 and correction 0.0; pass "
            "the base model to extrapolate.",
            argument="pretrained",
        )

    def eps(x: Any, t: Any) -> Any:
        e_ft = ft.eps(x, t)
        if pre is None:
            return e_ft
        return guided_eps(e_ft, pre.eps(x, t), float(guidance_scale), float(correction))

    modules = [ft.module] + ([pre.module] if pre is not None else [])
    hint = "pass shape=(C, H, W) of the models' input, and unconditional models eps(x, t)."
    return _eval_sample(
        eps,
        modules,
        int(n),
        shp,
        acp,
        int(num_inference_steps),
        int(batch_size),
        random_state,
        clip_denoised,
        hint,
        (RuntimeError, TypeError),
    )


def _eval_sample(
    eps: Any,
    modules: list[Any],
    n: int,
    shp: tuple[int, ...],
    acp: np.ndarray,
    num_inference_steps: int,
    batch_size: int,
    random_state: Any,
    clip_denoised: bool,
    hint: str,
    errors: tuple[type[BaseException], ...],
) -> np.ndarray:
    """:func:`trustlab.vision.diffusion` DDIM sampling of ``eps`` with the modules in eval mode.

    A denoiser failure becomes a :class:`ModelError` naming ``finetuned`` and ending with ``hint``;
    the modules' training flags are restored afterwards.
    """
    modes = [m.training for m in modules]
    for m in modules:
        m.eval()
    try:
        return _ddim_images(eps, n, shp, acp, num_inference_steps, batch_size, random_state, clip_denoised)
    except TrustlabError:
        raise  # the sampler's own argument errors (ParameterError is also a TypeError)
    except errors as exc:
        raise ModelError(
            f"finetuned/pretrained could not denoise images of shape {shp} ({exc}); {hint}",
            argument="finetuned",
        ) from None
    finally:
        for m, mode in zip(modules, modes, strict=True):
            m.train(mode)


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

    See Also
    --------
    finextract : returns it.
    extraction_score : scores its candidates against known training images.
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
    >>> from trustlab.vision import digits_ddpm_pair
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
