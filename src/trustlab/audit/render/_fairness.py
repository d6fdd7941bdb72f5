"""HTML of the Fairness section: group rates and disparities with their intervals."""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np

from trustlab.audit._thresholds import MAX_DIFFERENCE
from trustlab.audit.html import checks_list, fmt, fmt_ci, notes_list, table
from trustlab.audit.plots import MEASURE_COLOURS, PALETTE, bar_legend, figure_to_svg, new_grid
from trustlab.audit.section import SectionResult

__all__ = ["render_fairness"]

_RATES = ("selection_rate", "true_positive_rate", "false_positive_rate", "accuracy")
_DIFFS = ("demographic_parity_difference", "equalized_odds_difference")


def _interval(low: Any, high: Any) -> str:
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return "–"
    return f"[{fmt(float(low))}, {fmt(float(high))}]"


def _draw(axes: list[Any], attr: str, res: dict[str, Any], threshold: float) -> None:
    ax, ax2 = axes
    groups, ok = res["groups"], res["evaluable"]
    width = 0.8 / max(1, len(groups))
    x = np.arange(len(_RATES))
    for i, g in enumerate(groups):
        vals = np.array([res["rates"][m][i] for m in _RATES], dtype=float)
        ci = np.array([res["rate_intervals"][m][i] for m in _RATES], dtype=float)
        err = np.abs(np.vstack([vals - ci[:, 0], ci[:, 1] - vals]))
        ax.bar(
            x + (i - (len(groups) - 1) / 2) * width,
            np.nan_to_num(vals),
            width,
            label=g if ok[i] else f"{g} (too small)",
            yerr=np.nan_to_num(err),
            capsize=2,
            color=PALETTE[i % len(PALETTE)],
            hatch=None if ok[i] else "//",
            alpha=1.0 if ok[i] else 0.35,
        )
    ax.set_xticks(x, ["selection rate", "TPR", "FPR", "accuracy"])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("rate (fraction of rows)")
    ax.set_title(f"Rates by {attr} (95% intervals)", fontsize=10)
    bar_legend(ax)  # right of the panel: it covers no bar
    vals = np.array([res["differences"][k] for k in _DIFFS], dtype=float)
    ci = np.array([res["difference_intervals"][k] for k in _DIFFS], dtype=float)
    err = np.abs(np.vstack([vals - ci[:, 0], ci[:, 1] - vals]))
    ax2.bar([0, 1], np.nan_to_num(vals), color=MEASURE_COLOURS[1], yerr=np.nan_to_num(err), capsize=4)
    ax2.axhline(threshold, color="#C44E52", ls="--", lw=1, label=f"threshold {threshold:g}")
    top = float(np.nanmax(np.append(ci[:, 1], threshold)))
    ax2.set_ylim(0, max(1.25 * threshold, 1.1 * top))
    for j in np.flatnonzero(~np.isfinite(vals)):
        ax2.text(j, 0.5 * threshold, "not\nevaluable", ha="center", va="center", fontsize=8, color="0.35")
    ax2.set_xticks([0, 1], ["demographic\nparity", "equalized\nodds"])
    ax2.set_ylabel("difference (max - min rate)")
    ax2.set_title("Disparities (95% intervals)", fontsize=10)
    bar_legend(ax2, loc="upper right")


def render_fairness(result: SectionResult) -> str:
    """The Fairness section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.fairness.FairnessSection` computed.

    Returns
    -------
    str
        HTML: checks, one figure (a row per sensitive attribute: rates by group and the
        disparities against the threshold), and per attribute the group table (with the
        positives and negatives the size rule counts) and the disparity table.
    """
    by_attr = result.figures["by_attribute"]
    html = [checks_list(result.checks)]
    for attr, res in by_attr.items():
        ok = res["evaluable"]
        html.append(f"<h3>By {escape(attr)}</h3>")
        fig, axes = new_grid(1, 2, width=10.0, height=3.3, width_ratios=[2.2, 1])
        _draw(axes[0], attr, res, MAX_DIFFERENCE)
        html.append(figure_to_svg(fig, alt=f"rates and disparities by {attr}"))
        rows = []
        for i, g in enumerate(res["groups"]):
            n, (nlo, nhi) = res["rates"]["count"][i], res["count_intervals"][i]
            classes = (
                f"{fmt(round(res['positives'][i]))} / {fmt(round(res['negatives'][i]))}"
                if "positives" in res
                else "–"
            )
            rows.append(
                [g, fmt_ci(round(n), round(nlo), round(nhi)) if nhi > nlo else f"{round(n):,}", classes]
                + [fmt_ci(res["rates"][m][i], *res["rate_intervals"][m][i]) for m in _RATES]
                + ["yes" if ok[i] else "too small: figures not meaningful"]
            )
        html.append(
            table(
                [
                    "group",
                    "rows",
                    "positives / negatives",
                    "selection rate",
                    "TPR",
                    "FPR",
                    "accuracy",
                    "compared",
                ],
                rows,
            )
        )
        d, di = res["differences"], res["difference_intervals"]
        html.append(
            table(
                ["measure", "difference", "95% interval"],
                [
                    ["demographic parity", d[_DIFFS[0]], _interval(*di[_DIFFS[0]])],
                    ["equalized odds", d[_DIFFS[1]], _interval(*di[_DIFFS[1]])],
                ],
            )
        )
        html.append(f"<p class='rule'>{escape(res['size_rule'])}.</p>")
    html.extend(_calibration_html(result.figures.get("calibration")))
    html.extend(
        _mitigation_html(result.figures.get("mitigation"), result.figures.get("mitigation_constraint"))
    )
    html.append(notes_list(result.notes))
    return "".join(html)


def _triple(v: list[float]) -> str:
    return fmt_ci(v[0], v[1], v[2])


def _calibration_html(cal: dict[str, Any] | None) -> list[str]:
    """One table per attribute: multiaccuracy and multicalibration by group (and the proxy bound)."""
    if not cal:
        return []
    out = [f"<h3>Multiaccuracy and multicalibration ({cal['n_levels']} score levels)</h3>"]
    for attr, res in cal["by_attribute"].items():
        bound = "bound" in res
        headers = ["group", "rows", "multiaccuracy", "multicalibration (l1)"]
        headers += ["bound on the true violation"] if bound else []
        rows = [
            [g, n, _triple(ma), _triple(mc)] + ([_triple(b)] if bound else [])
            for g, n, ma, mc, b in zip(
                res["groups"], res["rows"], res["ma"], res["mc"], res.get("bound", res["mc"]), strict=True
            )
        ]
        caption = f"proxy {attr} (error rate {res['proxy_error']:g})" if bound else f"by {attr}"
        out.append(table(headers, rows, caption=caption))
    return out


def _mitigation_html(mit: dict[str, Any] | None, constraint: str | None) -> list[str]:
    """Before/after table per attribute: rates by group, disparities and accuracy."""
    if not mit:
        return []
    out = [f"<h3>Mitigation: {escape(str(constraint).replace('_', ' '))} post-processing</h3>"]
    names = {"selection_rate": "selection rate", "true_positive_rate": "TPR", "false_positive_rate": "FPR"}
    for attr, res in mit.items():
        if not res["evaluated"]:
            out.append(f"<p>By {escape(attr)}: not evaluable ({escape(res['reason'])}).</p>")
            continue
        rows: list[list[Any]] = []
        for i, g in enumerate(res["groups"]):
            for key, label in names.items():
                rows.append([f"{g}: {label}", res["before"]["rates"][key][i], res["after"]["rates"][key][i]])
        for key in ("demographic_parity", "equal_opportunity", "equalized_odds"):
            rows.append(
                [
                    f"{key.replace('_', ' ')} difference",
                    _triple(res["before"]["gaps"][key]),
                    _triple(res["after"]["gaps"][key]),
                ]
            )
        rows.append(["accuracy", _triple(res["before"]["accuracy"]), _triple(res["after"]["accuracy"])])
        n_fit, n_eval = res["rows"]["fit"], res["rows"]["evaluate"]
        caption = f"by {attr}: fitted on {n_fit:,} held-out rows, judged on {n_eval:,}"
        out.append(table(["", "before (threshold 0.5)", "after"], rows, caption=caption))
    return out
