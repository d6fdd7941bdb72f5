"""DP quantiles and boxplots of a partitioned table: merged grid counts, noise added once after merging.

The bounded quantile mechanisms (JointExp, the exponential mechanism per level) read
nothing of the data but how many clipped values fall on each point of their public
grid ``lower + k * step`` (:class:`~trustlab.privacy._grid.GridCounts`): the utility of
every interval and the tie-breaking jitter (drawn per record inside its grid cell)
depend on that alone. The extreme scans of a DP boxplot read the number of clipped
values below each public bucket edge ``anchor + base**(k+1) - 1``
(:class:`BucketCounts`). Both are sparse count vectors over public cells, so the
partial states of a partitioned table merge by addition into exactly the state of the
whole table; the releases then run the very mechanism code of
:func:`trustlab.privacy.dp_quantiles` / :func:`trustlab.privacy.grouped_dp_boxplot`,
once, on the client (no worker draws noise).

A boxplot's outlier counts are of the raw values beyond its whiskers, which are known
only once the quantiles are released: a second pass (:class:`BeyondWhiskers`) counts
them with the released whiskers as public parameters, and the noise is added to the
merged counts.

References
----------
Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.
Durfee. "Unbounded Differentially Private Quantile and Maximum Estimation". NeurIPS 2023.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, check_params
from trustlab.compute._quantile_release import (
    dp_boxplot_of_counts,
    dp_quantiles_of_counts,
    end_figure,
    grouped_dp_boxplot_of_counts,
    start_figure,
)
from trustlab.compute._quantile_state import (
    BeyondWhiskers,
    BucketCounts,
    GroupedQuantileSummary,
    QuantileCounts,
    QuantileSummary,
)
from trustlab.compute.statistics import MergeableStatistic
from trustlab.errors import ParameterError
from trustlab.privacy._boxplot_results import GroupedBoxplots
from trustlab.privacy._boxplot_rules import DEFAULT_COUNT_WEIGHT, OTHER_LABEL
from trustlab.privacy._grid import DEFAULT_RESOLUTION
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.release import Release

__all__ = [
    "BeyondWhiskers",
    "BucketCounts",
    "GroupedQuantileSummary",
    "QuantileCounts",
    "QuantileSummary",
    "dp_boxplot_of_counts",
    "dp_quantiles_of_counts",
    "grouped_dp_boxplot_of_counts",
    "grouped_dp_boxplot_on",
    "grouped_dp_boxplots_on",
]


def grouped_dp_boxplot_on(
    data: Any,
    column: str,
    group: str,
    categories: Sequence[Any],
    epsilon: float,
    bounds: tuple[float, float],
    *,
    client: Any = None,
    chunksize: int | None = None,
    base: float = 1.001,
    resolution: int = DEFAULT_RESOLUTION,
    **kwargs: Any,
) -> GroupedBoxplots:
    """:func:`grouped_dp_boxplot_of_counts` on a pandas or Dask frame: two passes, noise once on the client.

    Pass 1 computes :class:`QuantileCounts` (grid and bucket counts per group), the
    client releases the group sizes and quantiles, pass 2 computes
    :class:`BeyondWhiskers` with the released whiskers, and the client draws the noisy
    outlier counts. Only merged counts cross the network.

    Parameters
    ----------
    data : pandas.DataFrame or dask.dataframe.DataFrame
        The table.
    column, group : str
        The numeric column and the group column.
    categories : sequence
        The public groups.
    epsilon : float
        Budget of the whole figure.
    bounds : (float, float)
        Public bounds of ``column``.
    client : dask.distributed.Client, optional
        Where a Dask computation runs.
    chunksize : int, optional
        Rows per chunk for pandas input.
    base : float, default 1.001
        Bucket base of the extreme scans.
    resolution : int, default 2**20
        Grid steps across the bounds.
    **kwargs
        Passed to :func:`grouped_dp_boxplot_of_counts`.

    Returns
    -------
    GroupedBoxplots

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.

    Examples
    --------
    >>> import pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=6000), "g": rng.choice(["a", "b"], 6000)})
    >>> res = grouped_dp_boxplot_on(df, "x", "g", ["a", "b"], 1.0, (-20, 20), chunksize=2500)
    >>> list(res)
    ['a', 'b']
    """
    from trustlab.compute.backend import compute

    cats = list(categories)
    stat = QuantileCounts(column, bounds, resolution=resolution, base=base, group=group, categories=cats)
    summary = compute(stat, data, client=client, chunksize=chunksize)

    def beyond(whiskers: dict[int, tuple[float, float]]) -> np.ndarray:
        second = BeyondWhiskers(column, whiskers, group=group, categories=cats)
        return compute(second, data, client=client, chunksize=chunksize)

    return grouped_dp_boxplot_of_counts(summary, beyond, epsilon, **kwargs)  # type: ignore[arg-type]


_FIGURE_KEYS = {"column", "group", "categories", "epsilon", "bounds"}


def grouped_dp_boxplots_on(
    data: Any,
    figures: Sequence[Mapping[str, Any]],
    *,
    client: Any = None,
    chunksize: int | None = None,
    accountant: Accountant | None = None,
) -> list[GroupedBoxplots]:
    """Several grouped DP boxplot figures in two passes over the data in all.

    Pass 1 computes every figure's :class:`QuantileCounts` together; the client releases
    each figure's group sizes and quantiles (figure by figure, in order); pass 2 counts
    the values beyond every released whisker of every figure together
    (:class:`BeyondWhiskers`); the client draws the noisy counts. Each figure is the
    figure :func:`grouped_dp_boxplot_on` draws (and
    :func:`~trustlab.privacy.grouped_dp_boxplot` in process), with the same releases.

    Parameters
    ----------
    data : pandas.DataFrame or dask.dataframe.DataFrame
        The table.
    figures : sequence of mapping
        Each with ``column``, ``group``, ``categories``, ``epsilon`` and ``bounds``, and
        optionally ``base`` (1.001), ``resolution`` (2**20) and any keyword of
        :func:`grouped_dp_boxplot_of_counts` (``counts``, ``description``, ...).
    client : dask.distributed.Client, optional
        Where a Dask computation runs.
    chunksize : int, optional
        Rows per chunk for pandas input.
    accountant : Accountant, optional
        Charged the sum of the figures' budgets (checked before any noise is drawn);
        each figure's releases are recorded in order after all draws.

    Returns
    -------
    list of GroupedBoxplots
        One per figure, in order.

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.

    Examples
    --------
    >>> import pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=6000), "y": rng.exponential(size=6000),
    ...                    "g": rng.choice(["a", "b"], 6000)})
    >>> figs = [{"column": c, "group": "g", "categories": ["a", "b"], "epsilon": 1.0,
    ...          "bounds": (-20, 20)} for c in ("x", "y")]
    >>> [list(f) for f in grouped_dp_boxplots_on(df, figs, chunksize=2500)]
    [['a', 'b'], ['a', 'b']]
    """
    from trustlab.compute.backend import compute
    from trustlab.compute.statistics import Several

    specs = []
    for k, fig in enumerate(figures):
        if not isinstance(fig, Mapping) or not _FIGURE_KEYS <= set(fig):
            raise ParameterError(
                f"figures[{k}] must be a mapping with the keys {sorted(_FIGURE_KEYS)}.", argument="figures"
            )
        rest = {key: v for key, v in fig.items() if key not in _FIGURE_KEYS | {"base", "resolution"}}
        for key in ("accountant", "neighbouring") if "accountant" in rest else ():
            raise ParameterError(
                "pass the accountant to grouped_dp_boxplots_on, not per figure.", argument=key
            )
        check_params({"epsilon": fig["epsilon"]}, {"epsilon": [EPSILON]}, "grouped_dp_boxplots_on")
        stat = QuantileCounts(
            fig["column"],
            fig["bounds"],
            resolution=fig.get("resolution", DEFAULT_RESOLUTION),
            base=fig.get("base", 1.001),
            group=fig["group"],
            categories=fig["categories"],
        )
        specs.append((stat, float(fig["epsilon"]), rest))
    if accountant is not None:
        accountant.check(Release(None, sum(e for _, e, _ in specs), description="boxplot figures"))
    if not specs:
        return []
    summaries = compute(
        Several({str(k): st for k, (st, _, _) in enumerate(specs)}), data, client=client, chunksize=chunksize
    )
    started = []
    for k, (_, eps, rest) in enumerate(specs):
        opts = dict(rest)
        started.append(
            start_figure(
                summaries[str(k)],
                eps,
                neighbouring=opts.pop("neighbouring", "add_remove"),
                counts=opts.pop("counts", None),
                count_weight=opts.pop("count_weight", DEFAULT_COUNT_WEIGHT),
                min_group_size=opts.pop("min_group_size", None),
                other_label=opts.pop("other_label", OTHER_LABEL),
                description=opts.pop("description", "boxplot"),
                options=opts,
            )
        )
    second: dict[str, MergeableStatistic[Any, Any]] = {
        str(k): BeyondWhiskers(
            stat.column,
            {i: p.whiskers for i, (_, p) in pending.items()},
            group=stat.group,
            categories=stat.categories,
        )
        for k, ((stat, _, _), (_, pending)) in enumerate(zip(specs, started, strict=True))
        if pending
    }
    beyond = compute(Several(second), data, client=client, chunksize=chunksize) if second else {}
    out = [end_figure(steps, pending, beyond.get(str(k), {})) for k, (steps, pending) in enumerate(started)]
    if accountant is not None:
        out = [replace(res, releases=tuple(accountant.record(r) for r in res.releases)) for res in out]
    return out
