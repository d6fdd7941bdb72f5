"""Distribution-free mini-batch SGD, statistical queries and random features: what survives.

Karchmer & Malach (ICML 2025) claim that if a ``p``-parameter model trained by mini-batch SGD
(bSGD: ``T`` steps, gradients clipped and rounded to precision ``c``) learns a class for every
input distribution, then the class has a random-feature representation of size ``poly(Tp/c)``
on average over targets (average probabilistic dimension complexity, adc). Feldman, Kamath &
Srebro (COLT 2026, PMLR 336:7117-7122) report that these **claimed upper bounds do not hold**
because of a flaw in the proof (personal communication from the authors); the SQ-dimension to
adc step (the paper's Theorem 4.1) has an explicit counterexample. Nothing here implements the
flawed bound. What is implemented, each with a simulation beside it:

* :func:`bsgd_sq_resources` - the step that survives: bSGD with batches large enough is an SQ
  algorithm with ``m = Tp`` queries of tolerance ``c`` (Abbe, Kamath, Malach, Sandon & Srebro,
  NeurIPS 2021); ``trustlab.theory.sgd_feature_growth.simulate_bsgd_queries`` checks the
  batch-size condition.
* :func:`parity_feature_bound` - the lower-bound direction (SQ dimension bounds random features
  from below): for ``N = C(n, k)`` orthonormal ``k``-parities, any ``d`` features (random or
  not, chosen before the target) leave mean squared error ``>= 1 - d/N`` over the uniform
  prior; an SQ learner needs ``m >= tau^2 (N - 1)`` queries. :func:`simulate_parity_features`
  measures random ReLU and random parity features against it;
  ``trustlab.theory.sgd_feature_growth.simulate_null_oracle`` runs the SQ side.
* ``trustlab.theory.sgd_feature_growth.simulate_feature_growth`` - an empirical probe, not a
  theorem: how many random ReLU features approximate the function mini-batch SGD has learned
  after ``T`` steps.

See ``docs/theory/sgd-random-features.md``.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError

__all__ = [
    "BSGDResources",
    "ParityFeatureBound",
    "ParityFeatureSimulation",
    "bsgd_sq_resources",
    "parity_feature_bound",
    "simulate_parity_features",
]

_POS_INT = Interval(numbers.Integral, 1, None, closed="left")
_UNIT_OPEN = Interval(numbers.Real, 0, 1, closed="neither")
_PRECISION = Interval(numbers.Real, 0, 1, closed="right")
_BITS = Interval(numbers.Integral, 2, 14, closed="both")
_STATUS = (
    "Karchmer & Malach's poly(Tp/c) random-feature bound is reported not to hold (proof flaw; "
    "Feldman, Kamath & Srebro, COLT 2026); open_question_size is the linear form they ask about"
)


_F = TypeVar("_F", bound=Callable[..., Any])


def _one_blas_thread(func: _F) -> _F:
    """Run ``func`` with one BLAS thread, restored afterwards.

    The simulations' matrices are small (at most 2^14 rows by a few hundred columns), so BLAS
    threads only contend: beside a busy process they cost 10-60x the CPU time.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with threadpool_limits(limits=1):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _check_k(n_bits: int, k: int) -> None:
    if k > n_bits:
        raise ParameterError(
            f"k={k} exceeds n_bits={n_bits}: a parity reads at most all n_bits bits; pass k <= n_bits.",
            argument="k",
        )


def _cube(n_bits: int) -> np.ndarray:
    return np.array(list(itertools.product((-1.0, 1.0), repeat=n_bits)))


def _characters(x: np.ndarray, subsets: list[tuple[int, ...]]) -> np.ndarray:
    """Columns ``chi_S(x) = prod_{i in S} x_i`` for each subset (the empty one is 1)."""
    out = np.ones((x.shape[0], len(subsets)))
    for j, s in enumerate(subsets):
        if s:
            out[:, j] = np.prod(x[:, list(s)], axis=1)
    return out


@dataclass(frozen=True)
class BSGDResources:
    """SQ resources of bSGD (see :func:`bsgd_sq_resources`).

    Attributes
    ----------
    steps, n_params : int
        ``T`` and ``p``.
    precision : float
        ``c``: each clipped gradient coordinate is rounded to the grid ``c Z``.
    queries : int
        ``m = T p`` statistical queries (one per gradient coordinate per step).
    tolerance : float
        ``tau = c``: rounding (``c/2``) plus sampling (``c/2``, with probability ``1 - delta``).
    min_batch_size : int
        ``ceil(8 ln(2 T p / delta) / c^2)`` (Hoeffding on ``[-1, 1]`` values and a union bound
        over the ``T p`` coordinates).
    batch_size : int or None
    simulable : bool or None
        Whether ``batch_size >= min_batch_size`` (``None`` when no batch size was given).
    open_question_size : float
        ``T p / c^2 = m / tau^2``: the dimension Feldman, Kamath & Srebro's Open Question 2 asks
        about (whether ``dc <= C m / tau^2``). A question, not a bound.
    claimed_bound_status : str
        Why no ``poly(Tp/c)`` random-feature size is returned.

    See Also
    --------
    bsgd_sq_resources : computes it.
    """

    steps: int
    n_params: int
    precision: float
    queries: int
    tolerance: float
    min_batch_size: int
    batch_size: int | None
    simulable: bool | None
    open_question_size: float
    claimed_bound_status: str


@validate_params(
    {
        "steps": [_POS_INT],
        "n_params": [_POS_INT],
        "precision": [_PRECISION],
        "batch_size": [_POS_INT, None],
        "failure_prob": [_UNIT_OPEN],
    }
)
def bsgd_sq_resources(
    steps: int,
    n_params: int,
    precision: float,
    *,
    batch_size: int | None = None,
    failure_prob: float = 0.05,
) -> BSGDResources:
    """Statistical queries that mini-batch SGD with clipped, rounded gradients amounts to.

    Each step's gradient coordinate, clipped to ``[-1, 1]`` per example and averaged over a
    fresh batch of ``b`` examples, is within ``c/2`` of its population mean for every one of
    the ``T p`` coordinates with probability ``1 - delta`` once ``b >= 8 ln(2Tp/delta)/c^2``;
    rounding to ``c Z`` adds at most ``c/2``. The run is then a valid answer sequence of an SQ
    oracle with tolerance ``c`` to ``T p`` queries, so SQ lower bounds apply to it.

    Parameters
    ----------
    steps : int
        ``T >= 1``.
    n_params : int
        ``p >= 1``.
    precision : float
        ``c`` in ``(0, 1]``.
    batch_size : int, optional
        ``b``; reported against the condition.
    failure_prob : float, default 0.05
        ``delta`` in ``(0, 1)``.

    Returns
    -------
    BSGDResources

    References
    ----------
    A. Karchmer and E. Malach, "The Power of Random Features and the Limits of Distribution-Free
    Gradient Descent", ICML 2025 (PMLR 267:29078-29097), the bSGD model; its random-feature
    bound is reported flawed in V. Feldman, P. Kamath and N. Srebro, "Invited Open Problem: Is
    the Power of Deep Learning over Linear Models Inherently Distribution Dependent?", COLT 2026
    (PMLR 336:7117-7122). E. Abbe, P. Kamath, E. Malach, C. Sandon and N. Srebro, "On the Power
    of Differentiable Learning versus PAC and SQ Learning", NeurIPS 2021 (the SQ simulation).

    Examples
    --------
    >>> r = bsgd_sq_resources(100, 50, 0.1, batch_size=20000)
    >>> r.queries, r.tolerance, r.min_batch_size, r.simulable
    (5000, 0.1, 9765, True)
    """
    t, p, c = int(steps), int(n_params), float(precision)
    b_min = math.ceil(8 * math.log(2 * t * p / failure_prob) / c**2)
    return BSGDResources(
        steps=t,
        n_params=p,
        precision=c,
        queries=t * p,
        tolerance=c,
        min_batch_size=b_min,
        batch_size=None if batch_size is None else int(batch_size),
        simulable=None if batch_size is None else int(batch_size) >= b_min,
        open_question_size=t * p / c**2,
        claimed_bound_status=_STATUS,
    )


@dataclass(frozen=True)
class ParityFeatureBound:
    """Random-feature and SQ lower bounds for ``k``-parities (see :func:`parity_feature_bound`).

    Attributes
    ----------
    n_bits, k, n_features : int
    sq_dimension : int
        ``N = C(n_bits, k)``: pairwise orthogonal targets under the uniform distribution.
    error_lower_bound : float
        ``max(0, 1 - d/N)``: mean over the ``N`` parities of the best squared error of any
        ``d``-feature linear model (features fixed before the target).
    features_needed : int or None
        ``ceil((1 - error) N)``: fewest features with mean error ``<= error`` (``None`` when no
        ``error`` was given).
    class_feature_error : float
        ``(1 - 1/N)^d``: expected mean error of ``d`` features drawn uniformly from the parities
        themselves (a target is fitted exactly iff it was drawn).
    min_queries_per_tolerance_sq : float
        ``N - 1``: an SQ learner reaching squared error ``< 1/2`` on every parity needs
        ``m >= tau^2 (N - 1)`` queries; for bSGD in the SQ regime ``T p >= c^2 (N - 1)``.

    See Also
    --------
    parity_feature_bound : computes it.
    """

    n_bits: int
    k: int
    n_features: int
    sq_dimension: int
    error_lower_bound: float
    features_needed: int | None
    class_feature_error: float
    min_queries_per_tolerance_sq: float


@validate_params(
    {
        "n_bits": [Interval(numbers.Integral, 1, None, closed="left")],
        "k": [_POS_INT],
        "n_features": [_POS_INT],
        "error": [Interval(numbers.Real, 0, 1, closed="left"), None],
    }
)
def parity_feature_bound(
    n_bits: int, k: int, n_features: int, *, error: float | None = None
) -> ParityFeatureBound:
    """Lower bounds that the SQ dimension of ``k``-parities puts on random features and on SQ.

    The ``N = C(n, k)`` parities ``chi_S(x) = prod_{i in S} x_i`` are orthonormal in
    ``L2(uniform on {-1, 1}^n)``. For the orthogonal projection ``P`` onto the span of any ``d``
    features, ``sum_S ||P chi_S||^2 <= trace P <= d`` (Bessel), so the mean best squared error
    over the uniform prior on targets is ``>= 1 - d/N``; random features drawn independently of
    the target obey it on every draw. An SQ query ``phi(x, y) = g(x) + y h(x)`` answers its
    target-free part ``E g`` within ``tau`` for all but ``< 1/tau^2`` parities (Bessel again),
    so ``m`` queries leave ``>= N - m/tau^2`` targets indistinguishable, and at most one of them
    can be within squared error ``1/2`` of the output: learning all needs ``m >= tau^2 (N-1)``.

    Parameters
    ----------
    n_bits : int
        ``n >= 1``.
    k : int
        Parity size, ``1 <= k <= n_bits``.
    n_features : int
        ``d >= 1``.
    error : float, optional
        Target mean squared error in ``[0, 1)`` for ``features_needed``.

    Returns
    -------
    ParityFeatureBound

    References
    ----------
    A. Blum, M. Furst, J. Jackson, M. Kearns, Y. Mansour and S. Rudich, "Weakly learning DNF and
    characterizing statistical query learning using Fourier analysis", STOC 1994. P. Kamath,
    O. Montasser and N. Srebro, "Approximate is Good Enough: Probabilistic Variants of
    Dimensional and Margin Complexity", COLT 2020. Karchmer & Malach, ICML 2025 (adc; the
    direction bounding it from below by SQ dimension is the one not reported flawed).

    Examples
    --------
    >>> b = parity_feature_bound(8, 3, 16, error=0.1)
    >>> b.sq_dimension, round(b.error_lower_bound, 4), b.features_needed
    (56, 0.7143, 51)
    """
    _check_k(int(n_bits), int(k))
    n_par = math.comb(int(n_bits), int(k))
    d = int(n_features)
    return ParityFeatureBound(
        n_bits=int(n_bits),
        k=int(k),
        n_features=d,
        sq_dimension=n_par,
        error_lower_bound=max(0.0, 1.0 - d / n_par),
        features_needed=None if error is None else math.ceil((1 - float(error)) * n_par - 1e-12),
        class_feature_error=(1.0 - 1.0 / n_par) ** d,
        min_queries_per_tolerance_sq=float(n_par - 1),
    )


@dataclass(frozen=True)
class ParityFeatureSimulation:
    """Measured mean error of random features on all ``k``-parities (see :func:`simulate_parity_features`).

    Attributes
    ----------
    n_bits, k : int
    features : str
        ``"relu"`` or ``"parity"``.
    n_features : numpy.ndarray
        The sizes ``d``.
    mean_error : numpy.ndarray
        Mean over draws of the mean (over the ``N`` parities) best squared error.
    error_se : numpy.ndarray
        Its Monte-Carlo standard error.
    min_gap : numpy.ndarray
        Smallest, over draws, of ``error - (1 - rank/N)``: ``>= 0`` is the bound on every draw.
    degree_mass : numpy.ndarray
        ``(len(n_features), n_bits + 1)``: mean over draws of ``sum_{|S| = j} ||P chi_S||^2``.
    parseval_error : float
        Largest ``|sum_S ||P chi_S||^2 - rank|`` over all draws (all ``2^n`` characters).
    mean_rank : numpy.ndarray
        Mean rank of the feature matrix (``<= d``; random ReLU features on the cube can be
        dependent).
    bound : numpy.ndarray
        ``1 - d/N``, clipped at 0.
    predicted : numpy.ndarray
        ``(1 - 1/N)^d`` for ``"parity"`` features; ``nan`` for ``"relu"`` (no closed form).

    See Also
    --------
    simulate_parity_features : computes it.
    """

    n_bits: int
    k: int
    features: str
    n_features: np.ndarray
    mean_error: np.ndarray
    error_se: np.ndarray
    min_gap: np.ndarray
    degree_mass: np.ndarray
    parseval_error: float
    mean_rank: np.ndarray
    bound: np.ndarray
    predicted: np.ndarray


def _relu_features(rng: np.random.Generator, x: np.ndarray, d: int) -> np.ndarray:
    n = x.shape[1]
    w = rng.standard_normal((d, n)) / math.sqrt(n)
    b = rng.standard_normal(d) / math.sqrt(n)
    return np.maximum(x @ w.T + b, 0.0)


def _projection_basis(features: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the column span (columns below 1e-10 relative singular value dropped)."""
    u, s, _ = np.linalg.svd(features, full_matrices=False)
    keep = s > 1e-10 * max(float(s[0]), 1e-300) if s.size else s > 0
    return u[:, keep]


@validate_params(
    {
        "n_bits": [_BITS],
        "k": [_POS_INT],
        "n_features": ["array-like"],
        "features": [Options({"relu", "parity"})],
        "n_draws": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }
)
@_one_blas_thread
def simulate_parity_features(
    n_bits: int,
    k: int,
    n_features: Any,
    *,
    features: str = "relu",
    n_draws: int = 50,
    random_state: Any = 0,
) -> ParityFeatureSimulation:
    """Fit every ``k``-parity on ``{-1, 1}^n`` with ``d`` random features, exactly, and average.

    Expectations are exact (all ``2^n`` points, uniform weights): the best squared error of a
    target is ``1 - ||P chi_S||^2``. ``"relu"`` features are ``max(0, w . x + b)`` with
    ``w ~ N(0, I/n)``, ``b ~ N(0, 1/n)`` (the first layer of a two-layer ReLU network at its
    initialisation); ``"parity"`` features are ``d`` parities drawn uniformly, with replacement,
    from the class. The projection's mass on every character is recorded, so the Parseval
    identity ``sum_S ||P chi_S||^2 = rank P`` is checked on every draw.

    Parameters
    ----------
    n_bits : int
        ``n`` in ``[2, 14]``.
    k : int
        Parity size, ``1 <= k <= n_bits``.
    n_features : array-like of int
        Feature counts ``d >= 1``.
    features : {"relu", "parity"}, default "relu"
    n_draws : int, default 50
        Independent feature draws per size.
    random_state : int, Generator or None, default 0

    Returns
    -------
    ParityFeatureSimulation

    References
    ----------
    Kamath, Montasser & Srebro, COLT 2020; Karchmer & Malach, ICML 2025 (see
    :func:`parity_feature_bound`).

    Examples
    --------
    >>> sim = simulate_parity_features(6, 3, [4, 8], n_draws=5)
    >>> bool(np.all(sim.min_gap >= -1e-9)), sim.parseval_error < 1e-9
    (True, True)
    """
    n, kk = int(n_bits), int(k)
    _check_k(n, kk)
    ds = check_numeric_array(n_features, "n_features", ndim=1, min_rows=1, dtype=float)
    if np.any(ds < 1) or np.any(ds != np.round(ds)):
        raise DataError(f"n_features must be integers >= 1, got {ds.tolist()}.", argument="n_features")
    rng = make_generator(random_state)
    x = _cube(n)
    subsets = [s for j in range(n + 1) for s in itertools.combinations(range(n), j)]
    degree = np.array([len(s) for s in subsets])
    chars = _characters(x, subsets) / math.sqrt(x.shape[0])  # orthonormal columns
    target = degree == kk
    n_par = int(target.sum())
    mean, se, gap, mass, ranks = [], [], [], [], []
    parseval = 0.0
    for d in ds.astype(int):
        errs, gaps, masses, rank = [], [], [], []
        for _ in range(n_draws):
            if features == "relu":
                f = _relu_features(rng, x, int(d))
            else:
                pick = rng.integers(0, n_par, size=int(d))
                f = chars[:, np.flatnonzero(target)[pick]]
            q = _projection_basis(f)
            energy = np.sum((q.T @ chars) ** 2, axis=0)
            parseval = max(parseval, abs(float(energy.sum()) - q.shape[1]))
            err = 1.0 - float(energy[target].mean())
            rank.append(q.shape[1])
            errs.append(err)
            gaps.append(err - max(0.0, 1.0 - q.shape[1] / n_par))
            masses.append(np.bincount(degree, weights=energy, minlength=n + 1))
        e = np.array(errs)
        mean.append(e.mean())
        se.append(e.std(ddof=1) / math.sqrt(n_draws))
        gap.append(min(gaps))
        mass.append(np.mean(masses, axis=0))
        ranks.append(np.mean(rank))
    bound = np.maximum(0.0, 1.0 - ds / n_par)
    predicted = (1 - 1 / n_par) ** ds if features == "parity" else np.full(ds.shape, np.nan)
    return ParityFeatureSimulation(
        n_bits=n,
        k=kk,
        features=features,
        n_features=ds.astype(int),
        mean_error=np.array(mean),
        error_se=np.array(se),
        min_gap=np.array(gap),
        degree_mass=np.array(mass),
        parseval_error=parseval,
        mean_rank=np.array(ranks),
        bound=bound,
        predicted=predicted,
    )
