"""Private clipping bounds: estimate a range for a sensitive column under pure DP.

Most DP statistics (sums, means, histograms over a range) need public bounds on
the data. When the user has none, reading them off the data (``min``/``max``)
breaks the guarantee. :func:`dp_bounds` estimates a low and a high quantile with
Durfee's unbounded quantile method, which needs only a public anchor, and charges
the epsilon it uses; the result is a :class:`~trustlab.privacy.release.Release`
that can be recorded in an :class:`~trustlab.privacy.accounting.Accountant` and
whose value can then serve as the bounds of later releases (post-processing).

Released values lie on a public grid: each bound is a bucket edge
``anchor +- (base**k - 1)`` (the float evaluation of that public formula), clamped to
``+-MAX_ABS_BOUND`` and kept strictly on either side of the anchor.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, validate_params
from trustlab._validation import check_bounds
from trustlab.errors import ParameterError
from trustlab.privacy._durfee import scan
from trustlab.privacy._inputs import (
    BASE,
    MAX_BUCKETS,
    NEIGHBOURING,
    NEIGHBOURING_OPTION,
    check_anchor,
    check_public_n,
    read_private_sample,
)
from trustlab.privacy.accounting import Accountant, charge
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace

__all__ = [
    "DEFAULT_BOUNDS_LEVELS",
    "MAX_ABS_BOUND",
    "check_bounds_levels",
    "check_public_bounds",
    "dp_bounds",
]

DEFAULT_BOUNDS_LEVELS = (0.01, 0.99)

MAX_ABS_BOUND = 1e270
"""Largest magnitude of a bound (public or released) the DP statistics work with.

A released bound is clamped to ``+-MAX_ABS_BOUND``; a public anchor must lie within
half of it. At this cap ``upper - lower`` and every sum of at most ``2**63`` grid
steps stay finite in float64, so no later release overflows to ``inf``.
"""


def check_public_bounds(
    bounds: Any, name: str = "bounds", *, resolution: int | None = None
) -> tuple[float, float]:
    """Return public ``(lower, upper)`` after checking they are finite, ordered and not absurd.

    Besides :func:`trustlab._validation.check_bounds` (finite, ``lower < upper``),
    both ends must have magnitude at most :data:`MAX_ABS_BOUND`, and with a
    ``resolution`` the grid step ``(upper - lower) / resolution`` must be a normal
    positive float.

    Parameters
    ----------
    bounds : pair of float
        The public ``(lower, upper)``.
    name : str, default="bounds"
        The argument's name in error messages.
    resolution : int, optional
        Number of grid steps between the bounds, when the caller uses a grid.

    Returns
    -------
    tuple of (float, float)
        ``(lower, upper)`` as floats.

    Examples
    --------
    >>> check_public_bounds((0, 1))
    (0.0, 1.0)
    >>> check_public_bounds((-1e308, 1e308))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: bounds must lie within +-1e+270 ...
    """
    if isinstance(bounds, str | bytes):
        raise ParameterError(
            f"{name} must be a pair (lower, upper) of numbers, got {bounds!r}.", argument=name
        )
    lower, upper = check_bounds(bounds, name)
    if max(abs(lower), abs(upper)) > MAX_ABS_BOUND:
        raise ParameterError(
            f"{name} must lie within +-{MAX_ABS_BOUND:g} (beyond it sums and spans overflow float64), "
            f"got {bounds!r}; rescale the data.",
            argument=name,
        )
    if resolution is not None and not (upper - lower) / resolution >= np.finfo(float).tiny:
        raise ParameterError(
            f"{name} are too close together for resolution={resolution}: the grid step "
            f"{(upper - lower) / resolution!r} is not a normal float; widen them or lower resolution.",
            argument=name,
        )
    return lower, upper


def check_bounds_levels(levels: Any, name: str = "levels") -> tuple[float, float]:
    """Return ``(q_low, q_high)`` after checking ``0 < q_low < q_high < 1``.

    Parameters
    ----------
    levels : pair of float
        The quantile levels of the lower and upper bound.
    name : str, default="levels"
        The argument's name in error messages.

    Returns
    -------
    tuple of (float, float)
        The two levels as floats.

    Examples
    --------
    >>> from trustlab.privacy.bounds import check_bounds_levels
    >>> check_bounds_levels((0.01, 0.99))
    (0.01, 0.99)
    """
    try:
        q_lo, q_hi = (float(v) for v in levels)
    except (TypeError, ValueError):
        raise ParameterError(
            f"{name} must be a pair (q_low, q_high) of levels in (0, 1), got {levels!r}.", argument=name
        ) from None
    if not (0.0 < q_lo < q_hi < 1.0):
        raise ParameterError(
            f"{name} must satisfy 0 < q_low < q_high < 1, got {levels!r}; e.g. (0.01, 0.99).",
            argument=name,
        )
    return q_lo, q_hi


@validate_params(
    {
        "epsilon": [EPSILON],
        "base": [BASE],
        "neighbouring": [NEIGHBOURING_OPTION],
        "max_buckets": [MAX_BUCKETS],
        "description": [str],
        "accountant": [None, Accountant],
    }
)
def dp_bounds(
    x: Any,
    epsilon: float,
    *,
    anchor: float = 0.0,
    levels: tuple[float, float] = DEFAULT_BOUNDS_LEVELS,
    base: float = 1.001,
    neighbouring: str = "replace",
    n: float | None = None,
    max_buckets: int = 10**6,
    description: str = "clipping bounds",
    accountant: Any = None,
) -> Release:
    """Estimate clipping bounds ``(lower, upper)`` of ``x`` under pure ``epsilon``-DP, with no public range.

    Two above-threshold scans over geometrically growing buckets (Durfee's unbounded
    quantile method) start at the public ``anchor``: one upward for the level
    ``q_high``, one downward (on ``-x``) for the level ``q_low``, each with
    ``epsilon / 2``. Bucket ``k`` on the upper side ends at
    ``anchor + base**(k+1) - 1``; a noisy threshold ``ceil(q n) + Lap`` is compared with
    each bucket's cumulative count plus fresh noise, and the first bucket above it
    gives the estimate. The returned range always contains ``anchor``.

    Parameters
    ----------
    x : array-like of shape (n,)
        The sensitive sample. It may be empty, NaN counts as an absent record and
        ``+-inf`` lies beyond every bucket: no fact about the values raises.
    epsilon : float
        Privacy budget of the whole estimate (both sides), charged in full.
    anchor : float, default 0.0
        Public starting point of both scans: a guess of the data's centre that does
        not come from the data (0 for signed data, the smallest possible value for
        non-negative data). Its distance to the quantiles costs only a logarithmic
        number of buckets. ``|anchor| <= MAX_ABS_BOUND / 2``.
    levels : (float, float), default (0.01, 0.99)
        Quantile levels of the lower and upper bound: with the defaults about 98% of
        the data lies inside the released range (a little more: the scan tends to
        stop late rather than early).
    base : float, default 1.001
        Bucket growth factor (Durfee's default): relative resolution of the bounds.
    neighbouring : {"replace", "add_remove"}, default "replace"
        Under ``"replace"`` (``n`` public) the query noise is ``Lap(2/e2)``; under
        ``"add_remove"`` the counts are monotone and Durfee's ``Lap(1/e2)`` is used,
        and ``n`` (a public or released count) is required.
    n : float, optional
        Public or previously released sample size (required under ``"add_remove"``).
    max_buckets : int, default 1e6
        Each scan stops here and returns the last bucket's edge (at most 1e8).
    description : str
        What the release is, for the ledger.
    accountant : Accountant, optional
        Budget to charge: checked before any noise is drawn, recorded after.

    Returns
    -------
    Release
        ``value`` is the tuple ``(lower, upper)`` with ``lower < anchor < upper``;
        ``epsilon`` is what the estimate spent. Both ends lie within
        ``+-MAX_ABS_BOUND``, so they are always valid bounds for :func:`dp_sum`. A scan
        that never fires (a very small sample, whose noisy threshold stays above its
        size) ends at ``+-MAX_ABS_BOUND``: a useless but still private range; check
        the value before clipping with it.

    Notes
    -----
    Durfee states the method for data with a public lower bound and, for fully
    unbounded data, with two invocations; here both invocations start at one
    public anchor and scan outward (the lower one on ``-x``), splitting
    ``epsilon`` equally. Noise is OpenDP's exact discrete Laplace on integer counts
    (the paper uses continuous Laplace; the above-threshold proof holds for both).

    References
    ----------
    Durfee. "Unbounded Differentially Private Quantile and Maximum Estimation".
    NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> data_rng = np.random.default_rng(0)  # example data, not privacy noise
    >>> x = data_rng.normal(50.0, 10.0, size=10_000)
    >>> r = dp_bounds(x, epsilon=1.0, anchor=40.0)
    >>> lo, hi = r.value
    >>> bool(15 < lo < 35 and 65 < hi < 85), r.epsilon
    (True, 1.0)
    """
    epsilon, base, max_buckets = float(epsilon), float(base), int(max_buckets)
    anchor = check_anchor(anchor, "anchor", max_abs=MAX_ABS_BOUND / 2)
    q_lo, q_hi = check_bounds_levels(levels)
    arr = read_private_sample(x)
    n_public = check_public_n(n, arr.size, neighbouring)
    z = np.sort(arr[~np.isnan(arr)])
    per_side = epsilon / 2.0
    plan = Release(
        value=None,
        epsilon=epsilon,
        mechanism="two above-threshold scans over geometric buckets (Durfee)",
        parameters={
            "levels": (q_lo, q_hi),
            "anchor": anchor,
            "base": base,
            "epsilon_per_side": per_side,
            "threshold_scale": 2.0 / per_side,
            "query_scale": (2.0 if neighbouring == "replace" else 1.0) * 2.0 / per_side,
            "neighbouring": NEIGHBOURING[neighbouring],
            "grid": "bucket edges anchor +- (base**k - 1), clamped to +-MAX_ABS_BOUND",
            "note": (
                f"bounds estimated privately from the data; epsilon={epsilon:.6g} charged for them "
                "(nothing read off the data for free)"
            ),
        },
        description=description,
        sensitivity=1.0,  # of each cumulative count the scans compare
    )
    return charge(
        accountant,
        plan,
        lambda: _bounds_sorted(z, epsilon, anchor, q_lo, q_hi, base, neighbouring, n_public, max_buckets),
    )


def _bounds_sorted(
    z: np.ndarray,
    epsilon: float,
    anchor: float,
    q_lo: float,
    q_hi: float,
    base: float,
    neighbouring: str,
    n_public: float,
    max_buckets: int,
) -> tuple[float, float]:
    """Both scans on the sorted sample ``z``; ``epsilon / 2`` each.

    Clipping to the anchor is not needed: the upper scan counts values below edges
    that lie above the anchor, the lower one values above edges below it. The
    result is post-processed into ``[-MAX_ABS_BOUND, MAX_ABS_BOUND]`` with
    ``lower < anchor < upper`` strictly (an edge next to a large anchor can round
    onto it in float64), so later releases can always use it as bounds.
    """
    half = epsilon / 2.0
    # A public, data-independent cap: a scan stops, at the latest, at the first bucket edge
    # beyond 2 * MAX_ABS_BOUND from the anchor (the result is clamped to +-MAX_ABS_BOUND).
    cap = min(max_buckets, math.ceil(math.log1p(2.0 * MAX_ABS_BOUND) / math.log(base)))
    noise = add_discrete_laplace
    with np.errstate(over="ignore"):
        upper = scan(z, q_hi, half, anchor, base, neighbouring, n_public, cap, add_noise=noise)
        lower = -scan(z, 1.0 - q_lo, half, -anchor, base, neighbouring, n_public, cap, True, add_noise=noise)
    lower = min(float(np.clip(lower, -MAX_ABS_BOUND, MAX_ABS_BOUND)), math.nextafter(anchor, -math.inf))
    upper = max(float(np.clip(upper, -MAX_ABS_BOUND, MAX_ABS_BOUND)), math.nextafter(anchor, math.inf))
    return lower, upper
