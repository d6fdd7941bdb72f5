"""Training extension on power-law linear regression, beside the convex bound's optimal rates.

The convex bound of :mod:`trustlab.theory.lr_schedules` is ``A / gamma + B gamma`` with ``A``
falling like ``1/T``, so its optimal base rate falls like ``1/sqrt(T)``: extending training 4x
should halve the best rate (Schaipp et al., ICML 2025). Easy problems (strongly convex near the
optimum) are in a ``1/T`` regime where this fails. Large-model training is far from converged;
the standard solvable stand-in is SGD on linear regression whose covariance and target follow
power laws (eigenvalues ``i^-alpha``, target energy ``i^-beta``): with ``(beta - 1)/alpha = 1`` the
bias falls like ``1/(gamma T)`` and the noise floor grows like ``gamma``, the bound's shape.
:func:`simulate_powerlaw_extension` trains it at two horizons with every schedule and compares the
measured optimal rates with the bound's. See ``docs/theory/lr-schedules.md``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError
from trustlab.theory._lr_mlp import STUDY_CONSTRAINTS
from trustlab.theory.lr_schedules import SCHEDULES, schedule, schedule_bound

__all__ = ["ExtensionSimulation", "MLPExtensionStudy", "mlp_extension_study", "simulate_powerlaw_extension"]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")


@dataclass(frozen=True)
class ExtensionSimulation:
    """Final excess risks at two horizons, per schedule and base rate, beside the bound's rates.

    Attributes
    ----------
    schedules : tuple of str
    gammas : numpy.ndarray
    steps : tuple of int
        The short and the extended horizon.
    loss : numpy.ndarray
        ``(2, len(schedules), len(gammas))`` mean final excess risk over seeds.
    best_gamma : numpy.ndarray
        ``(2, len(schedules))`` optimal rate: the vertex of a parabola through the grid minimum
        and its neighbours in log-log coordinates (the grid point at the edge of the grid).
    predicted_ratio : numpy.ndarray
        Per schedule, the bound's ``gamma*(T_long) / gamma*(T_short)``.

    See Also
    --------
    simulate_powerlaw_extension : computes it.
    """

    schedules: tuple[str, ...]
    gammas: np.ndarray
    steps: tuple[int, int]
    loss: np.ndarray
    best_gamma: np.ndarray
    predicted_ratio: np.ndarray

    @property
    def measured_ratio(self) -> np.ndarray:
        """Per schedule, the measured ``gamma_best(T_long) / gamma_best(T_short)``."""
        return np.asarray(self.best_gamma[1] / self.best_gamma[0])


def _vertex(gammas: np.ndarray, loss: np.ndarray) -> float:
    i = int(np.argmin(loss))
    if i == 0 or i == len(gammas) - 1 or not np.all(np.isfinite(loss[i - 1 : i + 2])):
        return float(gammas[i])
    a, b, _ = np.polyfit(np.log(gammas[i - 1 : i + 2]), np.log(loss[i - 1 : i + 2]), 2)
    return float(np.exp(-b / (2 * a))) if a > 0 else float(gammas[i])


@validate_params(
    {
        "steps": ["array-like"],
        "gammas": ["array-like", None],
        "dimension": [Interval(numbers.Integral, 2, None, closed="left")],
        "alpha": [_POS],
        "beta": [_POS],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "n_seeds": [_INT1],
        "random_state": ["random_state"],
    }
)
def simulate_powerlaw_extension(
    steps: Any = (250, 1000),
    gammas: Any = None,
    *,
    dimension: int = 300,
    alpha: float = 1.5,
    beta: float = 2.5,
    noise: float = 1.0,
    n_seeds: int = 24,
    random_state: Any = 0,
) -> ExtensionSimulation:
    """Online SGD on power-law linear regression at two horizons, every schedule and base rate.

    Inputs ``x ~ N(0, diag(i^-alpha))``, ``y = <w*, x> + noise * N(0, 1)`` with
    ``lambda_i w*_i^2 = i^-beta``, batch size 1, start at 0; the final excess risk
    ``sum_i lambda_i (w_i - w*_i)^2 / 2`` is exact. All rates and seeds of a schedule run at once.

    Parameters
    ----------
    steps : pair of int, default (250, 1000)
        The short and the extended horizon (each >= 2).
    gammas : array-like, optional
        Base rates (> 0); default ``geomspace(0.02, 0.6, 9)``.
    dimension : int, default 300
    alpha, beta : float, default 1.5, 2.5
        Spectrum and target exponents; ``(beta - 1) / alpha = 1`` gives the bound's ``1/(gamma T)``
        bias.
    noise : float, default 1.0
        Label noise.
    n_seeds : int, default 24
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    ExtensionSimulation

    References
    ----------
    F. Schaipp, A. Hagele, A. Taylor, U. Simsekli and F. Bach, "The Surprising Agreement
    Between Convex Optimization Theory and Learning-Rate Scheduling for Large Model Training",
    ICML 2025 (training extension).

    Examples
    --------
    >>> sim = simulate_powerlaw_extension((20, 40), [0.05, 0.1, 0.2], dimension=10, n_seeds=2)
    >>> sim.loss.shape, sim.predicted_ratio.round(2).tolist()
    ((2, 4, 3), [0.66, 0.71, 0.75, 0.72])
    """
    horizons = check_numeric_array(steps, "steps", ndim=1, dtype=np.int64)
    if len(horizons) != 2 or horizons.min() < 2:
        raise DataError(
            f"steps must be two horizons >= 2 (short, long), got {horizons.tolist()}.", argument="steps"
        )
    g = np.geomspace(0.02, 0.6, 9) if gammas is None else check_numeric_array(gammas, "gammas", ndim=1)
    if np.any(g <= 0):
        raise DataError(f"gammas must all be > 0, got {g.tolist()}.", argument="gammas")
    rng = make_generator(random_state)
    idx = np.arange(1, int(dimension) + 1, dtype=float)
    lam = idx**-alpha
    w_star = np.sqrt(idx**-beta / lam)
    loss = np.zeros((2, len(SCHEDULES), len(g)))
    best = np.zeros((2, len(SCHEDULES)))
    for h, horizon in enumerate(horizons.tolist()):
        for si, name in enumerate(SCHEDULES):
            shape = schedule(name, horizon)
            w = np.zeros((len(g), int(n_seeds), len(lam)))
            with np.errstate(over="ignore", invalid="ignore"):
                for t in range(horizon):
                    x = rng.standard_normal(w.shape) * np.sqrt(lam)
                    y = x @ w_star + noise * rng.standard_normal(w.shape[:2])
                    residual = np.einsum("gsd,gsd->gs", x, w) - y
                    w -= (g[:, None, None] * shape[t]) * residual[..., None] * x
                risk = 0.5 * np.einsum("d,gsd->gs", lam, (w - w_star) ** 2).mean(axis=1)
            loss[h, si] = np.where(np.isfinite(risk), risk, np.inf)
            best[h, si] = _vertex(g, loss[h, si])
    predicted = np.array(
        [
            schedule_bound(schedule(n, int(horizons[1])), distance=1.0, gradient_bound=1.0).optimal_gamma
            / schedule_bound(schedule(n, int(horizons[0])), distance=1.0, gradient_bound=1.0).optimal_gamma
            for n in SCHEDULES
        ]
    )
    return ExtensionSimulation(SCHEDULES, g, (int(horizons[0]), int(horizons[1])), loss, best, predicted)


@dataclass(frozen=True)
class MLPExtensionStudy:
    """Final losses of MLPs per horizon, schedule, base rate and seed, beside the convex bound.

    Attributes
    ----------
    schedules : tuple of str
    gammas : numpy.ndarray
    steps : tuple of int
        The horizons ``T, k_1 T, ...``.
    loss : numpy.ndarray
        ``(len(steps), len(schedules), len(gammas), n_seeds)`` final excess population loss;
        ``inf`` where training diverged.
    optimal_gamma : numpy.ndarray
        ``(len(steps), len(schedules))`` measured optimal rate: vertex of a least-squares
        parabola in ``log gamma`` through the seed-mean loss at the grid minimum and up to two
        neighbours on each side.
    at_edge : numpy.ndarray
        Same shape, ``True`` where the grid minimum is at an end of the grid (no vertex: the grid
        rate is reported and the ratios involving it are only bounds).
    measured_ratio : numpy.ndarray
        ``(len(steps) - 1, len(schedules))``: ``optimal_gamma[h] / optimal_gamma[0]``.
    ratio_interval : numpy.ndarray
        ``(len(steps) - 1, len(schedules), 2)`` 2.5 and 97.5 % percentiles of the measured ratio
        over a paired seed bootstrap (the same resampled seeds at every horizon).
    predicted_ratio : numpy.ndarray
        ``(len(steps) - 1, len(schedules))``: the bound's ``gamma*(k T) / gamma*(T)`` (free of
        ``D``, ``G``).
    fit : tuple of float
        ``(L*, D^2, G^2)`` of ``loss ~ L* + D^2 a + G^2 b`` (``Omega = D^2 a + G^2 b`` the bound
        at each point), non-negative least squares on relative error over every finite
        seed-mean loss.
    bound : numpy.ndarray
        ``(len(steps), len(schedules), len(gammas))`` fitted ``L* + Omega``.
    predicted_gamma : numpy.ndarray
        ``(len(steps), len(schedules))`` the bound's ``gamma* = sqrt(A / B)`` with the fitted
        ``D``, ``G``.
    rank_correlation : numpy.ndarray
        Per horizon, Spearman correlation between the fitted bound and the seed-mean final loss
        over the finite (schedule, rate) points (its ordering depends on ``D / G`` only).
    rank_interval : numpy.ndarray
        ``(len(steps), 2)`` seed-bootstrap percentiles of ``rank_correlation`` (bound held fixed).

    See Also
    --------
    mlp_extension_study : computes it.
    """

    schedules: tuple[str, ...]
    gammas: np.ndarray
    steps: tuple[int, ...]
    loss: np.ndarray
    optimal_gamma: np.ndarray
    at_edge: np.ndarray
    measured_ratio: np.ndarray
    ratio_interval: np.ndarray
    predicted_ratio: np.ndarray
    fit: tuple[float, float, float]
    bound: np.ndarray
    predicted_gamma: np.ndarray
    rank_correlation: np.ndarray
    rank_interval: np.ndarray


def _loss_vertex(gammas: np.ndarray, loss: np.ndarray) -> tuple[float, bool]:
    """``(rate, at_edge)``: vertex of a least-squares parabola in ``log gamma`` near the minimum.

    The parabola goes through the grid minimum of ``loss`` and up to two finite neighbours on
    each side; at an end of the grid the grid rate is returned with ``at_edge`` true.
    """
    i = int(np.argmin(loss))
    if i == 0 or i == len(gammas) - 1 or not np.all(np.isfinite(loss[i - 1 : i + 2])):
        return float(gammas[i]), True
    lo, hi = max(i - 2, 0), min(i + 3, len(gammas))
    window = np.arange(lo, hi)
    window = window[np.isfinite(loss[window])]
    u = np.log(gammas[window])
    a, b, _ = np.polyfit(u, loss[window], 2)
    if a <= 0:
        return float(gammas[i]), False
    return float(np.exp(np.clip(-b / (2 * a), u[0], u[-1]))), False


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    ok = np.isfinite(x) & np.isfinite(y)
    return float(spearmanr(x[ok], y[ok])[0]) if ok.sum() > 2 else float("nan")


@validate_params(
    {
        "steps": [Interval(numbers.Integral, 2, None, closed="left")],
        "gammas": ["array-like", None],
        "factors": ["array-like"],
        "schedules": [tuple, list],
    }
    | STUDY_CONSTRAINTS
)
def mlp_extension_study(
    steps: int = 500,
    gammas: Any = None,
    *,
    factors: Any = (2, 4),
    schedules: tuple[str, ...] | list[str] = SCHEDULES,
    n_seeds: int = 16,
    width: int = 32,
    dimension: int = 16,
    teacher_width: int = 128,
    decay: float = 1.0,
    batch_size: int = 1,
    noise: float = 1.0,
    n_bootstrap: int = 1000,
    random_state: int = 0,
) -> MLPExtensionStudy:
    """Sweep base rates at ``T`` and extended horizons ``k T`` on MLPs; compare with the bound.

    The paper's tuning rules come from the bound ``Omega(gamma) = A / gamma + B gamma`` of
    :func:`~trustlab.theory.lr_schedules.schedule_bound`: its optimal rate ``gamma* = sqrt(A/B)``
    falls like ``1/sqrt(T)`` when training is extended (their Figure 3: ``gamma*(2T)/gamma*(T)``
    about 0.71, ``gamma*(4T)/gamma*(T)`` about 0.5), and it orders schedules and rates.
    This trains one-hidden-layer tanh students by online SGD on a teacher with a power-law tail
    of features (``teacher_width`` units, output weights ``~ k^-decay``, label ``noise``), at every
    horizon, schedule, rate and seed (seed = initial weights and data stream, shared by all
    schedules, rates and horizons), and reports (1) the measured optimal rate per horizon (parabola
    vertex) and its ratio after extension, with a paired seed-bootstrap interval, beside the
    bound's ratio; (2) the per-horizon Spearman correlation between the bound (``D``, ``G`` and an
    offset ``L*`` fitted once to all points) and the measured final loss. Requires ``torch``.

    Parameters
    ----------
    steps : int, default 500
        The short horizon ``T``.
    gammas : array-like, optional
        Base rates (> 0), a log grid; default ``geomspace(0.001, 0.064, 13)`` (step ``sqrt 2``).
    factors : array-like, default (2, 4)
        Extension factors ``k > 1`` (integers): horizons ``k T``.
    schedules : sequence of str, default all of :data:`~trustlab.theory.lr_schedules.SCHEDULES`
    n_seeds : int, default 16
    width, dimension : int, default 32, 16
        Student hidden units and input dimension.
    teacher_width : int, default 128
    decay : float, default 1.0
        Teacher output weights ``k^-decay`` (renormalised to unit norm).
    batch_size : int, default 1
    noise : float, default 1.0
        Label noise standard deviation.
    n_bootstrap : int, default 1000
        Seed-bootstrap resamples.
    random_state : int, default 0

    Returns
    -------
    MLPExtensionStudy

    Raises
    ------
    DataError
        If a rate is not positive, a factor is not an integer > 1, or a schedule is unknown.

    References
    ----------
    F. Schaipp, A. Hagele, A. Taylor, U. Simsekli and F. Bach, "The Surprising Agreement
    Between Convex Optimization Theory and Learning-Rate Scheduling for Large Model Training",
    ICML 2025 (Section 4, Figure 3: optimal base rate against the horizon; Section 5.1:
    extending training).

    Examples
    --------
    >>> st = mlp_extension_study(20, [0.01, 0.03, 0.1], factors=(2,), schedules=("cooldown",),
    ...                          n_seeds=2, n_bootstrap=10)
    >>> st.loss.shape, st.predicted_ratio.round(2).tolist()
    ((2, 1, 3, 2), [[0.71]])
    """
    g = np.geomspace(0.001, 0.064, 13) if gammas is None else check_numeric_array(gammas, "gammas", ndim=1)
    if np.any(g <= 0) or len(g) < 3:
        raise DataError(f"gammas must be at least 3 rates, all > 0, got {g.tolist()}.", argument="gammas")
    g = np.sort(g)
    ks = check_numeric_array(factors, "factors", ndim=1)
    if np.any(ks <= 1) or np.any(ks != np.round(ks)):
        raise DataError(f"factors must be integers > 1, got {ks.tolist()}.", argument="factors")
    names = tuple(schedules)
    if not names or any(n not in SCHEDULES for n in names):
        raise DataError(f"schedules must be drawn from {SCHEDULES}, got {names!r}.", argument="schedules")
    from trustlab.theory._lr_mlp import train_students

    horizons = (int(steps), *(int(k) * int(steps) for k in ks))
    loss = np.stack(
        [
            train_students(
                np.stack([schedule(n, t) for n in names]),
                g,
                n_seeds=int(n_seeds),
                width=int(width),
                dimension=int(dimension),
                batch_size=int(batch_size),
                noise=float(noise),
                teacher_width=int(teacher_width),
                decay=float(decay),
                random_state=int(random_state),
            )
            for t in horizons
        ]
    )
    return _analyse(names, g, horizons, loss, int(n_bootstrap), int(random_state))


def _analyse(
    names: tuple[str, ...], g: np.ndarray, horizons: tuple[int, ...], loss: np.ndarray, n_boot: int, seed: int
) -> MLPExtensionStudy:
    from scipy.optimize import nnls

    with np.errstate(invalid="ignore"):
        mean = loss.mean(axis=-1)
    n_h, n_s = len(horizons), len(names)

    def vertices(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = [[_loss_vertex(g, m[h, s]) for s in range(n_s)] for h in range(n_h)]
        return np.array([[v for v, _ in row] for row in out]), np.array([[e for _, e in row] for row in out])

    opt, edge = vertices(mean)
    # bound terms: Omega = D^2 a + G^2 b, a = 1 / (2 gamma sum s), b = gamma (B with G = 1)
    a = np.empty((n_h, n_s, len(g)))
    b = np.empty_like(a)
    ab = np.empty((n_h, n_s, 2))
    for h, t in enumerate(horizons):
        for s, name in enumerate(names):
            unit = schedule_bound(schedule(name, t), 1.0)  # A = 1 / (2 sum s), B with D = G = 1
            a[h, s] = unit.a / g
            b[h, s] = unit.b * g
            ab[h, s] = unit.a, unit.b
    predicted = ab[1:, :, 0] / ab[1:, :, 1]
    predicted = np.sqrt(predicted / (ab[0, :, 0] / ab[0, :, 1]))
    ok = np.isfinite(mean)
    y = mean[ok]
    design = np.stack([np.ones_like(y), a[ok], b[ok]], axis=1) / y[:, None]
    coef, _ = nnls(design, np.ones_like(y))
    bound = coef[0] + coef[1] * a + coef[2] * b
    d2, g2 = float(coef[1]), float(coef[2])
    pred_gamma = (
        np.sqrt(d2 * ab[..., 0] / (g2 * ab[..., 1])) if d2 > 0 and g2 > 0 else np.full((n_h, n_s), np.nan)
    )
    rho = np.array([_spearman(bound[h].ravel(), mean[h].ravel()) for h in range(n_h)])
    rng = np.random.default_rng(seed)
    k = loss.shape[-1]
    ratios = np.empty((n_boot, n_h - 1, n_s))
    rhos = np.empty((n_boot, n_h))
    for r in range(n_boot):
        with np.errstate(invalid="ignore"):
            m = loss[..., rng.integers(0, k, k)].mean(axis=-1)
        v, _ = vertices(m)
        ratios[r] = v[1:] / v[0]
        rhos[r] = [_spearman(bound[h].ravel(), m[h].ravel()) for h in range(n_h)]
    return MLPExtensionStudy(
        schedules=names,
        gammas=g,
        steps=horizons,
        loss=loss,
        optimal_gamma=opt,
        at_edge=edge,
        measured_ratio=opt[1:] / opt[0],
        ratio_interval=np.moveaxis(np.percentile(ratios, [2.5, 97.5], axis=0), 0, -1),
        predicted_ratio=predicted,
        fit=(float(coef[0]), d2, g2),
        bound=bound,
        predicted_gamma=pred_gamma,
        rank_correlation=rho,
        rank_interval=np.percentile(rhos, [2.5, 97.5], axis=0).T,
    )
