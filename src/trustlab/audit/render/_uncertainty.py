"""HTML of the Uncertainty section: Kandinsky vs split conformal coverage per group."""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np

from trustlab.audit.html import checks_list, fmt_ci, notes_list, table
from trustlab.audit.plots import LEGEND_FONTSIZE, MEASURE_COLOURS, figure_to_svg, new_figure
from trustlab.audit.section import SectionResult

__all__ = ["render_uncertainty"]

_SMALL_ROWS = 8  # too-small groups shown in the table (the rest are counted)
_METHODS = (("kandinsky", "Kandinsky"), ("split", "split"))
_VERDICT = {
    "pass": "pass",
    "fail": "FAIL: short",
    "inconclusive": "inconclusive",
    "too_small": "too small",
    "not_judged": "– (outcome, not judged)",
}


def _cell(r: dict[str, Any], method: str, what: str) -> str:
    m = r.get(method)
    if m is None:
        return "–"
    if what == "coverage":
        return fmt_ci(m["coverage"], m["coverage_low"], m["coverage_high"])
    return fmt_ci(m["mean_set_size"], m["set_size_low"], m["set_size_high"])  # one precision per table


def _figure(rows: list[dict[str, Any]], target: float, threshold: float) -> str:
    shown = [r for r in rows if r["evaluated"]]
    if not shown:
        return ""
    height = 1.6 + 0.3 * len(shown)
    fig, ax = new_figure(7.0, height)
    ypos = np.arange(len(shown))[::-1].astype(float)
    for j, (method, label) in enumerate(_METHODS):
        cov = np.array([r[method]["coverage"] for r in shown], dtype=float)
        lo = np.array([r[method]["coverage_low"] for r in shown], dtype=float)
        hi = np.array([r[method]["coverage_high"] for r in shown], dtype=float)
        off = 0.17 if j == 0 else -0.17
        ax.errorbar(
            cov,
            ypos + off,
            xerr=[cov - lo, hi - cov],
            fmt="os"[j],
            ms=4,
            lw=1.2,
            capsize=2,
            color=MEASURE_COLOURS[j],  # methods, not groups: greys
            label=f"{label} (95% interval)",
        )
    ax.axvline(target, color="black", lw=1, label=f"target 1 - alpha = {target:g}")
    ax.axvline(threshold, color="grey", lw=1, ls=":", label=f"fails at or below {threshold:g}")
    ax.set_yticks(ypos)
    ax.set_yticklabels([r["group"] for r in shown], fontsize=8)
    low = min(threshold, *(r[m]["coverage_low"] for r in shown for m, _ in _METHODS))
    ax.set_xlim(max(0.0, low - 0.03), 1.015)
    ax.set_ylim(-0.7, len(shown) - 0.3)
    ax.set_xlabel("coverage on the evaluation rows")
    ax.set_title("Coverage per group: Kandinsky vs split conformal", fontsize=10)
    ax.legend(
        fontsize=LEGEND_FONTSIZE,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.22 * 4.0 / height),
        ncol=2,
        frameon=False,
    )
    return figure_to_svg(fig, alt="coverage per group, Kandinsky and split conformal, with 95% intervals")


def render_uncertainty(result: SectionResult) -> str:
    """The Uncertainty section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.uncertainty.UncertaintySection` computed.

    Returns
    -------
    str
        HTML: checks, one table (coverage and mean set size per group, Kandinsky beside
        split conformal), one figure of per-group coverage with interval bars, and notes.
    """
    f = result.figures
    if not f.get("released", False):
        return notes_list(result.notes)
    html = [
        f"<p>Prediction sets at alpha = {f['alpha']:g} (target coverage {f['target']:g}); "
        f"{f['n_calibration']:,} held-out rows calibrate, {f['n_evaluation']:,} evaluate.</p>",
        checks_list(result.checks),
    ]
    rows = f["groups"]
    small = [r for r in rows if not r["evaluated"]]
    listed = [r for r in rows if r["evaluated"] or r in small[:_SMALL_ROWS]]
    hidden = len(rows) - len(listed)
    html.append(
        table(
            [
                "group",
                "rows (cal / eval)",
                "Kandinsky coverage",
                "Kandinsky set size",
                "split coverage",
                "split set size",
                "verdict",
            ],
            [
                [
                    "all rows" if r["kind"] == "overall" else r["group"],
                    f"{r['n_cal']:,} / {r['n_eval']:,}",
                    _cell(r, "kandinsky", "coverage"),
                    _cell(r, "kandinsky", "size"),
                    _cell(r, "split", "coverage"),
                    _cell(r, "split", "size"),
                    _VERDICT[r["status"]],
                ]
                for r in listed
            ],
        )
    )
    if hidden:
        html.append(
            f"<p class='rule'>{hidden} more groups are too small and not shown here (all are listed "
            "in the notes and in report.json).</p>"
        )
    html.append(
        f"<p class='rule'>Coverage: share of evaluation rows whose outcome is in the prediction set; "
        "set size: mean number of outcomes in the set (1 = a single confident answer, 2 = both "
        "outcomes, i.e. the model is unsure). Verdict (Kandinsky sets): "
        f"{escape(_VERDICT['fail'])} when the 95% interval lies at or below {f['threshold']:g}, pass "
        f"when it lies above, inconclusive otherwise; groups with fewer than {f['min_group']} "
        "calibration or evaluation rows are too small.</p>"
    )
    short = f.get("split_short", [])
    if short:
        html.append(
            f"<p>Split conformal, calibrated on all rows at once, falls short (95% interval at or below "
            f"{f['threshold']:g}) for: {escape(', '.join(short))}.</p>"
        )
    html.append(_figure(rows, f["target"], f["threshold"]))
    html.append(notes_list(result.notes))
    return "".join(html)
