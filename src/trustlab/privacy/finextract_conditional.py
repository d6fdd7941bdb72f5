"""FineXtract for conditional (text- or class-prompted) diffusion models.

The paper's main setting (Wu, Zhang and Wu, ICML 2025): a text-to-image model fine-tuned
DreamBooth-style on a few images with a prompt ``c``. Its released sampler guides with the
fine-tuned model's *conditional* prediction against the pretrained model's *unconditional*
(empty-prompt) prediction, plus the correction ``k`` times that unconditional prediction:

    base = eps_theta(x_t, t, "")                        (pretrained model, empty prompt)
    eps~ = base + w' (eps_theta'(x_t, t, c) - base) + k base

with ``w' = 3`` and ``k = -0.02`` for full fine-tuning (``w' = 5``, ``k = 0`` for LoRA). Without
the base model (``pretrained=None``) the empty-prompt prediction is the fine-tuned model's own,
which makes the formula classifier-free guidance of the fine-tuned model with scale ``w'``:
the paper's baseline (scale 3, then the same clustering). See docs/privacy/finextract.md.

Denoisers are torch modules called ``model(x, t, **{condition_kwarg: c})`` (``diffusers``'
``UNet2DModel`` with ``class_labels``, ``UNet2DConditionModel`` with ``encoder_hidden_states``,
the lab's :func:`~trustlab.vision.diffusion_conditional.make_conditional_unet`) or
``model(x, t, c)`` with ``condition_kwarg=None``; ``.sample`` outputs are unwrapped.

References
----------
X. Wu, J. Zhang, Z. S. Wu, "Leveraging Model Guidance to Extract Training Data from
Personalized Diffusion Models", ICML 2025 (arXiv:2410.03039).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import ParameterError
from trustlab.privacy._finextract_cluster import cluster_generations
from trustlab.privacy.finextract import FineXtractResult, _eval_sample, _setup
from trustlab.vision.classifiers import require_torch
from trustlab.vision.diffusion import DDPMSchedule

__all__ = [
    "DEFAULT_CONDITIONAL_CORRECTION",
    "DEFAULT_CONDITIONAL_SCALE",
    "conditional_guided_eps",
    "conditional_guided_sample",
    "finextract_conditional",
]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]
_REAL = [Interval(numbers.Real, None, None, closed="neither")]
_BASE = [Options({"empty", "prompt"})]

DEFAULT_CONDITIONAL_SCALE = 3.0
"""``w'`` of the paper's released DreamBooth runs (also the baseline's CFG scale)."""
DEFAULT_CONDITIONAL_CORRECTION = -0.02
"""``k`` of the paper's released DreamBooth runs (0 for LoRA)."""


def _batched(cond: Any, n: int, name: str) -> Any:
    """``cond`` as a tensor with a leading batch dimension of ``n`` (ints become class labels)."""
    torch = require_torch()
    if cond is None:
        raise ParameterError(f"{name} must be given (a class label or a condition tensor).", argument=name)
    if isinstance(cond, numbers.Integral) and not isinstance(cond, bool):
        return torch.full((n,), int(cond), dtype=torch.long)
    try:
        t = torch.as_tensor(np.asarray(cond) if not isinstance(cond, torch.Tensor) else cond)
    except (TypeError, ValueError, RuntimeError):
        raise ParameterError(
            f"{name} must be an int label or an array/tensor condition; got {type(cond).__name__}.",
            argument=name,
        ) from None
    if t.dtype.is_floating_point and not bool(torch.isfinite(t).all()):
        raise ParameterError(f"{name} contains NaN or inf.", argument=name)
    if t.ndim == 0:
        return t.expand(n)
    if t.shape[0] == 1:
        return t.expand(n, *t.shape[1:])
    if t.shape[0] != n:
        raise ParameterError(
            f"{name} must have a batch dimension of 1 (broadcast) or {n}; got shape {tuple(t.shape)}.",
            argument=name,
        )
    return t


def _cond_eps(module: Any, condition_kwarg: str | None) -> Callable[[Any, Any, Any], Any]:
    def eps(x: Any, t: Any, c: Any) -> Any:
        out = module(x, t, c) if condition_kwarg is None else module(x, t, **{condition_kwarg: c})
        return getattr(out, "sample", out)

    return eps


def _null_default(module: Any, null_prompt: Any) -> Any:
    if null_prompt is not None:
        return null_prompt
    n_classes = getattr(module, "n_classes", None)
    if isinstance(n_classes, numbers.Integral):
        return int(n_classes)  # the lab's conditional UNet: the null class is index n_classes
    raise ParameterError(
        "null_prompt must be given (the empty prompt's embedding, or the model's null class label); only "
        "models with an int n_classes attribute have a default.",
        argument="null_prompt",
    )


@validate_params({"guidance_scale": _REAL, "correction": _REAL, "base_condition": _BASE})
def conditional_guided_eps(
    finetuned: Any,
    pretrained: Any,
    x: Any,
    t: Any,
    prompt: Any,
    null_prompt: Any,
    *,
    guidance_scale: float = DEFAULT_CONDITIONAL_SCALE,
    correction: float = DEFAULT_CONDITIONAL_CORRECTION,
    condition_kwarg: str | None = "class_labels",
    base_condition: str = "empty",
) -> Any:
    """The conditional FineXtract noise prediction at one step.

    ``base + w' (eps_ft(x, t, prompt) - base) + k base`` with ``base = eps_pre(x, t, null_prompt)``
    (the pretrained model's empty-prompt prediction), or the fine-tuned model's own
    ``eps_ft(x, t, null_prompt)`` when ``pretrained`` is None (then this is classifier-free
    guidance with scale ``w'``).

    Parameters
    ----------
    finetuned, pretrained : callable
        ``model(x, t, **{condition_kwarg: c})``; ``pretrained`` may be None.
    x : torch.Tensor of shape (n, C, H, W)
    t : torch.Tensor of shape (n,)
    prompt, null_prompt : int, array or tensor
        The fine-tuning prompt's condition and the empty prompt's (broadcast over the batch).
    guidance_scale : float, default=3.0
        ``w'``.
    correction : float, default=-0.02
        ``k``.
    condition_kwarg : str or None, default="class_labels"
        Keyword carrying the condition; None passes it as the third positional argument.
    base_condition : {"empty", "prompt"}, default="empty"
        The base model's condition: the empty prompt (the released runs, with ``k``), or the
        prompt itself (the released code's mode without the correction term).

    Returns
    -------
    torch.Tensor
        Shaped like ``x``.

    Examples
    --------
    >>> import torch
    >>> toy = lambda x, t, c: x * c[:, None, None, None]
    >>> x = torch.ones(1, 1, 1, 1)
    >>> float(conditional_guided_eps(toy, toy, x, torch.zeros(1), 2.0, 0.5, correction=0.0,
    ...                              condition_kwarg=None))  # 0.5 + 3 (2 - 0.5)
    5.0
    """
    n = x.shape[0]
    e_ft = _cond_eps(finetuned, condition_kwarg)(x, t, _batched(prompt, n, "prompt"))
    base_model = finetuned if pretrained is None else pretrained
    base_cond = null_prompt if base_condition == "empty" else prompt
    base = _cond_eps(base_model, condition_kwarg)(x, t, _batched(base_cond, n, "null_prompt"))
    return base + guidance_scale * (e_ft - base) + correction * base


@validate_params(
    {
        "n": _POS_INT,
        "num_inference_steps": _POS_INT,
        "batch_size": _POS_INT,
        "guidance_scale": _REAL,
        "correction": [None, *_REAL],
        "clip_denoised": ["boolean"],
        "condition_kwarg": [None, str],
        "base_condition": _BASE,
    }
)
def conditional_guided_sample(
    finetuned: Any,
    pretrained: Any,
    n: int,
    *,
    prompt: Any,
    null_prompt: Any = None,
    condition_kwarg: str | None = "class_labels",
    base_condition: str = "empty",
    guidance_scale: float = DEFAULT_CONDITIONAL_SCALE,
    correction: float | None = None,
    num_inference_steps: int = 50,
    schedule: DDPMSchedule | None = None,
    shape: tuple[int, ...] | None = None,
    clip_denoised: bool = True,
    batch_size: int = 256,
    random_state: Any = 0,
) -> np.ndarray:
    """Sample ``n`` images by DDIM with conditional model guidance; images in [0, 1].

    Parameters
    ----------
    finetuned : torch.nn.Module or diffusers pipeline
        The fine-tuned conditional denoiser (a pipeline's ``.unet`` is used).
    pretrained : torch.nn.Module, diffusers pipeline or None
        Its base, same architecture. None gives the paper's baseline, classifier-free guidance
        of the fine-tuned model alone (``correction`` must then be 0).
    n : int
        Number of generations.
    prompt : int, array or tensor
        The fine-tuning set's prompt: a class label, or the prompt's text-encoder embedding.
    null_prompt : int, array or tensor, optional
        The empty prompt's condition; default ``model.n_classes`` (the lab's null class).
    condition_kwarg : str or None, default="class_labels"
        ``"encoder_hidden_states"`` for ``UNet2DConditionModel``; None: ``model(x, t, c)``.
    base_condition : {"empty", "prompt"}, default="empty"
        Condition the base model on the empty prompt (the paper's released runs) or on the
        prompt (the released code's mode without correction; then ``correction`` defaults to 0).
    guidance_scale : float, default=3.0
        ``w'`` (the paper's DreamBooth setting; with ``pretrained=None`` the CFG scale).
    correction : float, optional
        ``k``; default -0.02 with a pretrained model (the paper's DreamBooth setting), 0 without.
    num_inference_steps : int, default=50
    schedule : DDPMSchedule, optional
        Torch modules' schedule; default :class:`DDPMSchedule()`.
    shape : tuple of int, optional
        ``(C, H, W)``; default the pipeline's or ``(1, 8, 8)``.
    clip_denoised : bool, default=True
    batch_size : int, default=256
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the starting noise (the same seed gives every arm the same starts).

    Returns
    -------
    numpy.ndarray of shape (n, C, H, W)
        float32 in [0, 1].

    Examples
    --------
    >>> from trustlab.vision.diffusion_conditional import make_conditional_unet
    >>> net = make_conditional_unet(channels=4)
    >>> conditional_guided_sample(net, None, 2, prompt=3, num_inference_steps=3).shape
    (2, 1, 8, 8)
    """
    require_torch()
    ft, pre, acp, shp = _setup(finetuned, pretrained, schedule, shape)
    k = (
        (DEFAULT_CONDITIONAL_CORRECTION if pre is not None and base_condition == "empty" else 0.0)
        if correction is None
        else float(correction)
    )
    if pre is None and base_condition == "prompt":
        raise ParameterError(
            "base_condition='prompt' needs the pretrained model (without it the base would be the "
            "fine-tuned model's own prompted prediction); pass pretrained or base_condition='empty'.",
            argument="base_condition",
        )
    if pre is None and k != 0.0:
        raise ParameterError(
            "pretrained is None (the fine-tuned model's own CFG), so correction must be 0.0; pass the base "
            "model to use the paper's correction.",
            argument="correction",
        )
    null = _null_default(ft.module, null_prompt)
    _batched(prompt, 1, "prompt")  # validate before sampling
    _batched(null, 1, "null_prompt")
    pre_module = pre.module if pre is not None else None

    def eps(x: Any, t: Any) -> Any:
        return conditional_guided_eps(
            ft.module,
            pre_module,
            x,
            t,
            prompt,
            null,
            guidance_scale=float(guidance_scale),
            correction=k,
            condition_kwarg=condition_kwarg,
            base_condition=base_condition,
        )

    modules = [ft.module] + ([pre.module] if pre is not None else [])
    hint = (
        "pass shape=(C, H, W), a prompt the model accepts and condition_kwarg naming its condition argument."
    )
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
        (RuntimeError, TypeError, IndexError),
    )


@validate_params(
    {
        "n_images": _POS_INT,
        "n_generations": [None, *_POS_INT],
        "guidance_scale": [None, *_REAL],
        "correction": [None, *_REAL],
        "num_inference_steps": _POS_INT,
        "condition_kwarg": [None, str],
        "base_condition": _BASE,
    }
)
def finextract_conditional(
    finetuned: Any,
    pretrained: Any,
    n_images: int,
    *,
    prompt: Any,
    null_prompt: Any = None,
    condition_kwarg: str | None = "class_labels",
    base_condition: str = "empty",
    n_generations: int | None = None,
    guidance_scale: float | None = None,
    correction: float | None = None,
    num_inference_steps: int = 50,
    schedule: DDPMSchedule | None = None,
    shape: tuple[int, ...] | None = None,
    features: Callable[[np.ndarray], Any] | None = None,
    random_state: Any = 0,
) -> FineXtractResult:
    """Extract ``n_images`` fine-tuning images from a conditional model: guided sampling, clustering.

    Parameters
    ----------
    finetuned : torch.nn.Module or diffusers pipeline
        The fine-tuned conditional denoiser.
    pretrained : torch.nn.Module, diffusers pipeline or None
        Its base model; None gives the paper's baseline (the fine-tuned model's CFG with the
        prompt, then the same clustering).
    n_images : int
        ``N0``.
    prompt : int, array or tensor
        The fine-tuning prompt (class label or prompt embedding).
    null_prompt : int, array or tensor, optional
        The empty prompt; default the model's null class ``model.n_classes``.
    condition_kwarg : str or None, default="class_labels"
        See :func:`conditional_guided_sample`.
    base_condition : {"empty", "prompt"}, default="empty"
        See :func:`conditional_guided_sample`.
    n_generations : int, optional
        ``N``; default ``50 * n_images`` (the paper's 500 for 10).
    guidance_scale : float, optional
        ``w'``; default 3.0 (also the baseline's CFG scale in the paper's code).
    correction : float, optional
        ``k``; default -0.02 with a pretrained model and the empty-prompt base, else 0.
    num_inference_steps : int, default=50
    schedule : DDPMSchedule, optional
    shape : tuple of int, optional
    features : callable, optional
        Image features for the clustering (default raw pixels).
    random_state : None, int or numpy.random.Generator, default=0

    Returns
    -------
    FineXtractResult

    Examples
    --------
    >>> from trustlab.vision.diffusion_digits_conditional import digits_conditional_ddpm_pair
    >>> pre, ft = digits_conditional_ddpm_pair()
    >>> res = finextract_conditional(ft, pre, 2, prompt=9, n_generations=8, num_inference_steps=5)
    >>> res.candidates.shape
    (2, 1, 8, 8)
    """
    n_gen = 50 * int(n_images) if n_generations is None else int(n_generations)
    if n_gen < n_images:
        raise ParameterError(
            f"n_generations ({n_gen}) must be at least n_images ({n_images}).", argument="n_generations"
        )
    w = DEFAULT_CONDITIONAL_SCALE if guidance_scale is None else float(guidance_scale)
    k = (
        (DEFAULT_CONDITIONAL_CORRECTION if pretrained is not None and base_condition == "empty" else 0.0)
        if correction is None
        else correction
    )
    gens = conditional_guided_sample(
        finetuned,
        pretrained,
        n_gen,
        prompt=prompt,
        null_prompt=null_prompt,
        condition_kwarg=condition_kwarg,
        base_condition=base_condition,
        guidance_scale=w,
        correction=k,
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
        guidance_scale=w,
        correction=float(k),
    )
