"""The audit's *Uncertainty* section: conformal prediction sets for the audited model.

The held-out rows are split again by a public per-row rule (a keyed hash of each row's
values, :func:`trustlab.audit.split.row_split`, with a key of its own): half calibrate
the conformal sets, half evaluate them. Sets are calibrated at miscoverage ``alpha``
(0.1 by default) from the model's cached held-out probabilities with Kandinsky conformal
prediction on the sensitive groups, their combinations and the label (Bairaktari, Wu and
Wu, "Kandinsky Conformal Prediction: Beyond Class- and Covariate-Conditional Coverage",
ICML 2025), and, side by side, with plain split conformal prediction. Coverage and mean
set size are reported overall and per group with 95% Wilson intervals
(:func:`trustlab.uncertainty.group_coverage`); one check per group flags a coverage
shortfall from the interval.

In private mode the section releases nothing: the calibration quantile is an order
statistic of the private scores, so the prediction sets themselves are not
differentially private, and DP coverage counts of non-private sets would not make the
section private. It spends no budget (it shares the ``predictions`` key with weight 0,
so the audit's split of epsilon and its ledger are unchanged) and says why in a note.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab.audit.section import (
    AuditContext,
    Check,
    Section,
    SectionResult,
    interval_rule,
    interval_verdict,
)
from trustlab.audit.split import row_split

__all__ = ["UncertaintySection"]

_LEVEL = 0.95
_LIST = 12  # too-small groups named in the note (all are in the figures)
_SPLIT_KEY = 0x5EC7C0F  # added to the audit's seed: the calibration split's own public key
_MISSING = "missing"
PRIVATE_NOTE = (
    "Left out in private mode: the conformal sets are calibrated on a quantile of the held-out "
    "rows' scores, which is not differentially private (one row can move it), so releasing "
    "coverage or set sizes, even as noisy counts, would not be covered by the privacy guarantee. "
    "Nothing was computed and no budget was spent."
)


class _CachedProba(ClassifierMixin, BaseEstimator):
    """A classifier view of the audit's cached held-out probabilities (label 1 = positive).

    ``X`` is a one-column frame of row positions into ``proba``; the audited model is
    not called again (a user's model may name its classes differently).
    """

    def __init__(self, proba: np.ndarray) -> None:
        self.proba = np.clip(np.asarray(proba, dtype=float), 0.0, 1.0)
        self.classes_ = np.array([0, 1])

    def fit(self, X: Any = None, y: Any = None) -> _CachedProba:
        """Nothing to fit: the audited model was fitted on the training rows (scikit-learn protocol)."""
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        p = self.proba[X["row"].to_numpy()]
        return np.column_stack([1.0 - p, p])

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(int)


def _labels(sens: pd.DataFrame) -> pd.DataFrame:
    """Sensitive values as text (missing as 'missing'), one column per sensitive column."""
    out = {}
    for col in sens.columns:
        values = sens[col].astype(object)
        out[str(col)] = values.where(values.notna(), _MISSING).map(str).to_numpy()
    return pd.DataFrame(out)


def _round(x: Any) -> float | None:
    x = float(x)
    return round(x, 6) if np.isfinite(x) else None


class UncertaintySection(Section):
    """Conformal prediction sets: coverage and set size overall and per (overlapping) group.

    Attributes
    ----------
    alpha : float, default 0.1
        Target miscoverage; the sets aim at coverage ``1 - alpha``.
    tolerance : float, default 0.05
        Shortfall tolerated: a group fails when its whole 95% interval lies at or below
        ``1 - alpha - tolerance``, passes when it lies above, else is inconclusive.
    min_group : int, default 30
        Fewest calibration rows and evaluation rows a group needs to be calibrated and
        judged; smaller groups are listed as too small.

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction: Beyond Class- and
    Covariate-Conditional Coverage", ICML 2025.

    Examples
    --------
    >>> section = UncertaintySection()
    >>> section.name, section.title
    ('uncertainty', 'Uncertainty')
    """

    name = "uncertainty"
    title = "Uncertainty"
    budget_weight = 0.0  # releases nothing in private mode: no share of epsilon
    alpha: float = 0.1
    tolerance: float = 0.05
    min_group: int = 30

    def compute(self, ctx: AuditContext, budget: Any = None) -> SectionResult:
        """Calibrate and evaluate the conformal sets on the two halves of the held-out rows.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context (its cached held-out probabilities are reused).
        budget : Accountant or None
            Unused: in private mode the section releases nothing.

        Returns
        -------
        SectionResult
        """
        alpha = float(self.alpha)
        if ctx.private:
            released = {"released": False, "alpha": alpha, "target": 1.0 - alpha}
            return SectionResult(self.name, self.title, released, [], [PRIVATE_NOTE])
        from trustlab.uncertainty import conformal_coverage

        test = ctx.data.iloc[ctx.test_index]
        cal = row_split(test, 0.5, seed=int(ctx.random_state) + _SPLIT_KEY)
        n = len(test)
        rows = pd.DataFrame({"row": np.arange(n)})
        y = np.asarray(ctx.y_test, dtype=int)
        model = _CachedProba(ctx.proba_test)
        labels = _labels(ctx.sensitive_test)
        columns = list(labels.columns)
        varied = [c for c in columns if labels[c].nunique() > 1]
        single = [c for c in columns if c not in varied]
        groups: dict[str, tuple[str, np.ndarray]] = {}
        for c in varied:
            for v in sorted(pd.unique(labels[c]), key=str):
                groups[f"{c}={v}"] = ("group", (labels[c] == v).to_numpy())
        if len(varied) > 1:
            # vectorised "a=x & b=y" keys (a row-wise apply took 35 s on 300,000 held-out rows)
            parts = [f"{c}=" + labels[c].astype(str) for c in varied]
            keys = parts[0]
            for part in parts[1:]:
                keys = keys + " & " + part
            for k in sorted(pd.unique(keys)):
                groups[k] = ("overlap", (keys == k).to_numpy())
        target = 1.0 - alpha
        threshold = target - float(self.tolerance)
        sizes = {g: (int(m[cal].sum()), int(m[~cal].sum())) for g, (_, m) in groups.items()}
        used = [g for g in groups if min(sizes[g]) >= self.min_group]
        small = [g for g in groups if g not in used]
        n_cal, n_eval = int(cal.sum()), int((~cal).sum())
        enough = min(n_cal, n_eval) >= self.min_group and len(np.unique(y[cal])) == 2
        tables: dict[str, pd.DataFrame] = {}
        if enough:
            # internal names g0, g1, ...: a group's own name may be anything (even "all" or "y=0")
            frame: pd.DataFrame | None = None
            if used:
                frame = pd.DataFrame({f"g{i}": groups[g][1].astype(float) for i, g in enumerate(used)})
            for method in ("kandinsky", "split"):
                tables[method] = conformal_coverage(
                    model,
                    rows[cal].reset_index(drop=True),
                    y[cal],
                    rows[~cal].reset_index(drop=True),
                    y[~cal],
                    groups_cal=None if frame is None else frame[cal].reset_index(drop=True),
                    groups_test=None if frame is None else frame[~cal].reset_index(drop=True),
                    alpha=alpha,
                    method=method,
                    label_groups=True,
                    confidence=_LEVEL,
                    random_state=ctx.random_state,
                )
        out_rows: list[dict[str, Any]] = []
        index = {g: f"g{i}" for i, g in enumerate(used)}
        entries: list[tuple[str, str, str | None, tuple[int, int]]] = [
            ("all", "overall", "all", (n_cal, n_eval))
        ]
        entries += [(g, kind, index.get(g), sizes[g]) for g, (kind, _) in groups.items()]
        for outcome, label in ((0, ctx.negative_label), (1, ctx.positive_label)):
            counts = (int((y[cal] == outcome).sum()), int((y[~cal] == outcome).sum()))
            entries.append((f"{ctx.target}={label}", "label", f"y={outcome}", counts))
        for shown, kind, key, counts in entries:
            row: dict[str, Any] = {"group": shown, "kind": kind, "n_cal": counts[0], "n_eval": counts[1]}
            judged = (
                enough
                and key is not None
                and all(key in t.index for t in tables.values())
                and min(counts) >= self.min_group
            )
            row["evaluated"] = bool(judged)
            for method, t in tables.items():
                if judged:
                    r = t.loc[key]
                    row[method] = {
                        k: _round(r[k])
                        for k in (
                            "coverage",
                            "coverage_low",
                            "coverage_high",
                            "mean_set_size",
                            "set_size_low",
                            "set_size_high",
                        )
                    }
            if judged and kind == "label":
                row["status"] = "not_judged"  # shown for comparison; the checks are on groups of people
            elif judged:
                k = row["kandinsky"]
                row["status"] = interval_verdict(
                    k["coverage_low"], k["coverage_high"], threshold, at_most=False
                )
            else:
                row["status"] = "too_small"
            out_rows.append(row)
        rule = (
            f"{interval_rule(threshold, at_most=False)} ({threshold:g} = target {target:g} less a "
            f"tolerance of {self.tolerance:g}); groups with fewer than {self.min_group} calibration or "
            "evaluation rows are not judged"
        )
        checks: list[Check] = []
        for row in out_rows:
            if row["status"] not in ("pass", "fail", "inconclusive"):
                continue
            k = row["kandinsky"]
            who = "all evaluation rows" if row["kind"] == "overall" else row["group"]
            checks.append(
                Check(
                    f"Coverage: {who}",
                    None,
                    f"{k['coverage']:.3f} (95% interval {k['coverage_low']:.3f}..{k['coverage_high']:.3f}) "
                    f"on {row['n_eval']:,} evaluation rows; mean set size {k['mean_set_size']:.2f}",
                    status=row["status"],
                    rule=rule,
                )
            )
        if not enough:
            checks.insert(
                0,
                Check(
                    "Coverage: all evaluation rows",
                    None,
                    f"not evaluable: {n_cal:,} calibration and {n_eval:,} evaluation rows (each needs "
                    f"{self.min_group}, and the calibration rows need both outcomes)",
                    status="not_evaluable",
                    rule=rule,
                    hint=f"evaluable with at least {2 * self.min_group} held-out rows of both outcomes "
                    "(more data or a larger --test-size)",
                ),
            )
        for c in single:
            checks.append(
                Check(
                    f"Coverage by {c}",
                    None,
                    f"not evaluable: {c} has one value among the held-out rows, so its only group is "
                    "all rows",
                    status="not_evaluable",
                    rule=rule,
                    hint=f"evaluable with held-out rows of a second value of {c}",
                )
            )
        too_small = [{"group": g, "n_cal": sizes[g][0], "n_eval": sizes[g][1]} for g in small]
        notes = [
            "Raw statistics on the held-out rows (not differentially private).",
            "The held-out rows are split again by a keyed hash of each row's values (its own public "
            f"key, derived from the audit's seed): {n_cal:,} rows calibrate the sets, {n_eval:,} "
            "evaluate them. Checks judge the Kandinsky sets; the split conformal sets are shown for "
            "comparison. The "
            "model is not refitted; its held-out probabilities are reused.",
            "Prediction set: every outcome whose score 1 - p(outcome) is at most the calibrated "
            "threshold (size 0, 1 or 2). Kandinsky conformal calibrates one threshold function on "
            "the sensitive groups, their combinations and the outcome at once (coverage per group, "
            "Bairaktari et al., ICML 2025); split conformal calibrates one threshold for all rows, "
            "which guarantees coverage only on average over all rows. Both add a tiny random "
            "amount (1e-3 of the scores' spread) to every score, at calibration and evaluation "
            "alike, so tied scores (a model with few distinct probabilities) are ordered at random.",
            "Intervals: 95% Wilson score intervals over the evaluation rows (coverage); normal "
            "intervals on the standard error (mean set size). Each group's check uses its own 95% "
            "interval (no correction for the number of groups).",
        ]
        if small:
            listed = ", ".join(f"{t['group']} ({t['n_cal']}/{t['n_eval']})" for t in too_small[:_LIST])
            more = f" and {len(small) - _LIST} more (all in report.json)" if len(small) > _LIST else ""
            notes.append(
                f"Too small to calibrate or judge (fewer than {self.min_group} calibration or evaluation "
                f"rows; calibration/evaluation rows shown): {listed}{more}; their rows still count in "
                "the overall figures."
            )
        figures: dict[str, Any] = {
            "released": True,
            "method": "kandinsky",
            "alpha": alpha,
            "target": target,
            "tolerance": float(self.tolerance),
            "threshold": threshold,
            "min_group": int(self.min_group),
            "interval_level": _LEVEL,
            "n_calibration": n_cal,
            "n_evaluation": n_eval,
            "groups": out_rows,
            "too_small": too_small,
            "split_short": [
                r["group"] for r in out_rows if r["evaluated"] and r["split"]["coverage_high"] <= threshold
            ],
            "single_valued": single,
        }
        return SectionResult(self.name, self.title, figures, checks, notes)

    def render(self, result: SectionResult) -> str:
        """The section's HTML (drawn by :mod:`trustlab.audit.render._uncertainty`; needs matplotlib).

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._uncertainty import render_uncertainty

        return render_uncertainty(result)
