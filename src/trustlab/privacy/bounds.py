"""Private clipping bounds: estimate a range for a sensitive column under pure DP.

Most DP statistics (sums, means, histograms over a range) need public bounds on
the data. When the user has none, reading them off the data (``min``/``max``)
breaks the guarantee. :func:`dp_bounds` estimates a low and a high quantile with
Durfee's unbounded quantile method, which needs only a public anchor, and charges
the epsilon it uses; the result is a :class:`~trustlab.privacy.release.Release`
that can be recorded in an :class:`~trustlab.privacy.accounting.Accountant` and
whose value can then serve as the bounds of later releases (post-processing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab._validation import check_epsilon, check_positive_int
from trustlab.errors import ParameterError
from trustlab.privacy.quantiles import (
    NEIGHBOURING,
    _check_anchor,
    _check_base,
    _check_sample,
    _public_n,
    _unbounded_sorted,
    check_neighbouring,
)
from trustlab.privacy.release import Release

__all__ = ["DEFAULT_BOUNDS_LEVELS", "check_bounds_levels", "dp_bounds"]

DEFAULT_BOUNDS_LEVELS = (0.01, 0.99)
# Largest bound returned: finite, and (upper - lower) stays finite too.
_HUGE = 1e300


def check_bounds_levels(levels: Any, name: str = "levels") -> tuple[float, float]:
    """Return ``(q_low, q_high)`` after checking ``0 < q_low < q_high < 1``."""
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
        The sensitive sample (finite values).
    epsilon : float
        Privacy budget of the whole estimate (both sides), charged in full.
    anchor : float, default 0.0
        Public starting point of both scans: a guess of the data's centre that does
        not come from the data (0 for signed data, the smallest possible value for
        non-negative data). Its distance to the quantiles costs only a logarithmic
        number of buckets.
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
        Each scan stops here and returns the last bucket's edge.
    description : str
        What the release is, for the ledger.

    Returns
    -------
    Release
        ``value`` is the tuple ``(lower, upper)`` with ``lower < anchor < upper``;
        ``epsilon`` is what the estimate spent. A scan that never fires (a very small
        sample, whose noisy threshold stays above its size) ends at ``+-1e300``: a
        useless but still private range; check the value before clipping with it.

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
    epsilon = check_epsilon(epsilon)
    anchor = _check_anchor(anchor, "anchor")
    q_lo, q_hi = check_bounds_levels(levels)
    base = _check_base(base)
    neighbouring = check_neighbouring(neighbouring)
    max_buckets = check_positive_int(max_buckets, "max_buckets")
    arr = _check_sample(x)
    n_public = _public_n(n, arr.size, neighbouring)
    z = np.sort(arr)
    lower, upper = _bounds_sorted(z, epsilon, anchor, q_lo, q_hi, base, neighbouring, n_public, max_buckets)
    per_side = epsilon / 2.0
    return Release(
        value=(lower, upper),
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
            "note": (
                f"bounds estimated privately from the data; epsilon={epsilon:.6g} charged for them "
                "(nothing read off the data for free)"
            ),
        },
        description=description,
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
    that lie above the anchor, the lower one values above edges below it.
    """
    half = epsilon / 2.0
    with np.errstate(over="ignore"):
        upper = _unbounded_sorted(z, q_hi, half, anchor, base, neighbouring, n_public, max_buckets)
        lower = -_unbounded_sorted(
            z, 1.0 - q_lo, half, -anchor, base, neighbouring, n_public, max_buckets, True
        )
    # A scan that never fires (tiny n, threshold above n) ends at the last finite bucket
    # edge (~1e307); clamp to +-1e300 so that the range stays usable in arithmetic
    # (post-processing).
    return float(np.clip(lower, -_HUGE, _HUGE)), float(np.clip(upper, -_HUGE, _HUGE))
