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

__all__ = ["PrivacySection", "group_statistics"]

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


def _candidates(ctx: AuditContext) -> tuple[list[str], list[str]]:
    """Numeric non-sensitive features, and among them the ones left out as identifiers or codes.

    Numeric means declared with bounds (the section runs in private mode only); the
    identifiers and codes are found from public facts (names and the schema).
    """
    cols = [c for c in ctx.features if ctx.schema.bounds(c) is not None]
    cols = [c for c in cols if c != ctx.target and c not in ctx.sensitive]
    codes = {s["column"] for s in suspect_columns(ctx) if s["kind"] in ("identifier", "code")}
    return [c for c in cols if str(c) not in codes], [c for c in cols if str(c) in codes]


def _numeric_columns(ctx: AuditContext) -> list[str]:
    """The columns drawn (at most ``MAX_COLUMNS``): see :func:`_candidates`."""
    return _candidates(ctx)[0][:MAX_COLUMNS]


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

    Parameters
    ----------
    frame : pandas.DataFrame
        The (conformed) table or one partition of it.
    schema : Schema
        The public schema: each sensitive column's declared categories.
    sensitive : list
        The sensitive columns.

    Returns
    -------
    dict of str to numpy.ndarray
        ``groups:ATTR`` -> counts of each declared category, then of missing or other.

    Examples
    --------
    >>> import pandas as pd
    >>> from trustlab.datasets.schema import Schema
    >>> schema = Schema.from_dict({"columns": {"sex": {"categories": ["f", "m"]}}})
    >>> group_statistics(pd.DataFrame({"sex": ["f", "m", "m", None, "x"]}), schema, ["sex"])
    {'groups:sex': array([1, 2, 2])}
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

    Non-private mode: the section does not apply. Its figures are the private releases;
    exploratory boxes of the raw rows (panels without units, of columns the Data section
    may have flagged) would add nothing the Data section does not say, and their extremes
    are individual values, which the private stance of the report keeps out.

    Examples
    --------
    >>> section = PrivacySection()
    >>> section.name, section.title
    ('privacy', 'Privacy')
    """

    name = "privacy"
    title = "Privacy"
    budget_weight = 0.3

    def applies(self, ctx: AuditContext) -> bool:
        """Whether the audit is private, with sensitive columns and at least one numeric column to draw.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.

        Returns
        -------
        bool
        """
        return ctx.private and bool(ctx.sensitive) and bool(_numeric_columns(ctx))

    @override
    def _raw(self, ctx: AuditContext) -> SectionResult:
        """Nothing outside private mode (:meth:`applies` is False there); one note says why."""
        note = (
            "Not drawn outside private mode: this section shows the DP box plots of a private "
            "audit; the raw columns are described in the Data section."
        )
        figures = {"boxplots": [], "private": False, "not_drawn": []}
        return SectionResult(self.name, self.title, figures, [], [note])

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
        """The section's HTML (drawn by :mod:`trustlab.audit.render._privacy`; needs matplotlib).

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._privacy import render_privacy

        return render_privacy(result)
