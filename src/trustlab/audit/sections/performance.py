"""The Performance section: accuracy, ROC AUC, Brier score, calibration and ECE, overall and by group."""

from __future__ import annotations

from typing import Any

import numpy as np
from typing_extensions import override

from trustlab.audit._hints import group_hint, rows_hint
from trustlab.audit._scale_stats import score_tables
from trustlab.audit.prediction_table import (
    LEVEL,
    MIN_GROUP,
    N_BOOT,
    PredictionTable,
    binned_metrics,
    size_rule,
)
from trustlab.audit.section import (
    AuditContext,
    Check,
    SectionResult,
    interval_rule,
    interval_verdict,
)
from trustlab.audit.sections._base import TableSection
from trustlab.privacy.accounting import Accountant
from trustlab.uncertainty import GAP_METHOD, gap_interval, symmetric_interval

__all__ = ["PerformanceSection"]

MAX_ECE = 0.05
MAX_GROUP_ECE = 0.1
"""Threshold of each group's ECE (above the overall one: ECE's upward bias grows as a group shrinks)."""
MAX_AUC_GAP = 0.05
METRICS = ("accuracy", "roc_auc", "brier", "ece")
N_CAL_BINS = 10


def _exact(metrics: dict[str, Any]) -> dict[str, float]:
    """The exact figures of a merged :class:`~trustlab.compute.scores.ScoreTable` group."""
    return {"count": float(metrics["count"])} | {m: float(metrics[m]) for m in METRICS}


def _curve_binned(binned: np.ndarray) -> list[list[float]]:
    """Ten points (bin centre, fraction positive) of a ``[bin, label]`` table; NaN for empty bins."""
    c = np.clip(binned, 0, None).reshape(N_CAL_BINS, -1, 2).sum(axis=1)
    n = c.sum(axis=1)
    centre = (np.arange(N_CAL_BINS) + 0.5) / N_CAL_BINS
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(n > 0, c[:, 1] / n, np.nan)
    return np.column_stack([centre, frac]).tolist()


def _bin_counts(binned: np.ndarray) -> list[float]:
    """Held-out rows in each of the ten calibration bins of a ``[bin, label]`` table."""
    c = np.clip(np.asarray(binned, dtype=float), 0, None).reshape(N_CAL_BINS, -1, 2)
    return [float(v) for v in c.sum(axis=(1, 2))]


def verdict(low: float, high: float, threshold: float, *, at_most: bool, rows: float = np.inf) -> str:
    """:func:`~trustlab.audit.section.interval_verdict`; a zero-width interval from few rows: not evaluable.

    A finite interval of zero width from fewer than :data:`MIN_GROUP` held-out rows
    comes from too few rows (every bootstrap replicate equal), not from certainty:
    nothing can be judged from it. (A constant model's accuracy gain is exactly 0 in
    every replicate of any size: that zero width is real.)

    Examples
    --------
    >>> verdict(0.034, 0.034, 0.05, at_most=True, rows=3), verdict(0.01, 0.04, 0.05, at_most=True)
    ('not_evaluable', 'pass')
    """
    if np.isfinite(low) and np.isfinite(high) and high - low <= 0.0 and rows < MIN_GROUP:
        return "not_evaluable"
    return interval_verdict(low, high, threshold, at_most=at_most)


ZERO_WIDTH = "; not evaluable: the interval has zero width (too few held-out rows to judge)"


def _baseline_parts(binned: np.ndarray) -> dict[str, np.ndarray]:
    """Positive share, majority-class accuracy, predicted-positive share and accuracy gain.

    Of ``[..., bin, label]`` count tables, vectorised over leading axes.
    """
    c = np.clip(np.asarray(binned, dtype=float), 0, None)
    half = c.shape[-2] // 2
    n = c.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        base = c[..., 1].sum(axis=-1) / n
        accuracy = (c[..., :half, 0].sum(axis=-1) + c[..., half:, 1].sum(axis=-1)) / n
        predicted = c[..., half:, :].sum(axis=(-2, -1)) / n
    majority = np.maximum(base, 1.0 - base)
    return {"base_rate": base, "majority": majority, "predicted": predicted, "gain": accuracy - majority}


def majority_baseline(tab: PredictionTable, accuracy: float) -> dict[str, Any]:
    """The majority-class baseline of the held-out rows, and the model's accuracy gain over it.

    Predicting the majority outcome for every row scores ``max(p, 1 - p)``, ``p`` the
    share of positives; a model worth using beats it. The gain's 95% interval is the
    symmetric bootstrap interval of ``accuracy - max(p, 1 - p)`` over the table's
    replicates (in private mode they include the privacy noise).

    Parameters
    ----------
    tab : PredictionTable
        The shared table of held-out rows.
    accuracy : float
        The model's accuracy as reported (exact in the raw report).

    Returns
    -------
    dict
        ``base_rate``, ``majority_is_positive``, ``majority_accuracy``,
        ``predicted_positive_rate``, ``accuracy_gain`` and ``intervals`` (95%) of each.
    """
    est = {k: float(v) for k, v in _baseline_parts(tab.overall()).items()}
    reps = _baseline_parts(tab.overall(tab.replicates))
    gain = accuracy - est["majority"]
    intervals: dict[str, list[float]] = {}
    for key, part, value, limits in (
        ("base_rate", "base_rate", est["base_rate"], (0.0, 1.0)),
        ("majority_accuracy", "majority", est["majority"], (0.5, 1.0)),
        ("predicted_positive_rate", "predicted", est["predicted"], (0.0, 1.0)),
        ("accuracy_gain", "gain", gain, (-1.0, 1.0)),
    ):
        if not np.isfinite(value):
            intervals[key] = [np.nan, np.nan]
            continue
        lo, hi = symmetric_interval(value, reps[part], centre=est[part], limits=limits)
        intervals[key] = [float(lo), float(hi)]
    return {
        "base_rate": est["base_rate"],
        "majority_is_positive": bool(est["base_rate"] >= 0.5),
        "majority_accuracy": est["majority"],
        "predicted_positive_rate": est["predicted"],
        "accuracy_gain": float(gain),
        "intervals": intervals,
    }


def _entry(
    estimate: dict[str, float],
    centre: dict[str, np.ndarray],
    reps: dict[str, np.ndarray],
    count_halfwidth: float,
    index: Any = (),
) -> dict[str, Any]:
    """A row of figures: estimates, their 95% intervals, the count and its noise interval."""
    out: dict[str, Any] = {"count": float(estimate["count"])}
    intervals: dict[str, list[float]] = {}
    for m in METRICS:
        est = float(estimate[m])
        lo, hi = symmetric_interval(
            est, reps[m][(slice(None), *index)], centre=centre[m][index], limits=(0, 1)
        )
        out[m] = est
        intervals[m] = [float(lo), float(hi)] if np.isfinite(est) else [np.nan, np.nan]
    n = out["count"]
    intervals["count"] = [max(0.0, n - count_halfwidth), n + count_halfwidth]
    out["intervals"] = intervals
    return out


def _minimum(tab: PredictionTable, attr: str) -> str:
    """The group-size minimum in words (the same rule as the Fairness section's)."""
    need = tab.min_class(attr)
    return f"at least {MIN_GROUP} held-out rows, {need:,.0f} positives and {need:,.0f} negatives"


BASELINE_RULE = (
    "pass when the whole 95% interval of (accuracy - majority-class accuracy) lies above 0, fail "
    "when it is at most 0, inconclusive when it straddles 0"
)


def _baseline_check(b: dict[str, Any], labels: tuple[str, str], rows: float) -> Check:
    """The model must beat predicting the majority outcome for everyone."""
    gain, (lo, hi) = b["accuracy_gain"], b["intervals"]["accuracy_gain"]
    status = verdict(lo, hi, 0.0, at_most=False, rows=rows)
    if not np.isfinite(gain):
        detail = "accuracy undefined: no held-out rows"
    else:
        majority = labels[1] if b["majority_is_positive"] else labels[0]
        detail = (
            f"accuracy {gain + b['majority_accuracy']:.3f} vs {b['majority_accuracy']:.3f} from predicting "
            f"'{majority}' for every row (positive share {b['base_rate']:.3f}); difference "
            f"{100 * gain:+.1f} percentage points (95% interval {100 * lo:+.1f}..{100 * hi:+.1f}); the "
            f"model predicts '{labels[1]}' for {b['predicted_positive_rate']:.1%} of the held-out rows"
        )
        detail += ZERO_WIDTH if status == "not_evaluable" else ""
    hint = _zero_width_hint(status, rows)
    return Check("Better than the majority class", None, detail, status=status, rule=BASELINE_RULE, hint=hint)


def _zero_width_hint(status: str, rows: float) -> str:
    """The hint of a check left not evaluable by a zero-width interval (too few held-out rows)."""
    return f"evaluable with {rows_hint(rows, MIN_GROUP)}" if status == "not_evaluable" else ""


GROUP_ECE_RULE = (
    "fail when the 95% interval of some group's ECE lies above {t:g}, pass when every evaluable "
    "group's interval is at most {t:g}, inconclusive otherwise (one interval per group, not "
    "adjusted for the number of groups); ECE is biased upwards in small groups"
)


def _group_calibration_check(attr: str, rows: list[dict[str, Any]], size: str, hint: str = "") -> Check:
    """Each group's calibration judged from its own ECE interval (the worst group decides)."""
    rule = f"{GROUP_ECE_RULE.format(t=MAX_GROUP_ECE)}; {size}"
    name = f"Calibration within each group of {attr}"
    judged = []
    for r in rows:
        lo, hi = r["intervals"]["ece"]
        if r["evaluable"] and np.isfinite(r["ece"]):
            judged.append((r, verdict(lo, hi, MAX_GROUP_ECE, at_most=True, rows=r["count"])))
    small = [f"{r['group']} ({r['count']:,.0f} rows)" for r in rows if all(r is not j for j, _ in judged)]
    if not judged or all(st == "not_evaluable" for _, st in judged):
        detail = f"not evaluable: no group of {attr} is large enough" + (
            f" (too small: {', '.join(small)})" if small else ""
        )
        return Check(name, None, detail, status="not_evaluable", rule=rule, hint=hint)
    order = {"fail": 0, "inconclusive": 1, "not_evaluable": 2, "pass": 3}
    judged.sort(key=lambda t: (order[t[1]], -t[0]["ece"]))
    statuses = {st for _, st in judged}
    status = "fail" if "fail" in statuses else "pass" if statuses == {"pass"} else "inconclusive"
    words = {"fail": "above", "inconclusive": "straddles", "pass": "at most", "not_evaluable": "zero width"}
    parts = [
        f"{r['group']} ECE {r['ece']:.3f} [{r['intervals']['ece'][0]:.3f}, {r['intervals']['ece'][1]:.3f}] "
        f"({words[st]} {MAX_GROUP_ECE:g}; {r['count']:,.0f} rows)"
        for r, st in judged
    ]
    detail = "; ".join(parts) + (f"; too small to judge: {', '.join(small)}" if small else "")
    return Check(name, None, detail, status=status, rule=rule)


class PerformanceSection(TableSection):
    """Discrimination and calibration of the model on the held-out rows, overall and by group.

    Every figure has a 95% interval: a symmetric bootstrap interval (estimate +-
    the 95% quantile of ``|replicate - estimate|``) from the replicates of the shared
    prediction table, which in private mode include the privacy noise. Checks are
    decided from the intervals (pass, fail, inconclusive, not evaluable).

    In private mode every figure is post-processing of one DP histogram of the
    held-out rows by (sensitive cell, score bin of width 0.05, label), shared
    with the Fairness section; scores are then known to their bin, so AUC,
    Brier and ECE are binned approximations.

    Examples
    --------
    >>> section = PerformanceSection()
    >>> section.name, section.title
    ('performance', 'Performance')
    """

    name = "performance"
    title = "Performance"

    @override
    def _from_table(
        self, ctx: AuditContext, tab: PredictionTable, budget: Accountant | None
    ) -> SectionResult:
        """Overall and per-group metrics with intervals from the shared prediction table."""
        reps_all = binned_metrics(tab.overall(tab.replicates))
        centre_all = binned_metrics(tab.overall())
        groups: dict[str, list[dict[str, Any]]] = {}
        curves: dict[str, Any] = {}
        bin_counts: dict[str, Any] = {"overall": _bin_counts(tab.overall())}
        rules: dict[str, str] = {}
        short: dict[str, str] = {}
        if budget is not None:
            overall = {k: float(v) for k, v in centre_all.items()} | {"count": float(tab.group_counts())}
            curves["overall"] = _curve_binned(tab.overall())
            count_hw = tab.count_halfwidth()
        else:
            scores = score_tables(ctx)
            m_all = scores["overall"].metrics(n_bins=N_CAL_BINS)
            overall = _exact(m_all)
            curves["overall"] = m_all["curve"]
            count_hw = 0.0
        overall_entry = _entry(overall, centre_all, reps_all, count_hw)
        for attr, levels in zip(tab.attributes, tab.levels, strict=True):
            marg = tab.by_attribute(attr)
            centre = binned_metrics(marg)
            reps = binned_metrics(tab.by_attribute(attr, tab.replicates))
            ok = tab.evaluable(attr)
            counts = tab.group_counts(attr)
            hw = tab.count_halfwidth(attr)
            rows, curves[attr], bin_counts[attr] = [], {}, {}
            for i, lv in enumerate(levels):
                if budget is not None:
                    est = {k: float(v[i]) for k, v in centre.items()} | {"count": float(counts[i])}
                    curves[attr][str(lv)] = _curve_binned(marg[i])
                else:
                    m = scores[attr].metrics(i, n_bins=N_CAL_BINS)
                    est = _exact(m)
                    curves[attr][str(lv)] = m["curve"]
                bin_counts[attr][str(lv)] = _bin_counts(marg[i])
                row = {"group": str(lv)} | _entry(est, centre, reps, hw, (i,))
                row["evaluable"] = bool(ok[i])
                rows.append(row)
            groups[attr] = rows
            rules[attr] = size_rule(tab, attr)
            short[attr] = size_rule(tab, attr, short=True)
        baseline = majority_baseline(tab, overall_entry["accuracy"])
        labels = (str(ctx.negative_label), str(ctx.positive_label))
        checks = self._checks(tab, overall_entry, groups, short)
        checks.insert(1, _baseline_check(baseline, labels, overall_entry["count"]))
        if budget is not None:
            notes = [
                "Differentially private: every figure here is post-processing of one discrete-Laplace "
                f"histogram of the held-out rows (scale {tab.noise_scale:.4g} per cell), shared with "
                "the Fairness section; negative noisy counts are removed by one projection (each "
                "group's counts made non-negative with the same total), so both sections show the "
                "same group sizes.",
                "Scores are known only to their bin (width 0.05): AUC counts ties within a bin as "
                "one half, Brier uses bin midpoints, ECE uses 10 bins and their centres.",
                f"Intervals ({LEVEL:.0%}): {N_BOOT} parametric bootstrap replicates of the released "
                "table (rows resampled, fresh simulated noise of the released scale, the same "
                "projection); they cover sampling and privacy noise. Row counts: the noise alone "
                f"({LEVEL:.0%}, normal approximation to the sum of the noisy cells).",
            ]
        else:
            notes = [
                "Raw statistics on the held-out rows (not differentially private), computed as "
                "mergeable statistics (trustlab.compute): exact counts of each distinct score by "
                "label, merged over partitions; equal to the row-level figures up to float rounding.",
                "ECE: expected calibration error on 10 equal-width bins of the predicted probability.",
                f"Intervals ({LEVEL:.0%}): the exact estimate +- the 95% quantile of |replicate - "
                f"estimate| over {N_BOOT} row-bootstrap replicates of the held-out rows (scores "
                "binned to width 0.05 in the replicates).",
            ]
        figures = {
            "threshold": 0.5,
            "interval_level": LEVEL,
            "overall": overall_entry,
            "baseline": baseline,
            "labels": {"negative": labels[0], "positive": labels[1]},
            "by_group": groups,
            "calibration_curves": curves,
            # raw mode: rows behind each curve point (in private mode the group counts' intervals say it)
            **({"calibration_bin_counts": bin_counts} if budget is None else {}),
            "size_rule": rules,
        }
        return SectionResult(self.name, self.title, figures, checks, notes)

    def _checks(
        self,
        tab: PredictionTable,
        overall: dict[str, Any],
        groups: dict[str, list[dict[str, Any]]],
        rules: dict[str, str],
    ) -> list[Check]:
        auc, (alo, ahi) = overall["roc_auc"], overall["intervals"]["roc_auc"]
        ece, (elo, ehi) = overall["ece"], overall["intervals"]["ece"]
        n = overall["count"]
        auc_status = verdict(alo, ahi, 0.5, at_most=False, rows=n)
        ece_status = verdict(elo, ehi, MAX_ECE, at_most=True, rows=n)
        checks = [
            Check(
                "Better than chance",
                None,
                f"ROC AUC {auc:.3f} (95% interval {alo:.3f}..{ahi:.3f}; chance is 0.5)"
                + (ZERO_WIDTH if auc_status == "not_evaluable" else "")
                if np.isfinite(auc)
                else "ROC AUC undefined: the held-out rows have a single outcome",
                status=auc_status,
                rule=interval_rule(0.5, at_most=False),
                hint=_zero_width_hint(auc_status, n),
            ),
            Check(
                "Calibration",
                None,
                f"ECE {ece:.3f} (95% interval {elo:.3f}..{ehi:.3f}; threshold {MAX_ECE})"
                + (ZERO_WIDTH if ece_status == "not_evaluable" else "")
                if np.isfinite(ece)
                else "ECE undefined: no held-out rows",
                status=ece_status,
                rule=interval_rule(MAX_ECE, at_most=True)
                + "; ECE is biased upwards by sampling (and privacy) noise",
                hint=_zero_width_hint(ece_status, n),
            ),
        ]
        for attr, rows in groups.items():
            checks.append(_group_calibration_check(attr, rows, rules[attr], group_hint(tab, attr, 1)))
        for attr, rows in groups.items():
            ok = np.array([r["evaluable"] for r in rows], dtype=bool)
            ok &= np.array([np.isfinite(r["roc_auc"]) for r in rows], dtype=bool)
            small = [f"{r['group']} ({r['count']:,.0f} rows)" for r, o in zip(rows, ok, strict=True) if not o]
            idx = np.flatnonzero(ok)
            rule = f"{interval_rule(MAX_AUC_GAP, at_most=True)}; {rules[attr]}; {GAP_METHOD}"
            if idx.size < 2:
                checks.append(
                    Check(
                        f"AUC gap across {attr}",
                        None,
                        f"not evaluable: fewer than two groups large enough to compare "
                        f"({len(rows)} groups; groups need {_minimum(tab, attr)}; too small: "
                        f"{', '.join(small) or 'none'})",
                        status="not_evaluable",
                        rule=rule,
                        hint=group_hint(tab, attr),
                    )
                )
                continue
            reps = binned_metrics(tab.by_attribute(attr, tab.replicates))["roc_auc"][:, idx]
            centre = binned_metrics(tab.by_attribute(attr))["roc_auc"][idx]
            est = np.array([rows[i]["roc_auc"] for i in idx])
            gap, lo, hi = gap_interval(est, reps, centre=centre)
            checks.append(
                Check(
                    f"AUC gap across {attr}",
                    None,
                    f"largest difference in ROC AUC between groups: {gap:.3f} (95% interval "
                    f"{lo:.3f}..{hi:.3f}; threshold {MAX_AUC_GAP}); groups compared ({_minimum(tab, attr)} "
                    "each): "
                    + ", ".join(f"{rows[i]['group']} ({rows[i]['count']:,.0f})" for i in idx)
                    + (f"; too small to evaluate: {', '.join(small)}" if small else ""),
                    status=verdict(
                        lo, hi, MAX_AUC_GAP, at_most=True, rows=float(min(rows[i]["count"] for i in idx))
                    ),
                    rule=rule,
                )
            )
        return checks

    def render(self, result: SectionResult) -> str:
        """The section's HTML (drawn by :mod:`trustlab.audit.render._performance`; needs matplotlib).

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._performance import render_performance

        return render_performance(result)
