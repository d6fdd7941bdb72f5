"""Differentially private counts, histograms, sums and means.

Neighbouring relation: add or remove one record (so the number of records is
itself private and is released with noise). All noise is integer discrete
Laplace noise added inside OpenDP (:func:`~trustlab.privacy.samplers.add_discrete_laplace`);
real-valued sums are taken on a public fixed-point grid so that no floating-point
arithmetic touches the noise, and every float output is a fixed public function
of noisy integers.

**What may raise.** Only public facts raise: a bad ``epsilon``, ``resolution``,
``bounds``, ``n_bins``, a wrong shape or a non-numeric type. Facts about the private
values never do: an empty input is a legal table (its sum is noise on 0), a
missing value (NaN) counts as an absent record, ``+-inf`` is clipped to the bounds,
and a histogram code that names no bin is left out, exactly as if that record
were not in the table (a neighbouring table under add/remove).

:func:`dp_sum` and :func:`dp_mean` take public ``bounds``; with ``bounds=None`` they
estimate them privately with :func:`trustlab.privacy.bounds.dp_bounds`, spending a
share ``bounds_share`` of ``epsilon`` on it (never reading them off the data). The sum
mechanism (fixed-point grid units, shared with distributed tables) is in
:mod:`trustlab.privacy._sums`; :func:`dp_sum` and :func:`dp_sum_of_units` are re-exported here.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, Interval, validate_params
from trustlab._validation import check_epsilon
from trustlab.errors import DataError
from trustlab.privacy._inputs import read_private_sample
from trustlab.privacy._sums import (
    MAX_RESOLUTION,
    NEIGHBOURING,
    SUM_CAP,
    SUM_MEAN_CONSTRAINTS,
    check_resolution,
    check_share,
    dp_sum,
    dp_sum_of_units,
    sum_release,
)
from trustlab.privacy._sums import grid_units as grid_units  # re-exported (the Data section's)
from trustlab.privacy._sums import release_grid_sum as release_grid_sum  # re-exported
from trustlab.privacy.accounting import Accountant, charge, check_accountant
from trustlab.privacy.bounds import DEFAULT_BOUNDS_LEVELS, check_bounds_levels, check_public_bounds, dp_bounds
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace

__all__ = [
    "MAX_BINS",
    "MAX_RESOLUTION",
    "dp_count",
    "dp_histogram",
    "dp_mean",
    "dp_sum",
    "dp_sum_of_units",
]

MAX_BINS = 10**7
"""Largest number of bins :func:`dp_histogram` releases (one noisy count each)."""


@validate_params(
    {
        "n": [Interval(numbers.Integral, 0, None, closed="left")],
        "epsilon": [EPSILON],
        "description": [str],
        "accountant": [None, Accountant],
    }
)
def dp_count(n: int, epsilon: float, *, description: str = "count", accountant: Any = None) -> Release:
    """Release a count (sensitivity 1) with discrete Laplace noise of scale ``1/epsilon``.

    The noisy count is post-processed to be at least 0 (a count cannot be
    negative); it is an integer, so it lies on the public grid of the integers.

    Parameters
    ----------
    n : int
        The exact count (``>= 0``; saturated at ``2**62``).
    epsilon : float
        Privacy budget.
    description : str
        What is counted, for the ledger.
    accountant : Accountant, optional
        Budget to charge: the planned cost is checked before any noise is drawn
        (:class:`~trustlab.errors.BudgetExceededError`, nothing drawn) and the release is
        recorded after.

    Returns
    -------
    Release
        ``value`` is a non-negative ``int``.

    References
    ----------
    Dwork, McSherry, Nissim, Smith. "Calibrating Noise to Sensitivity in Private
    Data Analysis". TCC 2006. Canonne, Kamath, Steinke. "The Discrete Gaussian for
    Differential Privacy". NeurIPS 2020 (the exact discrete Laplace sampler).

    Examples
    --------
    >>> r = dp_count(1000, epsilon=1.0)
    >>> r.epsilon, r.mechanism, r.value >= 0, r.measure.value, r.sensitivity
    (1.0, 'discrete Laplace', True, 'pure', 1.0)
    """
    # Saturate the private count at 2**62 (a 1-Lipschitz clamp: sensitivity stays 1) rather than
    # raise on it: no table is that large, and no exception may depend on a private value.
    epsilon, n = float(epsilon), min(int(n), SUM_CAP)
    plan = Release(
        value=None,
        epsilon=epsilon,
        mechanism="discrete Laplace",
        parameters={
            "sensitivity": 1,
            "scale": 1.0 / epsilon,
            "neighbouring": NEIGHBOURING,
            "note": "noisy count clipped at 0 (post-processing)",
        },
        description=description,
        sensitivity=1.0,
        noise_scale=1.0 / epsilon,
    )

    def draw() -> int:
        noisy = max(0, int(add_discrete_laplace(n, 1.0 / epsilon)))
        return noisy

    return charge(accountant, plan, draw)


def _check_codes(codes: Any) -> np.ndarray:
    if isinstance(codes, str | bytes) or codes is None:
        raise DataError("codes must be a 1-d array of integer bin indices.", argument="codes")
    arr = np.asarray(codes)
    if arr.ndim != 1:
        raise DataError(f"codes must be 1-dimensional, got shape {arr.shape}.", argument="codes")
    if arr.dtype.kind not in "iubf":
        raise DataError(
            f"codes must be integer bin indices, got dtype {arr.dtype}; map each record to a public "
            "bin index (e.g. with a public category list) first.",
            argument="codes",
        )
    return arr


@validate_params(
    {
        "n_bins": [Interval(numbers.Integral, 1, MAX_BINS, closed="both")],
        "epsilon": [EPSILON],
        "description": [str],
        "accountant": [None, Accountant],
    }
)
def dp_histogram(
    codes: Any, n_bins: int, epsilon: float, *, description: str = "histogram", accountant: Any = None
) -> Release:
    """Release the counts of integer codes ``0..n_bins-1`` under ``epsilon``-DP.

    Each record falls in at most one bin, so adding or removing a record changes
    one count by one: L1 sensitivity 1, discrete Laplace of scale ``1/epsilon`` per bin
    (parallel composition). The bin set is public (``n_bins``), never read off the data.

    A record whose code names no bin (out of range, not an integer, NaN) is left out
    of every count, exactly as if it were absent (its neighbouring table); no error
    depends on the private values. Map values to a public "missing/other" bin first
    if they should be counted.

    Parameters
    ----------
    codes : array-like of shape (n,)
        Integer (or integral float) bin index of each record.
    n_bins : int
        Public number of bins, ``1 <= n_bins <= MAX_BINS``.
    epsilon : float
        Privacy budget (every bin gets the full budget: parallel composition).
    description : str
        What is counted, for the ledger.
    accountant : Accountant, optional
        Budget to charge, checked before any noise is drawn (see :func:`dp_count`).

    Returns
    -------
    Release
        ``value`` is an ``int64`` array of length ``n_bins``: unbiased noisy counts,
        which may be negative. Sums of bins stay unbiased only on these raw values;
        clip at 0 for display (post-processing) after any sums.

    Examples
    --------
    >>> r = dp_histogram([0, 1, 1, 2], 3, epsilon=1.0)
    >>> r.value.shape, r.parameters["scale"]
    ((3,), 1.0)
    """
    epsilon, n_bins = float(epsilon), int(n_bins)
    arr = _check_codes(codes)
    if arr.dtype.kind == "f":
        valid = np.isfinite(arr) & (arr == np.floor(arr)) & (arr >= 0) & (arr < n_bins)
    else:
        valid = (arr >= 0) & (arr < n_bins)
    counts = np.bincount(arr[valid].astype(np.int64), minlength=n_bins)
    return release_counts(counts, epsilon, description=description, accountant=accountant)


def release_counts(
    counts: np.ndarray, epsilon: float, *, description: str = "histogram", accountant: Any = None
) -> Release:
    """The mechanism of :func:`dp_histogram` on exact counts computed elsewhere (private helper).

    ``counts`` are the exact per-bin counts of records that each fall in at most one bin
    (e.g. merged from the partitions of a distributed table: :mod:`trustlab.compute`), so
    adding or removing a record changes one count by one. Its length is the public bin
    count. Nothing about the counts' values raises: the caller has checked their type.
    """
    epsilon = float(epsilon)
    counts = np.asarray(counts, dtype=np.int64).reshape(-1)
    n_bins = int(counts.size)

    def draw() -> np.ndarray:
        noisy = add_discrete_laplace(counts, 1.0 / epsilon)
        return noisy

    plan = Release(
        value=None,
        epsilon=epsilon,
        mechanism="discrete Laplace",
        parameters={
            "sensitivity": 1,
            "scale": 1.0 / epsilon,
            "bins": n_bins,
            "neighbouring": NEIGHBOURING,
            "note": "records whose code names no bin are left out (as if absent)",
        },
        description=description,
        sensitivity=1.0,
        noise_scale=1.0 / epsilon,
    )
    return charge(accountant, plan, draw)


@validate_params({k: v for k, v in SUM_MEAN_CONSTRAINTS.items() if k != "n"})
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
    accountant: Any = None,
) -> tuple[float, list[Release]]:
    """Release the mean of ``x`` clipped to ``bounds``: a noisy sum over a noisy count.

    ``count_share`` of ``epsilon`` goes to the count of present (non-NaN) values, the
    rest to the shifted sum. The mean ``lower + sum / count`` is post-processing of
    these two integer releases, clamped to the bounds; it is NaN exactly when the
    *noisy* count is below 1 (a rule on released values, so an empty table releases
    the same structure as any other).

    With ``bounds=None`` the bounds are estimated privately: ``bounds_share`` of
    ``epsilon`` goes to :func:`~trustlab.privacy.bounds.dp_bounds` (levels
    ``bounds_levels``, scans outward from the public ``anchor``, threshold from the
    released count), and ``count_share`` splits the rest between count and sum.

    With an ``accountant`` the planned parts (count, bounds, sum) are checked together
    before any noise is drawn and each release is recorded after.

    Parameters
    ----------
    x : array-like of shape (n,)
        The private values; may be empty. NaN counts as an absent record, ``+-inf``
        is clipped.
    bounds : (float, float) or None
        Public ``(lower, upper)``, or None to estimate them privately.
    epsilon : float
        Privacy budget in total (count, bounds and sum); pure epsilon-DP under
        add/remove-one-record neighbours.
    count_share : float, default 0.5
        Share of the count in the count-and-sum budget, in ``(0, 1)``.
    resolution : int, default 2**12
        Grid steps between the bounds for the sum (as in :func:`dp_sum`).
    description : str, default "mean"
        Prefix of the releases' descriptions.
    bounds_share : float, default 0.25
        Share of ``epsilon`` spent on the bounds when ``bounds=None``, in ``(0, 1)``.
    anchor : float, default 0.0
        Public point the private bounds scans start from (``bounds=None`` only).
    bounds_levels : (float, float), default (0.01, 0.99)
        Quantile levels of the estimated bounds (``bounds=None`` only).
    accountant : Accountant, optional
        Budget to charge all parts: checked before any noise is drawn, recorded after.

    Returns
    -------
    mean : float
        The DP mean in ``[lower, upper]``, or NaN when the noisy count is below 1.
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
    count_share = check_share(count_share, "count_share", epsilon)
    accountant = check_accountant(accountant)
    if bounds is None:
        bounds_share = check_share(bounds_share, "bounds_share", epsilon)
        bounds_levels = check_bounds_levels(bounds_levels, "bounds_levels")
        sum_epsilon = epsilon * (1 - bounds_share)
        resolution = check_resolution(resolution, sum_epsilon * (1 - count_share))
        arr = read_private_sample(x)
        if accountant is not None:
            accountant.check(
                Release(None, sum_epsilon * count_share),
                Release(None, epsilon * bounds_share),
                Release(None, sum_epsilon * (1 - count_share)),
            )
        count = dp_count(
            int(np.count_nonzero(~np.isnan(arr))),
            sum_epsilon * count_share,
            description=f"{description}: count",
        )
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
        sum_epsilon = epsilon
        resolution = check_resolution(resolution, sum_epsilon * (1 - count_share))
        lower, upper = check_public_bounds(bounds, resolution=resolution)
        arr = read_private_sample(x)
        if accountant is not None:
            accountant.check(Release(None, epsilon * count_share), Release(None, epsilon * (1 - count_share)))
        count = dp_count(
            int(np.count_nonzero(~np.isnan(arr))), epsilon * count_share, description=f"{description}: count"
        )
        releases = [count]
    total = sum_release(
        arr, (lower, upper), sum_epsilon * (1 - count_share), resolution, f"{description}: clipped sum"
    )
    n = count.value
    mean = math.nan if n < 1 else float(np.clip(lower + total.value / n, lower, upper))
    if accountant is not None:
        for rel in (*releases, total):
            accountant.record(rel)
    return mean, [*releases, total]
