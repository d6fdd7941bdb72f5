"""The Gaussian screening model of the worst-off (private; see welfare.py).

Risk score and outcome are standard bivariate normal with correlation ``rho = sqrt(R^2)``;
the worst-off are the ``beta`` share with the worst outcome and the planner serves the
``alpha`` share with the worst predicted outcome. The value is the share of the worst-off
who are served: ``V = Phi2(Phi^-1(alpha), Phi^-1(beta); rho) / beta``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri, owens_t

_NUDGE = 1e-12


def bvn_cdf(h: float, k: float, rho: float) -> float:
    """``P(Z1 <= h, Z2 <= k)`` for standard normals with correlation ``rho`` (Owen's T form)."""
    if rho >= 1.0:
        return float(ndtr(min(h, k)))
    if rho <= 0.0 and rho > -_NUDGE:
        return float(ndtr(h) * ndtr(k))
    h = h if h != 0 else _NUDGE
    k = k if k != 0 else _NUDGE
    s = math.sqrt((1.0 - rho) * (1.0 + rho))
    t = owens_t(h, (k - rho * h) / (h * s)) + owens_t(k, (h - rho * k) / (k * s))
    corr = 0.0 if h * k > 0 else 0.5
    return float(0.5 * (ndtr(h) + ndtr(k)) - t - corr)


def value(alpha: float, r2: float, beta: float) -> float:
    """Share of the worst-``beta`` served when the worst-predicted ``alpha`` are screened."""
    if alpha >= 1.0:
        return 1.0
    rho = math.sqrt(max(r2, 0.0))
    return min(1.0, max(0.0, bvn_cdf(float(ndtri(alpha)), float(ndtri(beta)), rho) / beta))


def d_value_d_alpha(alpha: float, r2: float, beta: float) -> float:
    """``dV/dalpha = P(worst-off | score at the capacity threshold) / beta``."""
    rho = math.sqrt(r2)
    a, b = ndtri(alpha), ndtri(beta)
    if rho >= 1.0:
        return (1.0 if alpha < beta else 0.0) / beta
    return float(ndtr((b - rho * a) / math.sqrt(1.0 - r2)) / beta)


def d_value_d_r2(alpha: float, r2: float, beta: float) -> float:
    """``dV/dR^2 = phi2(a, b; rho) / (2 rho beta)`` (Plackett's identity dPhi2/drho = phi2)."""
    rho = math.sqrt(r2)
    a, b = ndtri(alpha), ndtri(beta)
    one = 1.0 - r2
    dens = math.exp(-(a * a - 2 * rho * a * b + b * b) / (2 * one)) / (2 * math.pi * math.sqrt(one))
    return dens / (2.0 * rho * beta)


def par(alpha: float, r2: float, beta: float) -> float:
    """Prediction-access ratio: welfare per unit of capacity over welfare per unit of R^2."""
    d_r2 = d_value_d_r2(alpha, r2, beta)
    d_alpha = d_value_d_alpha(alpha, r2, beta)
    if d_r2 == 0.0:
        return math.inf
    return d_alpha / d_r2


def capacity_equivalent(alpha: float, r2: float, beta: float, delta_r2: float) -> float:
    """``d`` with ``V(alpha + d, R^2) = V(alpha, R^2 + delta_r2)`` (capped at ``1 - alpha``)."""
    target = value(alpha, min(1.0, r2 + delta_r2), beta)
    base = value(alpha, r2, beta)
    if target <= base:
        return 0.0
    if value(1.0 - 1e-15, r2, beta) <= target:
        return 1.0 - alpha
    return float(brentq(lambda x: value(alpha + x, r2, beta) - target, 0.0, 1.0 - alpha - 1e-15, xtol=1e-12))


def r2_from_value(alpha: float, v: float, beta: float) -> float:
    """The R^2 whose model value at ``alpha`` equals ``v`` (0 below chance, 1 at the maximum)."""
    lo, hi = value(alpha, 0.0, beta), value(alpha, 1.0, beta)
    if v <= lo:
        return 0.0
    if v >= hi:
        return 1.0
    rho = brentq(lambda r: value(alpha, r * r, beta) - v, 0.0, 1.0 - 1e-12, xtol=1e-12)
    return float(rho * rho)


def value_grid(alpha: np.ndarray, r2: np.ndarray, beta: float) -> np.ndarray:
    """``value`` over a grid (for plots and docs)."""
    return np.array([[value(float(a), float(r), beta) for r in r2] for a in alpha])
