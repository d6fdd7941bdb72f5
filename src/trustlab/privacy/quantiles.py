"""Differentially private quantiles: the exponential mechanism, JointExp and the unbounded method.

Three ways to release quantiles of a sensitive numeric sample under pure
``epsilon``-DP:

- :func:`dp_quantile` and :func:`dp_quantiles` with ``method="jointexp"``: the
  exponential mechanism over the intervals between sorted data points (Smith,
  STOC 2011) and its joint version for several levels at once (JointExp,
  Gillenwater, Joseph and Kulesza, ICML 2021). Public bounds are required.
- ``method="independent"``: one exponential mechanism per level, each with
  ``epsilon / m`` (the naive baseline).
- :func:`unbounded_quantile`: the above-threshold scan over geometrically
  growing buckets (Durfee, NeurIPS 2023), which needs only a public lower anchor.

**Every release lies on a public grid.** The bounded mechanisms snap the clipped
data to the grid ``lower + k * step``, ``step = (upper - lower) / resolution``,
``k = 0 .. resolution`` (default ``resolution = 2**20``), run the exponential
mechanism over grid points with integer arithmetic (interval weights are integer
counts of grid points) and return ``lower + k * step`` computed from the integer
``k`` alone, so the low bits of an output say nothing about the data (Mironov,
CCS 2012). Ties are broken by a secure uniform jitter of each record inside its
own grid cell on a finer integer grid, which keeps the guarantee exact (see
:func:`dp_quantiles`). All randomness comes from the secure samplers: the
selection steps are exact Gumbel-max draws through OpenDP
(:func:`~trustlab.privacy.samplers.exponential_select`), the jitter and the point
inside the chosen interval are exact uniform integers from the OS generator
(:func:`~trustlab.privacy.samplers.uniform_int`). Nothing is seeded:
``random_state`` is refused. The unbounded scan's outputs are bucket edges, a
public grid as well, and its noise is OpenDP's exact discrete Laplace.

Neighbouring relations: ``"replace"`` (swap one record; ``n`` is public) and
``"add_remove"`` (add or remove one record).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, Interval, Options, validate_params
from trustlab._validation import check_bounds
from trustlab.errors import ParameterError
from trustlab.privacy._durfee import scan, scan_cap
from trustlab.privacy._grid import (
    DEFAULT_RESOLUTION,
    MAX_RESOLUTION,
    GridCounts,
    QuantileGrid,
    sorted_clipped,
)
from trustlab.privacy._inputs import (
    BASE,
    MAX_BUCKETS,
    MAX_PUBLIC_N,
    NEIGHBOURING,
    NEIGHBOURING_OPTION,
    check_anchor,
    check_levels,
    check_neighbouring,
    check_public_n,
    read_private_sample,
)
from trustlab.privacy._jointexp import jointexp_sensitivity, jointexp_values
from trustlab.privacy.accounting import Accountant, charge
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace

__all__ = [
    "DEFAULT_RESOLUTION",
    "MAX_RESOLUTION",
    "check_neighbouring",
    "dp_quantile",
    "dp_quantiles",
    "jointexp_sensitivity",
    "unbounded_quantile",
]

_CLIP_NOTE = "inputs clipped to the public bounds (always applied; says nothing about the data)"
_NO_SEED = (
    "random_state is not accepted: DP quantiles are never seeded. Every random choice (the "
    "selection, the tie-breaking jitter, the point inside the chosen interval) comes from the "
    "secure samplers, because a seeded draw would be part of the mechanism and could give the "
    "data back. Drop the random_state argument."
)


def _present_values(x: Any) -> tuple[np.ndarray, int]:
    """The present values of the private sample ``x`` and ``len(x)``.

    Only public facts raise (``x`` is not a 1-d array of numbers). What the values
    are never does: NaN (or a non-number in an object array) is an absent record,
    ``+-inf`` is clipped later like any value outside the bounds, and an empty
    sample is legal (the release is then close to uniform over the grid).
    """
    arr = read_private_sample(x)
    missing = np.isnan(arr)
    return (arr[~missing] if missing.any() else arr), int(arr.size)


_RESOLUTION = Interval(numbers.Integral, 1, MAX_RESOLUTION, closed="both")
_COMMON = {
    "epsilon": [EPSILON],
    "neighbouring": [NEIGHBOURING_OPTION],
    "description": [str],
    "accountant": [None, Accountant],
}


@validate_params({**_COMMON, "method": [Options({"jointexp", "independent"})], "resolution": [_RESOLUTION]})
def dp_quantiles(
    x: Any,
    q: Any,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    method: str = "jointexp",
    neighbouring: str = "replace",
    resolution: int = DEFAULT_RESOLUTION,
    random_state: Any = None,
    description: str = "quantiles",
    accountant: Any = None,
    _presorted: bool = False,
    _jitter: int | None = None,
) -> Release:
    """Release several quantiles of ``x`` under pure ``epsilon``-DP, on a public grid.

    The clipped data are snapped to the grid ``lower + k * step`` with
    ``step = (upper - lower) / resolution``; JointExp (or one exponential mechanism
    per level) then selects grid points, and the release is ``lower + k * step``
    computed from the selected integers ``k``.

    Parameters
    ----------
    x : array-like of shape (n,)
        The sensitive sample; finite values.
    q : sequence of float
        Strictly increasing levels in (0, 1).
    epsilon : float
        The privacy budget of the whole release.
    bounds : (float, float)
        Public bounds; values outside are clipped (always, as the release says).
    method : {"jointexp", "independent"}, default "jointexp"
        ``"jointexp"`` samples all levels from one exponential mechanism over
        ordered tuples (Gillenwater et al.); ``"independent"`` runs the
        single-quantile exponential mechanism once per level with ``epsilon / m``.
    neighbouring : {"replace", "add_remove"}, default "replace"
        The neighbouring relation the guarantee is stated for.
    resolution : int, default 2**20
        Number of grid steps across the bounds (``1 .. 2**40``). For integer data
        pass ``int(upper - lower)`` (with integer bounds) so that the grid is the
        integers; a power of two keeps every grid value exact in float64.
    random_state : None
        Not accepted (a :class:`~trustlab.errors.ParameterError` is raised when it is
        anything but ``None``): DP quantiles are never seeded.
    description : str
        What the release is, for the ledger.
    accountant : Accountant, optional
        Budget to charge: checked before any noise is drawn (the selection, the
        jitter), recorded after.

    Returns
    -------
    Release
        ``value`` is a sorted float array of grid values inside ``bounds``.

    Notes
    -----
    *Ties.* The exponential mechanism over intervals between sorted points gives an
    interval of zero length zero weight, so with many tied values the ranks inside
    a tie cannot be chosen and the estimate is pushed off the tie (5,000 draws from
    {1, 2, 3} gave quartiles 1.8 / 2.1 / 2.3). Each record is therefore placed at a
    secure uniform sub-position of its grid cell on a finer integer grid
    (``K = 2**62 // (resolution + 1)`` sub-positions per grid point); the mechanism
    runs on the fine grid and the selected fine position is mapped back to its grid
    point by integer division. The jitter is an independent randomised map applied
    to each record, so the guarantee is exact: couple the jitter of the records two
    neighbouring datasets share; for every value of it the jittered datasets are
    neighbours, and averaging ``P[M(D_u) in S] <= exp(epsilon) P[M(D'_u) in S]``
    over the common jitter distribution gives the same inequality for the mechanism.

    *Arithmetic.* Positions, interval lengths and draws are exact int64. The forward
    pass runs in log space (blocked exponential filters, no FFT, no floor), so every
    weight has a relative error of order ``1e-12``. Ranks more than about
    ``(1400 + epsilon + 43 m) / a`` from a level's target are left out, with
    ``a = epsilon / (2 * sensitivity)``: their total probability is below
    ``exp(-1400 - epsilon)`` (checked at run time and widened otherwise), far
    below the smallest float64, so the release is ``(epsilon, delta)``-DP with
    ``delta < exp(-1400)``.

    References
    ----------
    Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
    Smith. "Privacy-preserving statistical estimation with optimal convergence
    rates". STOC 2011. Mironov. "On Significance of the Least Significant Bits for
    Differential Privacy". CCS 2012.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal(2000)
    >>> r = dp_quantiles(x, [0.25, 0.5, 0.75], epsilon=1.0, bounds=(-10, 10))
    >>> r.value.shape, r.epsilon, r.parameters["grid_step"] == 20 / 2**20
    ((3,), 1.0, True)
    """
    if random_state is not None:
        raise ParameterError(_NO_SEED, argument="random_state")
    lower, upper = check_bounds(bounds)
    grid = QuantileGrid((lower, upper), resolution)
    check_levels(q)  # a public fact, checked before the data are read
    arr, _ = _present_values(x)
    z = arr if _presorted else sorted_clipped(arr, lower, upper)
    return release_quantiles(
        GridCounts.from_sorted(z, grid),
        q,
        epsilon,
        grid,
        method=method,
        neighbouring=neighbouring,
        description=description,
        accountant=accountant,
        _jitter=_jitter,
    )


def release_quantiles(
    runs: GridCounts,
    q: Any,
    epsilon: float,
    grid: QuantileGrid,
    *,
    method: str,
    neighbouring: str,
    description: str,
    accountant: Any,
    _jitter: int | None = None,
) -> Release:
    """The mechanism of :func:`dp_quantiles` on the records' grid indices (all it reads).

    ``runs`` holds how many (clipped) records fall on each point of the public
    ``grid``: computed from the rows in process, or merged from the partitions of a
    table (:func:`trustlab.compute.quantiles.dp_quantiles_of_counts`). The plan, the
    ledger entry and the draws are the same for both. Only public parameters are
    checked here; the caller has validated them.
    """
    epsilon = float(epsilon)
    lower, upper = grid.lower, grid.upper
    levels = check_levels(q)
    res = grid.resolution
    if method == "jointexp":
        sens = jointexp_sensitivity(levels, neighbouring)
        mechanism = "JointExp (exponential mechanism over ordered grid tuples)"
        eps_each = epsilon

        def draw() -> np.ndarray:
            return jointexp_values(
                runs, (lower, upper), levels, epsilon, neighbouring, resolution=res, _jitter=_jitter
            )
    else:
        eps_each = epsilon / levels.size
        sens = float(max(jointexp_sensitivity(levels[j : j + 1], neighbouring) for j in range(levels.size)))
        mechanism = "exponential mechanism per level (epsilon split equally)"

        def draw() -> np.ndarray:
            return np.sort(
                np.concatenate(
                    [
                        jointexp_values(
                            runs,
                            (lower, upper),
                            levels[j : j + 1],
                            eps_each,
                            neighbouring,
                            resolution=res,
                            _jitter=_jitter,
                        )
                        for j in range(levels.size)
                    ]
                )
            )

    plan = Release(
        value=None,
        epsilon=epsilon,
        mechanism=mechanism,
        parameters={
            "levels": tuple(float(v) for v in levels),
            "bounds": (lower, upper),
            "sensitivity": sens,
            "epsilon_per_selection": eps_each,
            "neighbouring": NEIGHBOURING[neighbouring],
            "resolution": grid.resolution,
            "grid_step": grid.step,
            "note": _CLIP_NOTE
            + f"; outputs on the public grid lower + k * {grid.step!r}, k = 0 .. {grid.resolution}; "
            "ties broken by secure jitter inside each grid cell",
        },
        description=description,
        sensitivity=sens,
    )
    return charge(accountant, plan, draw)


@validate_params({**_COMMON, "resolution": [_RESOLUTION]})
def dp_quantile(
    x: Any,
    q: float,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    neighbouring: str = "replace",
    resolution: int = DEFAULT_RESOLUTION,
    random_state: Any = None,
    description: str = "quantile",
    accountant: Any = None,
) -> Release:
    """Release one quantile of ``x`` with the exponential mechanism (pure ``epsilon``-DP).

    The output is a grid point ``y = lower + k * step`` drawn with probability
    proportional to ``exp(-epsilon * |#{x_i < y} - q n| / (2 * s))`` (``s = 1`` under
    replace-one, ``max(q, 1 - q)`` under add/remove), ties broken as in
    :func:`dp_quantiles`: a run of grid points between consecutive records is chosen
    with probability proportional to its number of points times that weight (exactly,
    by Gumbel-max), then a uniform point inside it (exact uniform integers).

    Parameters
    ----------
    x, q, epsilon, bounds, neighbouring, resolution, description, accountant
        As in :func:`dp_quantiles` (``q`` one level).
    random_state : None
        Not accepted: DP quantiles are never seeded.

    Returns
    -------
    Release
        ``value`` is a float on the grid.

    References
    ----------
    Smith. "Privacy-preserving statistical estimation with optimal convergence
    rates". STOC 2011.

    Examples
    --------
    >>> import numpy as np
    >>> r = dp_quantile(np.arange(1000.0), 0.5, epsilon=1.0, bounds=(0, 1000))
    >>> 400 < r.value < 600
    True
    """
    if random_state is not None:
        raise ParameterError(_NO_SEED, argument="random_state")
    if accountant is not None:  # the plan: pure epsilon, checked before dp_quantiles draws
        accountant.check(Release(None, float(epsilon), description=description))
    rel = dp_quantiles(
        x,
        [q],
        epsilon,
        bounds,
        neighbouring=neighbouring,
        resolution=resolution,
        description=description,
    )
    single = Release(
        value=float(rel.value[0]),
        epsilon=rel.epsilon,
        mechanism="exponential mechanism (Smith) on the public grid",
        parameters={**rel.parameters, "sensitivity": rel.parameters["sensitivity"] / 2.0},
        description=description,
        sensitivity=rel.parameters["sensitivity"] / 2.0,
    )
    return single if accountant is None else accountant.record(single)


@validate_params({**_COMMON, "base": [BASE], "max_buckets": [MAX_BUCKETS]})
def unbounded_quantile(
    x: Any,
    q: float,
    epsilon: float,
    lower: float,
    *,
    base: float = 1.001,
    neighbouring: str = "replace",
    n: int | None = None,
    max_buckets: int = 10**6,
    description: str = "unbounded quantile",
    accountant: Any = None,
) -> Release:
    """Release a quantile with only a public lower anchor: Durfee's above-threshold scan.

    Buckets grow geometrically from ``lower``: bucket ``k`` holds the values with
    ``floor(log_base(x - lower + 1)) = k``. A noisy threshold ``ceil(q n) + Lap(1/e1)`` is
    drawn, the cumulative bucket counts are scanned upward and the first ``k`` whose
    count plus fresh noise exceeds it gives ``base**(k+1) - 1 + lower``. Half of
    ``epsilon`` (``e1``) goes to the threshold and half (``e2``) to the queries. The
    noise is the exact discrete Laplace on integer counts (the paper uses
    continuous Laplace; the above-threshold proof holds for both). The output is a
    bucket edge, a function of the integer ``k`` alone: a public grid.

    Parameters
    ----------
    x : array-like of shape (n,)
        Finite values; values below ``lower`` are clipped to it.
    q : float
        Level in (0, 1).
    epsilon : float
        Privacy budget.
    lower : float
        Public anchor (lower end of the first bucket); its magnitude must leave room
        for the bucket edges in float64 (about ``|lower| < 1e307``).
    base : float, default 1.001
        Bucket growth factor (the paper's default).
    neighbouring : {"replace", "add_remove"}, default "replace"
        Under ``"add_remove"`` the cumulative counts are monotone and the query
        noise is ``Lap(1/e2)`` (Durfee's analysis); under ``"replace"`` they are not,
        and the standard above-threshold query noise ``Lap(2/e2)`` is used.
    n : int, optional
        Public (or previously released) sample size for the threshold ``q n``
        (at most ``2**53``). Required under ``"add_remove"``, where the true size is
        private; under ``"replace"`` it defaults to ``len(x)``, which is public there.
    max_buckets : int, default 1e6
        The scan stops here (the last bucket's edge is returned).
    description : str
        What the release is, for the ledger.
    accountant : Accountant, optional
        Budget to charge: checked before any noise is drawn, recorded after.

    Returns
    -------
    Release
        ``value`` is a float.

    References
    ----------
    Durfee. "Unbounded Differentially Private Quantile and Maximum Estimation".
    NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(size=5000)
    >>> r = unbounded_quantile(x, 0.9, epsilon=1.0, lower=0.0)
    >>> 1.0 < r.value < 4.0
    True
    """
    epsilon, base, max_buckets = float(epsilon), float(base), int(max_buckets)
    lower = check_anchor(lower, "lower")
    scan_cap(lower, base, "lower")
    level = float(check_levels(q)[0])
    arr, length = _present_values(x)
    n_public = check_public_n(n, max(length, 1), neighbouring, maximum=MAX_PUBLIC_N)
    z = np.maximum(arr, lower)
    z.sort()
    plan = Release(
        value=None,
        epsilon=epsilon,
        mechanism="above-threshold over geometric buckets (Durfee)",
        parameters={
            "level": level,
            "lower_anchor": lower,
            "base": base,
            "threshold_scale": 2.0 / epsilon,
            "query_scale": (2.0 if neighbouring == "replace" else 1.0) * 2.0 / epsilon,
            "neighbouring": NEIGHBOURING[neighbouring],
            "note": "inputs below the lower anchor clipped to it (always applied); outputs are "
            "bucket edges lower + base**(k+1) - 1 of an integer k (a public grid)",
        },
        description=description,
        sensitivity=1.0,  # of each cumulative count the scan compares
    )
    return charge(
        accountant,
        plan,
        lambda: scan(
            z,
            level,
            epsilon,
            lower,
            base,
            neighbouring,
            n_public,
            max_buckets,
            add_noise=add_discrete_laplace,
            anchor_name="lower",
        ),
    )
