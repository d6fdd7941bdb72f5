"""HTML of the Privacy section: one small-multiples grid of DP boxes by sensitive group."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab.audit.html import notes_list
from trustlab.audit.plots import figure_to_svg, new_grid
from trustlab.audit.section import SectionResult

__all__ = ["render_privacy"]

_GRID_COLUMNS = 3
_PANEL = (3.3, 2.7)  # inches per panel (width, height)


def _short(label: str, limit: int = 14) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def _draw_boxes(ax: Any, plot: dict[str, Any], private: bool) -> None:
    """Boxes at each group's slot; "N beyond" under / over the whiskers; too-small groups marked."""
    groups = plot["groups"]
    names = list(groups)
    boxes, positions = [], []
    for pos, name in enumerate(names, start=1):
        g = groups[name]
        if not g["drawn"] or not np.isfinite(g["q1"]):
            continue
        boxes.append(
            {
                "label": name,
                "whislo": g["whisker_lo"],
                "q1": g["q1"],
                "med": g["median"],
                "q3": g["q3"],
                "whishi": g["whisker_hi"],
                "fliers": [],
            }
        )
        positions.append(pos)
    if boxes:
        ax.bxp(
            boxes,
            positions=positions,
            showfliers=False,
            widths=0.5,
            patch_artist=True,
            boxprops={"facecolor": "#dbe4f0", "edgecolor": "#2f3e55"},
            medianprops={"color": "#C44E52", "lw": 1.5},
        )
    for pos, name in enumerate(names, start=1):
        g = groups[name]
        if not g["drawn"] or not np.isfinite(g["q1"]):
            n = g["n"]
            # a released size of 0 is noise around a small count, not "no rows"
            text = "no rows" if n == 0 and not private else f"too small\n(n ≈ {n:,.0f})"
            ax.annotate(
                text, (pos, 0.5), xycoords=("data", "axes fraction"), ha="center", va="center", fontsize=7,
                color="0.4",
            )  # fmt: skip
            continue
        for y, count, up in ((g["whisker_hi"], g["count_hi"], True), (g["whisker_lo"], g["count_lo"], False)):
            if np.isfinite(count) and count > 0:
                ax.annotate(
                    f"{count:,.0f} beyond",
                    (pos, y),
                    textcoords="offset points",
                    xytext=(0, 2 if up else -2),
                    ha="center",
                    va="bottom" if up else "top",
                    fontsize=6,
                    color="0.3",
                )
    ax.set_xticks(range(1, len(names) + 1), [_short(n) for n in names], fontsize=7)
    ax.set_xlim(0.4, len(names) + 0.6)
    ax.margins(y=0.12)


def render_privacy(result: SectionResult) -> str:
    """The Privacy section's HTML body: every figure in ONE grid of small panels.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.privacy.PrivacySection` computed.

    Returns
    -------
    str
        HTML: one figure with a panel per (column, sensitive attribute) pair, or one line of
        text when there is nothing to draw, then the notes.
    """
    f = result.figures
    plots = f["boxplots"]
    private = f["private"]
    html: list[str] = []
    if not plots:
        if private:
            html.append('<p class="empty">No numeric column to draw (see the notes below).</p>')
        return "".join(html) + notes_list(result.notes)
    ncols = min(_GRID_COLUMNS, len(plots))
    nrows = math.ceil(len(plots) / ncols)
    fig, axes = new_grid(nrows, ncols, width=_PANEL[0] * ncols, height=_PANEL[1] * nrows + 0.3)
    flat = [ax for row in axes for ax in row]
    for ax, plot in zip(flat, plots, strict=False):
        _draw_boxes(ax, plot, private)
        what = "DP box of" if private else "box of"
        ax.set_title(f"{what} {plot['column']} by {plot['attribute']}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
    for ax in flat[len(plots) :]:
        ax.set_visible(False)
    kind = "DP boxplots" if private else "Raw boxplots"
    fig.suptitle(f"{kind} of numeric columns by sensitive group", fontsize=10)
    html.append(figure_to_svg(fig, alt=f"{kind}: {len(plots)} panels"))
    return "".join(html) + notes_list(result.notes)
