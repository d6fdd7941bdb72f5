"""HTML of the Data section: what the model used, shape, missing values, column summaries."""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np

from trustlab.audit._thresholds import MAX_MISSING_RATE
from trustlab.audit.html import checks_list, fmt, fmt_ci, notes_list, table
from trustlab.audit.plots import figure_to_svg, new_figure
from trustlab.audit.section import SectionResult

__all__ = ["render_data", "render_model_inputs"]

_KIND_WORD = {"identifier": "an identifier", "code": "a numeric code", "weight": "a weight"}


def render_model_inputs(inputs: dict[str, Any] | None) -> str:
    """The model's features, the sensitive columns it left out, and warnings about suspect inputs.

    Parameters
    ----------
    inputs : dict or None
        ``figures["model_inputs"]`` of the Data section (None: nothing to show).

    Returns
    -------
    str
        HTML.
    """
    if not inputs:
        return ""
    feats = inputs["features"]
    sens = inputs["sensitive"]
    if inputs["sensitive_used"]:
        used = (
            "The sensitive columns <strong>were used</strong> as features (--use-sensitive): "
            + escape(", ".join(sens))
            + "."
        )
    else:
        used = "Sensitive columns left out of the model: <strong>" + escape(", ".join(sens)) + "</strong>."
    parts = [
        '<div class="inputs"><p><strong>The model used '
        f"{len(feats)} feature{'s' if len(feats) != 1 else ''}:</strong> {escape(', '.join(feats))}. "
        f"{used}</p>"
    ]
    suspect = inputs.get("suspect") or []
    if suspect:
        items = "".join(
            f"<li><strong>{escape(s['column'])}</strong> looks like {_KIND_WORD[s['kind']]} "
            f"({escape(s['reason'])}): {escape(s['advice'])}.</li>"
            for s in suspect
        )
        parts.append(
            '<div class="warn"><strong>Check these inputs.</strong> Columns that look like '
            "identifiers, codes or weights are rarely features a model should use:"
            f"<ul>{items}</ul></div>"
        )
    screened = inputs.get("screened") or []
    if screened:
        lines: list[str] = []
        for f in screened:
            how = (
                f"left out of the model; keep it with <code>--keep {escape(f['column'])}</code> "
                f"(<code>Audit(keep=[...])</code>)"
                if f["dropped"]
                else "kept as a feature as asked (--keep)"
            )
            if f["kind"] == "entity_id" and not inputs.get("group"):
                how += (
                    f"; rows of one entity are on both sides of the split: declare it with "
                    f"<code>--group {escape(f['column'])}</code>"
                )
            lines.append(
                f"<li><strong>{escape(f['column'])}</strong> {escape(f['meaning'])} "
                f"({escape(f['detail'])}): {how}.</li>"
            )
        parts.append(
            '<div class="warn"><strong>Screened columns.</strong> Before fitting, the audit looks '
            "for copies of the target or of a sensitive column, features that predict the target "
            "almost perfectly alone (leakage), identifiers and free text (trustlab.audit.screening):"
            f"<ul>{''.join(lines)}</ul></div>"
        )
    screening = inputs.get("screening") or {}
    if screening.get("note"):
        cls = "rule" if screening.get("ran") else "warn"
        parts.append(f'<p class="{cls}">{escape(screening["note"])}</p>')
    if inputs.get("group"):
        parts.append(
            f"<p>Held-out rows were chosen by entity: every row of one <strong>{escape(inputs['group'])}"
            "</strong> value is on the same side of the split (a keyed hash of that value), so the "
            "held-out figures are for entities the model has not seen.</p>"
        )
    parts.append("</div>")
    return "".join(parts)


def render_data(result: SectionResult) -> str:
    """The Data section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.data.DataSection` computed.

    Returns
    -------
    str
        HTML with the missing-value chart inline as SVG (a line of text instead when no
        column has a missing value, in the raw report).
    """
    f = result.figures
    cols = f["column_summaries"]
    private = "rows_interval" in f  # a private Data section releases the row count with its interval
    rows = []
    flagged = {s["column"]: s["kind"] for s in (f.get("model_inputs") or {}).get("suspect", [])}
    for c in cols:
        if c["kind"] == "numeric":
            if "std" in c:
                detail = (
                    f"mean {fmt(c.get('mean'))}, sd {fmt(c['std'])}, range {fmt(c['min'])}..{fmt(c['max'])}"
                )
            else:
                lo, hi = c["bounds"]
                detail = f"mean {fmt_ci(c['mean'], *c['mean_interval'])} (bounds {lo:g}..{hi:g})"
        elif "top" in c:
            detail = ", ".join(f"{k}: {v:,}" for k, v in c["top"])
        else:
            detail = ", ".join(f"{k}: {v:.1%} [{lo:.1%}, {hi:.1%}]" for k, v, lo, hi in c["shares"])
        rate = (
            fmt_ci(c["missing_rate"], *c["missing_interval"])
            if "missing_interval" in c
            else c["missing_rate"]
        )
        kind = c["kind"] + (f" (looks like {_KIND_WORD[flagged[c['name']]]})" if c["name"] in flagged else "")
        rows.append([c["name"], kind, c["dtype"], rate, detail])
    rows_text = (
        fmt_ci(f["rows"], *f["rows_interval"])
        if "rows_interval" in f
        else f"<strong>{fmt(f['rows'])}</strong>"
    )
    html = [
        render_model_inputs(f.get("model_inputs")),
        f"<p>{rows_text} rows &times; <strong>{f['columns']}</strong> columns.</p>",
        checks_list(result.checks),
    ]
    rates = np.array([100 * c["missing_rate"] for c in cols][::-1], dtype=float)
    if not private and not np.any(rates > 0):
        html.append('<p class="empty">No missing values in any column (no chart drawn).</p>')
    else:
        names = [c["name"] for c in cols][::-1]
        fig, ax = new_figure(6.5, max(2.2, 0.2 * len(cols) + 1))
        if private:
            ci = 100 * np.array([c["missing_interval"] for c in cols][::-1], dtype=float).reshape(-1, 2)
            err = np.abs(np.vstack([rates - ci[:, 0], ci[:, 1] - rates]))
            ax.barh(names, rates, color="#4C72B0", xerr=err, capsize=2)
            ax.set_title("Missing values by declared column (95% intervals)")
        else:
            ax.barh(names, rates, color="#4C72B0")
            ax.set_title("Missing values by column")
        ax.axvline(
            100 * MAX_MISSING_RATE, color="#C44E52", ls="--", lw=1, label=f"{MAX_MISSING_RATE:.0%} threshold"
        )
        ax.set_xlim(0, max(25.0, float(np.max(rates, initial=0)) * 1.1))
        ax.set_xlabel("missing values (% of rows)")
        ax.legend(loc="lower right", fontsize=8)
        html.append(figure_to_svg(fig))
    html.append(table(["column", "kind", "dtype", "missing rate", "summary"], rows))
    html.append(notes_list(result.notes))
    return "".join(html)
