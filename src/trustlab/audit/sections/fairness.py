"""The Fairness section: group rates (fairlearn MetricFrame) and disparity measures with intervals."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from fairlearn.metrics import (
    MetricFrame,
    count,
    demographic_parity_difference,
    equalized_odds_difference,
    false_positive_rate,
    selection_rate,
    true_positive_rate,
)
from matplotlib.figure import Figure
from sklearn.metrics import accuracy_score

from trustlab.audit.html import checks_list, notes_list, table
from trustlab.audit.plots import figure_to_svg
from trustlab.audit.prediction_table import (
    OTHER,
    PredictionTable,
    build_prediction_table,
    confusion_from_bins,
)
from trustlab.audit.section import AuditContext, Check, Section, SectionResult
from trustlab.fairness import bootstrap_counts, fairness_differences, rates_from_counts
from trustlab.fairness.metrics import RATES
from trustlab.privacy.accounting import Accountant

__all__ = ["FairnessSection"]

MAX_DIFFERENCE = 0.1
N_BOOT = 1000
MIN_GROUP = 30
DIFFS = ("demographic_parity_difference", "equalized_odds_difference")


def _interval(samples: np.ndarray) -> list[list[float]]:
    """2.5 and 97.5 percentiles along the replicate axis (NaN-aware)."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # groups empty in every replicate
        lo, hi = np.nanpercentile(samples, [2.5, 97.5], axis=0)
    return np.column_stack([np.atleast_1d(lo), np.atleast_1d(hi)]).tolist()


class FairnessSection(Section):
    """Selection rate, TPR, FPR and accuracy by group; demographic-parity and equalized-odds
    differences, each with a 95% bootstrap interval.

    Point estimates come from fairlearn's ``MetricFrame`` (raw mode) or from the
    shared DP prediction histogram (private mode). Intervals are percentile
    bootstrap intervals over the held-out rows, drawn as multinomial resamples
    of the (group, score bin, label) count table; in private mode the bootstrap
    is parametric on the noisy table with simulated noise of the released
    scale, so the intervals include the privacy noise and cost no budget.
    """

    name = "fairness"
    title = "Fairness"
    budget_key = "predictions"
    budget_weight = 0.6

    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        key = "prediction_table" if budget is not None else "prediction_table_raw"
        tab: PredictionTable = ctx.shared(key, lambda: build_prediction_table(ctx, budget))
        boot = bootstrap_counts(
            tab.counts, n_boot=N_BOOT, noise_scale=tab.noise_scale, random_state=ctx.random_state
        )
        per_attr: dict[str, dict[str, Any]] = {}
        y_pred = (ctx.proba_test >= 0.5).astype(int)
        for attr, levels in zip(tab.attributes, tab.levels, strict=True):
            conf = confusion_from_bins(tab.by_attribute(attr))
            conf_boot = confusion_from_bins(tab.by_attribute(attr, boot))
            if budget is not None:  # noisy near-empty groups (e.g. 'missing') are pure noise
                tiny = rates_from_counts(conf)["count"] < MIN_GROUP
                conf[tiny] = 0
                conf_boot[:, tiny] = 0
            rates_boot = rates_from_counts(conf_boot)
            diff_boot = fairness_differences(conf_boot)
            if budget is None:
                sf = (
                    ctx.sensitive_test[attr]
                    .astype(object)
                    .where(ctx.sensitive_test[attr].notna(), OTHER)
                    .astype(str)
                )
                mf = MetricFrame(
                    metrics={
                        "selection_rate": selection_rate,
                        "true_positive_rate": true_positive_rate,
                        "false_positive_rate": false_positive_rate,
                        "accuracy": accuracy_score,
                        "count": count,
                    },
                    y_true=ctx.y_test,
                    y_pred=y_pred,
                    sensitive_features=sf,
                )
                by = mf.by_group.reindex([str(lv) for lv in levels])
                rates = {m: by[m].to_numpy(dtype=float) for m in (*RATES, "count")}
                diffs = {
                    "demographic_parity_difference": float(
                        demographic_parity_difference(ctx.y_test, y_pred, sensitive_features=sf)
                    ),
                    "equalized_odds_difference": float(
                        equalized_odds_difference(ctx.y_test, y_pred, sensitive_features=sf)
                    ),
                }
            else:
                rates = rates_from_counts(conf)
                diffs = {k: float(v) for k, v in fairness_differences(conf).items()}
            per_attr[attr] = {
                "groups": [str(lv) for lv in levels],
                "rates": {m: [float(v) for v in rates[m]] for m in (*RATES, "count")},
                "rate_intervals": {m: _interval(rates_boot[m]) for m in RATES},
                "differences": diffs,
                "difference_intervals": {k: _interval(diff_boot[k][:, None])[0] for k in DIFFS},
            }
        checks = []
        for attr, res in per_attr.items():
            small = [g for g, n in zip(res["groups"], res["rates"]["count"], strict=True) if n < MIN_GROUP]
            for k, label in zip(DIFFS, ("Demographic parity", "Equalized odds"), strict=True):
                v = res["differences"][k]
                lo, hi = res["difference_intervals"][k]
                checks.append(
                    Check(
                        f"{label} across {attr}",
                        None if np.isnan(v) else bool(v <= MAX_DIFFERENCE),
                        f"difference {v:.3f} (95% CI {lo:.3f}..{hi:.3f}; threshold {MAX_DIFFERENCE})"
                        + (f"; groups under {MIN_GROUP} rows: {', '.join(small)}" if small else ""),
                    )
                )
        notes = [
            f"Decision threshold 0.5 on the predicted probability; intervals: {N_BOOT} bootstrap "
            "replicates (2.5 and 97.5 percentiles).",
            "Demographic-parity difference: largest gap in selection rate between groups. "
            "Equalized-odds difference: the larger of the TPR and FPR gaps (fairlearn's definitions).",
        ]
        notes.append(
            "Differentially private: computed from the DP prediction histogram shared with "
            "Performance; the bootstrap is parametric and includes the privacy noise."
            if budget is not None
            else "Raw statistics on the held-out rows (not differentially private)."
        )
        return SectionResult(
            self.name,
            self.title,
            {"threshold": 0.5, "n_boot": N_BOOT, "by_attribute": per_attr},
            checks,
            notes,
        )

    def render(self, result: SectionResult) -> str:
        html = [checks_list(result.checks)]
        for attr, res in result.figures["by_attribute"].items():
            groups = res["groups"]
            fig = Figure(figsize=(8.5, 3.6), dpi=100, layout="constrained")
            ax, ax2 = fig.subplots(1, 2, width_ratios=[2.2, 1])
            width = 0.8 / len(groups)
            x = np.arange(len(RATES))
            for i, g in enumerate(groups):
                vals = np.array([res["rates"][m][i] for m in RATES])
                ci = np.array([res["rate_intervals"][m][i] for m in RATES])
                err = np.abs(np.vstack([vals - ci[:, 0], ci[:, 1] - vals]))
                ax.bar(
                    x + (i - (len(groups) - 1) / 2) * width,
                    vals,
                    width,
                    label=g,
                    yerr=np.nan_to_num(err),
                    capsize=3,
                )
            ax.set_xticks(x, ["selection rate", "TPR", "FPR", "accuracy"])
            ax.set_ylim(0, 1.05)
            ax.set_ylabel("rate (fraction of rows)")
            ax.set_title(f"Rates by {attr} (95% bootstrap CI)")
            ax.legend(fontsize=8)
            ax.grid(True, axis="y", alpha=0.3)
            vals = np.array([res["differences"][k] for k in DIFFS])
            ci = np.array([res["difference_intervals"][k] for k in DIFFS])
            err = np.abs(np.vstack([vals - ci[:, 0], ci[:, 1] - vals]))
            ax2.bar([0, 1], vals, color=["#DD8452", "#55A868"], yerr=np.nan_to_num(err), capsize=4)
            ax2.axhline(MAX_DIFFERENCE, color="#C44E52", ls="--", lw=1, label="threshold")
            ax2.set_xticks([0, 1], ["demographic\nparity", "equalized\nodds"])
            ax2.set_ylabel("difference (max - min rate)")
            ax2.set_title("Disparities")
            ax2.legend(fontsize=8)
            ax2.grid(True, axis="y", alpha=0.3)
            html.append(f"<h3>By {attr}</h3>")
            html.append(figure_to_svg(fig))
            rows = []
            for i, g in enumerate(groups):
                rows.append([g, round(res["rates"]["count"][i])] + [res["rates"][m][i] for m in RATES])
            html.append(table(["group", "rows", "selection rate", "TPR", "FPR", "accuracy"], rows))
            d = res["differences"]
            di = res["difference_intervals"]
            html.append(
                table(
                    ["measure", "difference", "95% CI low", "95% CI high"],
                    [
                        ["demographic parity", d[DIFFS[0]], *di[DIFFS[0]]],
                        ["equalized odds", d[DIFFS[1]], *di[DIFFS[1]]],
                    ],
                )
            )
        html.append(notes_list(result.notes))
        return "".join(html)
