"""HTML of the Unlearning section: the membership check and the deletion comparison."""

from __future__ import annotations

from trustlab.audit.html import checks_list, fmt, fmt_ci, notes_list, table
from trustlab.audit.section import SectionResult

__all__ = ["render_unlearning"]

_LABELS = {
    "original": "original model",
    "unlearned": "certified unlearning",
    "retrained": "retrained without the rows",
}


def render_unlearning(result: SectionResult) -> str:
    """The Unlearning section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.unlearning.UnlearningSection` computed.

    Returns
    -------
    str
        HTML: checks, the membership figure, the deletion table (logistic models), the notes.
    """
    figs = result.figures
    html = [checks_list(result.checks)]
    mem = figs.get("membership")
    if mem:
        html.append(
            table(
                ["training rows", "held-out rows", "attack advantage [95% interval]"],
                [[mem["members"], mem["non_members"], fmt_ci(*mem["advantage"])]],
            )
        )
    d = figs.get("deletion")
    if d:
        html.append(f"<h3>Forgetting {fmt(d['rows'])} training rows</h3>")
        rows = []
        for key, label in _LABELS.items():
            m = d["models"].get(key)
            if m is None:
                continue
            rows.append(
                [
                    label,
                    m["retain_accuracy"],
                    m["forget_accuracy"],
                    m["test_accuracy"],
                    m["mia_advantage"],
                    int(m["gradient_evaluations"]),
                ]
            )
        headers = [
            "model",
            "accuracy, kept rows",
            "accuracy, forgotten rows",
            "accuracy, held-out rows",
            "attack advantage on forgotten rows",
            "gradient evaluations",
        ]
        caption = (
            f"certificate: epsilon {fmt(d['epsilon'])}, delta {d['delta']:g}; unlearning used "
            f"{fmt(d['compute_ratio'])} of retraining's gradient evaluations; advantages below "
            f"{fmt(d['mia_noise_level'])} are indistinguishable from 0 (95%)"
        )
        html.append(table(headers, rows, caption=caption))
    html.append(notes_list(result.notes))
    return "".join(html)
