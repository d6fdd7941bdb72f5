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
share ``bounds_share`` of ``epsilon`` on it (never reading them off the data).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, Interval, validate_params
from trustlab._validation import check_epsilon, check_fraction
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._inputs import read_private_sample
from trustlab.privacy.accounting import Accountant, charge, check_accountant
from trustlab.privacy.bounds import (
    DEFAULT_BOUNDS_LEVELS,
    check_bounds_levels,
    check_public_bounds,
    dp_bounds,
)
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import MAX_INTEGER_SCALE, add_discrete_laplace

__all__ = [
    "MAX_BINS",
    "MAX_RESOLUTION",
    "dp_count",
    "dp_histogram",
    "dp_mean",
    "dp_sum",
    "dp_sum_of_units",
]

NEIGHBOURING = "add/remove one record"

MAX_RESOLUTION = 2**32
"""Largest ``resolution`` (grid steps between the bounds) of :func:`dp_sum` and :func:`dp_mean`.

Each value becomes at most ``resolution`` grid units; the exact sum is formed in
arbitrary precision and saturated at ``2**62`` units before the noise (a
1-Lipschitz clamp, so the sensitivity stays ``resolution``), which no table of
fewer than ``2**30`` records reaches at this cap.
"""

MAX_BINS = 10**7
"""Largest number of bins :func:`dp_histogram` releases (one noisy count each)."""

_SUM_CAP = 2**62


def _check_resolution(resolution: Any, epsilon: float) -> int:
    if (
        isinstance(resolution, bool)
        or not isinstance(resolution, numbers.Integral)
        or not (1 <= int(resolution) <= MAX_RESOLUTION)
    ):
        raise ParameterError(
            f"resolution must be an integer in [1, 2**32] (the number of grid steps between the "
            f"bounds), got {resolution!r}; the default 2**12 suits most uses.",
            argument="resolution",
        )
    resolution = int(resolution)
    if resolution / epsilon > MAX_INTEGER_SCALE:
        raise ParameterError(
            f"resolution / epsilon = {resolution / epsilon:.3g} exceeds {MAX_INTEGER_SCALE:.3g}, the "
            "largest integer noise scale served exactly; lower resolution or raise epsilon.",
            argument="resolution",
        )
    return resolution


def _check_share(share: Any, name: str, epsilon: float) -> float:
    """A fraction in (0, 1) that leaves both parts of ``epsilon`` a valid budget (>= 1e-12)."""
    share = check_fraction(share, name)
    if min(share, 1.0 - share) * epsilon < 1e-12:
        argument = "epsilon" if epsilon < 2e-12 else name
        raise ParameterError(
            f"{name}={share!r} splits epsilon={epsilon!r} into a part below 1e-12 (every release "
            f"would be pure noise); raise epsilon or use a {name} nearer 0.5.",
            argument=argument,
        )
    return share


def _step(lower: float, upper: float, resolution: int) -> float:
    return (upper - lower) / resolution


def _grid_units(arr: np.ndarray, lower: float, upper: float, resolution: int) -> int:
    """Exact integer sum of the grid units ``rint((clip(x) - lower) / step)``, saturated at ``2**62``.

    NaN entries contribute nothing (an absent record); ``+-inf`` is clipped. Every
    unit lies in ``0 .. resolution`` whatever the float rounding, and the sum is
    accumulated in chunks small enough for int64, then in Python integers.
    """
    present = arr[~np.isnan(arr)]
    step = _step(lower, upper, resolution)
    with np.errstate(over="ignore", invalid="ignore"):
        units = np.rint((np.clip(present, lower, upper) - lower) / step)
    units = np.clip(units, 0, resolution).astype(np.int64)
    chunk = max(1, (2**62) // resolution)
    total = sum(int(units[i : i + chunk].sum()) for i in range(0, units.size, chunk))
    return min(total, _SUM_CAP)


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
    epsilon, n = float(epsilon), min(int(n), _SUM_CAP)
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


_SUM_MEAN_CONSTRAINTS: dict[str, Any] = {
    "epsilon": [EPSILON],
    "n": [None, Interval(numbers.Real, None, None, closed="neither")],
    "anchor": [Interval(numbers.Real, None, None, closed="neither")],
    "description": [str],
    "accountant": [None, Accountant],
}
"""Declared constraints of :func:`dp_sum` and :func:`dp_mean` (the rest: rules across arguments)."""


@validate_params(_SUM_MEAN_CONSTRAINTS)
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
    accountant: Any = None,
) -> Release:
    """Release the sum of ``x`` clipped to public ``bounds`` under ``epsilon``-DP.

    Each value is clipped to ``[lower, upper]``, shifted by ``-lower`` and rounded to
    the public grid of step ``(upper - lower) / resolution``; the integer sum of
    grid units (saturated at ``2**62``, a 1-Lipschitz clamp) has sensitivity
    ``resolution`` and gets discrete Laplace noise of scale ``resolution / epsilon``.
    ``value`` is the noisy *shifted* sum in data units, ``sum(clip(x) - lower)``,
    post-processed to be at least 0: a multiple of the grid step (the float product
    ``noisy_units * step``, a fixed function of the noisy integer).

    With ``bounds=None`` the bounds are first estimated privately by
    :func:`~trustlab.privacy.bounds.dp_bounds` (levels ``bounds_levels``, scans from the
    public ``anchor``) with ``bounds_share * epsilon``; the sum gets the rest. Under this
    module's add/remove relation the scans need a public or released count ``n``
    (e.g. ``dp_count(...).value``). The release's ``epsilon`` is the total and its
    parameters name the estimated bounds and what they cost.

    Parameters
    ----------
    x : array-like of shape (n,)
        The private values; may be empty. NaN counts as an absent record, ``+-inf``
        is clipped.
    bounds : (float, float) or None
        Public ``(lower, upper)``, ``|lower|, |upper| <= MAX_ABS_BOUND``; or None.
    epsilon : float
        Privacy budget (in total, bounds included).
    resolution : int, default 2**12
        Grid steps between the bounds, ``1 <= resolution <= MAX_RESOLUTION`` and
        ``resolution / epsilon <= MAX_INTEGER_SCALE``.
    description : str, default "sum"
        What is released; names the release in the ledger.
    n : float, optional
        Public or released count, required with ``bounds=None``.
    bounds_share : float, default 0.25
        Share of ``epsilon`` spent on the bounds when ``bounds=None``, in ``(0, 1)``.
    anchor : float, default 0.0
        Public point the private bounds scans start from (``bounds=None`` only).
    bounds_levels : (float, float), default (0.01, 0.99)
        Quantile levels of the estimated bounds (``bounds=None`` only).
    accountant : Accountant, optional
        Budget to charge the whole ``epsilon`` (bounds included): checked before any
        noise is drawn, recorded after.

    Returns
    -------
    Release
        ``value`` is the noisy shifted sum ``sum(clip(x) - lower)`` in data units
        (``>= 0``, a multiple of the grid step); ``epsilon`` is the total spent
        (``delta`` 0, add/remove-one-record neighbours); ``parameters`` give the
        bounds, grid step, resolution, sensitivity ``upper - lower`` and noise scale
        (and, with ``bounds=None``, ``bounds_epsilon`` and ``sum_epsilon``).

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
    >>> dp_sum([], (0.0, 1.0), 1.0).value >= 0  # an empty table is legal: noise on 0
    True
    """
    epsilon = check_epsilon(epsilon)
    accountant = check_accountant(accountant)
    if bounds is None:
        bounds_share = _check_share(bounds_share, "bounds_share", epsilon)
        bounds_levels = check_bounds_levels(bounds_levels, "bounds_levels")
        n_public = _check_released_n(n)
        resolution = _check_resolution(resolution, epsilon * (1 - bounds_share))
        arr = read_private_sample(x)
        if accountant is not None:  # both parts are pure DP: one plan of the whole epsilon
            accountant.check(Release(None, epsilon, description=description))
        est = dp_bounds(
            arr,
            epsilon * bounds_share,
            anchor=anchor,
            levels=bounds_levels,
            neighbouring="add_remove",
            n=n_public,
            description=f"{description}: clipping bounds",
        )
        rel = _sum_release(arr, est.value, epsilon * (1 - bounds_share), resolution, description)
        merged = _with_estimated_bounds(rel, est, epsilon)
        return merged if accountant is None else accountant.record(merged)
    lower, upper = check_public_bounds(bounds, resolution=_check_resolution(resolution, epsilon))
    return _sum_release(
        read_private_sample(x), (lower, upper), epsilon, int(resolution), description, accountant
    )


@validate_params(
    {
        "units": [Interval(numbers.Integral, 0, None, closed="left")],
        "epsilon": [EPSILON],
        "description": [str],
        "accountant": [None, Accountant],
    }
)
def dp_sum_of_units(
    units: int,
    bounds: tuple[float, float],
    epsilon: float,
    *,
    resolution: int = 2**12,
    description: str = "sum",
    accountant: Any = None,
) -> Release:
    """Release a clipped sum from merged exact grid units, as :func:`dp_sum` releases it from the rows.

    ``units`` is the integer sum over every record of ``rint((clip(x) - lower) / step)``
    (step ``(upper - lower) / resolution``), e.g. the sum of the per-partition
    :func:`grid_units` of a distributed table. The noise (discrete Laplace of scale
    ``resolution / epsilon`` on the units), the ledger entry and the output's
    distribution are exactly those of ``dp_sum(x, bounds, epsilon, resolution=...)``
    on the same records: both call one mechanism. Noise is added here, once, never
    per partition.

    Parameters
    ----------
    units : int
        Exact non-negative grid units of the whole table (saturated at ``2**62``).
    bounds : (float, float)
        The public clipping bounds the units were computed with.
    epsilon : float
        Privacy budget.
    resolution : int, default 2**12
        Grid steps between the bounds (as the units were computed).
    description : str, default "sum"
        Names the release in the ledger.
    accountant : Accountant, optional
        Budget to charge: checked before any noise is drawn, recorded after.

    Returns
    -------
    Release
        As :func:`dp_sum` with public bounds: ``value`` is the noisy shifted sum
        ``sum(clip(x) - lower)`` (``>= 0``, a multiple of the grid step).

    References
    ----------
    Dwork, McSherry, Nissim, Smith. "Calibrating Noise to Sensitivity in Private Data
    Analysis". TCC 2006.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([0.25, 0.5, np.nan, 2.0])
    >>> u = grid_units(x, (0.0, 1.0), 4)  # 1 + 2 + 4 (2.0 clipped to 1.0)
    >>> r = dp_sum_of_units(u, (0.0, 1.0), 1.0, resolution=4, description="demo")
    >>> u, r.parameters["integer_scale"], r.description
    (7, 4.0, 'demo')
    """
    epsilon = check_epsilon(epsilon)
    accountant = check_accountant(accountant)
    lower, upper = check_public_bounds(bounds, resolution=_check_resolution(resolution, epsilon))
    return release_grid_sum(int(units), (lower, upper), epsilon, int(resolution), description, accountant)


def _check_released_n(n: Any) -> float:
    if n is None:
        raise ParameterError(
            "dp_sum with bounds=None needs n, a public or released count (e.g. "
            "dp_count(len(x), eps).value), for the private bounds estimate; or pass bounds.",
            argument="n",
        )
    if isinstance(n, bool) or not isinstance(n, numbers.Real) or not math.isfinite(float(n)):
        raise ParameterError(f"n must be a finite number (a released count), got {n!r}.", argument="n")
    return max(float(n), 1.0)


def _sum_release(
    arr: np.ndarray,
    bounds: tuple[float, float],
    epsilon: float,
    resolution: int,
    description: str,
    accountant: Any = None,
) -> Release:
    """The sum mechanism on checked inputs: raises nothing that depends on the data."""
    lower, upper = bounds
    units = _grid_units(arr, lower, upper, resolution)
    return release_grid_sum(units, bounds, epsilon, resolution, description, accountant)


def grid_units(x: Any, bounds: tuple[float, float], resolution: int) -> int:
    """The exact sufficient statistic of :func:`dp_sum`: the integer sum of grid units (private helper).

    ``rint((clip(x) - lower) / step)`` summed exactly (NaN absent, ``+-inf`` clipped) and
    saturated at ``2**62``. Sums of partitions' units add up (then saturate) to the
    units of the whole table, so a distributed run merges them exactly and releases the
    total once with :func:`release_grid_sum`. ``bounds`` and ``resolution`` must be
    checked by the caller (they are public).
    """
    lower, upper = float(bounds[0]), float(bounds[1])
    return _grid_units(read_private_sample(x), lower, upper, int(resolution))


def release_grid_sum(
    units: int,
    bounds: tuple[float, float],
    epsilon: float,
    resolution: int,
    description: str,
    accountant: Any = None,
) -> Release:
    """The mechanism of :func:`dp_sum` (public bounds) on exact grid units (private helper).

    ``units`` is :func:`grid_units` of the whole table (e.g. merged from the partitions
    of a distributed table: the sum of the partitions' units, saturated at ``2**62``).
    One record moves it by at most ``resolution``: the noise, the ledger entry and the
    output are those of :func:`dp_sum` on the rows. The caller has checked
    ``bounds``, ``epsilon`` and ``resolution``; nothing about ``units`` raises.
    """
    lower, upper = float(bounds[0]), float(bounds[1])
    step = _step(lower, upper, resolution)
    units = min(max(0, int(units)), _SUM_CAP)
    plan = Release(
        value=None,
        epsilon=epsilon,
        mechanism="discrete Laplace on a fixed-point grid",
        parameters={
            "bounds": (lower, upper),
            "shift": lower,
            "grid_step": step,
            "resolution": resolution,
            "sensitivity": upper - lower,
            "scale": (upper - lower) / epsilon,
            "integer_scale": resolution / epsilon,
            "neighbouring": NEIGHBOURING,
            "note": (
                "inputs clipped to bounds and shifted by -lower; value = noisy grid units x grid_step, "
                "clipped at 0"
            ),
        },
        description=description,
        sensitivity=upper - lower,
        noise_scale=(upper - lower) / epsilon,
    )

    def draw() -> float:
        noisy_units = max(0, int(add_discrete_laplace(units, resolution / epsilon)))
        return noisy_units * step

    return charge(accountant, plan, draw)


@validate_params({k: v for k, v in _SUM_MEAN_CONSTRAINTS.items() if k != "n"})
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
    count_share = _check_share(count_share, "count_share", epsilon)
    accountant = check_accountant(accountant)
    if bounds is None:
        bounds_share = _check_share(bounds_share, "bounds_share", epsilon)
        bounds_levels = check_bounds_levels(bounds_levels, "bounds_levels")
        sum_epsilon = epsilon * (1 - bounds_share)
        resolution = _check_resolution(resolution, sum_epsilon * (1 - count_share))
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
        resolution = _check_resolution(resolution, sum_epsilon * (1 - count_share))
        lower, upper = check_public_bounds(bounds, resolution=resolution)
        arr = read_private_sample(x)
        if accountant is not None:
            accountant.check(Release(None, epsilon * count_share), Release(None, epsilon * (1 - count_share)))
        count = dp_count(
            int(np.count_nonzero(~np.isnan(arr))), epsilon * count_share, description=f"{description}: count"
        )
        releases = [count]
    total = _sum_release(
        arr, (lower, upper), sum_epsilon * (1 - count_share), resolution, f"{description}: clipped sum"
    )
    n = count.value
    mean = math.nan if n < 1 else float(np.clip(lower + total.value / n, lower, upper))
    if accountant is not None:
        for rel in (*releases, total):
            accountant.record(rel)
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
