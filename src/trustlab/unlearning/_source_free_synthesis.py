"""Energy-guided Langevin synthesis of class-conditional inputs from a trained classifier (AEGDS).

Wang et al. (ICML 2025), Section 3.1 and Algorithm 1. The energy of input ``x`` for
class ``y`` is ``E(x, y) = -log softmax(M(x))[y]`` (``energy="softmax"``, the paper's) or
``-M(x)[y]`` (``energy="logit"``, the JEM joint energy); the score is ``s = -grad_x E``.
One step, with ``eps ~ N(0, I)`` drawn once and ``h = dt``::

    d  = s(x)
    x' = x + eta h alpha d + sqrt(2 alpha h) eps             (predictor; Heun only)
    v_hat = (1 - 1/(2 eta)) d + 1/(2 eta) s(x')              (Heun)   or   d   (Euler)
    v  = momentum v + alpha v_hat
    x  = clip(x + h v + sqrt(2 alpha h) eps, input_range)

With ``integrator="euler"`` and ``momentum=0`` this is plain SGLD (EGDS, the paper's
Eq. 3) with step ``alpha h``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from trustlab.errors import ModelError
from trustlab.unlearning._source_free_inputs import check_finite, import_torch

__all__ = ["class_score", "run_chain"]


def class_score(model: Any, energy: str) -> Callable[[Any, Any], tuple[Any, Any]]:
    """``score(x, y) -> (s, E)``: the score ``-grad_x E(x, y)`` and the energies, for a frozen model."""
    torch = import_torch()

    def score(x: Any, y: Any) -> tuple[Any, Any]:
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            try:
                logits = model(xg)
                rows = torch.arange(logits.shape[0])
                if energy == "softmax":
                    e = -torch.log_softmax(logits, dim=1)[rows, y]
                else:
                    e = -logits[rows, y]
                (grad,) = torch.autograd.grad(e.sum(), xg)
            except (RuntimeError, NotImplementedError, TypeError, IndexError) as exc:
                raise ModelError(
                    f"the energy gradient of the model could not be computed ({type(exc).__name__}: {exc}); "
                    "the model's logits must be differentiable with respect to its input.",
                    argument="model",
                ) from None
        return -grad.detach(), e.detach()

    return score


def run_chain(
    score: Callable[[Any, Any], tuple[Any, Any]],
    x0: Any,
    y: Any,
    *,
    steps: int,
    dt: float,
    alpha: float,
    momentum: float,
    integrator: str,
    eta: float,
    low: float,
    high: float,
    noise: bool,
    generator: Any,
) -> tuple[Any, list[float], int]:
    """Run the chain from ``x0``; return (samples, mean energy before each step and after, score evals)."""
    torch = import_torch()
    x = x0.clone()
    v = torch.zeros_like(x)
    sd = math.sqrt(2.0 * alpha * dt) if noise else 0.0
    trace: list[float] = []
    evals = 0
    for _ in range(steps):
        eps = torch.randn(x.shape, generator=generator, dtype=x.dtype) if noise else torch.zeros_like(x)
        d, e = score(x, y)
        evals += int(x.shape[0])
        check_finite(d, "the energy gradient (score)")
        trace.append(float(e.mean()))
        if integrator == "heun":
            xp = (x + eta * dt * alpha * d + sd * eps).clamp(low, high)
            d2, _ = score(xp, y)
            evals += int(x.shape[0])
            check_finite(d2, "the energy gradient (score)")
            v_hat = (1.0 - 1.0 / (2.0 * eta)) * d + (1.0 / (2.0 * eta)) * d2
        else:
            v_hat = d
        v = momentum * v + alpha * v_hat
        x = (x + dt * v + sd * eps).clamp(low, high)
    _, e = score(x, y)
    check_finite(e, "the energy")
    trace.append(float(e.mean()))
    return x.detach(), trace, evals
