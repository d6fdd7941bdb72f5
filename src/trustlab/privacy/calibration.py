"""Exact calibration of the Gaussian mechanism (the analytic Gaussian mechanism).

One place that turns ``(epsilon, delta, sensitivity)`` into a noise standard
deviation and back, used by every Gaussian release in trustlab (DSI, the
linear-transformation sketch, ...). The condition is Balle and Wang's exact
privacy profile of the Gaussian mechanism, not the classical
``sqrt(2 ln(1.25/delta)) / epsilon`` bound, which is loose and only valid for
``epsilon < 1``.

Exact samplers draw the *discrete* Gaussian on a grid, not the continuous one.
:func:`grid_gaussian_sigma` calibrates such noise: it charges, on top of Balle and
Wang's ``delta``, a bound on how far the discrete mechanism can be from the
continuous one (see its Notes), so that the released ``(epsilon, delta)`` holds
for the noise actually drawn.
"""

from __future__ import annotations

import math
import numbers

from scipy.optimize import brentq
from scipy.special import log_ndtr

from trustlab._param_validation import DELTA, EPSILON, Interval, validate_params
from trustlab._validation import check_delta, check_epsilon, check_positive
from trustlab.errors import ParameterError

__all__ = [
    "DG_ROUNDING_TV",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "check_gaussian_delta",
    "gaussian_delta",
    "grid_gaussian_epsilon",
    "grid_gaussian_sigma",
]

# Calibrated noise is inflated by this relative margin so that root-finding
# error can only make the release more private, never less.
_SAFETY = 1e-9

DG_ROUNDING_TV = 0.021
"""Bound ``c`` on ``s**2 * TV(N_Z(0, s**2), round(N(0, s**2)))`` for every ``s >= 1`` (grid units).

The total variation between the discrete Gaussian on the integers and the
continuous Gaussian rounded to the nearest integer, times ``s**2``, rises with ``s``
towards the midpoint-rule constant ``phi(1) / 12 = 0.020165`` (computed exactly
with 40-digit arithmetic: 0.0165 at ``s = 1``, 0.01993 at 4, 0.020163 at 64;
``tests/privacy/test_linear_sketch_grid.py`` re-checks it).
"""


def gaussian_delta(epsilon: float, mu: float) -> float:
    """Exact ``delta(epsilon)`` of a Gaussian mechanism with ``mu = sensitivity / sigma``.

    ``delta = Phi(mu/2 - epsilon/mu) - exp(epsilon) Phi(-mu/2 - epsilon/mu)``.

    Parameters
    ----------
    epsilon : float
        The epsilon at which delta is evaluated.
    mu : float
        Sensitivity over noise standard deviation (> 0).

    Returns
    -------
    float
        The smallest ``delta`` for which the mechanism is ``(epsilon, delta)``-DP.

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


def check_gaussian_delta(delta: float) -> float:
    """Return ``delta`` after checking ``0 < delta < 1`` (the Gaussian mechanism needs ``delta > 0``).

    Parameters
    ----------
    delta : float
        The delta of a Gaussian release.

    Returns
    -------
    float

    Examples
    --------
    >>> check_gaussian_delta(1e-5)
    1e-05
    """
    delta = check_delta(delta)
    if delta == 0.0:
        raise ParameterError(
            "delta must be > 0: the Gaussian mechanism cannot give delta = 0; pass e.g. 1e-5.",
            argument="delta",
        )
    return delta


_POSITIVE = Interval(numbers.Real, 0, None, closed="neither")


@validate_params({"epsilon": [EPSILON], "delta": [DELTA], "sensitivity": [_POSITIVE]})
def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest Gaussian noise std giving ``(epsilon, delta)``-DP at an L2 ``sensitivity``.

    Solves Balle and Wang's exact condition ``gaussian_delta(epsilon, sensitivity / sigma)
    = delta`` for ``sigma`` (Brent's method) and inflates the root by a relative
    ``1e-9``, so that root-finding error can only make the release more private.

    Parameters
    ----------
    epsilon : float
        Target epsilon.
    delta : float
        Target delta, in ``(0, 1)``.
    sensitivity : float, default 1.0
        L2 sensitivity of the query, in the query's units.

    Returns
    -------
    float
        The noise standard deviation, in the query's units (proportional to
        ``sensitivity``).

    References
    ----------
    Balle, Wang. "Improving the Gaussian Mechanism for Differential Privacy:
    Analytical Calibration and Optimal Denoising". ICML 2018.

    Examples
    --------
    >>> round(analytic_gaussian_sigma(1.0, 1e-5, 1.0), 4)
    3.7306
    """
    eps, sens = float(epsilon), float(sensitivity)
    dlt = check_gaussian_delta(delta)  # keeps the hint: delta = 0 is out for the Gaussian mechanism
    # delta(eps) increases with mu = sens / sigma: bracket mu, then solve.
    lo, hi = 1e-6, 1.0
    while gaussian_delta(eps, hi) < dlt:
        hi *= 2
    while gaussian_delta(eps, lo) > dlt:
        lo /= 2
    mu = float(brentq(lambda u: gaussian_delta(eps, u) - dlt, lo, hi, xtol=1e-14, rtol=1e-13))
    return sens / mu * (1 + _SAFETY)


@validate_params({"sigma": [_POSITIVE], "delta": [DELTA], "sensitivity": [_POSITIVE]})
def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest epsilon for which Gaussian noise of std ``sigma`` is ``(epsilon, delta)``-DP.

    The inverse of :func:`analytic_gaussian_sigma` in epsilon (Balle and Wang's exact
    privacy profile).

    Parameters
    ----------
    sigma : float
        Noise standard deviation, in the query's units.
    delta : float
        Target delta, in ``(0, 1)``.
    sensitivity : float, default 1.0
        L2 sensitivity of the query, in the same units as ``sigma``.

    Returns
    -------
    float
        The epsilon at ``delta``; 0 when the noise already gives ``(0, delta)``-DP.

    References
    ----------
    Balle, Wang. "Improving the Gaussian Mechanism for Differential Privacy:
    Analytical Calibration and Optimal Denoising". ICML 2018.

    Examples
    --------
    >>> round(analytic_gaussian_epsilon(3.7306, 1e-5, 1.0), 3)
    1.0
    """
    dlt = check_gaussian_delta(delta)  # keeps the hint: delta = 0 is out for the Gaussian mechanism
    mu = float(sensitivity) / float(sigma)
    if gaussian_delta(0.0, mu) <= dlt:
        return 0.0
    hi = 1.0
    while gaussian_delta(hi, mu) > dlt:
        hi *= 2
    return float(brentq(lambda e: gaussian_delta(e, mu) - dlt, 0.0, hi, xtol=1e-14))


def grid_gaussian_sigma(epsilon: float, delta: float, sensitivity: float, slack: float) -> float:
    """Smallest ``sigma`` with ``gaussian_delta(epsilon, sensitivity / sigma) + slack / sigma**2 <= delta``.

    ``slack / sigma**2`` is the extra ``delta`` a discrete Gaussian on a grid can
    carry beyond the continuous Gaussian of the same standard deviation (see
    Notes); ``slack = 0`` gives :func:`analytic_gaussian_sigma`.

    Parameters
    ----------
    epsilon : float
        Target epsilon (> 0).
    delta : float
        Target delta.
    sensitivity : float
        L2 sensitivity of the query (> 0).
    slack : float
        Grid slack (>= 0).

    Returns
    -------
    float
        The noise standard deviation, found by root-finding (Brent) and raised by a tiny
        safety factor.

    Notes
    -----
    Let ``Y`` be (sums of) discrete Gaussians on the grid ``h Z`` and ``Delta`` the
    change of the integer query, with ``mu = ||Delta / sigma||`` in whitened units.
    The hockey-stick divergence is ``E[g(L(Y))]`` with the privacy loss
    ``L(y) = sum_j (2 y_j Delta_j + Delta_j**2) / (2 sigma_j**2)`` and
    ``g(l) = (1 - e^(epsilon - l))_+``, which is 1-Lipschitz in ``l``. Couple each
    discrete share with a continuous Gaussian ``C`` of the same scale so that it
    equals ``round(C)`` except with probability ``TV <= DG_ROUNDING_TV h**2 / s**2``;
    rounding errors are independent, mean-zero and at most ``h / 2``, so they move
    ``L`` by ``mu h / (2 s_min)`` in mean. Hence
    ``delta_discrete <= gaussian_delta(epsilon, mu) + mu h / (2 s_min) +
    sum TV``: no ``e^epsilon`` factor, only coordinates the neighbour changes count.
    Callers pass ``slack`` so that these two terms equal ``slack / sigma**2``.

    Examples
    --------
    >>> s0 = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    >>> s1 = grid_gaussian_sigma(1.0, 1e-5, 1.0, 1e-12)
    >>> bool(s0 <= s1 < s0 * (1 + 1e-6))
    True
    """
    eps = check_epsilon(epsilon)
    dlt = check_gaussian_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    slack = check_positive(slack, "slack", allow_zero=True)
    sigma = analytic_gaussian_sigma(eps, dlt, sens)
    if slack == 0.0:
        return sigma

    def excess(s: float) -> float:
        return gaussian_delta(eps, sens / s) + slack / (s * s) - dlt

    lo = sigma
    if excess(lo) <= 0:
        return lo
    hi = max(2.0 * lo, math.sqrt(2.0 * slack / dlt))
    while excess(hi) > 0:
        hi *= 2.0
    root = float(brentq(excess, lo, hi, xtol=1e-15 * hi, rtol=1e-13))
    return root * (1 + _SAFETY)


def grid_gaussian_epsilon(sigma: float, delta: float, sensitivity: float, slack: float) -> float:
    """The epsilon at ``delta`` of grid Gaussian noise of std ``sigma``.

    The analytic Gaussian epsilon at ``delta - slack / sigma**2`` (see
    :func:`grid_gaussian_sigma`); ``math.inf`` when the grid term alone exceeds ``delta``.

    Parameters
    ----------
    sigma : float
        Noise standard deviation (> 0).
    delta : float
        Target delta.
    sensitivity : float
        L2 sensitivity of the query.
    slack : float
        Grid slack (>= 0): the grid adds ``slack / sigma**2`` to delta.

    Returns
    -------
    float
        The epsilon of the release, or ``math.inf``.

    Examples
    --------
    >>> round(grid_gaussian_epsilon(3.7306, 1e-5, 1.0, 0.0), 3)
    1.0
    """
    sigma = check_positive(sigma, "sigma")
    dlt = check_gaussian_delta(delta)
    slack = check_positive(slack, "slack", allow_zero=True)
    rest = dlt - slack / (sigma * sigma)
    if rest <= 0.0:
        return math.inf
    return analytic_gaussian_epsilon(sigma, rest, sensitivity)
