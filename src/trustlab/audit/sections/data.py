"""The Data section: shape, column types, missingness and per-column summaries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.html import checks_list, fmt, notes_list, table
from trustlab.audit.plots import figure_to_svg, new_figure
from trustlab.audit.section import AuditContext, Check, Section, SectionResult
from trustlab.compute import Moments, ValueCounts, compute
from trustlab.models import categorical_columns
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.statistics import dp_count, dp_histogram, dp_sum

__all__ = ["DataSection"]

MAX_MISSING_RATE = 0.2
TOP_LEVELS = 5


class DataSection(Section):
    """Shape, types, missingness and summaries of every column.

    In private mode: the row count, each column's missing rate and each numeric
    column's mean (clipped to its public bounds) and each categorical column's
    level shares (over its public categories) are released with discrete
    Laplace noise; columns without public bounds or categories are not released.
    """

    name = "data"
    title = "Data"
    budget_weight = 0.4

    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        if budget is None:
            return self._raw(ctx)
        return self._private(ctx, budget)

    def _raw(self, ctx: AuditContext) -> SectionResult:
        df = ctx.data
        cats = set(categorical_columns(df))
        columns: list[dict[str, Any]] = []
        for col in df.columns:
            entry: dict[str, Any] = {"name": str(col), "dtype": str(df[col].dtype)}
            if col in cats:
                counts = compute(ValueCounts(col), df)
                missing = counts.pop(None, 0)
                entry |= {
                    "kind": "categorical",
                    "levels": len(counts),
                    "top": [[str(k), int(v)] for k, v in list(counts.items())[:TOP_LEVELS]],
                }
            else:
                m = compute(Moments(col), df)
                missing = int(m["missing"])
                entry |= {"kind": "numeric"} | {k: float(m[k]) for k in ("mean", "std", "min", "max")}
            entry["missing"] = int(missing)
            entry["missing_rate"] = missing / len(df)
            columns.append(entry)
        figures = {"rows": len(df), "columns": df.shape[1], "column_summaries": columns}
        return SectionResult(
            self.name,
            self.title,
            figures,
            self._checks(ctx, columns),
            ["Raw statistics of the whole table (not differentially private)."],
        )

    def _private(self, ctx: AuditContext, budget: Accountant) -> SectionResult:
        df = ctx.data
        declared = [c for c in df.columns if c in ctx.schema]
        skipped = [str(c) for c in df.columns if c not in ctx.schema]
        shares = budget.split({"rows": 1.0} | {f"col:{c}": 1.0 for c in declared})
        n_release = shares["rows"].record(
            dp_count(len(df), shares["rows"].remaining_epsilon, description="Data: row count")
        )
        n = max(1, n_release.value)
        columns: list[dict[str, Any]] = []
        for col in declared:
            acc = shares[f"col:{col}"]
            bounds = ctx.schema.bounds(col)
            values = df[col]
            entry: dict[str, Any] = {"name": str(col), "dtype": str(values.dtype)}
            if bounds is not None:
                eps = acc.remaining_epsilon / 2
                miss = acc.record(
                    dp_count(int(values.isna().sum()), eps, description=f"Data: missing values of {col}")
                ).value
                x = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
                total = acc.record(
                    dp_sum(
                        x,
                        bounds,
                        acc.remaining_epsilon,
                        description=f"Data: clipped sum of {col} (bounds {bounds[0]:g}..{bounds[1]:g})",
                    )
                ).value
                present = max(1, n - max(0, miss))
                mean = float(np.clip(bounds[0] + total / present, *bounds))
                entry |= {"kind": "numeric", "bounds": list(bounds), "mean": mean}
            else:
                cats = list(ctx.schema.categories(col) or ())
                lookup = {v: i for i, v in enumerate(cats)}
                codes = values.astype(object).map(lookup).fillna(len(cats)).to_numpy(dtype=np.int64)
                hist = acc.record(
                    dp_histogram(
                        codes,
                        len(cats) + 1,
                        acc.remaining_epsilon,
                        description=f"Data: counts of {col} over its {len(cats)} public "
                        "categories + missing/other",
                    )
                ).value
                h = np.clip(hist, 0, None).astype(float)
                h = h / h.sum() if h.sum() > 0 else h
                miss = round(h[-1] * n)
                order = np.argsort(-h[:-1], kind="stable")[:TOP_LEVELS]
                entry |= {
                    "kind": "categorical",
                    "levels": len(cats),
                    "top_shares": [[str(cats[i]), float(h[i])] for i in order],
                }
            entry["missing_rate"] = float(np.clip(miss / n, 0.0, 1.0))
            columns.append(entry)
        notes = [
            f"Differentially private (add/remove one record): {budget.total_epsilon:.4g} of the "
            "audit's epsilon, split evenly over the row count and each declared column.",
            f"Means are of values clipped to the public bounds of the schema ({ctx.schema.source}).",
        ]
        if skipped:
            notes.append("Not released (no public bounds or categories declared): " + ", ".join(skipped))
        figures = {
            "rows": int(n_release.value),
            "columns": df.shape[1],
            "column_summaries": columns,
            "not_released": skipped,
        }
        return SectionResult(self.name, self.title, figures, self._checks(ctx, columns), notes)

    def _checks(self, ctx: AuditContext, columns: list[dict[str, Any]]) -> list[Check]:
        high = [c["name"] for c in columns if c["missing_rate"] > MAX_MISSING_RATE]
        checks = [
            Check(
                "Missing values",
                not high,
                f"columns with more than {MAX_MISSING_RATE:.0%} missing: {', '.join(high)}"
                if high
                else f"every column has at most {MAX_MISSING_RATE:.0%} missing",
            )
        ]
        if not ctx.private:
            const = [
                c["name"]
                for c in columns
                if (c["kind"] == "categorical" and c["levels"] <= 1)
                or (c["kind"] == "numeric" and c["std"] == 0)
            ]
            checks.append(
                Check(
                    "Constant columns",
                    not const,
                    f"single-valued columns carry no information: {', '.join(const)}"
                    if const
                    else "no column is constant",
                )
            )
        return checks

    def render(self, result: SectionResult) -> str:
        f = result.figures
        cols = f["column_summaries"]
        rows = []
        for c in cols:
            if c["kind"] == "numeric":
                detail = f"mean {fmt(c.get('mean'))}" + (
                    f", sd {fmt(c['std'])}, range {fmt(c['min'])}..{fmt(c['max'])}"
                    if "std" in c
                    else f" (bounds {c['bounds'][0]:g}..{c['bounds'][1]:g})"
                )
            elif "top" in c:
                detail = ", ".join(f"{k}: {v:,}" for k, v in c["top"])
            else:
                detail = ", ".join(f"{k}: {v:.1%}" for k, v in c["top_shares"])
            rows.append([c["name"], c["kind"], c["dtype"], c["missing_rate"], detail])
        fig, ax = new_figure(6.5, max(2.5, 0.22 * len(cols) + 1))
        names = [c["name"] for c in cols][::-1]
        rates = [100 * c["missing_rate"] for c in cols][::-1]
        ax.barh(names, rates, color="#4C72B0")
        ax.axvline(
            100 * MAX_MISSING_RATE,
            color="#C44E52",
            ls="--",
            lw=1,
            label=f"{MAX_MISSING_RATE:.0%} threshold",
        )
        ax.set_xlim(0, max(25.0, max(rates, default=0) * 1.1))
        ax.set_xlabel("missing values (% of rows)")
        ax.set_title("Missing values by column")
        ax.legend(loc="lower right", fontsize=8)
        shape = (
            f"<p><strong>{fmt(f['rows'])}</strong> rows &times; <strong>{f['columns']}</strong> columns.</p>"
        )
        return (
            shape
            + checks_list(result.checks)
            + figure_to_svg(fig)
            + table(["column", "kind", "dtype", "missing rate", "summary"], rows)
            + notes_list(result.notes)
        )
