"""Differentially private sums on a public fixed-point grid (the sum mechanism of :mod:`.statistics`).

Each value is clipped to public bounds, shifted by ``-lower`` and rounded to
``resolution`` grid units; the exact integer sum of the units gets discrete Laplace
noise of scale ``resolution / epsilon`` (:func:`~trustlab.privacy.samplers.add_discrete_laplace`),
so no floating-point arithmetic touches the noise and the output is a multiple of the
public grid step. :func:`grid_units` is the sum's sufficient statistic, which the
partitions of a distributed table merge by addition; :func:`release_grid_sum` is the
one mechanism both paths release through. :func:`dp_sum`, :func:`dp_sum_of_units`
and the constants are re-exported by :mod:`trustlab.privacy.statistics`.

References
----------
Dwork, McSherry, Nissim, Smith. "Calibrating Noise to Sensitivity in Private Data
Analysis". TCC 2006.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, Interval, validate_params
from trustlab._validation import check_epsilon, check_fraction
from trustlab.errors import ParameterError
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

__all__ = ["MAX_RESOLUTION", "dp_sum", "dp_sum_of_units", "grid_units", "release_grid_sum"]


NEIGHBOURING = "add/remove one record"


MAX_RESOLUTION = 2**32
"""Largest ``resolution`` (grid steps between the bounds) of :func:`dp_sum` and :func:`dp_mean`.

Each value becomes at most ``resolution`` grid units; the exact sum is formed in
arbitrary precision and saturated at ``2**62`` units before the noise (a
1-Lipschitz clamp, so the sensitivity stays ``resolution``), which no table of
fewer than ``2**30`` records reaches at this cap.
"""


SUM_CAP = 2**62


def check_resolution(resolution: Any, epsilon: float) -> int:
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


def check_share(share: Any, name: str, epsilon: float) -> float:
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
    return min(total, SUM_CAP)


SUM_MEAN_CONSTRAINTS: dict[str, Any] = {
    "epsilon": [EPSILON],
    "n": [None, Interval(numbers.Real, None, None, closed="neither")],
    "anchor": [Interval(numbers.Real, None, None, closed="neither")],
    "description": [str],
    "accountant": [None, Accountant],
}
"""Declared constraints of :func:`dp_sum` and :func:`dp_mean` (the rest: rules across arguments)."""


@validate_params(SUM_MEAN_CONSTRAINTS)
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
        bounds_share = check_share(bounds_share, "bounds_share", epsilon)
        bounds_levels = check_bounds_levels(bounds_levels, "bounds_levels")
        n_public = _check_released_n(n)
        resolution = check_resolution(resolution, epsilon * (1 - bounds_share))
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
        rel = sum_release(arr, est.value, epsilon * (1 - bounds_share), resolution, description)
        merged = _with_estimated_bounds(rel, est, epsilon)
        return merged if accountant is None else accountant.record(merged)
    lower, upper = check_public_bounds(bounds, resolution=check_resolution(resolution, epsilon))
    return sum_release(
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
    lower, upper = check_public_bounds(bounds, resolution=check_resolution(resolution, epsilon))
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


def sum_release(
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
    units = min(max(0, int(units)), SUM_CAP)
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
