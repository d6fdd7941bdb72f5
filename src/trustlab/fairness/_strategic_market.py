"""Market prices a linear classifier induces for features, and the users' response to them.

The model (written down in docs/fairness/strategic.md): a user with features ``x``,
score ``s = w.x + b < 0`` and budget ``B`` buys units of features to reach the
boundary. Feature ``j`` sells at ``p_j`` per unit and raises the score by ``w_j`` per
unit, so the user buys score at ``p_j / w_j`` per unit of score, from the features with
the lowest such ratio. Sellers of feature ``j`` supply ``slope_j * max(p_j - cost_j, 0)``
units per user at price ``p_j``. In a competitive equilibrium every traded feature sells
score at the same price ``lam`` (else no one buys the dearer one): ``p_j = lam * w_j``.
Score demand per user, ``D(lam) = mean(g_i * [lam * g_i <= B_i])`` with gap
``g_i = max(-s_i, 0)``, falls with ``lam``; score supply
``Q(lam) = sum_j w_j * slope_j * max(lam * w_j - cost_j, 0)`` rises with it. The
clearing price is the least ``lam`` with ``Q(lam) >= D(lam)``; ``D`` is a step function
evaluated by a binary search over the sorted reservation prices ``B_i / g_i`` and the
crossing is found by bisection on ``lam`` (monotone, so 200 halvings reach float
resolution).
"""

from __future__ import annotations

import numpy as np

_HALVINGS = 200


def score_supply(lam: float, w: np.ndarray, slope: np.ndarray, cost: np.ndarray) -> float:
    """Units of score the sellers supply per user when score sells at ``lam``."""
    wp = np.maximum(w, 0.0)
    return float(np.sum(wp * slope * np.maximum(lam * wp - cost, 0.0)))


def gaps(X: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    """Score each user lacks to reach the boundary (0 for users already accepted)."""
    return np.maximum(-(X @ w + b), 0.0)


class _Demand:
    """Score demand per user as a function of the score price (a decreasing step function)."""

    def __init__(self, g: np.ndarray, budgets: np.ndarray) -> None:
        need = g > 0
        reservation = budgets[need] / g[need]
        order = np.argsort(reservation)
        self.reservation = reservation[order]
        # tail[k] = sum of gaps of the users with the k-th and higher reservation prices
        self.tail = np.r_[np.cumsum(g[need][order][::-1])[::-1], 0.0] / g.size

    def __call__(self, lam: float) -> float:
        k = int(np.searchsorted(self.reservation, lam, side="left"))
        return float(self.tail[k])

    @property
    def max_reservation(self) -> float:
        return float(self.reservation[-1]) if self.reservation.size else 0.0


def clearing_price(
    X: np.ndarray, w: np.ndarray, b: float, budgets: np.ndarray, slope: np.ndarray, cost: np.ndarray
) -> float:
    """The least score price at which supply meets demand (``inf`` when nothing can be sold)."""
    demand = _Demand(gaps(X, w, b), budgets)
    wp = np.maximum(w, 0.0)
    active = (wp > 0) & (slope > 0)
    if not active.any():
        return float("inf")
    floor = float(np.min(cost[active] / wp[active]))  # below it no seller sells
    if demand(floor) <= 0.0:
        return floor
    hi = max(demand.max_reservation, floor) * (1.0 + 1e-12) + 1e-300
    if score_supply(hi, w, slope, cost) < demand(hi):  # demand(hi) = 0 by construction
        hi = max(hi * 2.0, 1.0)
    lo = floor
    for _ in range(_HALVINGS):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if score_supply(mid, w, slope, cost) >= demand(mid):
            hi = mid
        else:
            lo = mid
    return hi


def supply_shares(lam: float, w: np.ndarray, slope: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Share of the score sold that each feature supplies at price ``lam`` (zeros if none)."""
    wp = np.maximum(w, 0.0)
    if not np.isfinite(lam):
        return np.zeros_like(w)
    per = wp * slope * np.maximum(lam * wp - cost, 0.0)
    total = per.sum()
    if total <= 0:
        # at the floor price: the cheapest features share equally
        ratio = np.where(wp > 0, cost / np.where(wp > 0, wp, 1.0), np.inf)
        cheapest = np.isclose(ratio, ratio.min()) & (wp > 0) & (slope > 0)
        return cheapest / max(cheapest.sum(), 1)
    return per / total


def respond(
    X: np.ndarray, w: np.ndarray, b: float, budgets: np.ndarray, lam: float, shares: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Users' best response at score price ``lam``: ``(new features, moved mask)``.

    A user moves iff it is rejected and reaching the boundary costs at most its budget;
    it then buys the score it lacks in the proportions the sellers supply (each feature
    of a mix costs the same per unit of score, so every such bundle is a best response
    and this one clears each feature's market).
    """
    g = gaps(X, w, b)
    if not np.isfinite(lam):
        return X.copy(), np.zeros(X.shape[0], dtype=bool)
    moved = (g > 0) & (lam * g <= budgets)
    safe_w = np.where(w > 0, w, 1.0)
    units = np.where(w > 0, shares / safe_w, 0.0)  # units bought per unit of score
    X_new = X + np.where(moved, g, 0.0)[:, None] * units[None, :]
    return X_new, moved


def fixed_cost_price(w: np.ndarray, unit_costs: np.ndarray) -> float:
    """Score price under fixed per-unit feature costs (Hardt et al.'s separable linear cost)."""
    wp = np.maximum(w, 0.0)
    if not (wp > 0).any():
        return float("inf")
    return float(np.min(np.where(wp > 0, unit_costs / np.where(wp > 0, wp, 1.0), np.inf)))
