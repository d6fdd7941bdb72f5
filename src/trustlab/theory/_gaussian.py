"""Gaussian helpers for :mod:`trustlab.theory.diffusion_gaussian`: schedule, checks, Bures W2."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_positive
from trustlab.errors import DataError, ParameterError

__all__ = ["VPSchedule", "gaussian_w2"]


@dataclass(frozen=True)
class VPSchedule:
    """Linear noise schedule ``beta_t = beta_min + (beta_max - beta_min) t`` on ``[0, horizon]``.

    The defaults are the paper's (Song et al.'s 0.1 and 20, halved for the SDE
    ``dx = -beta x dt + sqrt(2 beta) dw``).

    Attributes
    ----------
    beta_min, beta_max : float
        Noise rate at times 0 and 1 (``0 <= beta_min <= beta_max``, ``beta_max > 0``).
    horizon : float
        Final forward time ``T`` (> 0).

    Examples
    --------
    >>> s = VPSchedule()
    >>> round(s.integral(1.0), 6)
    5.025
    """

    beta_min: float = 0.05
    beta_max: float = 10.0
    horizon: float = 1.0

    def __post_init__(self) -> None:
        check_positive(self.beta_min, "schedule.beta_min", allow_zero=True)
        check_positive(self.beta_max, "schedule.beta_max")
        check_positive(self.horizon, "schedule.horizon")
        if self.beta_max < self.beta_min:
            raise ParameterError(
                f"schedule.beta_max ({self.beta_max}) must be >= schedule.beta_min ({self.beta_min}); "
                "swap them.",
                argument="schedule",
            )

    def beta(self, t: Any) -> Any:
        """Return ``beta_t``.

        Parameters
        ----------
        t : float or numpy.ndarray
            Forward time.

        Returns
        -------
        float or numpy.ndarray
        """
        return self.beta_min + (self.beta_max - self.beta_min) * t

    def integral(self, t: Any) -> Any:
        """Return ``B_t``, the integral of ``beta`` from 0 to ``t``.

        Parameters
        ----------
        t : float or numpy.ndarray
            Forward time.

        Returns
        -------
        float or numpy.ndarray
        """
        return self.beta_min * t + (self.beta_max - self.beta_min) * t * t / 2


NONNEGATIVE = Interval(numbers.Real, 0, None, closed="left")
"""A finite float >= 0 (a time, a truncation or a tolerance)."""
POSITIVE_INT = Interval(numbers.Integral, 1, None, closed="left")
"""An int >= 1 (a number of steps, layers or runs)."""


def _check_covariance(covariance: Any, name: str) -> np.ndarray:
    """Return a PD covariance as a 2-D array, or a 1-D array of positive eigenvalues."""
    if isinstance(covariance, str | bytes) or covariance is None:
        raise DataError(f"{name} must be a covariance matrix or a vector of eigenvalues.", argument=name)
    try:
        arr = np.asarray(covariance, dtype=float)
    except (TypeError, ValueError):
        raise DataError(
            f"{name} must be an array of numbers (a d x d covariance or d eigenvalues).", argument=name
        ) from None
    if arr.ndim not in (1, 2) or arr.size == 0 or (arr.ndim == 2 and arr.shape[0] != arr.shape[1]):
        raise DataError(
            f"{name} must be a square d x d matrix or a vector of d >= 1 eigenvalues, got shape {arr.shape}.",
            argument=name,
        )
    if not np.all(np.isfinite(arr)):
        raise DataError(f"{name} contains NaN or infinite values.", argument=name)
    if arr.ndim == 1:
        if np.any(arr <= 0):
            raise DataError(
                f"{name} eigenvalues must all be > 0 (positive definite); add a small ridge to zeros.",
                argument=name,
            )
        return arr
    scale = max(float(np.max(np.abs(arr))), 1e-300)
    if np.max(np.abs(arr - arr.T)) > 1e-8 * scale:
        raise DataError(f"{name} must be symmetric; pass (C + C.T) / 2.", argument=name)
    arr = (arr + arr.T) / 2
    if float(np.linalg.eigvalsh(arr)[0]) <= 1e-12 * scale:
        raise DataError(
            f"{name} must be positive definite; add a small multiple of the identity.", argument=name
        )
    return arr


def _schedule(schedule: VPSchedule | None) -> VPSchedule:
    if schedule is None:
        return VPSchedule()
    if not isinstance(schedule, VPSchedule):
        raise ParameterError(
            f"schedule must be a VPSchedule or None, got {type(schedule).__name__}.", argument="schedule"
        )
    return schedule


def _check_truncation(truncation: Any, horizon: float) -> float:
    eps = check_positive(truncation, "truncation", allow_zero=True)
    if eps >= horizon:
        raise ParameterError(
            f"truncation must be in [0, horizon={horizon}), got {truncation!r}; use e.g. 1e-3.",
            argument="truncation",
        )
    return eps


def _trace_sqrt_product(a: np.ndarray, b: np.ndarray) -> float:
    """``tr (a^{1/2} b a^{1/2})^{1/2}`` for symmetric PSD matrices."""
    w, v = np.linalg.eigh(a)
    root = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    inner = np.linalg.eigvalsh(root @ b @ root)
    return float(np.sum(np.sqrt(np.clip(inner, 0, None))))


@validate_params({"cov_a": ["array-like"], "cov_b": ["array-like"]})
def gaussian_w2(cov_a: Any, cov_b: Any) -> float:
    """Wasserstein-2 distance between ``N(0, cov_a)`` and ``N(0, cov_b)`` (Bures formula).

    Vectors are diagonal covariances; for commuting covariances this is the paper's eq. (5),
    ``sqrt(sum_i (sqrt(a_i) - sqrt(b_i))^2)``.

    Parameters
    ----------
    cov_a, cov_b : array-like
        Positive definite d x d matrices, or vectors of d positive variances.

    Returns
    -------
    float

    References
    ----------
    E. Pierret and B. Galerne, "Diffusion models for Gaussian distributions: Exact solutions and
    Wasserstein errors", ICML 2025, eq. (5).

    Examples
    --------
    >>> gaussian_w2([1.0, 4.0], [4.0, 4.0])
    1.0
    """
    a = _check_covariance(cov_a, "cov_a")
    b = _check_covariance(cov_b, "cov_b")
    return _w2(a, b)


def _w2(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape[0] != b.shape[0]:
        raise DataError(f"covariances differ in dimension ({a.shape[0]} vs {b.shape[0]}).", argument="cov_b")
    if a.ndim == 1 and b.ndim == 1:
        return float(np.sqrt(np.sum((np.sqrt(a) - np.sqrt(b)) ** 2)))
    a2 = np.diag(a) if a.ndim == 1 else a
    b2 = np.diag(b) if b.ndim == 1 else b
    sq = float(np.trace(a2) + np.trace(b2) - 2 * _trace_sqrt_product(a2, b2))
    return math.sqrt(max(sq, 0.0))


def _marginal(sigma: np.ndarray, t: float, sched: VPSchedule) -> np.ndarray:
    decay = math.exp(-2 * sched.integral(t))
    eye = 1.0 if sigma.ndim == 1 else np.eye(sigma.shape[0])
    return decay * sigma + (1 - decay) * eye
