"""Differentially private counts, histograms, sums and means.

Neighbouring relation: add or remove one record (so the number of records is
itself private and is released with noise). All noise is integer discrete
Laplace noise from :mod:`trustlab.privacy.samplers`; real-valued sums are taken on
a public fixed-point grid so that no floating-point arithmetic touches the noise.

:func:`dp_sum` and :func:`dp_mean` take public ``bounds``; with ``bounds=None`` they
estimate them privately with :func:`trustlab.privacy.bounds.dp_bounds`, spending a
share ``bounds_share`` of ``epsilon`` on it (never reading them off the data).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab._validation import check_bounds, check_epsilon, check_fraction, check_positive_int
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.bounds import DEFAULT_BOUNDS_LEVELS, check_bounds_levels, dp_bounds
from trustlab.privacy.quantiles import _check_sample
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace

__all__ = ["dp_count", "dp_histogram", "dp_mean", "dp_sum"]

NEIGHBOURING = "add/remove one record"


def dp_count(n: int, epsilon: float, *, description: str = "count") -> Release:
    """Release a count (sensitivity 1) with discrete Laplace noise of scale ``1/epsilon``.

    Examples
    --------
    >>> r = dp_count(1000, epsilon=1.0)
    >>> r.epsilon, r.mechanism
    (1.0, 'discrete Laplace')
    """
    epsilon = check_epsilon(epsilon)
    n = check_positive_int(n, "n", minimum=0)
    noisy = int(add_discrete_laplace(n, 1.0 / epsilon))
    return Release(
        value=noisy,
        epsilon=epsilon,
        mechanism="discrete Laplace",
        parameters={"sensitivity": 1, "scale": 1.0 / epsilon, "neighbouring": NEIGHBOURING},
        description=description,
    )


def dp_histogram(codes: Any, n_bins: int, epsilon: float, *, description: str = "histogram") -> Release:
    """Release the counts of integer codes ``0..n_bins-1`` under ``epsilon``-DP.

    Each record falls in exactly one bin, so adding or removing a record changes
    one count by one: L1 sensitivity 1, discrete Laplace of scale ``1/epsilon`` per bin
    (parallel composition). The bin set is public (``n_bins``), never read off the data.

    Returns
    -------
    Release
        ``value`` is an ``int64`` array of length ``n_bins`` (noisy counts, may be negative).
    """
    epsilon = check_epsilon(epsilon)
    codes = np.asarray(codes)
    if codes.ndim != 1:
        raise DataError(f"codes must be 1-dimensional, got shape {codes.shape}.", argument="codes")
    n_bins = check_positive_int(n_bins, "n_bins")
    if codes.dtype.kind not in "iub" and not (
        codes.dtype.kind == "f" and np.isfinite(codes).all() and (codes == np.floor(codes)).all()
    ):
        raise DataError(
            f"codes must be integer bin indices, got dtype {codes.dtype} with non-integer or missing "
            "values; map each record to a public bin (e.g. a 'missing' bin) first.",
            argument="codes",
        )
    if codes.size and (codes.min() < 0 or codes.max() >= n_bins):
        raise DataError(
            f"codes must lie in 0..{n_bins - 1}; map unknown values to a public 'other' bin.",
            argument="codes",
        )
    counts = np.bincount(codes.astype(np.int64), minlength=n_bins)
    noisy = add_discrete_laplace(counts, 1.0 / epsilon)
    return Release(
        value=noisy,
        epsilon=epsilon,
        mechanism="discrete Laplace",
        parameters={
            "sensitivity": 1,
            "scale": 1.0 / epsilon,
            "bins": n_bins,
            "neighbouring": NEIGHBOURING,
        },
        description=description,
    )


def _grid(bounds: tuple[float, float], resolution: int) -> float:
    return (bounds[1] - bounds[0]) / resolution


def dp_sum(
    x: Any,
    bounds: tuple[float, float] | None,
    epsilon: float,
    *,
    resolution: int = 2**12,
    description: str = "sum",
    n: float | None = None,
    bounds_share: float = 0.25,
    anchor: float = 0.0,
    bounds_levels: tuple[float, float] = DEFAULT_BOUNDS_LEVELS,
) -> Release:
    """Release the sum of ``x`` clipped to public ``bounds`` under ``epsilon``-DP.

    With ``bounds=None`` the bounds are first estimated privately by
    :func:`~trustlab.privacy.bounds.dp_bounds` (levels ``bounds_levels``, scans from the
    public ``anchor``) with ``bounds_share * epsilon``; the sum gets the rest. Under this
    module's add/remove relation the scans need a public or released count ``n``
    (e.g. ``dp_count(...).value``). The release's ``epsilon`` is the total and its
    parameters name the estimated bounds and what they cost.

    Each value is clipped to ``[lower, upper]``, shifted by ``-lower`` and rounded to
    the public grid of step ``(upper - lower) / resolution``; the integer sum of
    grid units has sensitivity ``resolution`` and gets discrete Laplace noise of
    scale ``resolution / epsilon``. The released value is
    ``lower * n_true + step * noisy_units`` only through :func:`dp_mean`; here
    ``value`` is the noisy *shifted* sum in data units, ``sum(clip(x) - lower)``.

    Notes
    -----
    Rounding to the grid moves each value by at most half a step, a bias of at
    most ``(upper - lower) / (2 * resolution)`` in a mean. Values outside the
    bounds are always clipped; the release says so whether or not any were.

    Examples
    --------
    >>> import numpy as np
    >>> data_rng = np.random.default_rng(0)  # example data, not privacy noise
    >>> x = data_rng.normal(100.0, 15.0, size=5000)
    >>> r = dp_sum(x, None, epsilon=1.0, n=5000, anchor=100.0)
    >>> r.epsilon, r.parameters["bounds_epsilon"]
    (1.0, 0.25)
    """
    epsilon = check_epsilon(epsilon)
    if bounds is None:
        bounds_share = check_fraction(bounds_share, "bounds_share")
        bounds_levels = check_bounds_levels(bounds_levels, "bounds_levels")
        if n is None:
            raise ParameterError(
                "dp_sum with bounds=None needs n, a public or released count (e.g. "
                "dp_count(len(x), eps).value), for the private bounds estimate; or pass bounds.",
                argument="n",
            )
        est = dp_bounds(
            x,
            epsilon * bounds_share,
            anchor=anchor,
            levels=bounds_levels,
            neighbouring="add_remove",
            n=max(float(n), 1.0),
            description=f"{description}: clipping bounds",
        )
        rel = dp_sum(
            x, est.value, epsilon * (1 - bounds_share), resolution=resolution, description=description
        )
        return _with_estimated_bounds(rel, est, epsilon)
    lower, upper = check_bounds(bounds)
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise DataError(f"x must be 1-dimensional, got shape {arr.shape}.", argument="x")
    if np.isnan(arr).any():
        raise DataError("x contains NaN; drop missing values first.", argument="x")
    step = _grid((lower, upper), resolution)
    units = np.rint((np.clip(arr, lower, upper) - lower) / step).astype(np.int64)
    noisy_units = int(add_discrete_laplace(int(units.sum()), resolution / epsilon))
    return Release(
        value=noisy_units * step,
        epsilon=epsilon,
        mechanism="discrete Laplace on a fixed-point grid",
        parameters={
            "bounds": (lower, upper),
            "shift": lower,
            "grid_step": step,
            "sensitivity": upper - lower,
            "scale": (upper - lower) / epsilon,
            "neighbouring": NEIGHBOURING,
            "note": "inputs clipped to bounds and shifted by -lower",
        },
        description=description,
    )


def dp_mean(
    x: Any,
    bounds: tuple[float, float] | None,
    epsilon: float,
    *,
    count_share: float = 0.5,
    resolution: int = 2**12,
    description: str = "mean",
    bounds_share: float = 0.25,
    anchor: float = 0.0,
    bounds_levels: tuple[float, float] = DEFAULT_BOUNDS_LEVELS,
) -> tuple[float, list[Release]]:
    """Release the mean of ``x`` clipped to ``bounds``: a noisy sum over a noisy count.

    ``count_share`` of ``epsilon`` goes to the count, the rest to the shifted sum.
    The result is clamped to the bounds (post-processing).

    With ``bounds=None`` the bounds are estimated privately: ``bounds_share`` of
    ``epsilon`` goes to :func:`~trustlab.privacy.bounds.dp_bounds` (levels
    ``bounds_levels``, scans outward from the public ``anchor``, threshold from the
    released count), and ``count_share`` splits the rest between count and sum.

    Returns
    -------
    mean : float
        The DP mean, or NaN when the noisy count is below 1.
    releases : list of Release
        The count, (the estimated bounds,) and the sum releases, whose epsilons add
        up to ``epsilon``.

    Examples
    --------
    >>> import numpy as np
    >>> data_rng = np.random.default_rng(0)  # example data, not privacy noise
    >>> x = data_rng.normal(100.0, 15.0, size=10_000)
    >>> m, rels = dp_mean(x, None, epsilon=1.0, anchor=100.0)
    >>> bool(abs(m - 100.0) < 2.0), [r.epsilon for r in rels]
    (True, [0.375, 0.25, 0.375])
    """
    epsilon = check_epsilon(epsilon)
    count_share = check_fraction(count_share, "count_share")
    if bounds is None:
        bounds_share = check_fraction(bounds_share, "bounds_share")
        bounds_levels = check_bounds_levels(bounds_levels, "bounds_levels")
        arr = _check_sample(x)
        sum_epsilon = epsilon * (1 - bounds_share)
        count = dp_count(arr.size, sum_epsilon * count_share, description=f"{description}: count")
        est = dp_bounds(
            arr,
            epsilon * bounds_share,
            anchor=anchor,
            levels=bounds_levels,
            neighbouring="add_remove",
            n=max(float(count.value), 1.0),
            description=f"{description}: clipping bounds",
        )
        lower, upper = est.value
        releases = [count, est]
    else:
        lower, upper = check_bounds(bounds)
        arr = np.asarray(x, dtype=float)
        sum_epsilon = epsilon
        count = dp_count(arr.size, epsilon * count_share, description=f"{description}: count")
        releases = [count]
    total = dp_sum(
        arr,
        (lower, upper),
        sum_epsilon * (1 - count_share),
        resolution=resolution,
        description=f"{description}: clipped sum",
    )
    n = count.value
    mean = math.nan if n < 1 else float(np.clip(lower + total.value / n, lower, upper))
    return mean, [*releases, total]


def _with_estimated_bounds(rel: Release, est: Release, epsilon: float) -> Release:
    """The sum release on estimated bounds, charged with the bounds' epsilon too."""
    lower, upper = est.value
    return Release(
        value=rel.value,
        epsilon=epsilon,
        mechanism=f"{rel.mechanism}, bounds by {est.mechanism}",
        parameters={
            **rel.parameters,
            "bounds_epsilon": est.epsilon,
            "sum_epsilon": rel.epsilon,
            "bounds_levels": est.parameters["levels"],
            "anchor": est.parameters["anchor"],
            "note": (
                f"bounds ({lower:.6g}, {upper:.6g}) estimated privately with epsilon={est.epsilon:.6g} "
                "(included in this release's epsilon); inputs clipped to them and shifted by -lower"
            ),
        },
        description=rel.description,
    )
