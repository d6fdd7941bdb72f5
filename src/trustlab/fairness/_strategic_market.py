"""Market prices a linear classifier induces for features, and the users' response to them.

Two price models (written down in docs/fairness/strategic.md):

* ``revenue`` (the paper's, Sommer et al. 2025, as in the authors' code): features sell
  at prices proportional to the weights, ``p = rho * w / ||w||``, so crossing the
  boundary costs ``rho * u`` for a user at distance ``u = max(-(w.x + b) / ||w||, 0)``;
  a user with budget ``B`` buys iff ``B / u >= rho``. The sellers set ``rho`` to maximise
  revenue ``rho * sum{u_i : B_i / u_i >= rho}``: sort the rejected users by ``B / u``
  (their reservation price per unit of distance), descending; the revenue at the k-th
  candidate is ``(B / u)_(k) * cumsum(u)_(k)``; the price is the maximising candidate
  (:func:`revenue_price`, ``O(n log n)``).
* ``clearing`` (this module's earlier reconstruction, kept as an alternative): a
  competitive market with linear supply per feature; see :func:`clearing_price`.
  A user with score ``s = w.x + b < 0`` buys units of features to reach the
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


def distances(X: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    """Euclidean distance of each rejected user to the boundary (0 if accepted, inf if unreachable)."""
    norm = float(np.linalg.norm(w))
    s = X @ w + b
    if norm == 0.0:
        return np.where(s >= 0, 0.0, np.inf)
    return np.maximum(-s / norm, 0.0)


def revenue_price(u: np.ndarray, budgets: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Revenue-maximising price per unit of distance: ``(rho, revenue per user, movers)``.

    Candidates are the rejected users' reservation prices ``B / u``; sorted descending,
    the k-th candidate sells ``cumsum(u)`` units. The first maximiser is taken (the
    authors' strict ``>`` scan); every user with ``B / u >= rho`` buys. No rejected user
    or no positive revenue: ``rho = inf``, nobody buys.
    """
    need = (u > 0) & np.isfinite(u)
    movers = np.zeros(u.size, dtype=bool)
    if not need.any():
        return float("inf"), 0.0, movers
    bpu = budgets[need] / u[need]
    order = np.argsort(-bpu, kind="stable")
    revenue = bpu[order] * np.cumsum(u[need][order])
    k = int(np.argmax(revenue))
    if not revenue[k] > 0:
        return float("inf"), 0.0, movers
    rho = float(bpu[order][k])
    movers[np.flatnonzero(need)] = bpu >= rho
    return rho, float(revenue[k]) / u.size, movers
