"""The Privacy section: (DP) boxplots of numeric columns grouped by each sensitive attribute."""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.plots import figure_to_svg, new_figure
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.boxplot import OTHER_LABEL, BoxplotStats, GroupedBoxplots, grouped_dp_boxplot
from trustlab.privacy.boxplot_plot import plot_dp_boxplot
from trustlab.privacy.statistics import dp_histogram

__all__ = ["PrivacySection"]

MAX_COLUMNS = 6
SIZE_SHARE = 1 / 8  # of the section's budget, for the group sizes (shared by every pair of an attribute)
BOX_FIELDS = (
    "whisker_lo",
    "q1",
    "median",
    "q3",
    "whisker_hi",
    "share_lo",
    "share_hi",
    "count_lo",
    "count_hi",
)


def _numeric_columns(ctx: AuditContext) -> list[str]:
    """The columns drawn: declared with public bounds (private mode) or of numeric dtype (raw)."""
    if ctx.private:
        cols = [c for c in ctx.features if ctx.schema.bounds(c) is not None]
    else:
        cols = [
            c
            for c in ctx.features
            if pd.api.types.is_numeric_dtype(ctx.data[c]) and not pd.api.types.is_bool_dtype(ctx.data[c])
        ]
    return [c for c in cols if c != ctx.target and c not in ctx.sensitive][:MAX_COLUMNS]


def _plot_entry(col: str, attr: str, res: GroupedBoxplots) -> dict[str, Any]:
    """Every group of the figure with the same keys (NaN where no box is drawn)."""
    groups: dict[str, Any] = {}
    for cat in res.categories:
        box = res.boxes.get(cat)
        d = box.to_dict() if box is not None else {}
        groups[str(cat)] = {"n": float(res.sizes[cat]), "drawn": box is not None} | {
            k: float(d.get(k, math.nan)) for k in BOX_FIELDS
        }
    return {
        "column": col,
        "attribute": attr,
        "epsilon": float(res.epsilon),
        "min_group_size": int(res.min_group_size),
        "groups": groups,
    }


class PrivacySection(Section):
    """Boxplots of each numeric column by each sensitive attribute.

    Private mode: the rows of each sensitive attribute's groups are counted once with
    discrete Laplace noise (1/8 of the section's share, split over the attributes);
    then for every (column, attribute) pair, with the column's public bounds and the
    attribute's public categories (both from the schema, so which figures appear never
    depends on the rows), :func:`~trustlab.privacy.grouped_dp_boxplot` draws one DP
    boxplot per group (Ramsay and Diaz-Rodriguez, ICML 2025) under add/remove
    neighbours, with those released sizes as ``counts`` and an equal share of the rest
    (groups are disjoint: parallel composition). Releasing the sizes once per attribute
    rather than once per pair gives them as many times more budget as there are
    columns. Every declared group keeps its slot; one whose released size is too small
    to draw is marked so with that size. Non-private mode: plain boxplots, labelled as raw.
    """

    name = "privacy"
    title = "Privacy"
    budget_weight = 0.3

    def applies(self, ctx: AuditContext) -> bool:
        return bool(ctx.sensitive) and bool(_numeric_columns(ctx))

    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        cols = _numeric_columns(ctx)
        pairs = [(col, attr) for col in cols for attr in ctx.sensitive]
        plots: list[dict[str, Any]] = []
        notes: list[str] = []
        if budget is None:
            plots = [self._raw(ctx, col, attr) for col, attr in pairs]
            notes.append("Not private: these boxplots are computed from the raw data.")
            return SectionResult(self.name, self.title, {"boxplots": plots, "private": False}, [], notes)
        eps_sizes = budget.remaining_epsilon * SIZE_SHARE / len(ctx.sensitive) if pairs else 0.0
        eps_box = budget.remaining_epsilon * (1 - SIZE_SHARE) / len(pairs) if pairs else 0.0
        sizes = {attr: self._sizes(ctx, attr, eps_sizes, budget) for attr in ctx.sensitive} if pairs else {}
        for col, attr in pairs:
            bounds = ctx.schema.bounds(col)
            assert bounds is not None
            res = grouped_dp_boxplot(
                ctx.data[col].to_numpy(dtype=float, na_value=np.nan),
                ctx.data[attr].astype(object).to_numpy(),
                eps_box,
                bounds,
                categories=list(ctx.schema.categories(attr) or ()),
                counts=sizes[attr],
                description=f"privacy: {col} by {attr}",
            )
            for release in res.releases:
                budget.record(release)
            plots.append(_plot_entry(col, attr, res))
        rest = budget.remaining_epsilon
        if rest > 1e-12 * budget.total_epsilon:
            budget.spend(
                rest, description="privacy section: unused share (nothing to release)", mechanism="none"
            )
        undeclared = [c for c in ctx.features if c not in ctx.sensitive and ctx.schema.bounds(c) is None]
        notes += [
            "Boxplots are differentially private (DPBoxplot, add/remove neighbours). The rows of each "
            f"group of a sensitive attribute are counted once, with discrete Laplace noise ({SIZE_SHARE:.3g} "
            "of the section's share, split over the attributes), and every boxplot of that attribute "
            "uses those released sizes as its n (a row missing the plotted column is counted in its "
            "group's size all the same); each box gets the rest, split over the (column, attribute) "
            "pairs (groups are disjoint: parallel composition). Points beyond the whiskers are shown "
            "only as noisy counts.",
            "Columns and groups come from the schema (bounds and categories), never from the "
            f"rows; at most {MAX_COLUMNS} columns are drawn. A group whose released size is "
            "below the figure's minimum (min_group_size: JointExp's rank error must stay "
            "below an eighth of the group) keeps its slot, marked too small, with no box.",
            "Not drawn (no public bounds declared): " + (", ".join(map(str, undeclared)) or "none"),
            f"The boxes carry no interval. Each box gets epsilon {eps_box:.3g}; at such small budgets "
            "JointExp's quartiles can land far from the truth, above all on tied or concentrated "
            "data (counts, codes), so read them as indicative.",
        ]
        return SectionResult(self.name, self.title, {"boxplots": plots, "private": True}, [], notes)

    @staticmethod
    def _sizes(ctx: AuditContext, attr: str, epsilon: float, budget: Accountant) -> dict[Any, float]:
        """Rows per declared group of ``attr`` (and missing or other): one discrete-Laplace histogram."""
        cats = list(ctx.schema.categories(attr) or ())
        lookup = {c: i for i, c in enumerate(cats)}
        codes = ctx.data[attr].astype(object).map(lookup).fillna(len(cats)).to_numpy(dtype=np.int64)
        rel = budget.record(
            dp_histogram(
                codes,
                len(cats) + 1,
                epsilon,
                description=f"privacy: rows per {attr} group (the n of every boxplot by {attr})",
            )
        )
        values = np.clip(np.asarray(rel.value, dtype=float), 0, None)
        return dict(zip([*cats, OTHER_LABEL], values.tolist(), strict=True))

    @staticmethod
    def _raw(ctx: AuditContext, col: str, attr: str) -> dict[str, Any]:
        x = ctx.data[col].to_numpy(dtype=float, na_value=np.nan)
        labels = ctx.data[attr]
        finite = x[np.isfinite(x)]
        bounds = (float(finite.min()) - 1, float(finite.max()) + 1) if finite.size else (0.0, 1.0)
        cats = sorted(pd.unique(labels.dropna()), key=str)
        res = grouped_dp_boxplot(
            x,
            labels.astype(object).to_numpy(),
            math.inf,
            bounds,
            categories=cats,
            other_label=OTHER_LABEL if labels.isna().any() else None,
        )
        return _plot_entry(col, attr, res)

    def render(self, result: SectionResult) -> str:
        parts = []
        for plot in result.figures["boxplots"]:
            fig, ax = new_figure(6.0, 3.4)
            prefix = "DP boxplot" if result.figures["private"] else "Raw boxplot"
            plot_dp_boxplot(
                _from_dict(plot),
                ax=ax,
                title=f"{prefix}: {plot['column']} by {plot['attribute']}",
                xlabel=plot["attribute"],
                ylabel=plot["column"],
            )
            parts.append(figure_to_svg(fig))
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
        return "".join(parts) + (f"<ul class='notes'>{notes}</ul>" if notes else "")


def _from_dict(plot: dict[str, Any]) -> GroupedBoxplots:
    """Rebuild the figure's groups for drawing (from the figures only: the report never recomputes)."""
    boxes: dict[str, BoxplotStats] = {}
    for name, g in plot["groups"].items():
        if not g["drawn"]:
            continue
        boxes[name] = BoxplotStats(
            whisker_lo=g["whisker_lo"],
            q1=g["q1"],
            median=g["median"],
            q3=g["q3"],
            whisker_hi=g["whisker_hi"],
            share_lo=g["share_lo"],
            share_hi=g["share_hi"],
            n=g["n"],
            qmin=g["whisker_lo"],
            qmax=g["whisker_hi"],
            epsilon=plot["epsilon"],
            method="dpboxplot",
        )
    cats = tuple(plot["groups"])
    return GroupedBoxplots(
        boxes=boxes,
        categories=cats,
        sizes={k: g["n"] for k, g in plot["groups"].items()},
        sizes_public=False,
        too_small=tuple(k for k, g in plot["groups"].items() if not g["drawn"]),
        min_group_size=plot["min_group_size"],
        epsilon=plot["epsilon"],
        neighbouring="add_remove",
    )
