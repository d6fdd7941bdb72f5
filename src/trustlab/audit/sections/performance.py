"""The Performance section: accuracy, ROC AUC, Brier score, calibration and ECE, overall and by group."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score, brier_score_loss, roc_auc_score

from trustlab.audit.html import checks_list, notes_list, table
from trustlab.audit.plots import figure_to_svg, new_figure
from trustlab.audit.prediction_table import (
    OTHER,
    PredictionTable,
    binned_metrics,
    build_prediction_table,
    group_levels,
)
from trustlab.audit.section import AuditContext, Check, Section, SectionResult
from trustlab.privacy.accounting import Accountant
from trustlab.uncertainty import calibration_table, expected_calibration_error

__all__ = ["PerformanceSection"]

MAX_ECE = 0.05
MAX_AUC_GAP = 0.05
MIN_GROUP = 30
METRICS = ("accuracy", "roc_auc", "brier", "ece")


def _exact(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    out: dict[str, float] = {"count": float(y.size)}
    if y.size == 0:
        return out | dict.fromkeys(METRICS, np.nan)
    out["accuracy"] = float(accuracy_score(y, p >= 0.5))
    out["roc_auc"] = float(roc_auc_score(y, p)) if 0 < y.sum() < y.size else np.nan
    out["brier"] = float(brier_score_loss(y, p, pos_label=1)) if y.size else np.nan
    out["ece"] = expected_calibration_error(y, p)
    return out


def _curve_exact(y: np.ndarray, p: np.ndarray) -> list[list[float]]:
    t = calibration_table(y, p, n_bins=10)
    t = t[t["count"] > 0]
    return t[["mean_predicted", "fraction_positive"]].to_numpy().tolist()


def _curve_binned(binned: np.ndarray) -> list[list[float]]:
    c = np.clip(binned, 0, None).reshape(10, -1, 2).sum(axis=1)
    n = c.sum(axis=1)
    centre = (np.arange(10) + 0.5) / 10
    ok = n > 0
    return np.column_stack([centre[ok], c[ok, 1] / n[ok]]).tolist()


class PerformanceSection(Section):
    """Discrimination and calibration of the model on the held-out rows, overall and by group.

    In private mode every figure is post-processing of one DP histogram of the
    held-out rows by (sensitive cell, score bin of width 0.05, label), shared
    with the Fairness section; scores are then known to their bin, so AUC,
    Brier and ECE are binned approximations.
    """

    name = "performance"
    title = "Performance"
    budget_key = "predictions"
    budget_weight = 0.6

    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        if budget is None:
            return self._raw(ctx)
        tab: PredictionTable = ctx.shared("prediction_table", lambda: build_prediction_table(ctx, budget))
        overall = binned_metrics(tab.overall())
        groups: dict[str, list[dict[str, Any]]] = {}
        curves: dict[str, Any] = {"overall": _curve_binned(tab.overall())}
        for attr, levels in zip(tab.attributes, tab.levels, strict=True):
            marg = tab.by_attribute(attr)
            groups[attr] = [{"group": str(lv)} | binned_metrics(marg[i]) for i, lv in enumerate(levels)]
            curves[attr] = {str(lv): _curve_binned(marg[i]) for i, lv in enumerate(levels)}
        notes = [
            "Differentially private: every figure here is post-processing of one discrete-Laplace "
            f"histogram of the held-out rows (scale {tab.noise_scale:.4g} per cell), shared with "
            "the Fairness section.",
            "Scores are known only to their bin (width 0.05): AUC counts ties within a bin as "
            "one half, Brier uses bin midpoints, ECE uses 10 bins and their centres.",
        ]
        return self._result(ctx, overall, groups, curves, notes)

    def _raw(self, ctx: AuditContext) -> SectionResult:
        y, p = ctx.y_test, ctx.proba_test
        overall = _exact(y, p)
        groups: dict[str, list[dict[str, Any]]] = {}
        curves: dict[str, Any] = {"overall": _curve_exact(y, p)}
        sens = ctx.sensitive_test
        for attr in ctx.sensitive:
            values = sens[attr].astype(object).to_numpy()
            isna = sens[attr].isna().to_numpy()
            rows, curves[attr] = [], {}
            for lv in group_levels(ctx, attr):
                mask = isna if lv == OTHER else (values == lv) & ~isna
                rows.append({"group": str(lv)} | _exact(y[mask], p[mask]))
                if mask.any():
                    curves[attr][str(lv)] = _curve_exact(y[mask], p[mask])
            groups[attr] = rows
        notes = [
            "Raw statistics on the held-out rows (not differentially private).",
            "ECE: expected calibration error on 10 equal-width bins of the predicted probability.",
        ]
        return self._result(ctx, overall, groups, curves, notes)

    def _result(
        self,
        ctx: AuditContext,
        overall: dict[str, float],
        groups: dict[str, list[dict[str, Any]]],
        curves: dict[str, Any],
        notes: list[str],
    ) -> SectionResult:
        checks = [
            Check(
                "Better than chance",
                None if np.isnan(overall["roc_auc"]) else bool(overall["roc_auc"] > 0.5),
                f"ROC AUC {overall['roc_auc']:.3f} (chance is 0.5)",
            ),
            Check(
                "Calibration",
                None if np.isnan(overall["ece"]) else bool(overall["ece"] <= MAX_ECE),
                f"ECE {overall['ece']:.3f} (threshold {MAX_ECE})",
            ),
        ]
        for attr, rows in groups.items():
            aucs = [r["roc_auc"] for r in rows if r["count"] >= MIN_GROUP and not np.isnan(r["roc_auc"])]
            gap = max(aucs) - min(aucs) if len(aucs) >= 2 else np.nan
            checks.append(
                Check(
                    f"AUC gap across {attr}",
                    None if np.isnan(gap) else bool(gap <= MAX_AUC_GAP),
                    f"largest difference in ROC AUC between groups of at least {MIN_GROUP} rows: "
                    f"{gap:.3f} (threshold {MAX_AUC_GAP})"
                    if not np.isnan(gap)
                    else f"fewer than two groups with at least {MIN_GROUP} rows",
                )
            )
        figures = {
            "threshold": 0.5,
            "overall": overall,
            "by_group": groups,
            "calibration_curves": curves,
        }
        return SectionResult(self.name, self.title, figures, checks, notes)

    def render(self, result: SectionResult) -> str:
        f = result.figures
        o = f["overall"]
        html = [checks_list(result.checks)]
        html.append(
            table(
                ["", "accuracy", "ROC AUC", "Brier", "ECE"],
                [["all held-out rows", o["accuracy"], o["roc_auc"], o["brier"], o["ece"]]],
            )
        )
        curves = f["calibration_curves"]
        for attr, rows in f["by_group"].items():
            fig, ax = new_figure(5.0, 4.0)
            ax.plot([0, 1], [0, 1], color="grey", ls=":", lw=1, label="perfect calibration")
            pts = np.asarray(curves["overall"])
            if pts.size:
                ax.plot(pts[:, 0], pts[:, 1], "k-o", ms=3, lw=1.5, label="all")
            for lv, g in curves.get(attr, {}).items():
                g = np.asarray(g)
                if g.size:
                    ax.plot(g[:, 0], g[:, 1], "-o", ms=3, lw=1, label=str(lv))
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_xlabel("mean predicted probability")
            ax.set_ylabel("fraction of positives")
            ax.set_title(f"Calibration by {attr}")
            ax.legend(fontsize=8, loc="upper left")
            html.append(f"<h3>By {attr}</h3>")
            html.append(figure_to_svg(fig))
            html.append(
                table(
                    ["group", "rows", "accuracy", "ROC AUC", "Brier", "ECE"],
                    [
                        [
                            r["group"],
                            round(r["count"]),
                            r["accuracy"],
                            r["roc_auc"],
                            r["brier"],
                            r["ece"],
                        ]
                        for r in rows
                    ],
                )
            )
        html.append(notes_list(result.notes))
        return "".join(html)
