"""The Privacy section: (DP) boxplots of numeric columns grouped by each sensitive attribute."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab.audit.section import AuditContext, SectionResult
from trustlab.audit.sections._base import TwoModeSection
from trustlab.audit.sections._columns import category_codes, integer_resolution, suspect_columns
from trustlab.compute.private import dp_histogram_of_counts
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.boxplot import OTHER_LABEL, GroupedBoxplots, grouped_dp_boxplot

__all__ = ["PrivacySection", "group_statistics", "tukey_box"]

MAX_COLUMNS = 6
MAX_BAR_VALUES = 10  # a count-like column: integer values, at most this many distinct ones
WHISKER = 1.5  # Tukey's fences: 1.5 IQR beyond the quartiles
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


def _candidates(ctx: AuditContext) -> tuple[list[str], list[str]]:
    """Numeric non-sensitive features, and among them the ones left out as identifiers or codes.

    Numeric means declared with bounds in private mode, of numeric dtype otherwise; the
    identifiers and codes are found from public facts in private mode (names and the
    schema).
    """
    if ctx.private:
        cols = [c for c in ctx.features if ctx.schema.bounds(c) is not None]
    else:
        cols = [
            c
            for c in ctx.features
            if pd.api.types.is_numeric_dtype(ctx.data[c]) and not pd.api.types.is_bool_dtype(ctx.data[c])
        ]
    cols = [c for c in cols if c != ctx.target and c not in ctx.sensitive]
    codes = {s["column"] for s in suspect_columns(ctx) if s["kind"] in ("identifier", "code")}
    return [c for c in cols if str(c) not in codes], [c for c in cols if str(c) in codes]


def _numeric_columns(ctx: AuditContext) -> list[str]:
    """The columns drawn (at most ``MAX_COLUMNS``): see :func:`_candidates`."""
    return _candidates(ctx)[0][:MAX_COLUMNS]


def tukey_box(x: np.ndarray) -> dict[str, float]:
    """Tukey's box of finite values ``x``: quartiles, whiskers at data points, counts beyond.

    The whiskers end at the most extreme *data point* within ``1.5 IQR`` of the box
    (Tukey 1977; matplotlib's ``boxplot`` does the same), not at the fence itself: a
    count column with quartiles 0 and 1 has its upper whisker at 2 (a value that
    occurs), not at the fence 2.5.

    Parameters
    ----------
    x : numpy.ndarray
        Finite values (may be empty).

    Returns
    -------
    dict
        ``whisker_lo``, ``q1``, ``median``, ``q3``, ``whisker_hi``, ``count_lo`` and
        ``count_hi`` (points beyond each whisker), ``share_lo``, ``share_hi``; NaN
        everywhere for an empty ``x``.

    Examples
    --------
    >>> b = tukey_box(np.array([0, 0, 0, 0, 1, 1, 2, 2, 3, 5.0]))
    >>> b["q1"], b["q3"], b["whisker_hi"], b["count_hi"]
    (0.0, 2.0, 5.0, 0)
    >>> tukey_box(np.array([0, 0, 0, 1, 1, 1, 1, 1, 2, 9.0]))["whisker_hi"]
    2.0
    """
    if x.size == 0:
        return dict.fromkeys(BOX_FIELDS, math.nan)
    q1, med, q3 = (float(v) for v in np.quantile(x, [0.25, 0.5, 0.75]))
    iqr = q3 - q1
    inside = x[(x >= q1 - WHISKER * iqr) & (x <= q3 + WHISKER * iqr)]
    lo, hi = float(inside.min()), float(inside.max())
    count_lo, count_hi = int(np.sum(x < lo)), int(np.sum(x > hi))
    return {
        "whisker_lo": min(lo, q1),
        "q1": q1,
        "median": med,
        "q3": q3,
        "whisker_hi": max(hi, q3),
        "share_lo": count_lo / x.size,
        "share_hi": count_hi / x.size,
        "count_lo": count_lo,
        "count_hi": count_hi,
    }


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


def _not_drawn(left_out: list[str]) -> str:
    return "Not drawn (they look like identifiers or codes; see the Data section): " + (
        ", ".join(map(str, left_out)) or "none"
    )


def group_statistics(frame: pd.DataFrame, schema: Any, sensitive: list[Any]) -> dict[str, np.ndarray]:
    """Exact sufficient statistics of the private section's group sizes (they merge by addition).

    ``groups:ATTR``: the code histogram of each sensitive attribute over its declared
    categories + missing/other. The in-process section computes it on the whole
    conformed table, a distributed run (:mod:`trustlab.audit._scale_private`) on each
    partition and adds them up; both release them with the same code.
    """
    out: dict[str, np.ndarray] = {}
    for a in sensitive:
        cats = list(schema.categories(a) or ())
        out[f"groups:{a}"] = np.bincount(category_codes(frame[a], cats), minlength=len(cats) + 1)
    return out


def _sizes(
    ctx: AuditContext, attr: str, counts: np.ndarray, epsilon: float, budget: Accountant
) -> dict[Any, float]:
    """Rows per declared group of ``attr`` (and missing or other): one discrete-Laplace histogram."""
    cats = list(ctx.schema.categories(attr) or ())
    rel = budget.record(
        dp_histogram_of_counts(
            counts, epsilon, description=f"privacy: rows per {attr} group (the n of every boxplot by {attr})"
        )
    )
    values = np.clip(np.asarray(rel.value, dtype=float), 0, None)
    return dict(zip([*cats, OTHER_LABEL], values.tolist(), strict=True))


def _raw_groups(ctx: AuditContext, attr: str) -> tuple[list[Any], np.ndarray]:
    """Raw mode: the groups of ``attr`` (seen levels, then missing) and each row's group index."""
    labels = ctx.data[attr]
    cats: list[Any] = sorted(pd.unique(labels.dropna()), key=str)
    codes = pd.Categorical(labels, categories=cats).codes.astype(np.int64)
    codes[codes < 0] = len(cats)
    if labels.isna().any():
        cats.append(OTHER_LABEL)
    return cats, codes


def _bar_values(x: np.ndarray) -> list[float] | None:
    """The bar positions of a count-like column (integer values), or None when it is not one.

    A column is drawn as bars when its finite values are all integers: the values themselves
    when at most :data:`MAX_BAR_VALUES` occur, otherwise the smallest ``MAX_BAR_VALUES - 1``
    and one last bar "at least" the next one.
    """
    finite = x[np.isfinite(x)]
    if finite.size == 0 or not np.all(finite == np.round(finite)):
        return None
    values = np.unique(finite)
    return [float(v) for v in values[:MAX_BAR_VALUES]]


def _raw_plot(ctx: AuditContext, col: str, attr: str) -> dict[str, Any]:
    """Raw mode: exact Tukey boxes per group; bars of values for a count-like column whose box collapses."""
    x = ctx.data[col].to_numpy(dtype=float, na_value=np.nan)
    cats, codes = _raw_groups(ctx, attr)
    finite = np.isfinite(x)
    groups: dict[str, Any] = {}
    for i, cat in enumerate(cats):
        xi = x[(codes == i) & finite]
        groups[str(cat)] = {"n": float(xi.size), "drawn": bool(xi.size)} | {
            k: float(v) for k, v in tukey_box(xi).items()
        }
    entry: dict[str, Any] = {
        "column": str(col),
        "attribute": str(attr),
        "epsilon": math.inf,
        "min_group_size": 1,
        "kind": "box",
        "groups": groups,
    }
    collapsed = any(g["drawn"] and g["q1"] == g["q3"] for g in groups.values())
    values = _bar_values(x) if collapsed else None
    if values is not None:
        labels = [f"{v:g}" for v in values]
        last = len(values) == MAX_BAR_VALUES and np.nanmax(x[finite]) > values[-1]
        if last:
            labels[-1] = f">= {values[-1]:g}"
        for i, cat in enumerate(cats):
            xi = x[(codes == i) & finite]
            counts = [int(np.sum(xi == v)) for v in values]
            if last:
                counts[-1] = int(np.sum(xi >= values[-1]))
            n = max(1, xi.size)
            groups[str(cat)]["bar_shares"] = [c / n for c in counts]
        entry["kind"] = "bars"
        entry["bar_labels"] = labels
    return entry


class PrivacySection(TwoModeSection):
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
    to draw is marked so with that size. A column the schema declares integer-valued
    (``"integer": true`` with integer bounds) is released on the integer grid
    (``resolution = upper - lower``). Columns whose name or schema entry marks them as
    identifiers or codes are not drawn (a box of FIPS codes means nothing).

    Non-private mode: Tukey boxes computed exactly (:func:`tukey_box`: whiskers at the
    most extreme data point within 1.5 IQR, counts beyond them); a count-like column
    (integer values) whose box collapses (``q1 == q3`` in a group) is summarised by the
    share of each value instead.
    """

    name = "privacy"
    title = "Privacy"
    budget_weight = 0.3

    def applies(self, ctx: AuditContext) -> bool:
        """Whether there are sensitive columns and at least one numeric column to draw.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.

        Returns
        -------
        bool
        """
        return bool(ctx.sensitive) and bool(_numeric_columns(ctx))

    @override
    def _raw(self, ctx: AuditContext) -> SectionResult:
        """Exact Tukey boxes (or value shares) of each numeric column by each sensitive attribute."""
        left_out = _candidates(ctx)[1]
        plots = [_raw_plot(ctx, col, attr) for col in _numeric_columns(ctx) for attr in ctx.sensitive]
        notes = [
            "Not private: these figures are computed from the raw data.",
            f"Boxes (Tukey): the box spans the quartiles with the median inside; each whisker ends "
            f"at the most extreme value within {WHISKER:g} x IQR of the box; 'N beyond' counts "
            "the rows outside the whiskers (not drawn as points).",
            "A count-like column (whole numbers) whose box collapses (first quartile = third "
            "quartile, e.g. mostly zeros) is shown as the share of each value by group.",
            _not_drawn(left_out),
        ]
        figures = {"boxplots": plots, "private": False, "not_drawn": [str(c) for c in left_out]}
        return SectionResult(self.name, self.title, figures, [], notes)

    @override
    def _private(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        """The private figures of the in-process table (conformed to the schema)."""
        assert budget is not None  # weight > 0: private runs give the section a share

        def boxplot(col: Any, attr: Any, epsilon: float, bounds: tuple[float, float], **kw: Any) -> Any:
            x = ctx.data[col].to_numpy(dtype=float, na_value=np.nan)
            return grouped_dp_boxplot(x, ctx.data[attr].astype(object).to_numpy(), epsilon, bounds, **kw)

        groups = group_statistics(ctx.data, ctx.schema, ctx.sensitive) if _numeric_columns(ctx) else {}
        return self._release(ctx, budget, groups, boxplot)

    def _release(
        self,
        ctx: AuditContext,
        budget: Accountant,
        groups: dict[str, np.ndarray],
        boxplot: Callable[..., GroupedBoxplots],
        extra_notes: tuple[str, ...] = (),
    ) -> SectionResult:
        """The private figures from exact group sizes and a boxplot releaser (in process or merged).

        Parameters
        ----------
        ctx : AuditContext
            The audit's context (its schema decides every column, group and bound).
        budget : Accountant
            The section's share, spent in full.
        groups : dict
            :func:`group_statistics` of the whole table, computed whole or summed over
            partitions (exact code histograms: they merge by addition).
        boxplot : callable
            ``boxplot(col, attr, epsilon, bounds, categories=, counts=, description=, [resolution=])``
            releasing one grouped DP boxplot (:func:`~trustlab.privacy.grouped_dp_boxplot` on
            the rows, or :func:`~trustlab.compute.quantiles.grouped_dp_boxplot_on` on a Dask frame).
        extra_notes : tuple of str
            Appended to the notes (e.g. where the statistics were computed).

        Returns
        -------
        SectionResult
        """
        cols = _numeric_columns(ctx)
        left_out = _candidates(ctx)[1]
        pairs = [(col, attr) for col in cols for attr in ctx.sensitive]
        eps_sizes = budget.remaining_epsilon * SIZE_SHARE / len(ctx.sensitive) if pairs else 0.0
        eps_box = budget.remaining_epsilon * (1 - SIZE_SHARE) / len(pairs) if pairs else 0.0
        sizes = {}
        if pairs:
            sizes = {a: _sizes(ctx, a, groups[f"groups:{a}"], eps_sizes, budget) for a in ctx.sensitive}
        plots: list[dict[str, Any]] = []
        for col, attr in pairs:
            bounds = ctx.schema.bounds(col)
            assert bounds is not None
            resolution = integer_resolution(ctx.schema, col)
            options: dict[str, Any] = {} if resolution is None else {"resolution": resolution}
            res = boxplot(
                col,
                attr,
                eps_box,
                bounds,
                categories=list(ctx.schema.categories(attr) or ()),
                counts=sizes[attr],
                description=f"privacy: {col} by {attr}",
                **options,
            )
            for release in res.releases:
                budget.record(release)
            plots.append(_plot_entry(col, attr, res) | {"kind": "box", "resolution": resolution})
        rest = budget.remaining_epsilon
        if rest > 1e-12 * budget.total_epsilon:
            budget.spend(
                rest, description="privacy section: unused share (nothing to release)", mechanism="none"
            )
        undeclared = [c for c in ctx.features if c not in ctx.sensitive and ctx.schema.bounds(c) is None]
        notes = [
            "Boxplots are differentially private (DPBoxplot, add/remove neighbours). The rows of each "
            f"group of a sensitive attribute are counted once, with discrete Laplace noise ({SIZE_SHARE:.3g} "
            "of the section's share, split over the attributes), and every boxplot of that attribute "
            "uses those released sizes as its n (a row missing the plotted column is counted in its "
            "group's size all the same); each box gets the rest, split over the (column, attribute) "
            "pairs (groups are disjoint: parallel composition). Points beyond the whiskers are shown "
            "only as noisy counts ('N beyond').",
            "Columns and groups come from the schema (bounds and categories), never from the "
            f"rows; at most {MAX_COLUMNS} columns are drawn. A group whose released size is "
            "below the figure's minimum (min_group_size: JointExp's rank error must stay "
            "below an eighth of the group) keeps its slot, marked too small, with no box. "
            "Columns declared integer-valued in the schema are released on the integer grid.",
            "Not drawn (no public bounds declared): " + (", ".join(map(str, undeclared)) or "none"),
            _not_drawn(left_out),
            f"The boxes carry no interval. Each box gets epsilon {eps_box:.3g}; at such small budgets "
            "JointExp's quartiles can land far from the truth, above all on tied or concentrated "
            "data (counts, codes), so read them as indicative.",
            *extra_notes,
        ]
        figures = {"boxplots": plots, "private": True, "not_drawn": [str(c) for c in left_out]}
        return SectionResult(self.name, self.title, figures, [], notes)

    def render(self, result: SectionResult) -> str:
        """The section's HTML (drawn by :mod:`trustlab.audit.render._privacy`; needs matplotlib)."""
        from trustlab.audit.render._privacy import render_privacy

        return render_privacy(result)
