"""The exponential-gain setting of pre-training: a spike along the target traps random starts.

Inputs ``a ~ N(0, I_d + spike v0 v0^T)`` (the spike of the paper's model aligned with the target,
``eta_1 = 1``), labels ``y = f(a . v0) + noise``, a neuron ``x -> f(a . x)`` on the sphere trained by
online spherical SGD on the square loss. For links such as ``He_3`` the spike makes ``E f(a . x)^2``
grow with ``(x . v0)^2``, so the population drift of the overlap ``m = x . v0`` points back to
``m = 0`` near the equator: a random start (``m ~ d^{-1/2}``) is trapped and leaves only by a
large deviation, after ``exp(c d)`` samples, whatever the step size, while a PCA ("pre-trained")
or transferred start beyond the trap's edge ``m*`` needs ``O(d)`` samples (Jones-McCormick,
Jagannath & Sen, ICML 2025: "settings where pre-training grants exponential improvement over
random initialization"; the trap of spherical SGD under an aligned spike is Mousavi-Hosseini et
al., NeurIPS 2023). By the rotational symmetry about ``v0``, ``m_t`` is a Markov chain:
:func:`spiked_sample_complexity` gives its diffusion limit's mean first-passage time (closed form
up to one-dimensional quadrature) and escape rate ``c``; :func:`simulate_spiked_sample_complexity`
runs the SGD (the exact overlap chain, or the full ``d``-dimensional iterate) and fits the growth.
See ``docs/theory/pretraining.md``: trustlab's derivation, the paper's full text was not available.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.polynomial.hermite_e import HermiteE, hermegauss

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.theory.pretraining import (
    _bootstrap_slope_se,
    _check_link,
    _pca_starts,
    _run_sgd,
    _slope,
    pca_overlap,
)

__all__ = [
    "SpikedSampleComplexity",
    "SpikedSimulation",
    "simulate_spiked_sample_complexity",
    "spiked_sample_complexity",
]

_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")
_UNIT_OPEN = Interval(numbers.Real, 0, 1, closed="neither")
_NODES, _WEIGHTS = hermegauss(40)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()
_Z1, _Z2 = np.meshgrid(_NODES, _NODES, indexing="ij")
_W2 = np.outer(_WEIGHTS, _WEIGHTS)
_GRID = 401


def _moments(c: np.ndarray, m: float, spike: float, noise_std: float) -> tuple[float, float, float]:
    """Mean and variance of ``g . v0`` and ``E r^2`` at overlap ``m`` (``g = r (a - (a.x) x)``)."""
    f = HermiteE(c)
    fp = f.deriv()
    su = math.sqrt(1 + spike * m * m)
    sw = math.sqrt(1 + spike)
    rho = m * (1 + spike) / (su * sw)
    u = su * _Z1
    w = sw * (rho * _Z1 + math.sqrt(max(1 - rho * rho, 0.0)) * _Z2)
    res = f(w) - f(u)
    proj = w - m * u
    mean = float(np.sum(_W2 * -2 * res * fp(u) * proj))
    second = float(np.sum(_W2 * 4 * (res**2 + noise_std**2) * fp(u) ** 2 * proj**2))
    r2 = float(np.sum(_W2 * 4 * (res**2 + noise_std**2) * fp(u) ** 2))
    return mean, second - mean**2, r2


def _drift(
    c: np.ndarray, spike: float, delta: float, noise_std: float, grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``beta(m)``, ``sigma^2(m)``: per step ``E dm = (delta/d) beta``, ``Var dm = (delta/d)^2 sigma^2``."""
    mom = np.array([_moments(c, float(m), spike, noise_std) for m in grid])
    beta = -mom[:, 0] - delta / 2 * mom[:, 2] * grid
    return beta, np.maximum(mom[:, 1], 1e-300)


def _first_passage(
    grid: np.ndarray, beta: np.ndarray, sigma2: np.ndarray, d: int, delta: float, m0: float, floor: float
) -> float:
    """Mean steps for ``dm = (delta/d) beta dt + (delta/d) sigma dW`` to go from ``m0`` to ``grid[-1]``.

    Reflected at ``floor`` (Gardiner, *Handbook of Stochastic Methods*, Sec. 5.2.7).
    """
    keep = grid >= floor
    grid, beta, sigma2 = grid[keep], beta[keep], sigma2[keep]
    h = float(grid[1] - grid[0])
    ratio = 2 * d * beta / (delta * sigma2)  # 2 b / D
    log_psi = np.concatenate([[0.0], np.cumsum((ratio[1:] + ratio[:-1]) / 2 * h)])
    log_inner = np.logaddexp.accumulate(log_psi + np.log(2 * d * d / (delta * delta * sigma2)) + math.log(h))
    i0 = int(np.searchsorted(grid, m0))
    terms = log_inner[i0:] - log_psi[i0:]
    top = float(terms.max())
    return float(math.exp(top) * np.sum(np.exp(terms - top)) * h) if top < 700 else math.inf


def _trap(grid: np.ndarray, beta: np.ndarray, sigma2: np.ndarray, delta: float) -> tuple[float, float, float]:
    """Edge ``m*`` of the trap at ``m = 0``, where the drift turns negative again, escape rate ``c``.

    ``m*`` is the first zero of ``beta`` above 0, the next zero ``1`` if none, ``c = (2/delta)
    int_0^{m*} -beta/sigma^2``.
    """
    pos = grid > 0
    g, b, s = grid[pos], beta[pos], sigma2[pos]
    if b[0] >= 0:
        return 0.0, 1.0, 0.0
    up = np.flatnonzero(b > 0)
    if len(up) == 0:
        return math.inf, math.inf, math.inf
    i = int(up[0])
    down = np.flatnonzero(b[i:] <= 0)
    upper = float(g[i + down[0]]) if len(down) else 1.0
    rate = 2 / delta * float(np.trapezoid(-b[:i] / s[:i], g[:i]))
    return float(g[i]), upper, rate


@dataclass(frozen=True)
class SpikedSampleComplexity:
    """Predicted samples of online SGD under a spike along the target (see :func:`spiked_sample_complexity`).

    Attributes
    ----------
    dimension : int
    init : str
        ``"random"``, ``"pretrained"`` or ``"transfer"``.
    initial_overlap : float
        ``m0 = x0 . v0``.
    step_size : float
        ``delta``; SGD moves by ``delta / d`` times the gradient.
    samples : float
        From a start inside the trap: mean first-passage time (one sample per step) of the
        overlap's diffusion limit from ``m0`` to ``threshold`` (``inf`` if too large to represent);
        from a start beyond it, the same with the diffusion reflected at the trap's edge (the
        typical time: the mean is ruled by rare falls back into the trap); ``O(d)``.
    trap_edge : float
        ``m*``: the drift of ``m`` is negative on ``(0, m*)`` (``0``: no trap, ``inf``: no positive
        drift at all).
    drift_end : float
        Where the drift turns negative again above ``m*`` (``1``: not below ``threshold``).
    escape_rate : float
        ``c``: from a start inside the trap ``log(samples) / d -> c`` as ``d -> inf``.
    growth : str
        ``"exponential"`` (the start lies in the trap, ``c > 0``) or ``"linear"``.

    See Also
    --------
    spiked_sample_complexity : computes it.
    """

    dimension: int
    init: str
    initial_overlap: float
    step_size: float
    samples: float
    trap_edge: float
    drift_end: float
    escape_rate: float
    growth: str


_SPIKED: dict[str, list[Any]] = {
    "link": ["array-like"],
    "init": [Options({"random", "pretrained", "transfer"})],
    "initial_overlap": [_UNIT_OPEN, None],
    "spike": [_NONNEG],
    "unlabeled_ratio": [_POS],
    "threshold": [_UNIT_OPEN],
    "noise_std": [_NONNEG],
}


def _start(init: str, d: int, spike: float, ratio: float, overlap: float | None) -> float:
    if init == "random":
        return 1.0 / math.sqrt(d)
    if init == "pretrained":
        rho = pca_overlap(spike, 1.0 / ratio) if spike > 0 else 0.0
        if rho == 0.0:
            raise ParameterError(
                f"PCA on {ratio} d unlabeled samples carries no information at spike={spike} (BBP: needs "
                "spike^2 > 1 / unlabeled_ratio); raise spike or unlabeled_ratio.",
                argument="unlabeled_ratio",
            )
        return math.sqrt(rho)
    if overlap is None:
        raise ParameterError(
            "initial_overlap is required for init='transfer': the source model's overlap with the "
            "target, in (0, 1).",
            argument="initial_overlap",
        )
    return float(overlap)


@validate_params(
    {**_SPIKED, "dimension": [Interval(numbers.Integral, 3, None, closed="left")], "step_size": [_POS]}
)
def spiked_sample_complexity(
    link: Any,
    dimension: int,
    *,
    init: str = "random",
    initial_overlap: float | None = None,
    spike: float = 0.25,
    unlabeled_ratio: float = 32.0,
    step_size: float = 0.014,
    threshold: float = 0.8,
    noise_std: float = 0.0,
) -> SpikedSampleComplexity:
    """Predicted labeled samples for online spherical SGD to reach overlap ``threshold`` (spike along ``v0``).

    The overlap ``m = x . v0`` is a Markov chain; to leading order in ``d`` each step moves it by
    ``(delta/d) beta(m)`` on average with variance ``(delta/d)^2 sigma^2(m)``, ``beta = -E[g . v0]
    - (delta/2) E[r^2] m`` (population drift minus the sphere's retraction), ``g`` the spherical
    gradient, ``r = -2 (y - f(a.x)) f'(a.x)``; both by 2-D Gauss-Hermite quadrature. The result is
    the diffusion's mean first-passage time from ``m0`` to ``threshold``, reflected at ``m = -1``
    (at the trap's edge ``m*`` for a start beyond it).
    Where ``beta < 0`` on ``(0, m*)`` a start below ``m*`` needs ``~ exp(c d)`` samples with ``c =
    (2/delta) int_0^{m*} -beta/sigma^2`` (Freidlin-Wentzell); a start above ``m*`` needs ``O(d)``.

    Parameters
    ----------
    link : array-like
        Hermite coefficients of ``f`` (default setting: ``He_3 / sqrt 6``).
    dimension : int
        ``d >= 3``.
    init : {"random", "pretrained", "transfer"}, default "random"
        ``"random"``: ``m0 = d^{-1/2}``; ``"pretrained"``: the top principal component of
        ``unlabeled_ratio * d`` unlabeled inputs, ``m0 = sqrt(pca_overlap(spike, 1/unlabeled_ratio))``;
        ``"transfer"``: ``m0 = initial_overlap``.
    initial_overlap : float, optional
        For ``"transfer"``, in ``(0, 1)``.
    spike : float, default 0.25
        ``lambda >= 0`` (``0``: isotropic inputs, no trap from the spike).
    unlabeled_ratio : float, default 32
        Unlabeled samples per dimension for the PCA start (BBP needs ``spike^2 * ratio > 1``).
    step_size : float, default 0.014
        ``delta``, fixed in ``d``.
    threshold : float, default 0.8
        Overlap counted as recovery; must lie where the drift is positive.
    noise_std : float, default 0

    Returns
    -------
    SpikedSampleComplexity

    References
    ----------
    T. Jones-McCormick, A. Jagannath and S. Sen, "Provable Benefits of Unsupervised Pre-training
    and Transfer Learning via Single-Index Models", ICML 2025. A. Mousavi-Hosseini, D. Wu,
    T. Suzuki and M. A. Erdogdu, "Gradient-Based Feature Learning under Structured Data", NeurIPS
    2023. C. W. Gardiner, *Handbook of Stochastic Methods* (Sec. 5.2.7, mean first-passage time).

    Examples
    --------
    >>> he3 = [0, 0, 0, 1 / np.sqrt(6)]
    >>> cold = spiked_sample_complexity(he3, 64)
    >>> warm = spiked_sample_complexity(he3, 64, init="pretrained")
    >>> cold.growth, warm.growth, round(cold.trap_edge, 2), bool(cold.samples > 10 * warm.samples)
    ('exponential', 'linear', 0.47, True)
    """
    c = _check_link(link)
    d = int(dimension)
    m0 = _start(init, d, float(spike), float(unlabeled_ratio), initial_overlap)
    if m0 >= threshold:
        raise ParameterError(
            f"the start's overlap {m0:.3g} is already >= threshold={threshold}; raise threshold.",
            argument="threshold",
        )
    grid = np.linspace(-0.999, threshold, _GRID)
    beta, sigma2 = _drift(c, float(spike), float(step_size), float(noise_std), grid)
    edge, end, rate = _trap(grid, beta, sigma2, float(step_size))
    if not math.isfinite(edge) or end < threshold:
        raise ParameterError(
            f"the overlap's drift is not positive all the way from the trap to threshold={threshold} "
            f"(positive on ({edge:.3g}, {end:.3g})): lower step_size or threshold.",
            argument="step_size",
        )
    trapped = rate > 0 and m0 < edge
    # from beyond the trap, reflect at its edge: the mean would be ruled by rare falls back into it
    floor = float(grid[0]) if trapped or rate == 0 else edge
    fine = np.linspace(grid[0], threshold, min(max(_GRID, 16 * d), 400_001))  # resolve the O(1/d) layers
    samples = _first_passage(
        fine, np.interp(fine, grid, beta), np.interp(fine, grid, sigma2), d, float(step_size), m0, floor
    )
    growth = "exponential" if trapped else "linear"
    return SpikedSampleComplexity(d, init, m0, float(step_size), samples, edge, end, rate, growth)


@dataclass(frozen=True)
class SpikedSimulation:
    """Measured samples-to-recovery of online SGD under a spike along the target, across dimensions.

    Attributes
    ----------
    dimensions : numpy.ndarray
    init : str
    median_samples : numpy.ndarray
        Median over runs of labeled samples until ``x . v0 >= threshold`` (``inf`` if fewer than
        half the runs got there within the budget); includes the pre-trained start's sign samples.
    success_rate : numpy.ndarray
    predicted_samples : numpy.ndarray
        :func:`spiked_sample_complexity`'s mean first-passage time at each dimension.
    log_rate, log_rate_se : float
        Slope of ``log median_samples`` on ``d`` and its bootstrap (over runs) standard error.
    log_exponent, log_exponent_se : float
        Slope of ``log median_samples`` on ``log d`` and its bootstrap standard error.
    predicted_log_rate, predicted_log_exponent : float
        The same slopes of ``predicted_samples``.
    escape_rate : float
        The closed form's asymptotic ``c`` (``log samples / d`` from a trapped start).
    method : str
    run_samples : numpy.ndarray
        Samples of every run, shape ``(len(dimensions), n_runs)`` (``inf``: not recovered).

    See Also
    --------
    simulate_spiked_sample_complexity : computes it.
    """

    dimensions: np.ndarray
    init: str
    median_samples: np.ndarray
    success_rate: np.ndarray
    predicted_samples: np.ndarray
    log_rate: float
    log_rate_se: float
    log_exponent: float
    log_exponent_se: float
    predicted_log_rate: float
    predicted_log_exponent: float
    escape_rate: float
    method: str
    run_samples: np.ndarray


def _overlap_chain(
    rng: np.random.Generator,
    m: np.ndarray,
    c: np.ndarray,
    dims: np.ndarray,
    deltas: np.ndarray,
    spike: float,
    noise_std: float,
    threshold: float,
    budgets: np.ndarray,
) -> np.ndarray:
    """The overlap ``m_t = x_t . v0`` of spherical online SGD, exactly in law, for runs of any dimensions.

    A fresh input is ``a = a0 v0 + zeta e + rest`` with ``e`` the unit direction
    of ``x`` orthogonal to ``v0``, ``a0 ~ N(0, 1 + spike)``, ``zeta ~ N(0, 1)``, ``|rest|^2 ~
    chi^2_{d-2}``; only ``a . v0``, ``a . x`` and ``|a|^2`` enter the step.
    """
    f = HermiteE(c)
    fp = f.deriv()
    h = deltas / dims
    df = (dims - 2).astype(float)
    sd = math.sqrt(1 + spike)
    hit = np.full(len(m), np.inf)
    active = m < threshold
    hit[~active] = 0
    t, chunk = 0, 512
    while active.any():
        idx = np.flatnonzero(active)
        mm, hh = m[idx], h[idx]
        a0 = sd * rng.standard_normal((chunk, len(idx)))
        zeta = rng.standard_normal((chunk, len(idx)))
        norm2 = a0**2 + zeta**2 + rng.chisquare(df[idx], (chunk, len(idx)))
        y = f(a0)
        if noise_std:
            y = y + noise_std * rng.standard_normal((chunk, len(idx)))
        alive = np.ones(len(idx), dtype=bool)
        for i in range(chunk):
            t += 1
            u = mm * a0[i] + np.sqrt(np.maximum(1 - mm * mm, 0.0)) * zeta[i]
            r = -2 * (y[i] - f(u)) * fp(u)
            mm = (mm - hh * r * (a0[i] - u * mm)) / np.sqrt(1 + hh * hh * r * r * (norm2[i] - u * u))
            done = alive & (mm >= threshold)
            if done.any():
                hit[idx[done]] = t
                alive &= ~done
            alive &= t < budgets[idx]
            if not alive.any():
                break
        m[idx] = mm
        active[idx] = alive
    return hit


def _starts(
    rng: np.random.Generator,
    c: np.ndarray,
    d: int,
    runs: int,
    init: str,
    overlap: float,
    spike: float,
    ratio: float,
    noise_std: float,
    n_sign: int,
) -> np.ndarray:
    """Unit start vectors (``v0 = e_1``); the pre-trained ones' signs set by ``n_sign`` labeled samples."""
    v0 = np.zeros(d)
    v0[0] = 1.0
    if init == "random":
        x = rng.standard_normal((runs, d))
    elif init == "transfer":
        w = rng.standard_normal((runs, d))
        w[:, 0] = 0.0
        w /= np.linalg.norm(w, axis=1, keepdims=True)
        x = overlap * v0 + math.sqrt(1 - overlap**2) * w
    else:
        x = _pca_starts(rng, d, runs, spike, v0, ratio)
        if n_sign:
            f = HermiteE(c)
            a = rng.standard_normal((runs, n_sign, d))
            a[..., 0] *= math.sqrt(1 + spike)
            y = f(a[..., 0]) + noise_std * rng.standard_normal((runs, n_sign))
            score = np.sum(y * f(np.einsum("rnd,rd->rn", a, x)), axis=1)
            x *= np.where(score < 0, -1.0, 1.0)[:, None]
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@validate_params(
    {
        **_SPIKED,
        "dimensions": ["array-like"],
        "step_size": [_POS, "array-like"],
        "n_runs": [Interval(numbers.Integral, 2, None, closed="left")],
        "budget_factor": [Interval(numbers.Real, 1, None, closed="left")],
        "sign_samples": [_NONNEG],
        "method": [Options({"overlap", "full"})],
        "n_bootstrap": [Interval(numbers.Integral, 10, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def simulate_spiked_sample_complexity(
    link: Any,
    dimensions: Any,
    *,
    init: str = "random",
    initial_overlap: float | None = None,
    spike: float = 0.25,
    unlabeled_ratio: float = 32.0,
    step_size: Any = 0.014,
    threshold: float = 0.8,
    noise_std: float = 0.0,
    n_runs: int = 32,
    budget_factor: float = 4.0,
    sign_samples: float = 4.0,
    method: str = "overlap",
    n_bootstrap: int = 200,
    random_state: Any = 0,
) -> SpikedSimulation:
    """Run online spherical SGD with inputs ``N(0, I + spike v0 v0^T)`` and fit how samples grow with ``d``.

    ``method="full"`` updates the ``d``-dimensional iterate; ``method="overlap"`` (default) runs the
    same SGD's overlap ``m_t = x_t . v0``, which by rotational symmetry about ``v0`` is a Markov
    chain whose step needs only ``a . v0``, ``a . x`` and ``|a|^2`` (exact in law, cost independent
    of ``d``). Random starts are uniform on the sphere; the pre-trained start is the top eigenvector
    of ``unlabeled_ratio * d`` unlabeled inputs, its sign set from ``sign_samples * d`` labeled
    samples (sign of ``sum y f(a . x)``), counted.

    Parameters
    ----------
    link, init, initial_overlap, spike, unlabeled_ratio, threshold, noise_std
        As in :func:`spiked_sample_complexity`.
    dimensions : array-like of int
        At least two, each >= 3.
    step_size : float or array-like, default 0.014
        ``delta``, one for all dimensions or one per dimension.
    n_runs : int, default 32
    budget_factor : float, default 4
        Each run stops after ``budget_factor`` times the predicted samples.
    sign_samples : float, default 4
        Labeled samples per dimension spent on the pre-trained start's sign.
    method : {"overlap", "full"}, default "overlap"
    n_bootstrap : int, default 200
    random_state : int, Generator or None, default 0

    Returns
    -------
    SpikedSimulation

    References
    ----------
    T. Jones-McCormick, A. Jagannath and S. Sen, ICML 2025; G. Ben Arous, R. Gheissari and
    A. Jagannath, JMLR 22, 2021 (the overlap as a summary statistic of online SGD).

    Examples
    --------
    >>> he3 = [0, 0, 0, 1 / np.sqrt(6)]
    >>> sim = simulate_spiked_sample_complexity(he3, [16, 32], init="transfer", initial_overlap=0.7,
    ...                                         n_runs=8, n_bootstrap=20)
    >>> sim.success_rate.tolist(), bool(np.all(sim.median_samples < sim.predicted_samples))
    ([1.0, 1.0], True)
    """
    c = _check_link(link)
    dims = check_numeric_array(dimensions, "dimensions", ndim=1, min_rows=2, dtype=float)
    if np.any(dims < 3) or np.any(dims != np.round(dims)):
        raise DataError(f"dimensions must be integers >= 3, got {dims.tolist()}.", argument="dimensions")
    steps = (
        np.broadcast_to(np.asarray(step_size, dtype=float), dims.shape) if np.ndim(step_size) == 0 else None
    )
    if steps is None:
        steps = check_numeric_array(step_size, "step_size", ndim=1, dtype=float)
        if steps.shape != dims.shape or np.any(steps <= 0):
            raise DataError(
                f"step_size must be one positive number or one per dimension ({len(dims)}), got "
                f"{steps.tolist()}.",
                argument="step_size",
            )
    rng = make_generator(random_state)
    starts, preds, extras, budgets = [], [], [], []
    rate = 0.0
    for d, delta in zip(dims.astype(int), steps, strict=True):
        d = int(d)
        pred = spiked_sample_complexity(
            c, d, init=init, initial_overlap=initial_overlap, spike=spike, unlabeled_ratio=unlabeled_ratio,
            step_size=float(delta), threshold=threshold, noise_std=noise_std,
        )  # fmt: skip
        if not math.isfinite(pred.samples):
            raise ParameterError(
                f"the predicted samples at d={d} are too large to simulate; use smaller dimensions.",
                argument="dimensions",
            )
        rate = pred.escape_rate
        preds.append(pred.samples)
        budgets.append(math.ceil(budget_factor * pred.samples))
        extras.append(round(sign_samples * d) if init == "pretrained" else 0)
        starts.append(
            _starts(
                rng, c, d, n_runs, init, pred.initial_overlap, spike, unlabeled_ratio, noise_std, extras[-1]
            )
        )
    if method == "overlap":
        k = len(dims)
        m0 = np.concatenate([x[:, 0] for x in starts])
        hit = _overlap_chain(
            rng, m0, c, np.repeat(dims, n_runs), np.repeat(steps, n_runs), spike, noise_std, threshold,
            np.repeat(budgets, n_runs),
        )  # fmt: skip
        hits = list(hit.reshape(k, n_runs))
    else:
        hits = []
        for d, delta, x, budget in zip(dims.astype(int), steps, starts, budgets, strict=True):
            v0 = np.zeros(d)
            v0[0] = 1.0
            hits.append(
                _run_sgd(
                    rng,
                    x,
                    c,
                    float(delta),
                    spike=spike,
                    v=v0,
                    noise_std=noise_std,
                    threshold=threshold,
                    budget=budget,
                )
            )
    hits = [hit + extra for hit, extra in zip(hits, extras, strict=True)]
    h = np.array(hits)
    med = np.median(h, axis=1)
    lin, logd = dims, np.log(dims)
    se_lin, se_log = _bootstrap_slope_se(rng, h, [lin, logd], n_bootstrap)
    p = np.array(preds)
    return SpikedSimulation(
        dimensions=dims.astype(int),
        init=init,
        median_samples=med,
        success_rate=np.mean(np.isfinite(h), axis=1),
        predicted_samples=p,
        log_rate=_slope(lin, med),
        log_rate_se=se_lin,
        log_exponent=_slope(logd, med),
        log_exponent_se=se_log,
        predicted_log_rate=_slope(lin, p),
        predicted_log_exponent=_slope(logd, p),
        escape_rate=rate,
        method=method,
        run_samples=h,
    )
