"""The Privacy section: (DP) boxplots of numeric columns grouped by each sensitive attribute."""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.plots import figure_to_svg, new_figure
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.boxplot import BoxplotStats, dp_boxplot_stats
from trustlab.privacy.boxplot_plot import plot_dp_boxplot
from trustlab.privacy.statistics import dp_histogram

__all__ = ["PrivacySection"]

MAX_COLUMNS = 6
MIN_GROUP = 20
COUNT_SHARE = 1 / 8


def _numeric_columns(ctx: AuditContext) -> list[str]:
    return [
        c
        for c in ctx.features
        if c != ctx.target
        and c not in ctx.sensitive
        and pd.api.types.is_numeric_dtype(ctx.data[c])
        and not pd.api.types.is_bool_dtype(ctx.data[c])
    ][:MAX_COLUMNS]


class PrivacySection(Section):
    """Boxplots of each numeric column by each sensitive attribute.

    Private mode: for every (column, attribute) pair with public bounds and public
    categories, the group sizes are released by a discrete-Laplace histogram
    (``1/8`` of the pair's share) and one DP boxplot per group (Ramsay and
    Diaz-Rodriguez, ICML 2025) under add/remove neighbours with the rest (groups are
    disjoint: parallel composition). Pairs lacking bounds or categories are skipped
    with a note. Non-private mode: plain boxplots, labelled as raw.
    """

    name = "privacy"
    title = "Privacy"
    budget_weight = 0.3

    def applies(self, ctx: AuditContext) -> bool:
        return bool(ctx.sensitive) and bool(_numeric_columns(ctx))

    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        notes: list[str] = []
        pairs: list[tuple[str, str]] = []
        for col in _numeric_columns(ctx):
            for attr in ctx.sensitive:
                if budget is not None and ctx.schema.bounds(col) is None:
                    notes.append(f"{col}: no public bounds declared; not released.")
                    break
                if budget is not None and ctx.schema.categories(attr) is None:
                    notes.append(f"{attr}: no public categories declared; {col} not grouped by it.")
                    continue
                pairs.append((col, attr))
        plots: list[dict[str, Any]] = []
        share = budget.remaining_epsilon / len(pairs) if budget is not None and pairs else 0.0
        for col, attr in pairs:
            frame = ctx.data[[col, attr]].dropna()
            if budget is None:
                plots.append(self._raw(frame, col, attr))
            else:
                plots.append(self._private(ctx, frame, col, attr, share, budget, notes))
        if budget is not None:
            rest = budget.remaining_epsilon
            if rest > 0:
                budget.spend(
                    rest,
                    description="privacy section: unused share (nothing to release)",
                    mechanism="none",
                )
            notes.append(
                "Boxplots are differentially private (DPBoxplot, add/remove neighbours); "
                "points beyond the whiskers are shown only as noisy counts."
            )
        else:
            notes.append("Not private: these boxplots are computed from the raw data.")
        return SectionResult(
            self.name, self.title, {"boxplots": plots, "private": budget is not None}, [], notes
        )

    @staticmethod
    def _raw(frame: pd.DataFrame, col: str, attr: str) -> dict[str, Any]:
        groups = {}
        for level, sub in frame.groupby(attr, observed=True, sort=True)[col]:
            if len(sub):
                groups[str(level)] = dp_boxplot_stats(
                    sub.to_numpy(float), float("inf"), (float(sub.min()) - 1, float(sub.max()) + 1)
                ).to_dict()
        return {"column": col, "attribute": attr, "groups": groups}

    @staticmethod
    def _private(
        ctx: AuditContext,
        frame: pd.DataFrame,
        col: str,
        attr: str,
        share: float,
        budget: Accountant,
        notes: list[str],
    ) -> dict[str, Any]:
        bounds = ctx.schema.bounds(col)
        cats = list(ctx.schema.categories(attr) or ())
        assert bounds is not None
        index = {c: i for i, c in enumerate(cats)}
        mapped = frame[attr].map(index)
        other = mapped.isna().to_numpy()
        codes = mapped.fillna(len(cats)).astype(np.int64).to_numpy()
        eps_counts, eps_boxes = share * COUNT_SHARE, share * (1 - COUNT_SHARE)
        hist = budget.record(
            dp_histogram(
                codes,
                len(cats) + 1,
                eps_counts,
                description=f"privacy: rows per {attr} group for {col}",
            )
        )
        budget.spend(
            eps_boxes,
            description=f"privacy: DP boxplots of {col} by {attr}",
            mechanism="DPBoxplot (parallel over groups)",
        )
        values = frame[col].to_numpy(float)
        groups: dict[str, Any] = {}
        for i, cat in enumerate(cats):
            noisy_n = int(hist.value[i])
            if noisy_n < MIN_GROUP:
                notes.append(f"{col} by {attr}: group {cat!r} too small for a boxplot; omitted.")
                continue
            sub = values[(codes == i) & ~other]
            if sub.size == 0:
                sub = np.array([bounds[0]])
            stats = dp_boxplot_stats(
                sub,
                eps_boxes,
                bounds,
                neighbouring="add_remove",
                n=noisy_n,
                random_state=ctx.random_state,
            )
            groups[str(cat)] = stats.to_dict()
        return {"column": col, "attribute": attr, "groups": groups, "epsilon": share}

    def render(self, result: SectionResult) -> str:
        parts = []
        for plot in result.figures["boxplots"]:
            if not plot["groups"]:
                continue
            fig, ax = new_figure(6.0, 3.4)
            stats = {k: _from_dict(v) for k, v in plot["groups"].items()}
            prefix = "DP boxplot" if result.figures["private"] else "Raw boxplot"
            plot_dp_boxplot(
                stats,
                ax=ax,
                title=f"{prefix}: {plot['column']} by {plot['attribute']}",
                xlabel=plot["attribute"],
                ylabel=plot["column"],
            )
            parts.append(figure_to_svg(fig))
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
        return "".join(parts) + (f"<ul class='notes'>{notes}</ul>" if notes else "")


def _from_dict(d: dict[str, Any]) -> BoxplotStats:
    return BoxplotStats(
        whisker_lo=d["whisker_lo"],
        q1=d["q1"],
        median=d["median"],
        q3=d["q3"],
        whisker_hi=d["whisker_hi"],
        share_lo=d["share_lo"],
        share_hi=d["share_hi"],
        n=d["n"],
        qmin=d["whisker_lo"],
        qmax=d["whisker_hi"],
        epsilon=d["epsilon"],
        method=d["method"],
    )
