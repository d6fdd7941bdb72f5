"""Exact calibration of the Gaussian mechanism (the analytic Gaussian mechanism).

One place that turns ``(epsilon, delta, sensitivity)`` into a noise standard
deviation and back, used by every Gaussian release in trustlab (DSI, the
linear-transformation sketch, ...). The condition is Balle and Wang's exact
privacy profile of the Gaussian mechanism, not the classical
``sqrt(2 ln(1.25/delta)) / epsilon`` bound, which is loose and only valid for
``epsilon < 1``.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq
from scipy.special import log_ndtr

from trustlab._validation import check_delta, check_epsilon, check_positive
from trustlab.errors import ParameterError

__all__ = ["analytic_gaussian_epsilon", "analytic_gaussian_sigma", "gaussian_delta"]

# Calibrated noise is inflated by this relative margin so that root-finding
# error can only make the release more private, never less.
_SAFETY = 1e-9


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact ``delta(epsilon)`` of a Gaussian mechanism with ``mu = sensitivity / sigma``.

    ``delta = Phi(mu/2 - epsilon/mu) - exp(epsilon) Phi(-mu/2 - epsilon/mu)``.

    References
    ----------
    Balle, Wang. "Improving the Gaussian Mechanism for Differential Privacy:
    Analytical Calibration and Optimal Denoising". ICML 2018 (Theorem 8).

    Examples
    --------
    >>> round(gaussian_delta(1.0, 1.0), 6)
    0.126937
    """
    a = epsilon / mu
    first = math.exp(float(log_ndtr(mu / 2 - a)))
    second = math.exp(epsilon + float(log_ndtr(-mu / 2 - a)))
    return max(0.0, first - second)


def _check_gaussian_delta(delta: float) -> float:
    delta = check_delta(delta)
    if delta == 0.0:
        raise ParameterError(
            "delta must be > 0: the Gaussian mechanism cannot give delta = 0; pass e.g. 1e-5.",
            argument="delta",
        )
    return delta


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest Gaussian noise std giving ``(epsilon, delta)``-DP at an L2 ``sensitivity``.

    Examples
    --------
    >>> round(analytic_gaussian_sigma(1.0, 1e-5, 1.0), 4)
    3.7306
    """
    eps = check_epsilon(epsilon)
    dlt = _check_gaussian_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    # delta(eps) increases with mu = sens / sigma: bracket mu, then solve.
    lo, hi = 1e-6, 1.0
    while gaussian_delta(eps, hi) < dlt:
        hi *= 2
    while gaussian_delta(eps, lo) > dlt:
        lo /= 2
    mu = float(brentq(lambda u: gaussian_delta(eps, u) - dlt, lo, hi, xtol=1e-14, rtol=1e-13))
    return sens / mu * (1 + _SAFETY)


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest epsilon for which Gaussian noise of std ``sigma`` is ``(epsilon, delta)``-DP.

    Examples
    --------
    >>> round(analytic_gaussian_epsilon(3.7306, 1e-5, 1.0), 3)
    1.0
    """
    sigma = check_positive(sigma, "sigma")
    dlt = _check_gaussian_delta(delta)
    mu = check_positive(sensitivity, "sensitivity") / sigma
    if gaussian_delta(0.0, mu) <= dlt:
        return 0.0
    hi = 1.0
    while gaussian_delta(hi, mu) > dlt:
        hi *= 2
    return float(brentq(lambda e: gaussian_delta(e, mu) - dlt, 0.0, hi, xtol=1e-14))
