"""Mini-batch SGD on a two-layer ReLU network over the Boolean cube, against SQ answers and random features.

The simulations beside :mod:`trustlab.theory.sgd_random_features` that train a network:
:func:`simulate_bsgd_queries` measures how far bSGD's clipped, rounded mini-batch gradients are
from tolerance-``c`` statistical-query answers (the simulation step of Karchmer & Malach's
argument that survives); :func:`simulate_null_oracle` runs the SQ lower bound for parities
(bSGD fed the adversary's target-free answers); :func:`simulate_feature_growth` measures how
many random ReLU features approximate the function SGD has learned after ``T`` steps (an
empirical probe of their claimed, and reportedly flawed, ``poly(Tp/c)`` bound). Expectations
are exact: every function is evaluated on all ``2^n`` points of the cube. See
``docs/theory/sgd-random-features.md``.
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.theory.sgd_random_features import (
    _BITS,
    _POS_INT,
    _PRECISION,
    _UNIT_OPEN,
    BSGDResources,
    _check_k,
    _cube,
    _one_blas_thread,
    _relu_features,
    bsgd_sq_resources,
)

__all__ = [
    "BSGDQuerySimulation",
    "FeatureGrowth",
    "NullOracleSimulation",
    "simulate_bsgd_queries",
    "simulate_feature_growth",
    "simulate_null_oracle",
]


def _init_net(rng: np.random.Generator, n: int, width: int) -> list[np.ndarray]:
    """Two-layer ReLU net ``x -> a . max(0, W x + b)``; ``W, b`` as :func:`_relu_features` draws them."""
    return [
        rng.standard_normal((width, n)) / math.sqrt(n),
        rng.standard_normal(width) / math.sqrt(n),
        rng.standard_normal(width) / math.sqrt(width),
    ]


def _forward(params: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    w, b, a = params
    return np.maximum(x @ w.T + b, 0.0) @ a


def _example_grads(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-example gradients of ``(f - y)^2 / 2``, flattened ``[W, b, a]``: shape ``(m, p)``."""
    w, b, a = params
    h = x @ w.T + b
    r = (np.maximum(h, 0.0) @ a - y)[:, None]
    gb = r * (h > 0) * a
    gw = (gb[:, :, None] * x[:, None, :]).reshape(len(x), -1)
    return np.concatenate([gw, gb, r * np.maximum(h, 0.0)], axis=1)


def _step(params: list[np.ndarray], grad: np.ndarray, lr: float) -> list[np.ndarray]:
    w, b, a = params
    nw = w.size
    width = b.size
    return [
        w - lr * grad[:nw].reshape(w.shape),
        b - lr * grad[nw : nw + width],
        a - lr * grad[nw + width :],
    ]


@dataclass(frozen=True)
class BSGDQuerySimulation:
    """Measured deviation of rounded mini-batch gradients from SQ answers (see :func:`simulate_bsgd_queries`).

    Attributes
    ----------
    resources : BSGDResources
        The closed form at the run's ``T``, ``p``, ``c`` and batch size.
    max_sampling_deviation : numpy.ndarray
        Per run, ``max |batch mean - population mean|`` over the ``T p`` clipped coordinates.
    max_answer_deviation : numpy.ndarray
        Per run, the same after rounding to ``c Z``.
    valid_fraction : float
        Fraction of runs whose every rounded coordinate is within ``tau = c`` of its population
        value (the run is a valid SQ transcript).
    valid_se : float
        Its binomial standard error.
    guaranteed_fraction : float
        ``1 - delta`` when the batch meets :attr:`BSGDResources.min_batch_size`, else 0.

    See Also
    --------
    simulate_bsgd_queries : computes it.
    """

    resources: BSGDResources
    max_sampling_deviation: np.ndarray
    max_answer_deviation: np.ndarray
    valid_fraction: float
    valid_se: float
    guaranteed_fraction: float


@validate_params(
    {
        "n_bits": [_BITS],
        "k": [_POS_INT],
        "width": [_POS_INT],
        "steps": [_POS_INT],
        "precision": [_PRECISION],
        "batch_size": [_POS_INT, None],
        "failure_prob": [_UNIT_OPEN],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "n_runs": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }
)
@_one_blas_thread
def simulate_bsgd_queries(
    n_bits: int = 8,
    k: int = 3,
    *,
    width: int = 8,
    steps: int = 20,
    precision: float = 0.25,
    batch_size: int | None = None,
    failure_prob: float = 0.05,
    learning_rate: float = 0.1,
    n_runs: int = 20,
    random_state: Any = 0,
) -> BSGDQuerySimulation:
    """Run bSGD on a ``k``-parity and compare each rounded gradient with its population value.

    A two-layer ReLU network (``p = width (n_bits + 2)`` parameters) is trained on
    ``y = x_1 ... x_k`` under the uniform distribution on ``{-1, 1}^n`` with square loss;
    per-example gradients are clipped to ``[-1, 1]``, averaged over ``batch_size`` uniform
    draws, rounded to ``c Z`` and applied. The population value of every clipped coordinate is
    exact (all ``2^n`` points), so each run's deviation from a tolerance-``c`` SQ answer is
    measured, not estimated.

    Parameters
    ----------
    n_bits : int, default 8
        ``n`` in ``[2, 14]``.
    k : int, default 3
        Parity size, ``<= n_bits``.
    width : int, default 8
    steps : int, default 20
        ``T``.
    precision : float, default 0.25
        ``c`` in ``(0, 1]``.
    batch_size : int, optional
        ``b``; default :attr:`BSGDResources.min_batch_size`.
    failure_prob : float, default 0.05
    learning_rate : float, default 0.1
    n_runs : int, default 20
    random_state : int, Generator or None, default 0

    Returns
    -------
    BSGDQuerySimulation

    References
    ----------
    Abbe, Kamath, Malach, Sandon & Srebro, NeurIPS 2021; Karchmer & Malach, ICML 2025 (bSGD).

    Examples
    --------
    >>> sim = simulate_bsgd_queries(6, 2, width=4, steps=5, precision=0.5, n_runs=3)
    >>> sim.valid_fraction, sim.resources.queries
    (1.0, 160)
    """
    n, kk = int(n_bits), int(k)
    _check_k(n, kk)
    p = int(width) * (n + 2)
    res0 = bsgd_sq_resources(int(steps), p, float(precision), failure_prob=failure_prob)
    b = res0.min_batch_size if batch_size is None else int(batch_size)
    res = bsgd_sq_resources(int(steps), p, float(precision), batch_size=b, failure_prob=failure_prob)
    rng = make_generator(random_state)
    x = _cube(n)
    y = np.prod(x[:, :kk], axis=1)
    c = float(precision)
    samp, ans = np.zeros(n_runs), np.zeros(n_runs)
    for r in range(n_runs):
        params = _init_net(rng, n, int(width))
        for _ in range(int(steps)):
            g = np.clip(_example_grads(params, x, y), -1.0, 1.0)
            pop = g.mean(axis=0)
            batch = g[rng.integers(0, len(x), size=b)].mean(axis=0)
            answer = c * np.round(batch / c)
            samp[r] = max(samp[r], float(np.max(np.abs(batch - pop))))
            ans[r] = max(ans[r], float(np.max(np.abs(answer - pop))))
            params = _step(params, answer, float(learning_rate))
    valid = ans <= c + 1e-12
    frac = float(valid.mean())
    return BSGDQuerySimulation(
        resources=res,
        max_sampling_deviation=samp,
        max_answer_deviation=ans,
        valid_fraction=frac,
        valid_se=math.sqrt(max(frac * (1 - frac), 1.0 / n_runs) / n_runs),
        guaranteed_fraction=1.0 - failure_prob if res.simulable else 0.0,
    )


@dataclass(frozen=True)
class NullOracleSimulation:
    """bSGD fed the target-free SQ answers on all ``k``-parities (see :func:`simulate_null_oracle`).

    Attributes
    ----------
    sq_dimension : int
        ``N = C(n_bits, k)``.
    queries : int
        ``T p``.
    tolerance : float
    distinguished : int
        Parities for which some target-free answer was more than ``tolerance`` off (the only
        targets an SQ algorithm fed these answers could tell apart).
    bessel_cap : float
        ``sum over queries of E[h^2] / tau^2`` (``h`` the label-odd part of each query): the
        bound on ``distinguished``.
    cap : float
        ``T p / tau^2`` (``E[h^2] <= 1``).
    fitted_indistinguished : int
        Parities not distinguished whose squared error to the common output is ``< 1/2``
        (at most 1 by the triangle inequality).
    mean_error : float
        Mean over the ``N`` parities of the squared error of the common output.
    error_lower_bound : float
        ``(U - 1) / N`` with ``U = N - distinguished``: one output for ``U`` orthonormal targets
        has summed squared error ``>= U - 1`` (least at their mean).

    See Also
    --------
    simulate_null_oracle : computes it.
    """

    sq_dimension: int
    queries: int
    tolerance: float
    distinguished: int
    bessel_cap: float
    cap: float
    fitted_indistinguished: int
    mean_error: float
    error_lower_bound: float


@validate_params(
    {
        "n_bits": [_BITS],
        "k": [_POS_INT],
        "width": [_POS_INT],
        "steps": [_POS_INT],
        "tolerance": [_PRECISION],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
)
@_one_blas_thread
def simulate_null_oracle(
    n_bits: int = 8,
    k: int = 3,
    *,
    width: int = 8,
    steps: int = 20,
    tolerance: float = 0.05,
    learning_rate: float = 0.1,
    random_state: Any = 0,
) -> NullOracleSimulation:
    """Run bSGD's SQ simulation with the adversary's answers and count the parities it could tell apart.

    Each clipped gradient coordinate is a query ``phi(x, y) = g(x) + y h(x)`` with
    ``g, h = (phi(x, 1) +- phi(x, -1)) / 2``; on target ``chi_S`` its value is
    ``E g + hat h(S)``. The adversary answers ``E g`` (exact, over the cube) for every target;
    the answer is valid for ``chi_S`` unless ``|hat h(S)| > tau``, which by Bessel happens for
    fewer than ``E[h^2] / tau^2`` parities per query. Gradient descent driven by these answers
    is the same run for every target not distinguished, so their common output can fit at
    most one of them: the closed form ``m >= tau^2 (N - 1)`` of
    :func:`~trustlab.theory.sgd_random_features.parity_feature_bound`, run.

    Parameters
    ----------
    n_bits : int, default 8
        ``n`` in ``[2, 14]``.
    k : int, default 3
        Parity size, ``<= n_bits``.
    width : int, default 8
    steps : int, default 20
    tolerance : float, default 0.05
        ``tau`` in ``(0, 1]``.
    learning_rate : float, default 0.1
    random_state : int, Generator or None, default 0

    Returns
    -------
    NullOracleSimulation

    References
    ----------
    Blum et al., STOC 1994 (SQ lower bounds from orthogonal classes); Abbe, Kamath, Malach,
    Sandon & Srebro, NeurIPS 2021 (bSGD as SQ).

    Examples
    --------
    >>> sim = simulate_null_oracle(6, 3, width=4, steps=5)
    >>> sim.distinguished <= sim.bessel_cap <= sim.cap, sim.fitted_indistinguished <= 1
    (True, True)
    """
    n, kk = int(n_bits), int(k)
    _check_k(n, kk)
    rng = make_generator(random_state)
    x = _cube(n)
    subsets = list(itertools.combinations(range(n), kk))
    chars = np.stack([np.prod(x[:, list(s)], axis=1) for s in subsets], axis=1)  # (2^n, N)
    params = _init_net(rng, n, int(width))
    tau = float(tolerance)
    hit = np.zeros(len(subsets), dtype=bool)
    cap_sum = 0.0
    ones = np.ones(len(x))
    for _ in range(int(steps)):
        up = np.clip(_example_grads(params, x, ones), -1.0, 1.0)
        down = np.clip(_example_grads(params, x, -ones), -1.0, 1.0)
        g, h = (up + down) / 2, (up - down) / 2
        coef = chars.T @ h / len(x)  # hat h_j(S), (N, p)
        hit |= np.any(np.abs(coef) > tau, axis=1)
        cap_sum += float(np.sum(np.mean(h**2, axis=0))) / tau**2
        params = _step(params, g.mean(axis=0), float(learning_rate))
    f = _forward(params, x)
    err = np.mean((f[:, None] - chars) ** 2, axis=0)
    p = int(width) * (n + 2)
    return NullOracleSimulation(
        sq_dimension=len(subsets),
        queries=int(steps) * p,
        tolerance=tau,
        distinguished=int(hit.sum()),
        bessel_cap=cap_sum,
        cap=int(steps) * p / tau**2,
        fitted_indistinguished=int(np.sum((err < 0.5) & ~hit)),
        mean_error=float(err.mean()),
        error_lower_bound=max(0.0, (len(subsets) - int(hit.sum()) - 1) / len(subsets)),
    )


@dataclass(frozen=True)
class FeatureGrowth:
    """Random ReLU features needed for the function SGD learned (see :func:`simulate_feature_growth`).

    Attributes
    ----------
    steps : numpy.ndarray
        SGD step counts ``T``.
    n_params : int
        ``p`` of the trained network.
    target_error : numpy.ndarray
        Mean squared error of the network to the parity after ``T`` steps (exact).
    functions : numpy.ndarray
        ``(len(steps), 2^n)``: the network's outputs ``f_T`` on the cube, points in
        ``itertools.product((-1, 1), repeat=n)`` order.
    error_curve : numpy.ndarray
        ``(len(steps), max_features)``: median over feature draws of the relative squared error
        ``||f_T - P_N f_T||^2 / ||f_T||^2`` of the best ``N``-feature fit, ``N = 1..max_features``.
    features_needed : numpy.ndarray
        ``N*(T)``: smallest ``N`` whose median error is ``<= error`` (``nan`` if none).
    error : float
    fitted_exponent : float
        Least-squares slope of ``log N*`` on ``log T``.
    exponent_se : float
        Bootstrap (over feature draws) standard error of the slope.
    error_exponent : float
        Slope of ``log error_curve[-1]`` on ``log N`` over ``N = 4..max_features`` (the last
        ``T``): the power law of the approximation error in the number of features.
    error_exponent_se : float
        Its least-squares standard error.

    See Also
    --------
    simulate_feature_growth : computes it.
    """

    steps: np.ndarray
    n_params: int
    target_error: np.ndarray
    functions: np.ndarray
    error_curve: np.ndarray
    features_needed: np.ndarray
    error: float
    fitted_exponent: float
    exponent_se: float
    error_exponent: float
    error_exponent_se: float


def _needed(curve: np.ndarray, error: float) -> np.ndarray:
    hit = curve <= error
    return np.where(hit.any(axis=-1), np.argmax(hit, axis=-1) + 1.0, np.nan)


def _fit(xs: np.ndarray, ys: np.ndarray) -> tuple[float, float]:
    ok = np.isfinite(ys)
    if ok.sum() < 2:
        return math.nan, math.nan
    xv, yv = xs[ok], ys[ok]
    coef, cov = np.polyfit(xv, yv, 1, cov=True) if ok.sum() > 2 else (np.polyfit(xv, yv, 1), None)
    se = math.sqrt(float(cov[0, 0])) if cov is not None else math.nan
    return float(coef[0]), se


@validate_params(
    {
        "n_bits": [_BITS],
        "k": [_POS_INT],
        "steps": ["array-like"],
        "width": [_POS_INT],
        "batch_size": [_POS_INT],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "error": [_UNIT_OPEN],
        "max_features": [_POS_INT, None],
        "n_draws": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_bootstrap": [Interval(numbers.Integral, 10, None, closed="left")],
        "random_state": ["random_state"],
    }
)
@_one_blas_thread
def simulate_feature_growth(
    n_bits: int = 8,
    k: int = 3,
    steps: Any = (50, 100, 200, 400, 800, 1600),
    *,
    width: int = 64,
    batch_size: int = 32,
    learning_rate: float = 0.05,
    error: float = 0.25,
    max_features: int | None = None,
    n_draws: int = 5,
    n_bootstrap: int = 200,
    random_state: Any = 0,
) -> FeatureGrowth:
    """Train a two-layer ReLU net by mini-batch SGD, then fit its function with random ReLU features.

    An empirical probe of the question, not a check of a theorem: the target is the parity
    ``x_1 ... x_k`` under the uniform distribution on ``{-1, 1}^n`` (one distribution, where
    Karchmer & Malach's statement is about every distribution and an average over targets).
    The network (width ``width``, initialised like the features) runs plain mini-batch SGD on
    the square loss; after each ``T`` in ``steps`` its function ``f_T`` on all ``2^n`` points
    is projected, exactly, on the span of the first ``N`` of ``max_features`` random ReLU
    features (nested Gram-Schmidt), for every ``N``.

    Parameters
    ----------
    n_bits : int, default 8
        ``n`` in ``[2, 14]``.
    k : int, default 3
        Parity size, ``<= n_bits``.
    steps : array-like of int, default (50, 100, 200, 400, 800, 1600)
        At least two increasing step counts.
    width : int, default 64
    batch_size : int, default 32
    learning_rate : float, default 0.05
    error : float, default 0.25
        Relative squared error that counts as approximated, in ``(0, 1)``.
    max_features : int, optional
        Largest ``N``, at most ``2^n``; default ``2^n - 1`` (``2^n`` features fit any function
        on the cube).
    n_draws : int, default 5
        Independent feature draws.
    n_bootstrap : int, default 200
    random_state : int, Generator or None, default 0

    Returns
    -------
    FeatureGrowth

    References
    ----------
    Karchmer & Malach, ICML 2025 (the claim probed: RF size ``poly(Tp/c)``, reported not to hold
    by Feldman, Kamath & Srebro, COLT 2026). B. Barak, B. Edelman, S. Goel, S. Kakade, E. Malach
    and C. Zhang, "Hidden Progress in Deep Learning: SGD Learns Parities Near the Computational
    Limit", NeurIPS 2022 (SGD on sparse parities).

    Examples
    --------
    >>> g = simulate_feature_growth(6, 2, [20, 200], width=16, n_draws=2, n_bootstrap=10)
    >>> g.error_curve.shape
    (2, 63)
    """
    n, kk = int(n_bits), int(k)
    _check_k(n, kk)
    ts = check_numeric_array(steps, "steps", ndim=1, min_rows=2, dtype=float)
    if np.any(ts < 1) or np.any(ts != np.round(ts)) or np.any(np.diff(ts) <= 0):
        raise DataError(f"steps must be increasing integers >= 1, got {ts.tolist()}.", argument="steps")
    m_max = 2**n - 1 if max_features is None else int(max_features)
    if m_max > 2**n:
        raise ParameterError(
            f"max_features={m_max} exceeds the 2^n_bits={2**n} points of the cube; pass at most {2**n}.",
            argument="max_features",
        )
    rng = make_generator(random_state)
    x = _cube(n)
    y = np.prod(x[:, :kk], axis=1)
    params = _init_net(rng, n, int(width))
    snaps, mse = [], []
    todo = set(ts.astype(int).tolist())
    for t in range(1, int(ts[-1]) + 1):
        idx = rng.integers(0, len(x), size=int(batch_size))
        params = _step(params, _example_grads(params, x[idx], y[idx]).mean(axis=0), float(learning_rate))
        if t in todo:
            f = _forward(params, x)
            snaps.append(f)
            mse.append(float(np.mean((f - y) ** 2)))
    fs = np.array(snaps)  # (len(T), 2^n)
    curves = np.empty((n_draws, len(ts), m_max))
    for r in range(n_draws):
        q = np.linalg.qr(_relu_features(rng, x, m_max))[0]
        coef2 = (fs @ q) ** 2  # (len(T), m_max)
        curves[r] = 1.0 - np.cumsum(coef2, axis=1) / np.sum(fs**2, axis=1, keepdims=True)
    curves = np.maximum(curves, 0.0)
    median = np.median(curves, axis=0)
    need = _needed(median, float(error))
    logt = np.log(ts)
    slope, _ = _fit(logt, np.log(need))
    boots = []
    for _ in range(n_bootstrap):
        pick = rng.integers(0, n_draws, size=n_draws)
        boots.append(_fit(logt, np.log(_needed(np.median(curves[pick], axis=0), float(error))))[0])
    b = np.array(boots)
    b = b[np.isfinite(b)]
    ns = np.arange(1, m_max + 1)
    sel = (ns >= 4) & (median[-1] > 0)
    e_slope, e_se = _fit(np.log(ns[sel]), np.log(median[-1][sel]))
    return FeatureGrowth(
        steps=ts.astype(int),
        n_params=int(width) * (n + 2),
        target_error=np.array(mse),
        functions=fs,
        error_curve=median,
        features_needed=need,
        error=float(error),
        fitted_exponent=slope,
        exponent_se=float(np.std(b, ddof=1)) if b.size > 2 else math.nan,
        error_exponent=e_slope,
        error_exponent_se=e_se,
    )
