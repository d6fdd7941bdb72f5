"""Drawing DP boxplots with matplotlib (computation lives in :mod:`trustlab.privacy.boxplot`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trustlab._param_validation import validate_params
from trustlab.errors import ParameterError
from trustlab.privacy.boxplot import BoxplotStats, GroupedBoxplots

__all__ = ["plot_dp_boxplot"]


@validate_params({"title": [None, str], "xlabel": [str], "ylabel": [str], "show_counts": ["boolean"]})
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
    counts are written next to each whisker instead. For a
    :class:`~trustlab.privacy.boxplot.GroupedBoxplots` every public group gets a
    slot, in category order; a group too small to draw is marked "too small" with
    its public or released size, so the figure's layout depends on public inputs
    and released counts only.

    Parameters
    ----------
    stats : BoxplotStats, GroupedBoxplots or mapping of label to BoxplotStats
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
    grouped = stats if isinstance(stats, GroupedBoxplots) else None
    if isinstance(stats, BoxplotStats):
        slots: dict[Any, BoxplotStats | None] = {"": stats}
    elif grouped is not None:
        slots = {cat: grouped.boxes.get(cat) for cat in grouped.categories}
    elif isinstance(stats, Mapping) and stats and all(isinstance(v, BoxplotStats) for v in stats.values()):
        slots = dict(stats)
    else:
        raise ParameterError(
            "stats must be a BoxplotStats, a GroupedBoxplots or a non-empty mapping of label to "
            "BoxplotStats (what dp_boxplot_stats / grouped_dp_boxplot return).",
            argument="stats",
        )
    if ax is not None and not (hasattr(ax, "bxp") and hasattr(ax, "annotate")):
        raise ParameterError(f"ax must be a matplotlib Axes, got {type(ax).__name__}.", argument="ax")
    if ax is None:
        from matplotlib.figure import Figure

        ax = Figure(figsize=(max(4.0, 1.2 * len(slots) + 2), 3.6), layout="constrained").add_subplot()
    drawn = [(pos, label, s) for pos, (label, s) in enumerate(slots.items(), start=1) if s is not None]
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
        for _, label, s in drawn
    ]
    if boxes:
        ax.bxp(boxes, positions=[pos for pos, _, _ in drawn], showfliers=False)
    ax.set_xticks(range(1, len(slots) + 1), [str(label) for label in slots])
    ax.set_xlim(0.5, len(slots) + 0.5)
    if show_counts:
        for pos, _, s in drawn:
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
    if grouped is not None:
        for pos, label in enumerate(slots, start=1):
            if slots[label] is None:
                ax.annotate(
                    f"too small\n(n ≈ {grouped.sizes[label]:g})",
                    (pos, 0.5),
                    xycoords=("data", "axes fraction"),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="0.4",
                )
        eps = {grouped.epsilon}
    else:
        eps = {s.epsilon for s in slots.values() if s is not None}
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
