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
from trustlab.theory.lr_schedules import SCHEDULES, schedule, schedule_bound

__all__ = ["ExtensionSimulation", "simulate_powerlaw_extension"]

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
