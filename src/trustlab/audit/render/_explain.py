"""HTML of the Explain section: importance, partial dependence (in stated units), interactions, recourse."""

from __future__ import annotations

from html import escape
from typing import Any

import numpy as np

from trustlab.audit.html import checks_list, fmt, notes_list, table
from trustlab.audit.plots import PALETTE, figure_to_svg, new_figure, new_grid
from trustlab.audit.section import SectionResult
from trustlab.audit.sections._text_hypotheses import SOURCES

__all__ = ["render_explain", "render_recourse"]


def _importance(f: dict[str, Any]) -> str:
    unit = f.get("unit", "model output")
    suspect = set(f.get("suspect", []))
    names = [n for n, _ in f["importance"]][::-1]
    vals = [v for _, v in f["importance"]][::-1]
    fig, ax = new_figure(6.5, 0.28 * len(names) + 1.2)
    colors = ["#C44E52" if n in suspect else PALETTE[0] for n in names]
    ax.barh([f"{n} (check)" if n in suspect else n for n in names], vals, color=colors)
    if f.get("method") == "fastpd":
        ax.set_xlabel(f"mean |SHAP value| ({unit})")
    else:
        ax.set_xlabel(f"|coefficient| x feature sd ({unit})")
    ax.set_title("Global feature importance", fontsize=10)
    ax.grid(False, axis="y")
    caption = (
        '<p class="rule">Red bars: inputs that look like identifiers, codes or weights (see the Data '
        "section).</p>"
        if suspect & set(names)
        else ""
    )
    return figure_to_svg(fig, alt="feature importance") + caption


def _pd_figure(curves: list[dict[str, Any]], unit: str, suspect: set[str]) -> Any:
    """One row of partial-dependence panels on one y-scale (the effects compare across panels)."""
    fig, axes = new_grid(1, len(curves), width=min(10.0, 3.4 * len(curves)), height=2.9, sharey=True)
    for k, (ax, c) in enumerate(zip(axes[0], curves, strict=True)):
        grid, pd_values = np.asarray(c["grid"], dtype=float), np.asarray(c["pd"], dtype=float)
        levels = c.get("levels")
        if levels is not None:  # a categorical feature: one point per level name
            x = np.arange(len(levels))
            ax.plot(x, pd_values, "o", color=PALETTE[0], ms=6)
            ax.vlines(x, np.nanmin(pd_values), pd_values, color=PALETTE[0], lw=1, alpha=0.4)
            ax.set_xticks(
                x, levels, rotation=30 if max(len(s) for s in levels) > 6 else 0, fontsize=7, ha="right"
            )
            ax.set_xlim(-0.5, len(levels) - 0.5)
        else:
            ax.plot(grid, pd_values, color=PALETTE[0], lw=2)
        feature = str(c["feature"])
        ax.set_xlabel(feature + (" (looks like a code)" if feature in suspect else ""), fontsize=8)
        if k == 0:
            ax.set_ylabel(f"partial dependence ({unit})", fontsize=8)
        ax.set_title(f"Partial dependence on {feature}", fontsize=9)
        ax.tick_params(labelsize=7)
    return fig


def _pd_curves(curves: list[dict[str, Any]], unit: str, suspect: set[str]) -> str:
    fig = _pd_figure(curves, unit, suspect)
    return figure_to_svg(fig, alt="partial dependence curves, one y-scale")


def render_explain(result: SectionResult) -> str:
    """The Explain section's HTML body.

    Parameters
    ----------
    result : SectionResult
        What :class:`~trustlab.audit.sections.explain.ExplainSection` computed.

    Returns
    -------
    str
        HTML: checks, the importance chart, the partial-dependence curves in one row (each
        in the unit the figures state, categorical features over their level names), the
        interactions as a table, the recourse check, notes.
    """
    f = result.figures
    unit = f.get("unit", "model output")
    parts = [checks_list(result.checks)]
    if f.get("importance"):
        parts.append(_importance(f))
    if f.get("pd_curves"):
        parts.append(_pd_curves(f["pd_curves"], unit, set(f.get("suspect", []))))
    if f.get("interactions"):
        parts.append(
            table(
                ["interaction (pair of features)", f"mean |component| ({unit})"],
                [[n, fmt(float(v))] for n, v in f["interactions"]],  # one precision per table
                caption="Strongest pairwise interactions",
            )
        )
    elif f.get("method") == "fastpd":
        parts.append('<p class="empty">No pairwise interaction to show.</p>')
    rec = f.get("recourse")
    if rec and rec.get("status") != "skipped":
        parts.append(render_recourse(rec))
    parts += [_text_hypotheses(t) for t in f.get("text_hypotheses", [])]
    parts.append(notes_list(result.notes))
    return "".join(parts)


_YES_NO = {True: "yes", False: "no"}


def _text_hypotheses(t: dict[str, Any]) -> str:
    """One column's HypotheSAEs hypotheses as a table, the significant ones first."""

    def p_value(h: dict[str, Any]) -> float:  # NaN: the label duplicates another's (no own effect)
        return h["p_value"] if np.isfinite(h["p_value"]) else 2.0

    hyps = sorted(t["hypotheses"], key=lambda h: (not h["significant"], p_value(h)))
    rows = [
        [
            h["label"],
            fmt(h["coef"]),
            f"{h['p_value']:.2g}" if np.isfinite(h["p_value"]) else "–",
            _YES_NO[h["significant"]],
            f"{h['prevalence']:.0%}",
        ]
        for h in hyps
    ]
    return table(
        ["hypothesis (distinguishing n-grams)", "coefficient", "p-value", "significant", "share of texts"],
        rows,
        caption=(
            f"Hypotheses about the outcome from the text column {t['column']!r}"
            + (f", {SOURCES[t['source']]}" if t.get("source") in SOURCES else "")
            + " (HypotheSAEs; "
            f"tested on {t['n_test']:,} held-out rows, significant below {t['threshold']:.3g})"
        ),
    )


def render_recourse(rec: dict[str, Any]) -> str:
    """The recourse check as a summary line and a table of confined regions.

    Parameters
    ----------
    rec : dict
        ``figures["recourse"]`` of the Explain section.

    Returns
    -------
    str
        HTML.
    """
    head = (
        f"<h4>Recourse (confined regions)</h4><p>{rec['n_fixed']:,} of {rec['n_checked']:,} test "
        f"individuals ({rec['share_fixed']:.1%}) have a fixed negative prediction "
        f"({rec['n_negative']:,} are predicted negative). "
    )
    if rec["certified"]:
        head += "No confined region exists: recourse is certified for the whole population region.</p>"
        return head
    head += f"Search status: {escape(str(rec['status']))}, {rec['solve_time']:.2f} s.</p>"
    if not rec["regions"]:
        return head
    rows = [[r["description"], r["n_rows"], r["verified"]] for r in rec["regions"]]
    return head + table(
        ["Confined region (everyone inside is fixed)", "test rows inside", "verified"],
        rows,
        caption="Confined regions, largest first",
    )
