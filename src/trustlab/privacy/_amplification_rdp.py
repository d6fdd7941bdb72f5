"""Renyi-DP numerics for amplification by random partitioning (private module).

All moments are computed in log space: the terms ``exp(C(m, 2) / z**2)`` overflow a
float long before the orders a Renyi accountant needs (``C(256, 2) = 32640``).

Notation (Dong, Chen, Ozgur, ICML 2025; Feldman, Shenfeld 2025): one record is
replaced by a null record (zero-out adjacency); its clipped gradient has norm 1 in
units of the clipping norm; ``z`` is the noise multiplier. For integer ``alpha`` the
forward Renyi moment of a mixture of Gaussians ``N(1_S, z^2 I)`` against ``N(0, z^2 I)``
is ``M_alpha = E exp(sum_{a<b} <1_{S_a}, 1_{S_b}> / z^2)`` over ``alpha`` i.i.d. draws of
the mixture index ``S`` (expand ``E_Q[L^alpha]`` and integrate the Gaussians).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from scipy.special import gammaln, logsumexp

__all__ = [
    "balls_in_bins_log_moments",
    "hypergeometric_log_moment2",
    "log_elementary_symmetric",
    "poisson_gaussian_log_moment",
    "rdp_from_log_moments",
    "small_bis_log_moment",
]


def _log_conv(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Log-space product of two power series truncated at degree ``n`` (``len == n + 1``).

    Anti-diagonal log-sum-exp of the outer sum, each anti-diagonal shifted by its own
    maximum so that no coefficient underflows against a larger one of another degree.
    """
    idx = np.add.outer(np.arange(n + 1), np.arange(n + 1)).ravel()
    terms = np.add.outer(a[: n + 1], b[: n + 1]).ravel()
    keep = (idx <= n) & np.isfinite(terms)
    idx, terms = idx[keep], terms[keep]
    peak = np.full(n + 1, -np.inf)
    np.maximum.at(peak, idx, terms)
    sums = np.bincount(idx, weights=np.exp(terms - peak[idx]), minlength=n + 1)
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(peak), peak + np.log(np.where(sums > 0, sums, 1.0)), -np.inf)


def _log_power(a: np.ndarray, d: int, n: int) -> np.ndarray:
    """Log-space ``a(x)**d`` truncated at degree ``n`` (binary powering)."""
    result = np.full(n + 1, -np.inf)
    result[0] = 0.0
    base = a.copy()
    while d:
        if d & 1:
            result = _log_conv(result, base, n)
        d >>= 1
        if d:
            base = _log_conv(base, base, n)
    return result


def balls_in_bins_log_moments(max_order: int, num_bins: int, rate: float, z: float) -> np.ndarray:
    """``log M_alpha`` for ``alpha = 0..max_order`` of the "one of ``num_bins``" mixture.

    Each of the ``alpha`` draws falls in bin ``j`` with probability ``rate / num_bins``
    and in no bin with probability ``1 - rate``; a bin holding ``m`` draws costs
    ``exp(C(m, 2) / z**2)``. ``M_alpha = alpha! [x^alpha] G_0(x) G(x)**num_bins`` with
    ``G_0(x) = exp((1 - rate) x)`` and ``G(x) = sum_m (rate/num_bins)^m e^{C(m,2)/z^2} x^m / m!``.
    One computation gives every order up to ``max_order``.
    """
    n = int(max_order)
    m = np.arange(n + 1, dtype=float)
    log_fact = gammaln(m + 1.0)
    with np.errstate(divide="ignore", over="ignore"):
        block = m * math.log(rate / num_bins) + m * (m - 1.0) / 2.0 / z**2 - log_fact
        block[0] = 0.0
        series = _log_power(block, int(num_bins), n)
        if rate < 1.0:
            none = m * math.log1p(-rate) - log_fact
            series = _log_conv(series, none, n)
    return series + log_fact


def poisson_gaussian_log_moment(orders: np.ndarray, rate: float, z: float) -> np.ndarray:
    """``log M_alpha`` of one Poisson-subsampled Gaussian step at integer ``orders`` (closed form).

    ``M_alpha = sum_j C(alpha, j) q^j (1 - q)^(alpha - j) exp(j (j - 1) / (2 z^2))``
    (Mironov, Talwar, Zhang 2019).
    """
    a = np.asarray(orders, dtype=float)[:, None]
    j = np.arange(int(a.max()) + 1, dtype=float)[None, :]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        lq = math.log(rate)
        l1q = math.log1p(-rate) if rate < 1.0 else -np.inf
        log_binom = gammaln(a + 1.0) - gammaln(j + 1.0) - gammaln(a - j + 1.0)
        terms = log_binom + j * lq + np.where(j < a, (a - j) * l1q, 0.0) + j * (j - 1.0) / (2.0 * z**2)
        terms = np.where(j <= a, terms, -np.inf)  # one row per order, padded past j = alpha
        return np.asarray(logsumexp(terms, axis=1))


def poisson_gaussian_log_moment_real(orders: np.ndarray, rate: float, z: float) -> np.ndarray:
    """``log E_{x~N(0,z^2)}[((1-q) + q exp((2x - 1) / (2 z^2)))^alpha]`` at real orders ``alpha > 1``.

    Numerical quadrature on one grid that covers every order's mass, from ``-40 z`` to
    ``max(orders) + 40 z``, at spacing ``z / 20`` (at least 4,000 points). The integrand is
    a mixture of Gaussians of width ``z`` (analytic, fast-decaying), for which the Riemann sum
    converges geometrically: spacings from ``z / 5`` to ``z / 200`` agree to 1e-12 (absolute,
    in ``log M``) over ``q`` in [1e-5, 0.999] and ``z`` in [0.1, 200], and the result equals
    scipy's adaptive quadrature to 1e-8 (tests/privacy/test_amplification.py). All orders share
    the grid, so the mixture term is computed once; used for fractional orders.
    """
    a = np.asarray(orders, dtype=float)
    lo = -40.0 * z
    hi = float(a.max()) + 40.0 * z
    n = int(min(max(4000, (hi - lo) / (z / 20.0)), 400_000))
    x = np.linspace(lo, hi, n)
    dx = x[1] - x[0]
    with np.errstate(divide="ignore"):
        log_mix = np.logaddexp(
            math.log1p(-rate) if rate < 1.0 else -np.inf,
            math.log(rate) + (2.0 * x - 1.0) / (2.0 * z**2),
        )
    log_density = -(x**2) / (2.0 * z**2) - math.log(z * math.sqrt(2.0 * math.pi))
    out = np.empty(a.size)
    chunk = max(1, 250_000 // n)  # bounds the (orders x grid) block at 2 MB
    for start in range(0, a.size, chunk):
        block = log_density + a[start : start + chunk, None] * log_mix
        peak = block.max(axis=1)
        out[start : start + chunk] = peak + np.log(np.exp(block - peak[:, None]).sum(axis=1)) + math.log(dx)
    return out


def hypergeometric_log_moment2(steps: int, k: int, z: float) -> float:
    """Exact ``log M_2`` of balanced iteration subsampling: ``E exp(|S_1 ∩ S_2| / z^2)``.

    The overlap of two independent uniform ``k``-subsets of ``steps`` is
    Hypergeometric(``steps``, ``k``, ``k``).
    """
    i = np.arange(k + 1, dtype=float)
    valid = (k - i) <= (steps - k)
    i = i[valid]

    def lchoose(n: float, r: np.ndarray | float) -> np.ndarray:
        return np.asarray(gammaln(n + 1.0) - gammaln(np.asarray(r) + 1.0) - gammaln(n - np.asarray(r) + 1.0))

    log_pmf = lchoose(k, i) + lchoose(steps - k, k - i) - lchoose(steps, k)
    return float(logsumexp(log_pmf + i / z**2))


def small_bis_log_moment(order: int, steps: int, k: int, z: float) -> float:
    """Exact ``log M_alpha`` of balanced iteration subsampling by dynamic programming.

    The state is the sorted vector of how many of the draws so far contain each
    step (exchangeable, so sorting loses nothing); each draw adds a uniform
    ``k``-subset. ``M_alpha = E exp(sum_i C(c_i, 2) / z^2)``. Only for small
    ``steps`` (the caller bounds the number of states).
    """
    subsets = list(itertools.combinations(range(steps), k))
    log_p = -math.log(len(subsets))
    states: dict[tuple[int, ...], float] = {tuple([0] * steps): 0.0}
    for _ in range(order):
        nxt: dict[tuple[int, ...], list[float]] = {}
        for state, lw in states.items():
            for s in subsets:
                c = list(state)
                for i in s:
                    c[i] += 1
                key = tuple(sorted(c))
                nxt.setdefault(key, []).append(lw + log_p)
        states = {key: float(logsumexp(v)) for key, v in nxt.items()}
    vals = [lw + sum(c * (c - 1) / 2.0 for c in state) / z**2 for state, lw in states.items()]
    return float(logsumexp(vals))


def small_bis_state_count(order: int, steps: int) -> int:
    """Upper bound on the number of DP states of :func:`small_bis_log_moment` (sorted count vectors)."""
    # Multisets of size `steps` over {0..order}: C(steps + order, order).
    return math.comb(steps + order, order)


def rdp_from_log_moments(orders: Sequence[int] | np.ndarray, log_moments: np.ndarray) -> np.ndarray:
    """``log M_alpha / (alpha - 1)`` (the forward Renyi divergence) at each order."""
    a = np.asarray(orders, dtype=float)
    return np.asarray(log_moments, dtype=float) / (a - 1.0)


def log_elementary_symmetric(log_w: np.ndarray, k: int) -> np.ndarray:
    """``log e_k(w)`` row-wise for ``log_w`` of shape ``(n, T)``: O(T k) dynamic program in log space."""
    n, t = log_w.shape
    e = np.full((n, k + 1), -np.inf)
    e[:, 0] = 0.0
    for i in range(t):
        upper = min(i + 1, k)
        e[:, 1 : upper + 1] = np.logaddexp(e[:, 1 : upper + 1], e[:, 0:upper] + log_w[:, i : i + 1])
    return e[:, k]
