"""Sample complexity of online SGD on a single-index model from random, pre-trained and transferred starts.

A single neuron ``x -> f(a . x)`` on the unit sphere is trained by online spherical SGD on
``y = f(a . v0) + noise``. From a random start (overlap ``m0 ~ d^{-1/2}`` with ``v0``) the number
of samples grows like ``d^{k-1}`` (``k >= 3``), ``d log d`` (``k = 2``) or ``d`` (``k = 1``), ``k``
the information exponent of ``f``; from a start with an overlap bounded away from zero (PCA
pre-training on unlabeled data whose covariance is spiked along a direction correlated with
``v0``, or transfer from a related task) it is linear in ``d`` (Jones-McCormick, Jagannath & Sen,
ICML 2025, building on Ben Arous, Gheissari & Jagannath, JMLR 2021). :func:`sample_complexity`
gives the predicted exponent and an effective-dynamics (ODE) estimate of the sample count;
:func:`simulate_sample_complexity` runs the SGD and fits the exponent. See
``docs/theory/pretraining.md`` (partial: the paper's full text was not available here).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.polynomial.hermite_e import HermiteE, herme2poly, hermegauss
from numpy.polynomial.polynomial import polyder, polyval
from scipy.integrate import quad

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError

__all__ = [
    "SampleComplexity",
    "SampleComplexitySimulation",
    "information_exponent",
    "pca_overlap",
    "sample_complexity",
    "simulate_sample_complexity",
]

_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")
_UNIT_OPEN = Interval(numbers.Real, 0, 1, closed="neither")
_INITS = Options({"random", "pretrained", "transfer"})
_NODES, _WEIGHTS = hermegauss(40)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def _check_link(link: Any) -> np.ndarray:
    c = check_numeric_array(link, "link", ndim=1, min_rows=2)
    if not np.any(c[1:] != 0):
        raise ParameterError(
            "link must have a non-zero Hermite coefficient of degree >= 1 (a constant link carries "
            f"no signal); got {c.tolist()}.",
            argument="link",
        )
    return c


@validate_params({"link": ["array-like"]})
def information_exponent(link: Any) -> int:
    """The information exponent: the lowest degree ``k >= 1`` of a non-zero Hermite coefficient.

    Parameters
    ----------
    link : array-like
        Coefficients ``c_0, c_1, ...`` of ``f`` in the probabilists' Hermite basis ``He_k``.

    Returns
    -------
    int

    References
    ----------
    G. Ben Arous, R. Gheissari and A. Jagannath, "Online stochastic gradient descent on
    non-convex losses from high-dimensional inference", JMLR 22, 2021 (Definition 1.2).

    Examples
    --------
    >>> information_exponent([0, 0, 0, 1])  # He_3(z) = z^3 - 3z
    3
    """
    c = _check_link(link)
    return int(np.flatnonzero(c[1:])[0] + 1)


@validate_params({"spike": [_POS], "ratio": [_POS]})
def pca_overlap(spike: float, ratio: float) -> float:
    """Squared overlap of the top sample eigenvector with the spike (BBP transition).

    For ``N`` samples of ``N(0, I_d + spike v v^T)`` with ``d / N -> ratio``, the top eigenvector
    ``v_hat`` of the sample covariance satisfies ``(v_hat . v)^2 -> (1 - ratio / spike^2) /
    (1 + ratio / spike)`` when ``spike > sqrt(ratio)`` and ``0`` otherwise.

    Parameters
    ----------
    spike : float
        Spike strength ``lambda > 0``.
    ratio : float
        ``d / N`` (dimension over number of unlabeled samples), > 0.

    Returns
    -------
    float
        In ``[0, 1)``.

    References
    ----------
    D. Paul, "Asymptotics of sample eigenstructure for a large dimensional spiked covariance
    model", Statistica Sinica 17, 2007 (Theorem 4); J. Baik, G. Ben Arous and S. Peche, Annals
    of Probability 33, 2005.

    Examples
    --------
    >>> round(pca_overlap(1.0, 0.25), 4)
    0.6
    >>> pca_overlap(0.4, 0.25)  # below the threshold sqrt(ratio) = 0.5: no information
    0.0
    """
    if spike**2 <= ratio:
        return 0.0
    return float((1 - ratio / spike**2) / (1 + ratio / spike))


def _phi_prime(c: np.ndarray, m: float) -> float:
    """``d/dm`` of ``E[f(z0) f(z1)] = sum_k k! c_k^2 m^k`` (corr(z0, z1) = m), times 2 (square loss)."""
    k = np.arange(len(c))
    fact = np.array([math.factorial(int(i)) for i in k], dtype=float)
    return float(2 * np.sum((k * fact * c**2)[1:] * m ** (k[1:] - 1)))


def _noise_variance(c: np.ndarray, m: float, noise_std: float) -> float:
    """``E |grad|^2 / d`` of the square loss at overlap ``m`` (isotropic data, leading order in d)."""
    f = HermiteE(c)
    fp = f.deriv()
    u, w = np.meshgrid(_NODES, _NODES, indexing="ij")
    weight = np.outer(_WEIGHTS, _WEIGHTS)
    z1 = u
    z0 = m * u + math.sqrt(max(1 - m * m, 0.0)) * w
    val = ((f(z0) - f(z1)) ** 2 + noise_std**2) * fp(z1) ** 2
    return float(4 * np.sum(weight * val))


@dataclass(frozen=True)
class SampleComplexity:
    """Predicted sample complexity of online spherical SGD (see :func:`sample_complexity`).

    Attributes
    ----------
    dimension : int
    init : str
        ``"random"``, ``"pretrained"`` or ``"transfer"``.
    information_exponent : int
    initial_overlap : float
        ``m0 = x0 . v0`` the start has.
    step_size : float
        ``delta``; SGD moves by ``delta / d`` times the gradient.
    samples : float
        Samples (one per step) for the overlap to reach ``threshold`` under the effective
        dynamics; ``inf`` if the drift vanishes on the way.
    exponent : float
        Predicted exponent ``p`` in ``samples ~ d^p`` (times ``log d`` where ``log_factor``).
    log_factor : bool

    See Also
    --------
    sample_complexity : computes it.
    """

    dimension: int
    init: str
    information_exponent: int
    initial_overlap: float
    step_size: float
    samples: float
    exponent: float
    log_factor: bool


def _initial_overlap(
    init: str, d: int, spike: float, spike_overlap: float, unlabeled_ratio: float, overlap: float | None
) -> float:
    if init == "random":
        return 1.0 / math.sqrt(d)
    if init == "pretrained":
        return spike_overlap * math.sqrt(pca_overlap(spike, 1.0 / unlabeled_ratio))
    if overlap is None:
        raise ParameterError(
            "initial_overlap is required for init='transfer': pass the source task's overlap "
            "with the target direction, in (0, 1).",
            argument="initial_overlap",
        )
    return float(overlap)


_SC_PARAMS: dict[str, list[Any]] = {
    "link": ["array-like"],
    "dimension": [Interval(numbers.Integral, 2, None, closed="left")],
    "init": [_INITS],
    "initial_overlap": [_UNIT_OPEN, None],
    "spike": [_POS],
    "spike_overlap": [_UNIT_OPEN],
    "unlabeled_ratio": [_POS],
    "threshold": [_UNIT_OPEN],
    "step_scale": [Interval(numbers.Real, 0, 1, closed="neither")],
    "noise_std": [_NONNEG],
}


@validate_params(_SC_PARAMS)
def sample_complexity(
    link: Any,
    dimension: int,
    *,
    init: str = "random",
    initial_overlap: float | None = None,
    spike: float = 1.0,
    spike_overlap: float = 0.45,
    unlabeled_ratio: float = 4.0,
    threshold: float = 0.5,
    step_scale: float = 0.25,
    noise_std: float = 0.0,
) -> SampleComplexity:
    """Predicted number of labeled samples for online SGD to reach overlap ``threshold``.

    The overlap ``m = x . v0`` follows ``dm/dt = (delta/d) Phi'(m)(1 - m^2) - (delta^2/2d) V(m) m``
    (drift of the population loss minus the retraction to the sphere), ``Phi(m) = 2 sum_k k!
    c_k^2 m^k``, ``V(m) = E|grad|^2 / d``; ``delta = step_scale * min_m Phi'(m)(1-m^2) / (m V(m))``
    over ``[m0, threshold]``, the largest step keeping the drift positive. With ``m0 = d^{-1/2}``
    (random start) this gives ``d^{k-1}``, ``d log d`` or ``d`` samples; with ``m0`` fixed
    (pre-trained or transferred start) ``d``.

    Parameters
    ----------
    link : array-like
        Hermite coefficients of ``f``.
    dimension : int
        ``d >= 2``.
    init : {"random", "pretrained", "transfer"}, default "random"
        ``"pretrained"``: the start is the top principal component of ``unlabeled_ratio * d``
        unlabeled samples of ``N(0, I + spike v v^T)``, ``v . v0 = spike_overlap``;
        ``"transfer"``: a start with overlap ``initial_overlap`` (a related source task).
    initial_overlap : float, optional
        For ``"transfer"``, in ``(0, 1)``.
    spike, spike_overlap, unlabeled_ratio : float
        The pre-training model (defaults: the paper's simulation, ``lambda = 1``, ``eta_1 = 0.45``).
    threshold : float, default 0.5
        Overlap counted as recovery.
    step_scale : float, default 0.25
        Fraction of the largest stable step, in ``(0, 1)``.
    noise_std : float, default 0
        Label noise.

    Returns
    -------
    SampleComplexity

    References
    ----------
    T. Jones-McCormick, A. Jagannath and S. Sen, "Provable Benefits of Unsupervised Pre-training
    and Transfer Learning via Single-Index Models", ICML 2025 (PMLR 267:28350-28376).
    G. Ben Arous, R. Gheissari and A. Jagannath, JMLR 22, 2021 (Theorem 1.3).

    Examples
    --------
    >>> sc = sample_complexity([0, 0, 0, 1], 100)
    >>> sc.information_exponent, sc.exponent
    (3, 2.0)
    >>> sample_complexity([0, 0, 0, 1], 100, init="pretrained").exponent
    1.0
    """
    c = _check_link(link)
    k = information_exponent(c)
    d = int(dimension)
    m0 = _initial_overlap(init, d, spike, spike_overlap, unlabeled_ratio, initial_overlap)
    if m0 <= 0 or m0 >= threshold:
        raise ParameterError(
            f"the start's overlap {m0:.3g} must lie in (0, threshold={threshold}); lower "
            "initial_overlap, raise threshold, or (pretrained) raise spike or unlabeled_ratio.",
            argument="threshold",
        )
    grid = np.geomspace(m0, threshold, 24)
    ratio = [_phi_prime(c, m) * (1 - m * m) / (m * _noise_variance(c, m, noise_std)) for m in grid]
    delta = step_scale * float(min(ratio))

    def inverse_drift(m: float) -> float:
        drift = (
            delta / d * _phi_prime(c, m) * (1 - m * m)
            - delta**2 / (2 * d) * _noise_variance(c, m, noise_std) * m
        )
        return 1.0 / drift if drift > 0 else math.inf

    samples = float(quad(inverse_drift, m0, threshold, limit=200)[0])
    if init == "random":
        exponent, log_factor = (float(k - 1), False) if k >= 3 else (1.0, k == 2)
    else:
        exponent, log_factor = 1.0, False
    return SampleComplexity(d, init, k, m0, delta, samples, exponent, log_factor)


@dataclass(frozen=True)
class SampleComplexitySimulation:
    """Measured samples-to-recovery of online spherical SGD across dimensions.

    Attributes
    ----------
    dimensions : numpy.ndarray
    init : str
    median_samples : numpy.ndarray
        Median over runs of labeled samples until ``x . v0 >= threshold`` (``inf`` if fewer than
        half the runs got there within the budget).
    success_rate : numpy.ndarray
        Fraction of runs that got there.
    predicted_samples : numpy.ndarray
        :func:`sample_complexity`'s estimate at each dimension.
    fitted_exponent : float
        Least-squares slope of ``log median_samples`` on ``log d`` (on ``log(d log d)`` where
        the prediction has a log factor).
    exponent_se : float
        Bootstrap (over runs) standard error of the slope.
    predicted_exponent : float

    See Also
    --------
    simulate_sample_complexity : computes it.
    """

    dimensions: np.ndarray
    init: str
    median_samples: np.ndarray
    success_rate: np.ndarray
    predicted_samples: np.ndarray
    fitted_exponent: float
    exponent_se: float
    predicted_exponent: float


def _pca_starts(
    rng: np.random.Generator, d: int, runs: int, spike: float, v: np.ndarray, ratio: float
) -> np.ndarray:
    n = max(round(ratio * d), 2)
    s = math.sqrt(1 + spike) - 1
    starts = np.empty((runs, d))
    for r in range(runs):
        z = rng.standard_normal((n, d))
        z += s * np.outer(z @ v, v)
        starts[r] = np.linalg.eigh(z.T @ z)[1][:, -1]
    return starts


def _run_sgd(
    rng: np.random.Generator,
    x: np.ndarray,
    c: np.ndarray,
    delta: float,
    *,
    spike: float,
    v: np.ndarray,
    noise_std: float,
    threshold: float,
    budget: int,
) -> np.ndarray:
    runs, d = x.shape
    power = herme2poly(c)
    dpower = polyder(power)
    s = math.sqrt(1 + spike) - 1 if spike > 0 else 0.0
    hit = np.full(runs, np.inf)
    active = np.ones(runs, dtype=bool)
    chunk = 256
    t = 0
    while t < budget and active.any():
        block = rng.standard_normal((chunk, runs, d))
        noise = noise_std * rng.standard_normal((chunk, runs)) if noise_std else None
        if s:
            block += s * (block @ v)[..., None] * v
        for i in range(chunk):
            t += 1
            a = block[i]
            ax = np.einsum("ij,ij->i", a, x)
            y = polyval(a[:, 0], power)
            if noise is not None:
                y = y + noise[i]
            g = (-2 * (y - polyval(ax, power)) * polyval(ax, dpower))[:, None] * a
            g -= np.einsum("ij,ij->i", g, x)[:, None] * x
            x = x - (delta / d) * g
            x /= np.sqrt(np.einsum("ij,ij->i", x, x))[:, None]
            done = active & (x[:, 0] >= threshold)
            if done.any():
                hit[done] = t
                active &= ~done
                if not active.any() or t >= budget:
                    break
            if t >= budget:
                break
    return hit


def _slope(xs: np.ndarray, med: np.ndarray) -> float:
    """Least-squares slope of ``log(med)`` on ``xs`` (NaN when a median is not finite)."""
    if not np.all(np.isfinite(med)):
        return math.nan
    return float(np.polyfit(xs, np.log(med), 1)[0])


def _bootstrap_slope_se(
    rng: np.random.Generator, runs: np.ndarray, xs_list: list[Any], n_bootstrap: int
) -> list[float]:
    """Bootstrap SE of :func:`_slope` of the per-dimension medians of ``runs`` on each ``xs``.

    Runs are resampled within each dimension (row); one resample serves every ``xs``. Each SE is
    the standard deviation of the finite bootstrap slopes (NaN with fewer than three).
    """
    boots: list[list[float]] = [[] for _ in xs_list]
    for _ in range(n_bootstrap):
        idx = rng.integers(0, runs.shape[1], size=runs.shape)
        med = np.median(np.take_along_axis(runs, idx, axis=1), axis=1)
        for b, xs in zip(boots, xs_list, strict=True):
            b.append(_slope(xs, med))
    ses = []
    for slopes in map(np.array, boots):
        ok = slopes[np.isfinite(slopes)]
        ses.append(float(np.std(ok, ddof=1)) if ok.size > 2 else math.nan)
    return ses


@validate_params(
    {
        **{k: v for k, v in _SC_PARAMS.items() if k != "dimension"},
        "dimensions": ["array-like"],
        "n_runs": [Interval(numbers.Integral, 2, None, closed="left")],
        "budget_factor": [Interval(numbers.Real, 1, None, closed="left")],
        "sign_samples": [Interval(numbers.Real, 0, None, closed="left")],
        "n_bootstrap": [Interval(numbers.Integral, 10, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def simulate_sample_complexity(
    link: Any,
    dimensions: Any,
    *,
    init: str = "random",
    initial_overlap: float | None = None,
    spike: float = 1.0,
    spike_overlap: float = 0.45,
    unlabeled_ratio: float = 4.0,
    threshold: float = 0.5,
    step_scale: float = 0.25,
    noise_std: float = 0.0,
    n_runs: int = 32,
    budget_factor: float = 20.0,
    sign_samples: float = 4.0,
    n_bootstrap: int = 200,
    random_state: Any = 0,
) -> SampleComplexitySimulation:
    """Run online spherical SGD at each dimension and fit the sample-complexity exponent.

    Labeled inputs are drawn from ``N(0, I + spike v v^T)`` for ``init="pretrained"`` (the
    paper's model: ``v . v0 = spike_overlap``) and from ``N(0, I)`` otherwise. The pre-trained
    start is the top eigenvector of ``unlabeled_ratio * d`` unlabeled draws; its sign is set from
    ``sign_samples * d`` labeled samples (the sign of ``sum y f(a . x)``, which is ``sign(m)^k``),
    counted in the result. Steps use :func:`sample_complexity`'s ``delta`` at each dimension.

    Parameters
    ----------
    link, init, initial_overlap, spike, spike_overlap, unlabeled_ratio, threshold, step_scale, \
noise_std
        As in :func:`sample_complexity`.
    dimensions : array-like of int
        At least two dimensions, each >= 2.
    n_runs : int, default 32
        Independent runs per dimension.
    budget_factor : float, default 20
        Each run stops after ``budget_factor`` times the predicted samples.
    sign_samples : float, default 4
        Labeled samples (per dimension) spent on the pre-trained start's sign.
    n_bootstrap : int, default 200
    random_state : int, Generator or None, default 0

    Returns
    -------
    SampleComplexitySimulation

    References
    ----------
    T. Jones-McCormick, A. Jagannath and S. Sen, ICML 2025 (Section 5.2, simulations).

    Examples
    --------
    >>> sim = simulate_sample_complexity([0, 1, 0.5], [16, 32], n_runs=8, random_state=0)
    >>> sim.predicted_exponent, bool(np.all(sim.success_rate == 1))
    (1.0, True)
    """
    c = _check_link(link)
    dims = check_numeric_array(dimensions, "dimensions", ndim=1, min_rows=2, dtype=float)
    if np.any(dims < 2) or np.any(dims != np.round(dims)):
        raise DataError(f"dimensions must be integers >= 2, got {dims.tolist()}.", argument="dimensions")
    rng = make_generator(random_state)
    keys = ("init", "initial_overlap", "spike", "spike_overlap", "unlabeled_ratio", "threshold")
    common = dict(
        zip(keys, (init, initial_overlap, spike, spike_overlap, unlabeled_ratio, threshold), strict=True)
    )
    common.update(step_scale=step_scale, noise_std=noise_std)
    hits, preds = [], []
    exponent, log_factor = 1.0, False
    for d in dims.astype(int):
        pred = sample_complexity(c, int(d), **common)  # type: ignore[arg-type]
        exponent, log_factor = pred.exponent, pred.log_factor
        preds.append(pred.samples)
        v0 = np.zeros(d)
        v0[0] = 1.0
        v = np.zeros(d)
        labeled_spike = 0.0
        extra = 0
        if init == "random":
            x = rng.standard_normal((n_runs, d))
        elif init == "transfer":
            w = rng.standard_normal((n_runs, d))
            w[:, 0] = 0.0
            w /= np.linalg.norm(w, axis=1, keepdims=True)
            x = pred.initial_overlap * v0 + math.sqrt(1 - pred.initial_overlap**2) * w
        else:
            v[0], v[1] = spike_overlap, math.sqrt(1 - spike_overlap**2)
            labeled_spike = spike
            x = _pca_starts(rng, d, n_runs, spike, v, unlabeled_ratio)
            extra = round(sign_samples * d)
            if extra:
                f = HermiteE(c)
                a = rng.standard_normal((n_runs, extra, d))
                a += (math.sqrt(1 + spike) - 1) * np.einsum("rnd,d->rn", a, v)[..., None] * v
                y = f(a[..., 0]) + noise_std * rng.standard_normal((n_runs, extra))
                score = np.sum(y * f(np.einsum("rnd,rd->rn", a, x)), axis=1)
                x *= np.where(score < 0, -1.0, 1.0)[:, None]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        if not math.isfinite(pred.samples):
            raise ParameterError(
                f"the effective dynamics never reach threshold={threshold} at d={d}; lower step_scale "
                "or threshold.",
                argument="step_scale",
            )
        budget = math.ceil(budget_factor * pred.samples)
        hit = _run_sgd(
            rng,
            x,
            c,
            pred.step_size,
            spike=labeled_spike,
            v=v,
            noise_std=noise_std,
            threshold=threshold,
            budget=budget,
        )
        hits.append(hit + extra)
    h = np.array(hits)
    med = np.median(h, axis=1)
    xs = np.log(dims) + (np.log(np.log(dims)) if log_factor else 0.0)
    slope = _slope(xs, med)
    (se,) = _bootstrap_slope_se(rng, h, [xs], n_bootstrap)
    return SampleComplexitySimulation(
        dimensions=dims.astype(int),
        init=init,
        median_samples=med,
        success_rate=np.mean(np.isfinite(h), axis=1),
        predicted_samples=np.array(preds),
        fitted_exponent=slope,
        exponent_se=se,
        predicted_exponent=exponent,
    )
