"""Differentiable strategic learning of a linear classifier (torch, imported only here).

The hard response "move iff price * gap <= budget" is smoothed with a sigmoid of
temperature ``tau``; the probability of being accepted after the response is
``sigma(s / tau) + (1 - sigma(s / tau)) * sigma((B - lam * g) / tau)``, trained with
binary cross-entropy. ``lam`` is the score price the learner anticipates:

* ``"none"``: no response (the naive learner);
* ``"fixed"``: ``lam = min_j c_j / w_j`` from fixed per-unit costs ``c`` (linear cost,
  Hardt et al. 2016), or the quadratic cost's closed form;
* ``"market"``: the market-clearing price of the smoothed market, found by bisection
  (no gradient) and then differentiated through the clearing condition
  ``F(lam, w, b) = D_tau(lam) - Q(lam) = 0`` by the implicit function theorem: one
  Newton step ``lam* - F(lam*, w, b) / dF/dlam`` with the denominator detached has the
  value ``lam*`` and the gradient ``-(dF/dtheta) / (dF/dlam)``.

The weights are parametrised as ``v / ||v||`` (the market is invariant to scaling
``(w, b)``, prices scale inversely), started from a logistic-regression fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.errors import MissingDependencyError


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is installed in every environment here
        raise MissingDependencyError(
            "MarketAwareClassifier needs torch for its gradients: pip install 'trustlab[torch]'."
        ) from None
    return torch


def _smooth_clearing(
    torch: Any,
    g: Any,
    budgets: Any,
    w: Any,
    slope: Any,
    cost: Any,
    tau: float,
) -> Any:
    """Clearing score price of the smoothed market, differentiable in ``(w, b)`` through ``g`` and ``w``."""
    wp = torch.clamp(w, min=0.0)
    g_np, w_np = g.detach().numpy(), wp.detach().numpy()
    B_np, s_np, c_np = budgets.numpy(), slope.numpy(), cost.numpy()
    active = (w_np > 0) & (s_np > 0)
    if not active.any():
        return None

    def excess_np(lam: float) -> float:
        z = np.clip((B_np - lam * g_np) / tau, -500, 500)
        demand = float(np.mean(g_np / (1.0 + np.exp(-z))))
        return demand - float(np.sum(w_np * s_np * np.maximum(lam * w_np - c_np, 0.0)))

    lo = float(np.min(c_np[active] / w_np[active]))
    if excess_np(lo) <= 0:
        return torch.as_tensor(lo, dtype=g.dtype) + 0.0 * torch.sum(wp)
    hi = lo + 1.0
    while excess_np(hi) > 0 and hi < 1e12:
        hi = lo + 2.0 * (hi - lo)
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        if excess_np(mid) > 0:
            lo = mid
        else:
            hi = mid
    lam_var = torch.tensor(hi, dtype=g.dtype, requires_grad=True)

    def excess(lam: Any, g_: Any, wp_: Any) -> Any:
        demand = torch.mean(g_ * torch.sigmoid((budgets - lam * g_) / tau))
        supply = torch.sum(wp_ * slope * torch.relu(lam * wp_ - cost))
        return demand - supply

    with torch.enable_grad():
        dfdl = torch.autograd.grad(excess(lam_var, g.detach(), wp.detach()), lam_var)[0]
    lam0 = lam_var.detach()
    if float(dfdl) >= 0:  # flat excess demand: no gradient information, keep the value
        return lam0 + 0.0 * torch.sum(wp)
    return lam0 - excess(lam0, g, wp) / dfdl.detach()


def train_linear(
    X: np.ndarray,
    y: np.ndarray,
    budgets: np.ndarray,
    *,
    anticipate: str,
    slope: np.ndarray,
    cost: np.ndarray,
    fixed_costs: np.ndarray | None,
    cost_kind: str,
    tau: float,
    max_iter: int,
    learning_rate: float,
    init: tuple[np.ndarray, float],
) -> tuple[np.ndarray, float, list[float]]:
    """Fit ``(w, b)`` by Adam on the smoothed strategic loss; return ``(w, b, losses)``."""
    torch = _torch()
    dt = torch.float64
    Xt = torch.as_tensor(X, dtype=dt)
    yt = torch.as_tensor(y, dtype=dt)
    Bt = torch.as_tensor(budgets, dtype=dt)
    slope_t = torch.as_tensor(slope, dtype=dt)
    cost_t = torch.as_tensor(cost, dtype=dt)
    fixed_t = None if fixed_costs is None else torch.as_tensor(fixed_costs, dtype=dt)
    w0, b0 = init
    scale = float(np.linalg.norm(w0)) or 1.0
    v = torch.tensor(w0 / scale, dtype=dt, requires_grad=True)
    b = torch.tensor([b0 / scale], dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([v, b], lr=learning_rate)
    losses: list[float] = []
    for _ in range(max_iter):
        w = v / torch.linalg.vector_norm(v).clamp(min=1e-12)
        s = Xt @ w + b
        # a smooth gap: softplus with the same temperature as the response
        g = tau * torch.nn.functional.softplus(-s / tau)
        accept = torch.sigmoid(s / tau)
        lam = None
        if anticipate == "fixed":
            if cost_kind == "quadratic":
                # cost c * ||delta||^2 to cross: c * g^2 / ||w||^2 = (c * g) * g with ||w|| = 1
                move = torch.sigmoid((Bt - fixed_t[0] * g * g) / tau)  # type: ignore[index]
                accept = accept + (1 - accept) * move
            else:
                wp = torch.clamp(w, min=1e-9)
                lam = torch.min(fixed_t / wp)
        elif anticipate == "market":
            lam = _smooth_clearing(torch, g, Bt, w, slope_t, cost_t, tau)
        if lam is not None:
            move = torch.sigmoid((Bt - lam * g) / tau)
            accept = accept + (1 - accept) * move
        accept = accept.clamp(1e-7, 1 - 1e-7)
        loss = torch.nn.functional.binary_cross_entropy(accept, yt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        w = (v / torch.linalg.vector_norm(v).clamp(min=1e-12)).numpy().copy()
    return w, float(b.detach()[0]), losses
