"""Renyi-DP numerics of the noisy sign compressor (private module).

A coordinate ``v`` is released as ``sign(v + xi)``: ``+1`` with probability ``F(v)``,
``F`` the noise CDF (``Phi(v / s)`` for Gaussian noise of std ``s``, ``sigmoid(v / b)``
for logistic noise of scale ``b``). Removing one record shifts ``v`` by ``t``; the
per-coordinate Renyi divergence is ``D_alpha(Bern F(v + t) || Bern F(v))``. Its
supremum over the unknown ``v`` is found on a grid that covers the maximiser, refined
by golden-section search; everything is in log space.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import gammaln, log_ndtr, logsumexp

__all__ = [
    "MAX_SIGN_ORDER",
    "base_rdp",
    "logistic_mechanism_rdp",
    "scalar_sign_rdp_sup",
    "zhu_wang_subsampled",
]

MAX_SIGN_ORDER = 64
"""Largest Renyi order at which the sign compressor's own curve is computed."""

_INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0


def _log_cdf(noise: str, x: np.ndarray) -> np.ndarray:
    if noise == "gaussian":
        return np.asarray(log_ndtr(x))
    return np.asarray(-np.logaddexp(0.0, -x))


def _divergence(noise: str, alphas: np.ndarray, v: np.ndarray, shift: float, scale: float) -> np.ndarray:
    """Max over both directions of ``D_alpha(Bern F(v+t) || Bern F(v))``, shape ``(n_alphas, n_v)``."""
    a = alphas[:, None]
    lp = _log_cdf(noise, (v + shift) / scale)[None, :]
    lq = _log_cdf(noise, v / scale)[None, :]
    lp1 = _log_cdf(noise, -(v + shift) / scale)[None, :]
    lq1 = _log_cdf(noise, -v / scale)[None, :]
    fwd = np.logaddexp(a * lp + (1 - a) * lq, a * lp1 + (1 - a) * lq1) / (a - 1)
    rev = np.logaddexp(a * lq + (1 - a) * lp, a * lq1 + (1 - a) * lp1) / (a - 1)
    return np.asarray(np.maximum(fwd, rev))


def _divergence_pairs(
    noise: str, alphas: np.ndarray, v: np.ndarray, shift: float, scale: float
) -> np.ndarray:
    """:func:`_divergence` for paired ``alphas[i]`` and ``v[i]`` (element-wise)."""
    a = alphas
    lp, lq = _log_cdf(noise, (v + shift) / scale), _log_cdf(noise, v / scale)
    lp1, lq1 = _log_cdf(noise, -(v + shift) / scale), _log_cdf(noise, -v / scale)
    fwd = np.logaddexp(a * lp + (1 - a) * lq, a * lp1 + (1 - a) * lq1) / (a - 1)
    rev = np.logaddexp(a * lq + (1 - a) * lp, a * lq1 + (1 - a) * lp1) / (a - 1)
    return np.asarray(np.maximum(fwd, rev))


def _v_range(noise: str, alpha_max: float, shift: float, scale: float) -> tuple[float, float, float]:
    if noise == "gaussian":
        # the maximiser sits near v = -alpha * shift (Mills ratio); its width is ~ scale
        return -(alpha_max * shift + 15.0 * scale), 15.0 * scale + shift, 0.025 * scale
    return -(40.0 * scale + shift), 40.0 * scale, 0.025 * scale


def scalar_sign_rdp_sup(alphas: np.ndarray, shift: float, scale: float, noise: str) -> np.ndarray:
    """``h_alpha(shift) = sup_v D_alpha`` at each order (grid, then golden-section refinement)."""
    alphas = np.asarray(alphas, dtype=float)
    if shift == 0:
        return np.zeros(alphas.size)
    lo, hi, step = _v_range(noise, float(alphas.max()), shift, scale)
    v = np.arange(lo, hi + step, step)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        vals = _divergence(noise, alphas, v, shift, scale)
        i = np.argmax(vals, axis=1)
        best = vals[np.arange(alphas.size), i]
        left = v[np.maximum(i - 1, 0)]
        right = v[np.minimum(i + 1, v.size - 1)]
        # vectorised golden-section search for each order on [v_{i-1}, v_{i+1}]
        c = right - _INV_PHI * (right - left)
        d = left + _INV_PHI * (right - left)
        for _ in range(40):
            fc = _divergence_pairs(noise, alphas, c, shift, scale)
            fd = _divergence_pairs(noise, alphas, d, shift, scale)
            best = np.maximum(best, np.maximum(fc, fd))
            move = fc > fd
            right = np.where(move, d, right)
            left = np.where(move, left, c)
            c = right - _INV_PHI * (right - left)
            d = left + _INV_PHI * (right - left)
    return np.asarray(best)


@lru_cache(maxsize=64)
def base_rdp(noise: str, z: float, max_order: int = MAX_SIGN_ORDER) -> tuple[float, ...]:
    """Per-step Renyi DP (orders ``2..max_order``) of the sign of a clipped sum plus noise, no subsampling.

    Coordinates are independent, so divergences add; with ``||delta||_2 <= 1`` (units of
    the clipping norm) the total is at most ``sup_{0 < t <= 1} h_alpha(t) / t^2``. The
    supremum over ``t`` is taken on a 24-point grid refined around its maximum. For
    Gaussian noise it is capped by the Gaussian mechanism's ``alpha / (2 z^2)``.
    """
    alphas = np.arange(2, max_order + 1, dtype=float)
    grid = np.linspace(1.0 / 24.0, 1.0, 24)
    ratios = np.stack([scalar_sign_rdp_sup(alphas, t, z, noise) / t**2 for t in grid], axis=1)
    best = ratios.max(axis=1)
    arg = ratios.argmax(axis=1)
    for j in np.unique(arg):
        if j == grid.size - 1:
            continue
        lo, hi = grid[max(j - 1, 0)], grid[j + 1]
        rows = np.where(arg == j)[0]
        for t in np.linspace(lo, hi, 9):
            best[rows] = np.maximum(best[rows], scalar_sign_rdp_sup(alphas[rows], t, z, noise) / t**2)
    if noise == "gaussian":
        best = np.minimum(best, alphas / (2.0 * z**2))
    return tuple(float(x) for x in best)


@lru_cache(maxsize=64)
def logistic_mechanism_rdp(z: float, max_order: int = MAX_SIGN_ORDER) -> tuple[float, ...]:
    """Per-step Renyi DP (orders ``2..max_order``) of a clipped sum plus i.i.d. logistic noise (scale ``z``).

    ``sup_{0 < t <= 1} D_alpha(Logistic(t, z) || Logistic(0, z)) / t^2`` by quadrature on a
    fine grid (the post-processing baseline of the logistic sign).
    """
    alphas = np.arange(2, max_order + 1, dtype=float)[:, None]
    x = np.linspace(-50.0 * z, 50.0 * z, 8_001)
    dx = x[1] - x[0]

    def log_pdf(u: np.ndarray) -> np.ndarray:
        w = u / z
        return np.asarray(-w - 2.0 * np.logaddexp(0.0, -w) - math.log(z))

    best = np.zeros(alphas.shape[0])
    for t in np.linspace(1.0 / 24.0, 1.0, 24):
        lp, lq = log_pdf(x - t)[None, :], log_pdf(x)[None, :]
        fwd = (logsumexp(alphas * lp + (1 - alphas) * lq, axis=1) + math.log(dx)) / (alphas[:, 0] - 1)
        best = np.maximum(best, fwd / t**2)
    return tuple(float(v) for v in best)


def zhu_wang_subsampled(orders: np.ndarray, base: np.ndarray, rate: float) -> np.ndarray:
    """Zhu and Wang's (ICML 2019) general upper bound on Poisson-subsampled Renyi DP at integer orders.

    ``base[l - 2]`` is the base mechanism's Renyi DP at order ``l`` (``l = 2..``); for integer
    ``alpha``: ``log[(1-q)^(a-1)(aq-q+1) + C(a,2) q^2 (1-q)^(a-2) e^{eps(2)}
    + 3 sum_{l=3}^{a} C(a,l) (1-q)^(a-l) q^l e^{(l-1) eps(l)}] / (a - 1)``.
    """
    out = np.empty(len(orders))
    if rate >= 1.0:
        return np.asarray([base[int(a) - 2] for a in orders], dtype=float)
    lq, l1q = math.log(rate), math.log1p(-rate)
    for i, a in enumerate(orders):
        a = int(a)
        terms = [(a - 1) * l1q + math.log(a * rate - rate + 1.0)]
        terms.append(math.log(math.comb(a, 2)) + 2 * lq + (a - 2) * l1q + base[0])
        if a >= 3:
            ls = np.arange(3, a + 1, dtype=float)
            log_binom = gammaln(a + 1.0) - gammaln(ls + 1.0) - gammaln(a - ls + 1.0)
            eps = np.asarray([base[int(l_) - 2] for l_ in ls])
            rest = math.log(3.0) + log_binom + (a - ls) * l1q + ls * lq + (ls - 1) * eps
            terms.append(float(logsumexp(rest)))
        out[i] = float(logsumexp(terms)) / (a - 1)
    return out
