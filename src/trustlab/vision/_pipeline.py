"""A user's ``diffusers`` pipeline read once for every tool: its denoiser, schedule and shape.

Private, shared by the tools that take a pipeline (:mod:`trustlab.privacy.finextract`,
:mod:`trustlab.unlearning.saeuron`). A *pipeline* is any object with ``.unet`` and
``.scheduler`` (``diffusers``' ``DDPMPipeline`` and ``DDIMPipeline``, or a look-alike). Its
schedule is read as the cumulative products ``alphas_cumprod`` that trustlab's DDIM sampler
(:func:`trustlab.vision.diffusion.ddim_loop`) needs: the scheduler's own ``alphas_cumprod``
(``diffusers``' DDPM, DDIM, PNDM, Euler... schedulers all keep it), else ``cumprod(1 - betas)``.
Only epsilon-predicting schedulers are accepted (``config.prediction_type``, read when present).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.errors import ModelError


@dataclass(frozen=True)
class PipelineParts:
    """A pipeline's denoiser, schedule (float64 ``alphas_cumprod``) and image shape if known."""

    unet: Any
    alphas_cumprod: np.ndarray
    shape: tuple[int, int, int] | None


def is_pipeline(obj: Any) -> bool:
    """Whether ``obj`` has a pipeline's layout: a ``.unet`` and a ``.scheduler``."""
    return hasattr(obj, "unet") and hasattr(obj, "scheduler")


def _array(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor (diffusers keeps its schedule as one)
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def _shape(unet: Any) -> tuple[int, int, int] | None:
    cfg = getattr(unet, "config", None)
    size, channels = getattr(cfg, "sample_size", None), getattr(cfg, "in_channels", None)
    if size is None or channels is None:
        return None
    hw = tuple(size) if isinstance(size, tuple | list) else (size, size)
    return (int(channels), int(hw[0]), int(hw[1]))


def pipeline_parts(obj: Any, name: str, method: str) -> PipelineParts:
    """The denoiser, schedule and shape of the pipeline ``obj`` (the argument ``name`` of ``method``)."""
    unet, sched = obj.unet, obj.scheduler
    pred = getattr(getattr(sched, "config", None), "prediction_type", "epsilon")
    if pred != "epsilon":
        raise ModelError(
            f"{name}: its scheduler predicts {pred!r}; {method} needs an epsilon-predicting model.",
            argument=name,
        )
    acp = getattr(sched, "alphas_cumprod", None)
    if acp is None and getattr(sched, "betas", None) is not None:
        acp = np.cumprod(1.0 - _array(sched.betas))
    if acp is None:
        raise ModelError(
            f"{name}: its scheduler ({type(sched).__name__}) has neither alphas_cumprod nor betas; "
            "pass a pipeline with a DDPM-type scheduler (e.g. diffusers' DDPMScheduler or DDIMScheduler).",
            argument=name,
        )
    acp = _array(acp)
    if acp.ndim != 1 or len(acp) < 1 or not np.all(np.isfinite(acp)) or acp.min() <= 0 or acp.max() > 1:
        raise ModelError(
            f"{name}: its scheduler's alphas_cumprod must be a 1-d array of values in (0, 1]; got shape "
            f"{acp.shape}.",
            argument=name,
        )
    return PipelineParts(unet=unet, alphas_cumprod=acp, shape=_shape(unet))
