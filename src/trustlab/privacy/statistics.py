"""Differentially private counts, histograms, sums and means.

Neighbouring relation: add or remove one record (so the number of records is
itself private and is released with noise). All noise is integer discrete
Laplace noise from :mod:`trustlab.privacy.samplers`; real-valued sums are taken on
a public fixed-point grid so that no floating-point arithmetic touches the noise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab._validation import check_bounds, check_epsilon
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import discrete_laplace

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
    noisy = int(n) + int(discrete_laplace(1.0 / epsilon, 1)[0])
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
    if n_bins < 1:
        raise ParameterError(f"n_bins must be >= 1, got {n_bins}.", argument="n_bins")
    if codes.size and (codes.min() < 0 or codes.max() >= n_bins):
        raise DataError(
            f"codes must lie in 0..{n_bins - 1}; map unknown values to a public 'other' bin.",
            argument="codes",
        )
    counts = np.bincount(codes.astype(np.int64), minlength=n_bins)
    noisy = counts + discrete_laplace(1.0 / epsilon, n_bins)
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
    bounds: tuple[float, float],
    epsilon: float,
    *,
    resolution: int = 2**12,
    description: str = "sum",
) -> Release:
    """Release the sum of ``x`` clipped to public ``bounds`` under ``epsilon``-DP.

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
    """
    epsilon = check_epsilon(epsilon)
    lower, upper = check_bounds(bounds)
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise DataError(f"x must be 1-dimensional, got shape {arr.shape}.", argument="x")
    if np.isnan(arr).any():
        raise DataError("x contains NaN; drop missing values first.", argument="x")
    step = _grid((lower, upper), resolution)
    units = np.rint((np.clip(arr, lower, upper) - lower) / step).astype(np.int64)
    noisy_units = int(units.sum()) + int(discrete_laplace(resolution / epsilon, 1)[0])
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
    bounds: tuple[float, float],
    epsilon: float,
    *,
    count_share: float = 0.5,
    resolution: int = 2**12,
    description: str = "mean",
) -> tuple[float, list[Release]]:
    """Release the mean of ``x`` clipped to public ``bounds``: a noisy sum over a noisy count.

    ``count_share`` of ``epsilon`` goes to the count, the rest to the shifted sum.
    The result is clamped to the bounds (post-processing).

    Returns
    -------
    mean : float
        The DP mean, or NaN when the noisy count is below 1.
    releases : list of Release
        The count and the sum releases, whose epsilons add up to ``epsilon``.
    """
    epsilon = check_epsilon(epsilon)
    lower, upper = check_bounds(bounds)
    if not 0 < count_share < 1:
        raise ParameterError(f"count_share must be in (0, 1), got {count_share}.", argument="count_share")
    arr = np.asarray(x, dtype=float)
    count = dp_count(arr.size, epsilon * count_share, description=f"{description}: count")
    total = dp_sum(
        arr,
        (lower, upper),
        epsilon * (1 - count_share),
        resolution=resolution,
        description=f"{description}: clipped sum",
    )
    n = count.value
    mean = math.nan if n < 1 else float(np.clip(lower + total.value / n, lower, upper))
    return mean, [count, total]
