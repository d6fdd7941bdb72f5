"""The Data section: shape, column types, missingness and per-column summaries."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from typing_extensions import override

from trustlab.audit._scale_stats import column_summaries
from trustlab.audit._thresholds import MAX_MISSING_RATE
from trustlab.audit.prediction_table import discrete_laplace_sd
from trustlab.audit.section import (
    AuditContext,
    Check,
    SectionResult,
    interval_rule,
    interval_verdict,
)
from trustlab.audit.sections._base import TwoModeSection
from trustlab.audit.sections._columns import category_codes, suspect_columns
from trustlab.compute.private import dp_histogram_of_counts
from trustlab.models import categorical_columns
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.statistics import dp_count, dp_sum_of_units, grid_units

__all__ = ["DataSection"]

TOP_LEVELS = 5


class DataSection(TwoModeSection):
    """Shape, types, missingness and summaries of every column.

    In private mode: the row count, each column's missing rate and each numeric
    column's mean (clipped to its public bounds) and each categorical column's
    level shares (over its public categories) are released with discrete
    Laplace noise; columns without public bounds or categories are not released.

    Examples
    --------
    >>> section = DataSection()
    >>> section.name, section.title
    ('data', 'Data')
    """

    name = "data"
    title = "Data"
    budget_weight = 0.4

    @override
    def _raw(self, ctx: AuditContext) -> SectionResult:
        df = ctx.data
        cats = categorical_columns(df)
        stats = column_summaries(ctx, cats)  # one pass over the table (trustlab.compute)
        columns: list[dict[str, Any]] = []
        n_rows = 0
        for i, col in enumerate(df.columns):
            entry: dict[str, Any] = {"name": str(col), "dtype": str(df[col].dtype)}
            if col in set(cats):
                counts = dict(stats[str(i)])
                n_rows = sum(counts.values())
                missing = counts.pop(None, 0)
                entry |= {
                    "kind": "categorical",
                    "levels": len(counts),
                    "top": [[str(k), int(v)] for k, v in list(counts.items())[:TOP_LEVELS]],
                }
            else:
                m = stats[str(i)]
                n_rows = int(m["rows"])
                missing = int(m["missing"])
                entry |= {"kind": "numeric"} | {k: float(m[k]) for k in ("mean", "std", "min", "max")}
            entry["missing"] = int(missing)
            columns.append(entry)
        for entry in columns:
            entry["missing_rate"] = entry["missing"] / n_rows
        figures = {
            "rows": n_rows,
            "columns": df.shape[1],
            "column_summaries": columns,
            "model_inputs": model_inputs(ctx),
        }
        return SectionResult(
            self.name,
            self.title,
            figures,
            self._checks(ctx, columns),
            [
                "Raw statistics of the whole table (not differentially private), computed in one "
                "pass as mergeable statistics (trustlab.compute): exact counts; sums up to float "
                "rounding."
            ],
        )

    @override
    def _private(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        assert budget is not None  # weight > 0: private runs give the section a share
        columns = list(ctx.data.columns)  # conformed to the schema: dtypes come from the schema alone
        stats = private_statistics(ctx.data, ctx.schema, columns)
        return self._release(ctx, budget, stats, columns)

    def _release(
        self,
        ctx: AuditContext,
        budget: Accountant,
        st: dict[str, Any],
        all_columns: list[Any],
        extra_notes: tuple[str, ...] = (),
    ) -> SectionResult:
        """The private figures from exact statistics (:func:`private_statistics`, or merged ones)."""
        schema = ctx.schema
        declared = [c for c in all_columns if _described(schema, c)]  # text columns: not released
        skipped = [str(c) for c in all_columns if not _described(schema, c)]
        shares = budget.split({"rows": 1.0} | {f"col:{c}": 1.0 for c in declared})
        n_release = shares["rows"].record(
            dp_count(int(st["rows"]), shares["rows"].remaining_epsilon, description="Data: row count")
        )
        n = max(1, n_release.value)
        t_n = _halfwidth(n_release.parameters["scale"], 3)
        columns: list[dict[str, Any]] = []
        for col in declared:
            acc = shares[f"col:{col}"]
            bounds = schema.bounds(col)
            entry: dict[str, Any] = {"name": str(col)}
            if bounds is not None:
                eps = acc.remaining_epsilon / 2
                miss_rel = acc.record(
                    dp_count(int(st[f"missing:{col}"]), eps, description=f"Data: missing values of {col}")
                )
                sum_rel = acc.record(
                    dp_sum_of_units(
                        int(st[f"units:{col}"]),
                        bounds,
                        acc.remaining_epsilon,
                        resolution=SUM_RESOLUTION,
                        description=f"Data: clipped sum of {col} (bounds {bounds[0]:g}..{bounds[1]:g})",
                    )
                )
                miss = miss_rel.value
                t_m = _halfwidth(miss_rel.parameters["scale"], 3)
                t_s = _halfwidth(sum_rel.parameters["integer_scale"], 3) * sum_rel.parameters["grid_step"]
                total = float(sum_rel.value)
                present = max(1, n - miss)
                mean = float(np.clip(bounds[0] + total / present, *bounds))
                lo = bounds[0] + max(0.0, total - t_s) / (present + t_n + t_m)
                hi = bounds[0] + (total + t_s) / max(1, present - t_n - t_m)
                entry |= {
                    "kind": "numeric",
                    "dtype": "float64",
                    "bounds": list(bounds),
                    "mean": mean,
                    "mean_interval": [float(np.clip(lo, *bounds)), float(np.clip(hi, *bounds))],
                }
                rate = float(np.clip(miss / n, 0.0, 1.0))
                rate_int = [
                    float(np.clip((miss - t_m) / (n + t_n), 0.0, rate)),
                    float(np.clip((miss + t_m) / max(1, n - t_n), rate, 1.0)),
                ]
            else:
                cats = list(schema.categories(col) or ())
                rel = acc.record(
                    dp_histogram_of_counts(
                        st[f"hist:{col}"],
                        acc.remaining_epsilon,
                        description=f"Data: counts of {col} over its {len(cats)} public "
                        "categories + missing/other",
                    )
                )
                h = np.clip(np.asarray(rel.value, dtype=float), 0, None)
                scale = rel.parameters["scale"]
                t_h = _halfwidth(scale, 2)
                total = max(1.0, float(h.sum()))
                t_total = _Z2 * np.sqrt(h.size) * discrete_laplace_sd(scale)
                share = h / total
                low = np.clip((h - t_h) / (total + t_total), 0.0, share)
                high = np.clip((h + t_h) / max(1.0, total - t_total), share, 1.0)
                entry |= {
                    "kind": "categorical",
                    "dtype": "category",
                    "levels": len(cats),
                    "shares": [
                        [str(c), float(share[i]), float(low[i]), float(high[i])] for i, c in enumerate(cats)
                    ],
                }
                rate, rate_int = float(share[-1]), [float(low[-1]), float(high[-1])]
            entry["missing_rate"] = rate
            entry["missing_interval"] = rate_int
            columns.append(entry)
        notes = [
            f"Differentially private (add/remove one record): {budget.total_epsilon:.4g} of the "
            "audit's epsilon, split evenly over the row count and each declared column.",
            "Kinds and dtypes are the schema's declarations (numeric columns as float64 clipped to "
            "their bounds, categorical columns over their declared categories), never read off the "
            "rows; a value outside a column's categories, or one that does not read as a number, "
            "counts as missing or other.",
            f"Means are of values clipped to the public bounds of the schema ({schema.source}).",
            "Intervals (95%) cover the privacy noise of the counts and sums each figure is built "
            "from (Bonferroni over them); they describe this table, so no sampling error is added.",
            "Not released (no public bounds or categories declared): " + (", ".join(skipped) or "none"),
            *extra_notes,
        ]
        figures = {
            "rows": int(n_release.value),
            "rows_interval": [max(0, int(n_release.value) - t_n), int(n_release.value) + t_n],
            "columns": len(all_columns),
            "column_summaries": columns,
            "not_released": skipped,
            "model_inputs": model_inputs(ctx),
        }
        return SectionResult(self.name, self.title, figures, self._checks(ctx, columns), notes)

    def _checks(self, ctx: AuditContext, columns: list[dict[str, Any]]) -> list[Check]:
        rule = interval_rule(MAX_MISSING_RATE, at_most=True) + " (for every column: fail when one fails)"
        if ctx.private:
            verdicts = [
                interval_verdict(
                    c["missing_interval"][0], c["missing_interval"][1], MAX_MISSING_RATE, at_most=True
                )
                for c in columns
            ]
            high = [c["name"] for c, v in zip(columns, verdicts, strict=True) if v == "fail"]
            unsure = [c["name"] for c, v in zip(columns, verdicts, strict=True) if v == "inconclusive"]
            status = "fail" if high else "inconclusive" if unsure else "pass"
            detail = (
                (f"more than {MAX_MISSING_RATE:.0%} missing: {', '.join(high)}" if high else "")
                + ("; " if high and unsure else "")
                + (f"interval straddles {MAX_MISSING_RATE:.0%}: {', '.join(unsure)}" if unsure else "")
            ) or f"every declared column has at most {MAX_MISSING_RATE:.0%} missing"
            return [Check("Missing values", None, detail, status=status, rule=rule)]
        high = [c["name"] for c in columns if c["missing_rate"] > MAX_MISSING_RATE]
        checks = [
            Check(
                "Missing values",
                not high,
                f"columns with more than {MAX_MISSING_RATE:.0%} missing: {', '.join(high)}"
                if high
                else f"every column has at most {MAX_MISSING_RATE:.0%} missing",
                rule=f"pass when every column has at most {MAX_MISSING_RATE:.0%} missing (exact counts)",
            )
        ]
        const = [
            c["name"]
            for c in columns
            if (c["kind"] == "categorical" and c["levels"] <= 1) or (c["kind"] == "numeric" and c["std"] == 0)
        ]
        checks.append(
            Check(
                "Constant columns",
                not const,
                f"single-valued columns carry no information: {', '.join(const)}"
                if const
                else "no column is constant",
                rule="pass when no column holds a single value (exact counts)",
            )
        )
        return checks

    def render(self, result: SectionResult) -> str:
        """The section's HTML (drawn by :mod:`trustlab.audit.render._data`; needs matplotlib).

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._data import render_data

        return render_data(result)


def model_inputs(ctx: AuditContext) -> dict[str, Any]:
    """What the model used: its features, the sensitive columns and whether it used them.

    Also lists the inputs that look like identifiers, codes or weights (public facts
    only in private mode: see :func:`~trustlab.audit.sections._columns.suspect_columns`).
    """
    return {
        "features": [str(c) for c in ctx.features],
        "sensitive": [str(c) for c in ctx.sensitive],
        "sensitive_used": any(c in ctx.features for c in ctx.sensitive),
        "suspect": suspect_columns(ctx),
        "screened": list(ctx.column_flags),
        "screening": dict(ctx.screening),
        "group": None if ctx.group is None else str(ctx.group),
    }


SUM_RESOLUTION = 2**12
"""Grid steps of the private Data section's clipped sums (:func:`~trustlab.privacy.dp_sum`'s default)."""


def private_statistics(frame: Any, schema: Any, columns: list[Any]) -> dict[str, Any]:
    """Exact sufficient statistics of the private Data section (they merge by addition).

    ``rows``; per declared column with bounds, ``missing:COL`` and the integer
    ``units:COL`` of :func:`~trustlab.privacy.statistics.grid_units`; per declared
    categorical column, ``hist:COL``, its code histogram over the declared categories +
    missing/other. The in-process section computes them on the whole conformed table, a
    distributed run (:mod:`trustlab.audit._scale_private`) on each partition and adds them
    up; both release them with the same code, so their ledgers are identical.
    """
    st: dict[str, Any] = {"rows": len(frame)}
    for c in columns:
        if not _described(schema, c):
            continue
        bounds = schema.bounds(c)
        if bounds is not None:
            values = frame[c].to_numpy(dtype=float, na_value=np.nan)
            st[f"missing:{c}"] = int(np.isnan(values).sum())
            st[f"units:{c}"] = grid_units(values, bounds, SUM_RESOLUTION)
        else:
            cats = list(schema.categories(c) or ())
            st[f"hist:{c}"] = np.bincount(category_codes(frame[c], cats), minlength=len(cats) + 1)
    return st


def _described(schema: Any, column: Any) -> bool:
    """Whether the schema declares the column's bounds or categories (not a text column)."""
    return schema.kind(column) in ("numeric", "categorical")


_Z2 = 2.241402727604947  # normal quantile for two-sided 95% with Bonferroni over 2


def _halfwidth(scale: float, k: int = 1, level: float = 0.95) -> int:
    """Smallest ``t`` with ``P(|Z| > t) <= (1 - level) / k`` for discrete Laplace noise ``Z`` of ``scale``.

    ``P(|Z| > t) = 2 a^(t+1) / (1 + a)`` with ``a = exp(-1/scale)``.
    """
    a = math.exp(-1.0 / float(scale))
    if a <= 0.0:
        return 0
    t = math.log((1 - level) / k * (1 + a) / 2) / math.log(a) - 1
    return max(0, math.ceil(t - 1e-9))
