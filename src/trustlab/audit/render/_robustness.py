"""HTML of the Robustness section: the most unlike held-out rows and flip shares by group."""

from __future__ import annotations

from html import escape

from trustlab.audit.html import checks_list, fmt, fmt_ci, notes_list, table
from trustlab.audit.section import SectionResult

__all__ = ["render_robustness"]


def render_robustness(result: SectionResult) -> str:
    """The Robustness section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.robustness.RobustnessSection` computed.

    Returns
    -------
    str
        HTML: checks, the OOD summary and most unlike rows, the flip table per attribute, notes.
    """
    figs = result.figures
    html = [checks_list(result.checks)]
    ood = figs.get("ood")
    if ood:
        html.append("<h3>Held-out rows unlike the training data</h3>")
        lo, hi = ood["intervals"]["share_above"]
        html.append(
            table(
                ["figure", "value"],
                [
                    ["held-out rows", ood["rows"]],
                    ["threshold (training 95th percentile distance)", ood["threshold"]],
                    ["median held-out distance", ood["median_score"]],
                    ["share beyond the threshold [95% interval]", fmt_ci(ood["share_above"], lo, hi)],
                ],
            )
        )
        if ood["top"]:
            rows = [
                [
                    t["row"],
                    t["score"],
                    "; ".join(f"{u['feature']}: {u['how']}" for u in t.get("unusual", []))
                    or "no single feature: an unusual combination",
                ]
                for t in ood["top"]
            ]
            html.append(
                table(
                    ["row id", "distance", "what makes it unusual"],
                    rows,
                    caption="Most unlike the training data (row ids only: a whole record could single a "
                    "person out)",
                )
            )
    flips = figs.get("flips")
    if flips and flips.get("evaluated"):
        html.append(f"<h3>Label flips within {escape(fmt(flips['eps']))} x IQR</h3>")
        slo, shi = flips["intervals"]["share"]
        html.append(
            table(
                ["figure", "value"],
                [
                    ["searched held-out rows", flips["rows"]],
                    ["share that flips [95% interval]", fmt_ci(flips["share"], slo, shi)],
                    ["search", flips["method"]],
                ],
            )
        )
        for attr, groups in flips["by_attribute"].items():
            rows = [
                [
                    g["group"],
                    g["rows"],
                    g["flipped"],
                    fmt_ci(*g["share"]),
                    "yes" if g["evaluated"] else "too small",
                ]
                for g in groups
            ]
            html.append(f"<h3>Flips by {escape(str(attr))}</h3>")
            html.append(table(["group", "searched rows", "flipped", "share [95% interval]", "judged"], rows))
    html.append(notes_list(result.notes))
    return "".join(html)
