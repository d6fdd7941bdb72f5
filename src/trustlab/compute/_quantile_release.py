"""DP quantiles and boxplots released from merged counts (the releases of :mod:`.quantiles`).

The mechanism code of :func:`trustlab.privacy.dp_quantiles` and
:func:`trustlab.privacy.grouped_dp_boxplot` runs here once, on the client, on the
merged :class:`~trustlab.compute.quantiles.QuantileSummary`; a boxplot's outlier
counts come back from a second pass (``count_beyond``). The frame drivers that run
both passes are in :mod:`trustlab.compute.quantiles`, which re-exports these names.

References
----------
Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Generator, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, Interval, Options, validate_params
from trustlab.compute._quantile_state import GroupedQuantileSummary, QuantileSummary
from trustlab.errors import ParameterError
from trustlab.privacy._boxplot_core import (
    BoxOptions,
    BoxSummary,
    PendingBox,
    box_finish,
    box_quantiles,
    record,
)
from trustlab.privacy._boxplot_grouped import FigurePlan, finish_boxes, grouped_figure, pending_boxes
from trustlab.privacy._boxplot_results import BoxplotStats, GroupedBoxplots
from trustlab.privacy._boxplot_rules import (
    DEFAULT_COUNT_WEIGHT,
    DEFAULT_N_WEIGHT,
    OTHER_LABEL,
    check_categories,
    check_counts,
    check_n,
    check_options,
)
from trustlab.privacy._grid import QuantileGrid
from trustlab.privacy._inputs import NEIGHBOURING_OPTION, check_levels
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.quantiles import release_quantiles
from trustlab.privacy.release import Release

__all__ = ["dp_boxplot_of_counts", "dp_quantiles_of_counts", "grouped_dp_boxplot_of_counts"]


def _check_summary(summary: Any, need_buckets: bool) -> None:
    if not isinstance(summary, QuantileSummary):
        raise ParameterError(
            "summary must be a QuantileSummary (compute(QuantileCounts(...), data)), "
            f"got {type(summary).__name__}.",
            argument="summary",
        )
    if need_buckets and summary.upper is None:
        raise ParameterError(
            "summary has no bucket counts for the extreme scans: build it with "
            "QuantileCounts(..., base=1.001) (the boxplot's base).",
            argument="summary",
        )


_COMMON = {"epsilon": [EPSILON], "description": [str], "accountant": [None, Accountant]}
_BOX = {**_COMMON, "count_beyond": [callable], "neighbouring": [NEIGHBOURING_OPTION]}
_SHARE = Interval(numbers.Real, 0, 1, closed="neither")
_POSITIVE_INT = Interval(numbers.Integral, 1, None, closed="left")


@validate_params(
    {**_COMMON, "method": [Options({"jointexp", "independent"})], "neighbouring": [NEIGHBOURING_OPTION]}
)
def dp_quantiles_of_counts(
    summary: QuantileSummary,
    q: Any,
    epsilon: float,
    *,
    method: str = "jointexp",
    neighbouring: str = "replace",
    description: str = "quantiles",
    accountant: Accountant | None = None,
) -> Release:
    """Release quantiles from merged grid counts with the mechanism of :func:`~trustlab.privacy.dp_quantiles`.

    The same code as the in-process call runs on the merged counts (the mechanism reads
    nothing else), once: the output distribution, the plan and the ledger entry are
    those of ``dp_quantiles(x, q, epsilon, summary.bounds, resolution=summary.resolution)``.

    Parameters
    ----------
    summary : QuantileSummary
        ``compute(QuantileCounts(column, bounds, resolution=...), data)``.
    q : sequence of float
        Strictly increasing levels in (0, 1).
    epsilon : float
        Budget of the release.
    method, neighbouring, description, accountant
        As in :func:`~trustlab.privacy.dp_quantiles`.

    Returns
    -------
    Release
        Sorted grid values inside the bounds.

    References
    ----------
    Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.

    Examples
    --------
    >>> import pandas as pd
    >>> from trustlab.compute import QuantileCounts, compute
    >>> df = pd.DataFrame({"x": np.random.default_rng(0).normal(size=4000)})
    >>> s = compute(QuantileCounts("x", (-10, 10)), df, chunksize=1000)
    >>> r = dp_quantiles_of_counts(s, [0.25, 0.5, 0.75], epsilon=1.0)
    >>> r.value.shape, r.epsilon, bool(abs(r.value[1]) < 0.3)
    ((3,), 1.0, True)
    """
    _check_summary(summary, need_buckets=False)
    check_levels(q)
    return release_quantiles(
        summary.grid,
        q,
        epsilon,
        QuantileGrid(summary.bounds, summary.resolution),
        method=method,
        neighbouring=neighbouring,
        description=description,
        accountant=accountant,
    )


def _options(summary: QuantileSummary, neighbouring: str, kwargs: dict[str, Any]) -> BoxOptions:
    for key in ("base", "resolution"):
        if key in kwargs:
            raise ParameterError(
                f"{key} is fixed by the summary (QuantileCounts(..., {key}=...)); drop it here.", argument=key
            )
    opts = check_options(**kwargs)
    base = 1.001 if summary.base is None else summary.base  # a summary with buckets has its base
    return BoxOptions(**opts, neighbouring=neighbouring, base=base, resolution=summary.resolution)


def _box_data(summary: QuantileSummary) -> BoxSummary:
    return BoxSummary(summary.n, summary.n + summary.missing, summary.upper, summary.lower, summary.grid)


CountBeyond = Callable[[float, float], tuple[int, int]]


@validate_params({**_BOX, "n_weight": [_SHARE]})
def dp_boxplot_of_counts(
    summary: QuantileSummary,
    count_beyond: CountBeyond,
    epsilon: float,
    *,
    neighbouring: str = "add_remove",
    n: float | None = None,
    n_weight: float = DEFAULT_N_WEIGHT,
    description: str = "boxplot",
    accountant: Accountant | None = None,
    **kwargs: Any,
) -> BoxplotStats:
    """A DP boxplot from merged counts: the mechanism of :func:`~trustlab.privacy.dp_boxplot_stats`.

    The sample size, the extremes and the quartiles are released from ``summary``;
    ``count_beyond(whisker_lo, whisker_hi)`` then returns the exact numbers of raw
    values below and above the released whiskers (a second pass over the data,
    e.g. :class:`BeyondWhiskers`), and the noisy counts are drawn once. Releases,
    ledger entries and output distribution are those of the in-process call.

    Parameters
    ----------
    summary : QuantileSummary
        ``compute(QuantileCounts(column, bounds, base=1.001), data)``.
    count_beyond : callable
        ``(lo, hi) -> (count of values < lo, count of values > hi)``, NaN left out.
    epsilon : float
        Budget of the boxplot (finite: the non-private boxplot needs the rows).
    neighbouring, n, n_weight, description, accountant
        As in :func:`~trustlab.privacy.dp_boxplot_stats`.
    **kwargs
        The tuning options of :func:`~trustlab.privacy.dp_boxplot_stats` except ``base``
        and ``resolution`` (the summary's).

    Returns
    -------
    BoxplotStats

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.

    Examples
    --------
    >>> import pandas as pd
    >>> from trustlab.compute import BeyondWhiskers, QuantileCounts, compute
    >>> df = pd.DataFrame({"x": np.random.default_rng(0).normal(size=5000)})
    >>> s = compute(QuantileCounts("x", (-50, 50), base=1.001), df, chunksize=2000)
    >>> def beyond(lo, hi):
    ...     return tuple(compute(BeyondWhiskers("x", {0: (lo, hi)}), df)[0])
    >>> b = dp_boxplot_of_counts(s, beyond, 1.0, n=5000)
    >>> bool(b.whisker_lo <= b.q1 <= b.median <= b.q3 <= b.whisker_hi), b.epsilon
    (True, 1.0)
    """
    _check_summary(summary, need_buckets=True)
    opts = _options(summary, neighbouring, kwargs)
    n_given = check_n(n)
    if accountant is not None:
        accountant.check(Release(None, float(epsilon), description=description))
    opts = replace(opts, n_weight=float(n_weight))
    pending = box_quantiles(_box_data(summary), float(epsilon), summary.bounds, n_given, opts, description)
    lo, hi = count_beyond(*pending.whiskers)
    stats = box_finish(pending, int(lo), int(hi))
    return stats if accountant is None else record(stats, accountant)


GroupedCountBeyond = Callable[[dict[int, tuple[float, float]]], Any]


@validate_params({**_BOX, "count_weight": [_SHARE], "min_group_size": [None, _POSITIVE_INT]})
def grouped_dp_boxplot_of_counts(
    summary: GroupedQuantileSummary,
    count_beyond: GroupedCountBeyond,
    epsilon: float,
    *,
    neighbouring: str = "add_remove",
    counts: Mapping[Any, float] | None = None,
    count_weight: float = DEFAULT_COUNT_WEIGHT,
    min_group_size: int | None = None,
    other_label: Any = OTHER_LABEL,
    description: str = "boxplot",
    accountant: Accountant | None = None,
    **kwargs: Any,
) -> GroupedBoxplots:
    """DP boxplots by group from merged counts: the mechanism of :func:`~trustlab.privacy.grouped_dp_boxplot`.

    The group sizes are released from the merged counts, every box's quantiles from
    its group's summary, then ``count_beyond({group index: (lo, hi)})`` returns the
    exact counts beyond the whiskers of all drawn boxes at once (one second pass,
    e.g. :class:`BeyondWhiskers`; an array ``[group, 2]`` or a mapping of group index
    to ``(below, above)``), and the noisy counts are drawn once.

    Parameters
    ----------
    summary : GroupedQuantileSummary
        ``compute(QuantileCounts(column, bounds, base=1.001, group=..., categories=...), data)``.
    count_beyond : callable
        ``{group index: (lo, hi)} -> counts beyond``.
    epsilon : float
        Budget of the whole figure (finite).
    neighbouring, counts, count_weight, min_group_size, other_label, description, accountant
        As in :func:`~trustlab.privacy.grouped_dp_boxplot` (``categories`` are the summary's).
    **kwargs
        Tuning options of the boxes except ``base`` and ``resolution``.

    Returns
    -------
    GroupedBoxplots

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.

    Examples
    --------
    >>> import pandas as pd
    >>> from trustlab.compute import BeyondWhiskers, QuantileCounts, compute
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=6000), "g": rng.choice(["a", "b"], 6000)})
    >>> stat = QuantileCounts("x", (-20, 20), base=1.001, group="g", categories=["a", "b"])
    >>> s = compute(stat, df, chunksize=2500)
    >>> def beyond(w):
    ...     return compute(BeyondWhiskers("x", w, group="g", categories=["a", "b"]), df)
    >>> res = grouped_dp_boxplot_of_counts(s, beyond, 1.0)
    >>> list(res), sum(r.epsilon for r in res.releases)
    (['a', 'b'], 1.0)
    """
    if accountant is not None:
        accountant.check(Release(None, float(epsilon), description=description))
    steps, pending = start_figure(
        summary,
        float(epsilon),
        neighbouring=neighbouring,
        counts=counts,
        count_weight=count_weight,
        min_group_size=min_group_size,
        other_label=other_label,
        description=description,
        options=kwargs,
    )
    beyond = count_beyond({i: p.whiskers for i, (_, p) in pending.items()}) if pending else {}
    res = end_figure(steps, pending, beyond)
    return (
        res
        if accountant is None
        else replace(res, releases=tuple(accountant.record(r) for r in res.releases))
    )


Figure = tuple[Generator[Any, Any, GroupedBoxplots], dict[int, tuple[Any, PendingBox]]]


def start_figure(
    summary: Any,
    epsilon: float,
    *,
    neighbouring: str,
    counts: Mapping[Any, float] | None,
    count_weight: float,
    min_group_size: int | None,
    other_label: Any,
    description: str,
    options: dict[str, Any],
) -> Figure:
    """Check a figure's public inputs, release its group sizes and every box's quantiles."""
    if not isinstance(summary, GroupedQuantileSummary):
        raise ParameterError(
            "summary must be a GroupedQuantileSummary (compute(QuantileCounts(..., group=..., "
            f"categories=...), data)), got {type(summary).__name__}.",
            argument="summary",
        )
    for s in summary.groups:
        _check_summary(s, need_buckets=True)
    for key in ("n", "n_weight"):
        if key in options:
            raise ParameterError(f"{key} is not accepted by a grouped boxplot.", argument=key)
    first = summary.groups[0]
    opts = _options(first, "add_remove", options)
    cats = list(summary.categories)
    check_categories(cats, other_label)
    labels = [*cats, other_label] if other_label is not None else list(cats)
    public = None if counts is None else check_counts(counts, labels)
    exact = np.array([summary.groups[i].n for i in range(len(labels))], dtype=np.int64)
    plan = FigurePlan(
        labels,
        public,
        epsilon,
        first.bounds,
        neighbouring,
        float(count_weight),
        None if min_group_size is None else int(min_group_size),
        other_label,
        description,
    )
    steps = grouped_figure(exact, plan)
    todo = next(steps)
    data = {i: _box_data(summary.groups[i]) for i, *_ in todo}
    return steps, pending_boxes(todo, data, opts, first.bounds, description)


def end_figure(steps: Generator[Any, Any, GroupedBoxplots], pending: Any, beyond: Any) -> GroupedBoxplots:
    """The noisy outlier counts of every box, then the figure's releases."""
    try:
        steps.send(finish_boxes(pending, beyond))
    except StopIteration as done:
        return done.value
    raise AssertionError("grouped_figure yields once")  # pragma: no cover
