"""Exact Wasserstein errors of diffusion samplers when the data are Gaussian.

With data ``N(0, Sigma)`` and the variance-preserving forward SDE, every marginal, the
continuous backward SDE and flow ODE, and each of their discretisations (Euler-Maruyama,
exponential integrator, Euler, Heun) are Gaussian with a covariance that a short recurrence
gives exactly, so the Wasserstein-2 error of a sampler is known in closed form (Pierret &
Galerne, ICML 2025). :func:`sampler_w2` returns it split into its four sources
(initialisation, truncation, discretisation, score); :func:`simulate_sampler` runs the
sampler itself on random numbers, as a check. See ``docs/theory/diffusion-gaussian.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_choice, check_positive, check_positive_int, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.theory._gaussian import (
    NONNEGATIVE,
    POSITIVE_INT,
    VPSchedule,
    _check_covariance,
    _check_truncation,
    _marginal,
    _schedule,
    _w2,
    gaussian_w2,
)

__all__ = [
    "SCHEMES",
    "SamplerError",
    "SamplerSimulation",
    "VPSchedule",
    "continuous_covariance",
    "forward_covariance",
    "gaussian_w2",
    "sampler_covariance",
    "sampler_w2",
    "simulate_sampler",
]

SCHEMES = ("euler_maruyama", "exponential_integrator", "euler", "heun")
_SDE_SCHEMES = ("euler_maruyama", "exponential_integrator")
_INITS = ("normal", "p_T")
_SAMPLER_PARAMS: dict[str, list[Any]] = {
    "covariance": ["array-like"],
    "scheme": [Options(SCHEMES)],
    "n_steps": [POSITIVE_INT],
    "truncation": [NONNEGATIVE],
    "init": [Options(_INITS)],
    "score_covariance": ["array-like", None],
    "schedule": [VPSchedule, None],
}


@dataclass(frozen=True)
class SamplerError:
    """Exact W2 errors of one sampler, in total and per error source.

    Attributes
    ----------
    scheme, init : str
        The discretisation and the initial law (``"normal"`` is ``N(0, I)``, ``"p_T"`` the
        exact forward marginal at the horizon).
    n_steps : int
        Number of steps (the paper's ``N`` is ``n_steps + 1`` grid points).
    truncation : float
        Forward time ``epsilon`` at which sampling stops.
    w2 : float
        W2 between the sampler's output law and the data, all sources switched on.
    w2_continuous : float
        The same for the continuous equation (SDE for the stochastic schemes, flow ODE for the
        deterministic ones) with the same initialisation, truncation and score.
    w2_truncation, w2_initialization, w2_discretization, w2_score : float
        Each source switched on alone: ``W2(p_epsilon, p_0)``; the continuous sampler from
        ``N(0, I)``; the scheme from ``p_T`` with the exact score; the continuous sampler from
        ``p_T`` with the approximate score (0 when no ``score_covariance`` was given).
    covariance : numpy.ndarray
        Covariance of the sampler's output in the data's coordinates (a vector of variances
        when the data covariance was given as eigenvalues and the output is diagonal).

    See Also
    --------
    sampler_w2 : builds it.
    """

    scheme: str
    init: str
    n_steps: int
    truncation: float
    w2: float
    w2_continuous: float
    w2_truncation: float
    w2_initialization: float
    w2_discretization: float
    w2_score: float
    covariance: np.ndarray


@dataclass(frozen=True)
class SamplerSimulation:
    """Monte-Carlo run of a sampler: plug-in W2 of the sample covariance and its standard error.

    Attributes
    ----------
    w2 : float
        W2 between ``N(0, C_hat)`` and the data, ``C_hat`` the samples' second-moment matrix.
    standard_error : float
        Delta-method standard error of ``w2`` (gradient of W2 squared in ``C`` is ``I - A``,
        ``A`` the optimal transport map), ignoring the ``O(d / n)`` plug-in bias.
    covariance : numpy.ndarray
        ``C_hat`` (d x d).
    covariance_se : numpy.ndarray
        Standard error of each entry of ``C_hat``.
    n_samples : int

    See Also
    --------
    simulate_sampler : builds it.
    """

    w2: float
    standard_error: float
    covariance: np.ndarray
    covariance_se: np.ndarray
    n_samples: int


# ---------------------------------------------------------------- closed forms


@validate_params({"covariance": ["array-like"], "t": [NONNEGATIVE], "schedule": [VPSchedule, None]})
def forward_covariance(covariance: Any, t: float, *, schedule: VPSchedule | None = None) -> np.ndarray:
    """Covariance of the forward marginal ``p_t``: ``e^{-2B_t} Sigma + (1 - e^{-2B_t}) I`` (eq. 2).

    Parameters
    ----------
    covariance : array-like
        Data covariance (d x d, positive definite) or its eigenvalues (a diagonal one).
    t : float
        Forward time in ``[0, horizon]``.
    schedule : VPSchedule, optional
        Default: the paper's linear schedule.

    Returns
    -------
    numpy.ndarray
        Same shape as ``covariance``.

    References
    ----------
    Pierret & Galerne, ICML 2025, eqs. (2) and (6).

    Examples
    --------
    >>> forward_covariance([0.5, 2.0], 0.0).tolist()
    [0.5, 2.0]
    """
    sched = _schedule(schedule)
    sigma = _check_covariance(covariance, "covariance")
    tt = check_positive(t, "t", allow_zero=True)
    if tt > sched.horizon:
        raise ParameterError(f"t must be in [0, {sched.horizon}], got {t!r}.", argument="t")
    return _marginal(sigma, tt, sched)


class _Frame:
    """The score covariance's eigenbasis: target, initial law and per-time score eigenvalues."""

    def __init__(self, sigma: np.ndarray, score: np.ndarray | None, sched: VPSchedule, init: str) -> None:
        self.sched = sched
        s = sigma if score is None else score
        basis: np.ndarray | None = None
        if s.ndim == 1:
            self.s = s
        else:
            self.s, basis = np.linalg.eigh(s)
        self.basis = basis
        if score is None:
            # Without a score error everything is diagonal in the data's eigenbasis.
            self.target = self.s.copy()
        elif basis is None:
            self.target = sigma if sigma.ndim == 1 else sigma.copy()
        else:
            sig2 = np.diag(sigma) if sigma.ndim == 1 else sigma
            self.target = basis.T @ sig2 @ basis
        self.target_T = _marginal(self.target, sched.horizon, sched)
        self.init = np.ones_like(self.s) if init == "normal" else self.target_T

    def lam(self, t: float) -> np.ndarray:
        """Eigenvalues of the score's ``S_t`` at forward time ``t``."""
        decay = math.exp(-2 * self.sched.integral(t))
        return decay * self.s + (1 - decay)


def _to_data(frame: _Frame, cov: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Express a covariance from the frame's eigenbasis in the data's coordinates.

    A vector (diagonal) stays a vector when the data covariance was given as eigenvalues.
    """
    if frame.basis is None:
        return cov if (cov.ndim == 2 or sigma.ndim == 1) else np.diag(cov)
    full = np.diag(cov) if cov.ndim == 1 else cov
    return frame.basis @ full @ frame.basis.T


def _propagate(cov: np.ndarray, m: np.ndarray, c: float) -> np.ndarray:
    if cov.ndim == 1:
        return m * m * cov + c
    return (m[:, None] * cov * m[None, :]) + c * np.eye(len(m))


def _run_scheme(frame: _Frame, scheme: str, n_steps: int, eps: float) -> np.ndarray:
    sched = frame.sched
    horizon = sched.horizon
    grid = (horizon - eps) * np.arange(n_steps + 1) / n_steps
    dt = grid[1] - grid[0]
    cov = frame.init
    for k in range(n_steps):
        u, u1 = horizon - grid[k], horizon - grid[k + 1]
        lam, b = frame.lam(u), float(sched.beta(u))
        if scheme == "euler_maruyama":
            cov = _propagate(cov, 1 + dt * b * (1 - 2 / lam), 2 * dt * b)
        elif scheme == "exponential_integrator":
            jump = sched.integral(u) - sched.integral(u1)
            g1, g2 = math.expm1(jump), math.expm1(2 * jump) / 2
            cov = _propagate(cov, 1 + g1 * (1 - 2 / lam), 2 * g2)
        else:
            first = 1 + dt * b * (1 - 1 / lam)
            if scheme == "euler":
                cov = _propagate(cov, first, 0.0)
            else:
                lam1, b1 = frame.lam(u1), float(sched.beta(u1))
                m = 1 + dt / 2 * b * (1 - 1 / lam) + dt / 2 * b1 * (1 - 1 / lam1) * first
                cov = _propagate(cov, m, 0.0)
    return cov


def _continuous(frame: _Frame, kind: str, eps: float) -> np.ndarray:
    sched = frame.sched
    lam_eps, lam_T = frame.lam(eps), frame.lam(sched.horizon)
    if kind == "ode":
        return _propagate(frame.init, np.sqrt(lam_eps / lam_T), 0.0)
    phi = math.exp(-(sched.integral(sched.horizon) - sched.integral(eps))) * lam_eps / lam_T
    start = frame.init - (lam_T if frame.init.ndim == 1 else np.diag(lam_T))
    particular = lam_eps if frame.init.ndim == 1 else np.diag(lam_eps)
    return particular + _propagate(start, phi, 0.0)


def _common(
    covariance: Any, n_steps: Any, truncation: Any, init: Any, score_covariance: Any, schedule: Any
) -> tuple[np.ndarray, np.ndarray | None, int, float, str, VPSchedule]:
    sched = _schedule(schedule)
    sigma = _check_covariance(covariance, "covariance")
    steps = check_positive_int(n_steps, "n_steps")
    eps = _check_truncation(truncation, sched.horizon)
    start = check_choice(init, "init", _INITS)
    score = None
    if score_covariance is not None:
        score = _check_covariance(score_covariance, "score_covariance")
        if score.shape[0] != sigma.shape[0]:
            raise DataError(
                f"score_covariance has dimension {score.shape[0]} but covariance has {sigma.shape[0]}.",
                argument="score_covariance",
            )
    return sigma, score, steps, eps, start, sched


@validate_params(
    {k: v for k, v in _SAMPLER_PARAMS.items() if k not in ("scheme", "n_steps")}
    | {"kind": [Options({"sde", "ode"})]}
)
def continuous_covariance(
    covariance: Any,
    kind: str = "sde",
    *,
    truncation: float = 0.0,
    init: str = "normal",
    score_covariance: Any = None,
    schedule: VPSchedule | None = None,
) -> np.ndarray:
    """Covariance of the output of the continuous backward SDE or flow ODE (eqs. 7, 8).

    A d x d matrix in the data's coordinates, or a vector of variances when ``covariance`` was
    given as eigenvalues and the output is diagonal.

    Parameters
    ----------
    covariance : array-like
        Data covariance (positive definite) or its eigenvalues.
    kind : {"sde", "ode"}
    truncation : float
        Forward time ``epsilon`` at which sampling stops.
    init : {"normal", "p_T"}
        Start from ``N(0, I)`` or from the exact forward marginal at the horizon.
    score_covariance : array-like, optional
        Use the score of ``N(0, S)`` instead of the data's.
    schedule : VPSchedule, optional

    Returns
    -------
    numpy.ndarray

    References
    ----------
    Pierret & Galerne, ICML 2025, Propositions 2 and 3, eqs. (7) and (8).

    Examples
    --------
    >>> v = continuous_covariance([0.5, 2.0], "ode", init="p_T")
    >>> np.round(v, 12).tolist()
    [0.5, 2.0]
    """
    sigma, score, _, eps, start, sched = _common(covariance, 1, truncation, init, score_covariance, schedule)
    which = check_choice(kind, "kind", ("sde", "ode"))
    frame = _Frame(sigma, score, sched, start)
    return _to_data(frame, _continuous(frame, which, eps), sigma)


@validate_params(_SAMPLER_PARAMS)
def sampler_covariance(
    covariance: Any,
    scheme: str,
    n_steps: int,
    *,
    truncation: float = 0.0,
    init: str = "normal",
    score_covariance: Any = None,
    schedule: VPSchedule | None = None,
) -> np.ndarray:
    """Exact covariance of a discretised sampler's output (eqs. 11, 13, 16, 17).

    Same basis convention as :func:`continuous_covariance`.

    Parameters
    ----------
    covariance : array-like
        Data covariance (positive definite) or its eigenvalues.
    scheme : {"euler_maruyama", "exponential_integrator", "euler", "heun"}
        The first two discretise the backward SDE, the last two the flow ODE.
    n_steps : int
        Number of steps on the uniform grid from the horizon down to ``truncation``.
    truncation, init, score_covariance, schedule
        As in :func:`continuous_covariance`.

    Returns
    -------
    numpy.ndarray

    References
    ----------
    Pierret & Galerne, ICML 2025, Section 4, eqs. (10)-(17).

    Examples
    --------
    >>> v = sampler_covariance([1.0], "euler", n_steps=1, init="p_T")
    >>> round(float(v[0]), 12)
    1.0
    """
    sigma, score, steps, eps, start, sched = _common(
        covariance, n_steps, truncation, init, score_covariance, schedule
    )
    which = check_choice(scheme, "scheme", SCHEMES)
    frame = _Frame(sigma, score, sched, start)
    return _to_data(frame, _run_scheme(frame, which, steps, eps), sigma)


@validate_params(_SAMPLER_PARAMS)
def sampler_w2(
    covariance: Any,
    scheme: str,
    n_steps: int,
    *,
    truncation: float = 0.0,
    init: str = "normal",
    score_covariance: Any = None,
    schedule: VPSchedule | None = None,
) -> SamplerError:
    """Exact W2 error of a diffusion sampler on Gaussian data, split into its four sources.

    Parameters
    ----------
    covariance : array-like
        Data covariance ``Sigma`` (d x d, positive definite) or its eigenvalues.
    scheme : {"euler_maruyama", "exponential_integrator", "euler", "heun"}
    n_steps : int
        Number of steps (the paper's ``N`` grid points are ``n_steps + 1``).
    truncation : float, default 0
        Forward time ``epsilon`` at which sampling stops.
    init : {"normal", "p_T"}, default "normal"
        Initial law: ``N(0, I)`` (what samplers use) or the exact ``p_T``.
    score_covariance : array-like, optional
        Score of ``N(0, S)`` used instead of the exact score (a score error).
    schedule : VPSchedule, optional
        Default: linear, ``beta_min = 0.05``, ``beta_max = 10``, horizon 1 (the paper's).

    Returns
    -------
    SamplerError

    References
    ----------
    E. Pierret and B. Galerne, "Diffusion models for Gaussian distributions: Exact solutions and
    Wasserstein errors", ICML 2025 (Table 2 is this function over schemes, ``N``, ``epsilon``
    and ``init``).

    Examples
    --------
    >>> err = sampler_w2(2.0 / np.arange(1, 9), "heun", n_steps=49)
    >>> err.w2 < sampler_w2(2.0 / np.arange(1, 9), "euler", n_steps=49).w2
    True
    >>> err.w2_truncation
    0.0
    """
    sigma, score, steps, eps, start, sched = _common(
        covariance, n_steps, truncation, init, score_covariance, schedule
    )
    which = check_choice(scheme, "scheme", SCHEMES)
    kind = "sde" if which in _SDE_SCHEMES else "ode"
    full = _Frame(sigma, score, sched, start)
    exact_pt = _Frame(sigma, None, sched, "p_T")
    exact_normal = _Frame(sigma, None, sched, "normal")
    out = _run_scheme(full, which, steps, eps)
    w2_score = 0.0
    if score is not None:
        w2_score = _w2(_continuous(_Frame(sigma, score, sched, "p_T"), kind, 0.0), full.target)
    return SamplerError(
        scheme=which,
        init=start,
        n_steps=steps,
        truncation=eps,
        w2=_w2(out, full.target),
        w2_continuous=_w2(_continuous(full, kind, eps), full.target),
        w2_truncation=_w2(_marginal(exact_pt.target, eps, sched), exact_pt.target),
        w2_initialization=_w2(_continuous(exact_normal, kind, 0.0), exact_normal.target),
        w2_discretization=_w2(_run_scheme(exact_pt, which, steps, 0.0), exact_pt.target),
        w2_score=w2_score,
        covariance=_to_data(full, out, sigma),
    )


# ---------------------------------------------------------------- Monte Carlo


@validate_params(
    _SAMPLER_PARAMS
    | {"n_samples": [Interval(numbers.Integral, 2, None, closed="left")], "random_state": ["random_state"]}
)
def simulate_sampler(
    covariance: Any,
    scheme: str,
    n_steps: int,
    *,
    n_samples: int = 10_000,
    truncation: float = 0.0,
    init: str = "normal",
    score_covariance: Any = None,
    schedule: VPSchedule | None = None,
    random_state: Any = None,
) -> SamplerSimulation:
    """Run the sampler on ``n_samples`` random starts and measure its W2 error.

    The score is applied as the matrix ``-S_t^{-1}`` in the data's coordinates (no
    eigendecomposition), so this is an independent check of :func:`sampler_w2`.

    Parameters
    ----------
    covariance, scheme, n_steps, truncation, init, score_covariance, schedule
        As in :func:`sampler_w2`.
    n_samples : int, default 10000
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    SamplerSimulation
        Sample covariance in the data's coordinates.

    References
    ----------
    Pierret & Galerne, ICML 2025, Section 4.

    Examples
    --------
    >>> sim = simulate_sampler([0.5, 2.0], "heun", n_steps=20, n_samples=2000, random_state=0)
    >>> sim.covariance.shape
    (2, 2)
    """
    sigma, score, steps, eps, start, sched = _common(
        covariance, n_steps, truncation, init, score_covariance, schedule
    )
    which = check_choice(scheme, "scheme", SCHEMES)
    n = check_positive_int(n_samples, "n_samples", minimum=2)
    rng = make_generator(random_state)
    sig2 = np.diag(sigma) if sigma.ndim == 1 else sigma
    s2 = sig2 if score is None else (np.diag(score) if score.ndim == 1 else score)
    d = sig2.shape[0]
    eye = np.eye(d)
    y = rng.standard_normal((n, d))
    if start == "p_T":
        y = y @ np.linalg.cholesky(_marginal(sig2, sched.horizon, sched)).T

    def drift(u: float, x: np.ndarray, factor: float) -> np.ndarray:
        decay = math.exp(-2 * sched.integral(u))
        precision = np.linalg.inv(decay * s2 + (1 - decay) * eye)
        return x - factor * (x @ precision)

    horizon = sched.horizon
    grid = (horizon - eps) * np.arange(steps + 1) / steps
    dt = grid[1] - grid[0]
    for k in range(steps):
        u, u1 = horizon - grid[k], horizon - grid[k + 1]
        b = float(sched.beta(u))
        if which == "euler_maruyama":
            y = y + dt * b * drift(u, y, 2.0) + math.sqrt(2 * dt * b) * rng.standard_normal((n, d))
        elif which == "exponential_integrator":
            jump = sched.integral(u) - sched.integral(u1)
            y = y + math.expm1(jump) * drift(u, y, 2.0)
            y = y + math.sqrt(math.expm1(2 * jump)) * rng.standard_normal((n, d))
        elif which == "euler":
            y = y + dt * b * drift(u, y, 1.0)
        else:
            k1 = b * drift(u, y, 1.0)
            k2 = float(sched.beta(u1)) * drift(u1, y + dt * k1, 1.0)
            y = y + dt / 2 * (k1 + k2)
    products = y[:, :, None] * y[:, None, :]
    cov_hat = products.mean(axis=0)
    cov_se = products.std(axis=0, ddof=1) / math.sqrt(n)
    w2 = _w2(cov_hat, sig2)
    # Delta method: d W2^2 / d C = I - A, A the transport map from N(0, C) to N(0, Sigma).
    w, v = np.linalg.eigh(cov_hat)
    root = (v * np.sqrt(w)) @ v.T
    inv_root = (v / np.sqrt(w)) @ v.T
    mw, mv = np.linalg.eigh(root @ sig2 @ root)
    middle = (mv * np.sqrt(np.clip(mw, 0, None))) @ mv.T
    grad = eye - inv_root @ middle @ inv_root
    quad = np.einsum("ni,ij,nj->n", y, grad, y)
    se_sq = float(quad.std(ddof=1) / math.sqrt(n))
    se = se_sq / (2 * w2) if w2 > 0 else math.sqrt(se_sq)
    return SamplerSimulation(w2=w2, standard_error=se, covariance=cov_hat, covariance_se=cov_se, n_samples=n)
