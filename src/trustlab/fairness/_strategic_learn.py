"""Learning a linear classifier that anticipates the feature market it induces (torch only here).

The paper's market-aware strategic classification (MASC), as the authors' code runs it:

* the price is made differentiable: the rejected users' ``u / B`` (distance per unit of
  budget, divided by its minimum) are soft-sorted with SoftSort (Prillo & Eisenschlos
  2020, temperature ``sort_temperature``, default 0.1), giving soft reservation prices
  ``(B / u)_(k)`` and soft cumulative demand ``C_k``; the revenue ``r_k = (B / u)_(k) C_k``
  is turned into weights ``softmax(price_temperature * r)`` (default 2; larger is
  harder) and the smooth price is ``rho_hat = sum_k softmax_k * (B / u)_(k)``;
* the loss is the market hinge ``max(0, 1 - y (w.x + b + (B / rho_hat) ||w||))`` with
  ``y`` in {-1, 1} (a user with budget ``B`` can move ``B / rho_hat`` towards the
  boundary, raising its score by ``(B / rho_hat) ||w||``), averaged, plus
  ``regularization * ||w||^2``; Adam on mini-batches, the price computed per batch.

The baseline "Strat" (the authors' market line search): the naive classifier's weights,
the price it induces held fixed, and the intercept chosen on a grid to minimise the
market hinge at that price.
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


def soft_sort(torch: Any, scores: Any, tau: float) -> Any:
    """SoftSort's relaxed permutation matrix: row ``k`` is a soft one-hot of the k-th largest score."""
    s = scores[:, None]
    ranked = torch.sort(scores, descending=True).values[:, None]
    return torch.softmax(-torch.abs(s.T - ranked) / tau, dim=-1)


def smooth_price(torch: Any, u: Any, budgets: Any, sort_tau: float, price_tau: float) -> Any:
    """Differentiable revenue-maximising price of one batch (``inf`` when nobody is rejected)."""
    need = u > 0
    n_need = int(need.sum())
    if n_need == 0:
        return torch.tensor(float("inf"), dtype=u.dtype)
    u_n, b_n = u[need], budgets[need]
    upb = u_n / b_n.clamp(min=1e-300)
    if n_need == 1:
        return 1.0 / upb[0]
    scale = upb.min().detach().clamp(min=1e-300)
    P = soft_sort(torch, -(upb / scale), sort_tau)  # ascending u / B = descending B / u
    bpu_sorted = 1.0 / (P @ upb).clamp(min=1e-300)
    revenue = bpu_sorted * torch.cumsum(P @ u_n, dim=0)
    q = torch.softmax(price_tau * revenue, dim=0)
    return q @ bpu_sorted


def market_hinge(torch: Any, s: Any, y_pm: Any, budgets: Any, norm: Any, rho: Any) -> Any:
    """Mean market hinge ``max(0, 1 - y (s + (B / rho) ||w||))``."""
    reach = budgets / rho * norm if bool(torch.isfinite(rho)) else torch.zeros_like(s)
    return torch.relu(1.0 - y_pm * (s + reach)).mean()


def train_masc(
    X: np.ndarray,
    y: np.ndarray,
    budgets: np.ndarray,
    *,
    init: tuple[np.ndarray, float],
    regularization: float,
    sort_tau: float,
    price_tau: float,
    max_iter: int,
    learning_rate: float,
    batch_size: int,
    seed: int,
) -> tuple[np.ndarray, float, list[float]]:
    """Fit ``(w, b)`` by Adam on the market hinge with the smooth induced price; return the loss per epoch."""
    torch = _torch()
    dt = torch.float64
    Xt = torch.as_tensor(X, dtype=dt)
    yt = torch.as_tensor(2.0 * y - 1.0, dtype=dt)
    Bt = torch.as_tensor(budgets, dtype=dt)
    w = torch.tensor(init[0], dtype=dt, requires_grad=True)
    b = torch.tensor([init[1]], dtype=dt, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=learning_rate)
    gen = torch.Generator().manual_seed(int(seed))
    n = X.shape[0]
    losses: list[float] = []
    for _ in range(max_iter):
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, batch_size):
            idx = perm[start : start + batch_size]
            norm = torch.linalg.vector_norm(w).clamp(min=1e-12)
            s = Xt[idx] @ w + b
            u = torch.clamp(-s / norm, min=0.0)
            rho = smooth_price(torch, u, Bt[idx], sort_tau, price_tau)
            loss = market_hinge(torch, s, yt[idx], Bt[idx], norm, rho) + regularization * norm**2
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * idx.numel()
        losses.append(total / n)
    return w.detach().numpy().copy(), float(b.detach()[0]), losses


def hinge_at_price(
    X: np.ndarray, y: np.ndarray, budgets: np.ndarray, w: np.ndarray, b: float, rho: float
) -> float:
    """Market hinge of ``(w, b)`` when the price is held at ``rho`` (numpy; for the line search)."""
    norm = float(np.linalg.norm(w))
    reach = budgets / rho * norm if np.isfinite(rho) and rho > 0 else 0.0
    return float(np.mean(np.maximum(0.0, 1.0 - (2.0 * y - 1.0) * (X @ w + b + reach))))
