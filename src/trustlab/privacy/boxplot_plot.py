"""Drawing DP boxplots with matplotlib (computation lives in :mod:`trustlab.privacy.boxplot`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trustlab.errors import ParameterError
from trustlab.privacy.boxplot import BoxplotStats

__all__ = ["plot_dp_boxplot"]


def plot_dp_boxplot(
    stats: BoxplotStats | Mapping[Any, BoxplotStats],
    *,
    ax: Any = None,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "value",
    show_counts: bool = True,
) -> Any:
    """Draw one or several (DP) boxplots with ``Axes.bxp`` and return the Axes.

    Points beyond the whiskers are never drawn (they are private); their noisy
    counts are written next to each whisker instead.

    Parameters
    ----------
    stats : BoxplotStats or mapping of label to BoxplotStats
        What :func:`~trustlab.privacy.dp_boxplot_stats` or
        :func:`~trustlab.privacy.grouped_dp_boxplot` returned.
    ax : matplotlib Axes, optional
        Where to draw; a new detached Figure is made when omitted.
    title, xlabel, ylabel : str
        Labels. The default title states epsilon.
    show_counts : bool, default True
        Annotate the noisy counts beyond the whiskers.

    Returns
    -------
    matplotlib.axes.Axes

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy import dp_boxplot_stats
    >>> s = dp_boxplot_stats(np.random.default_rng(0).standard_normal(2000), 1.0, (-50, 50))
    >>> plot_dp_boxplot(s).get_title()
    'DP boxplot (epsilon = 1)'
    """
    if isinstance(stats, BoxplotStats):
        items: dict[Any, BoxplotStats] = {"": stats}
    elif isinstance(stats, Mapping) and stats and all(isinstance(v, BoxplotStats) for v in stats.values()):
        items = dict(stats)
    else:
        raise ParameterError(
            "stats must be a BoxplotStats or a non-empty mapping of label to BoxplotStats.",
            argument="stats",
        )
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(max(4.0, 1.2 * len(items) + 2), 3.6), layout="constrained").add_subplot()
    boxes = [
        {
            "label": str(label),
            "whislo": s.whisker_lo,
            "q1": s.q1,
            "med": s.median,
            "q3": s.q3,
            "whishi": s.whisker_hi,
            "fliers": [],
        }
        for label, s in items.items()
    ]
    ax.bxp(boxes, showfliers=False)
    if show_counts:
        for pos, s in enumerate(items.values(), start=1):
            for y, count, va in (
                (s.whisker_hi, s.count_hi, "bottom"),
                (s.whisker_lo, s.count_lo, "top"),
            ):
                ax.annotate(
                    f"{count} beyond",
                    (pos, y),
                    textcoords="offset points",
                    xytext=(0, 3 if va == "bottom" else -3),
                    ha="center",
                    va=va,
                    fontsize=7,
                )
    eps = {s.epsilon for s in items.values()}
    if title is None:
        title = (
            "boxplot (not private)"
            if eps == {float("inf")}
            else "DP boxplot (epsilon = " + ", ".join(f"{e:g}" for e in sorted(eps)) + ")"
        )
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax
