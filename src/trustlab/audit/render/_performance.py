"""HTML of the Performance section: overall figures beside the majority baseline, calibration, groups."""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np

from trustlab.audit.html import checks_list, fmt_ci, notes_list, table
from trustlab.audit.plots import LEGEND_FONTSIZE, PALETTE, figure_to_svg, new_figure
from trustlab.audit.section import SectionResult

__all__ = ["render_performance"]

_METRICS = ("accuracy", "roc_auc", "brier", "ece")


def _cells(r: dict[str, Any]) -> list[str]:
    return [fmt_ci(r[m], *r["intervals"][m]) for m in _METRICS]


def _count(r: dict[str, Any]) -> str:
    lo, hi = r["intervals"]["count"]
    if hi > lo:
        return fmt_ci(round(r["count"]), round(lo), round(hi))
    return f"{round(r['count']):,}"


def _points(value: float, low: float, high: float) -> str:
    """A difference of two rates in percentage points, with its interval."""
    if not np.isfinite(value):
        return "–"
    text = f"{100 * value:+.1f} percentage points"
    if np.isfinite(low) and np.isfinite(high):
        text += f" [{100 * low:+.1f}, {100 * high:+.1f}]"
    return text


def render_performance(result: SectionResult) -> str:
    """The Performance section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.performance.PerformanceSection` computed.

    Returns
    -------
    str
        HTML: checks, the overall table with the majority-class baseline, one figure of
        calibration curves (a panel per sensitive attribute) and a table per attribute.
    """
    f = result.figures
    o = f["overall"]
    b = f.get("baseline")
    html = [checks_list(result.checks)]
    if b is not None:
        labels = f.get("labels", {"negative": "0", "positive": "1"})
        majority = labels["positive"] if b["majority_is_positive"] else labels["negative"]
        bi = b["intervals"]
        html.append(
            table(
                ["", "accuracy", "majority baseline", "ROC AUC", "Brier", "ECE"],
                [
                    [
                        "all held-out rows",
                        fmt_ci(o["accuracy"], *o["intervals"]["accuracy"]),
                        f"{fmt_ci(b['majority_accuracy'], *bi['majority_accuracy'])} (always '{majority}')",
                        *_cells(o)[1:],
                    ]
                ],
            )
        )
        html.append(
            f"<p>Positive share ('{escape(labels['positive'])}') among the held-out rows: "
            f"{fmt_ci(b['base_rate'], *bi['base_rate'])}; the model predicts "
            f"'{escape(labels['positive'])}' for "
            f"{fmt_ci(b['predicted_positive_rate'], *bi['predicted_positive_rate'])} "
            "of them (threshold 0.5). Accuracy minus the majority baseline: "
            f"{_points(b['accuracy_gain'], *bi['accuracy_gain'])}.</p>"
        )
    else:
        html.append(table(["", "accuracy", "ROC AUC", "Brier", "ECE"], [["all held-out rows", *_cells(o)]]))
    groups = f["by_group"]
    curves = f["calibration_curves"]
    bins = f.get("calibration_bin_counts", {})
    for attr, rows in groups.items():
        html.append(f"<h3>By {escape(attr)}</h3>")
        fig, ax = new_figure(4.6, 3.6)
        ax.plot([0, 1], [0, 1], color="grey", ls=":", lw=1, label="perfect")
        pts = np.asarray(curves["overall"], dtype=float)
        if pts.size:
            ax.plot(pts[:, 0], pts[:, 1], "k-o", ms=3, lw=1.5, label="all")
        for i, r in enumerate(rows):
            g = np.asarray(curves.get(attr, {}).get(r["group"], []), dtype=float)
            if g.size and r["evaluable"]:  # too-small groups' curves are noise: not drawn
                colour = PALETTE[i % len(PALETTE)]
                ax.plot(g[:, 0], g[:, 1], "-", lw=1, color=colour, label=r["group"])
                n = np.asarray(bins.get(attr, {}).get(r["group"], [1.0] * len(g)), dtype=float)
                ax.scatter(
                    g[:, 0], g[:, 1], s=4 + 60 * np.sqrt(n / max(n.max(), 1.0)), color=colour, zorder=3
                )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("mean predicted probability")
        ax.set_ylabel("fraction of positives")
        ax.set_title(f"Calibration by {attr}", fontsize=10)
        ax.legend(fontsize=LEGEND_FONTSIZE, loc="upper left")
        html.append(figure_to_svg(fig, alt=f"calibration by {attr}"))
        if attr in bins:
            edges = [f"{i / 10:.1f}–{(i + 1) / 10:.1f}" for i in range(10)]
            html.append(
                table(
                    ["rows per bin", *edges],
                    [["all", *[round(v) for v in bins["overall"]]]]
                    + [[g, *[round(v) for v in c]] for g, c in bins[attr].items()],
                    caption=f"Held-out rows behind each point of the calibration curves by {attr} "
                    "(bins of predicted probability; a point from a few rows is noise)",
                )
            )
        html.append(
            table(
                ["group", "rows", "accuracy", "ROC AUC", "Brier", "ECE", "evaluated"],
                [
                    [
                        r["group"],
                        _count(r),
                        *_cells(r),
                        "yes" if r["evaluable"] else "too small: figures not meaningful",
                    ]
                    for r in rows
                ],
            )
        )
        html.append(f"<p class='rule'>{escape(f['size_rule'][attr])}.</p>")
    if groups:
        html.append(
            "<p class='rule'>Calibration curves: held-out rows in 10 bins of predicted probability; "
            "a calibrated model follows the dotted diagonal; a point's area grows with its rows "
            "(counts in the table under each chart). Groups too small to evaluate are not drawn.</p>"
        )
    html.append(notes_list(result.notes))
    return "".join(html)
