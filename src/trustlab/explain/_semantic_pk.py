"""The pharmacokinetic trajectories of :mod:`trustlab.explain.semantic_ode` (private module).

:func:`make_pk_trajectories` is re-exported there.

References
----------
K. Kacprzyk, J. Piskorz, M. van der Schaar, "Skip the Equations: Learning Behavior of
Personalized Dynamical Systems Directly From Data", ICML 2025.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from scipy.integrate import solve_ivp

from trustlab._validation import make_generator
from trustlab.errors import ParameterError

__all__ = ["make_pk_trajectories"]


def make_pk_trajectories(
    n_samples: int, *, n_times: int = 20, noise: float = 0.01, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[tuple[str, ...]]]]:
    """Simulate two-dimensional pharmacokinetic trajectories with a planted semantic structure.

    A one-compartment model with a 100 mg dose over 24 h, solved with ``scipy.integrate.solve_ivp``:
    ``dA_gut/dt = -k_a A_gut`` feeding ``dA_c/dt = input - k_e A_c``, ``dA_e/dt = k_e A_c``.
    Covariates: weight ~ U(50, 100) kg, age ~ U(20, 80) y, extended_release ~ Bernoulli(0.5).
    Volume ``V = 50 w/70`` L, clearance ``CL = 2 (w/70)^0.75 (1 - 0.006 (age - 50))`` L/h,
    ``k_e = CL/V``; immediate release absorbs first-order with ``k_a ~ U(0.3, 0.8)``/h, extended release
    is a zero-order input of 100/24 mg/h. Dimensions: the concentration ``A_c/V`` (mg/L) and the
    fraction of the dose eliminated ``A_e/100``, observed at ``n_times`` equally spaced times of
    [0, 1] (= 24 h) with Gaussian noise of sd ``noise`` times each dimension's largest clean value.

    Parameters
    ----------
    n_samples : int
        Number of patients.
    n_times : int, default=20
        Observation times (>= 3).
    noise : float, default=0.01
        Relative noise level (>= 0).
    random_state : None, int or numpy.random.Generator, optional
        Seeds the covariates and the noise.

    Returns
    -------
    X : ndarray (n_samples, 3)
        weight, age, extended_release.
    y : ndarray (n_samples, n_times, 2)
    times : ndarray (n_times,)
    compositions : list
        The true composition per sample and dimension: immediate release gives
        ``(+-, --, -+)`` and ``(++, +-)``, extended release ``(+-,)`` and ``(++,)`` (the peak and the
        inflection of the concentration both fall inside the window by construction).

    Examples
    --------
    >>> X, y, times, truth = make_pk_trajectories(5, n_times=8, random_state=0)
    >>> X.shape, y.shape, times.shape
    ((5, 3), (5, 8, 2), (8,))
    >>> truth[0] == ([("+-",), ("++",)] if X[0, 2] else [("+-", "--", "-+"), ("++", "+-")])
    True
    """
    if not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ParameterError(
            f"n_samples must be a positive integer, got {n_samples!r}.", argument="n_samples"
        )
    if not isinstance(n_times, numbers.Integral) or n_times < 3:
        raise ParameterError(f"n_times must be an integer >= 3, got {n_times!r}.", argument="n_times")
    if not isinstance(noise, numbers.Real) or not np.isfinite(noise) or noise < 0:
        raise ParameterError(f"noise must be a finite number >= 0, got {noise!r}.", argument="noise")
    gen = make_generator(random_state)
    weight = gen.uniform(50, 100, n_samples)
    age = gen.uniform(20, 80, n_samples)
    er = gen.integers(0, 2, n_samples).astype(float)
    ka = gen.uniform(0.3, 0.8, n_samples)
    volume = 50.0 * weight / 70.0
    ke = 2.0 * (weight / 70.0) ** 0.75 * (1 - 0.006 * (age - 50)) / volume
    times = np.linspace(0.0, 1.0, n_times)

    def rhs(_t: float, a: np.ndarray) -> np.ndarray:  # all samples at once: a = [gut, central, eliminated]
        gut, central = a[:n_samples], a[n_samples : 2 * n_samples]
        absorbed = np.where(er > 0, 100.0 / 24.0, ka * gut)
        return np.concatenate([np.where(er > 0, 0.0, -absorbed), absorbed - ke * central, ke * central])

    start = np.concatenate([np.where(er > 0, 0.0, 100.0), np.zeros(2 * n_samples)])
    sol = solve_ivp(rhs, (0.0, 24.0), start, t_eval=24.0 * times, rtol=1e-8, atol=1e-10)
    clean = np.stack(
        [sol.y[n_samples : 2 * n_samples] / volume[:, None], sol.y[2 * n_samples :] / 100.0], axis=2
    )
    y = clean + gen.normal(0.0, 1.0, clean.shape) * noise * clean.max(axis=(0, 1))
    truth = [[("+-",), ("++",)] if e else [("+-", "--", "-+"), ("++", "+-")] for e in er]
    return np.column_stack([weight, age, er]), y, times, truth
