"""HTML of the Targeting section: reach by group and the prediction-vs-capacity comparison."""

from __future__ import annotations

from html import escape

from trustlab.audit.html import checks_list, fmt, fmt_ci, notes_list, table
from trustlab.audit.section import SectionResult

__all__ = ["render_targeting"]


def render_targeting(result: SectionResult) -> str:
    """The Targeting section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.targeting.TargetingSection` computed.

    Returns
    -------
    str
        HTML: checks, a reach table per sensitive attribute, the comparison, the notes.
    """
    figs = result.figures
    html = [checks_list(result.checks)]
    for attr, res in figs.get("by_attribute", {}).items():
        rows = [["all", res["rows"], res["target_rows"], figs["capacity"], fmt_ci(*res["overall"]), ""]]
        for g in res["groups"]:
            rows.append(
                [
                    g["group"],
                    g["rows"],
                    g["target_rows"],
                    g["served_share"],
                    fmt_ci(*g["reach"]),
                    "yes" if g["evaluated"] else "too small",
                ]
            )
        html.append(f"<h3>By {escape(str(attr))}</h3>")
        headers = ["group", "held-out rows", f"rows with {figs['target_label']}", "share served", "reach"]
        html.append(table([*headers, "judged"], rows))
    comp = figs.get("comparison")
    if comp:
        iv = comp["intervals"]

        def ci(key: str) -> str:
            return fmt_ci(comp[key], *iv[key]) if key in iv else fmt(comp[key])

        html.append("<h3>Better prediction or more capacity?</h3>")
        html.append(
            table(
                ["figure", "value [95% interval]"],
                [
                    ["reach at this capacity", ci("reach")],
                    ["equivalent R^2 of the model", ci("r2_equivalent")],
                    ["prediction-access ratio", ci("prediction_access_ratio")],
                    [f"reach gained by +{comp['delta_r2']:g} R^2", ci("reach_gain")],
                    ["capacity increase that gains as much", ci("capacity_increase")],
                ],
            )
        )
    html.append(notes_list(result.notes))
    return "".join(html)
