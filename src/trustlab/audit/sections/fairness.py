"""The Fairness section: group rates and disparity measures, each with an interval and a verdict."""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
from typing_extensions import override

from trustlab._param_validation import Interval, Options, check_params
from trustlab.audit._hints import group_hint
from trustlab.audit._thresholds import MAX_DIFFERENCE
from trustlab.audit.prediction_table import (
    LEVEL,
    MIN_GROUP,
    N_BOOT,
    PredictionTable,
    binned_metrics,
    confusion_from_bins,
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
from trustlab.audit.sections._fairness_extras import (
    MAX_MULTICALIBRATION,
    MITIGATIONS,
    N_LEVELS,
    calibration_figures,
    mitigation_figures,
)
from trustlab.errors import DataError, ParameterError
from trustlab.fairness import rates_from_counts
from trustlab.fairness.metrics import RATES
from trustlab.privacy.accounting import Accountant
from trustlab.uncertainty import GAP_METHOD, gap_interval, symmetric_interval

__all__ = ["FairnessSection"]

DIFFS = ("demographic_parity_difference", "equalized_odds_difference")
LABELS = ("Demographic parity", "Equalized odds")


def _differences(
    rates: dict[str, np.ndarray], reps: dict[str, np.ndarray], idx: np.ndarray
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Demographic-parity and equalized-odds gaps over the groups ``idx``, with 95% intervals.

    Demographic parity: the largest gap in selection rate. Equalized odds: the larger
    of the TPR and FPR gaps (fairlearn's definitions); its interval is
    ``[max(low_TPR, low_FPR), max(high_TPR, high_FPR)]`` with Bonferroni over the
    pairs of both rates.
    """
    nan = float("nan")
    if idx.size < 2:
        return dict.fromkeys(DIFFS, nan), {k: [nan, nan] for k in DIFFS}
    pairs = idx.size * (idx.size - 1) // 2

    def gap(m: str, comparisons: int) -> tuple[float, float, float]:
        return gap_interval(rates[m][idx], reps[m][:, idx], n_comparisons=comparisons)

    dp = gap("selection_rate", pairs)
    tpr, fpr = gap("true_positive_rate", 2 * pairs), gap("false_positive_rate", 2 * pairs)
    eo = (max(tpr[0], fpr[0]), max(tpr[1], fpr[1]), max(tpr[2], fpr[2]))
    return (
        {DIFFS[0]: dp[0], DIFFS[1]: eo[0]},
        {DIFFS[0]: [dp[1], dp[2]], DIFFS[1]: [eo[1], eo[2]]},
    )


class FairnessSection(TableSection):
    """Selection rate, TPR, FPR and accuracy by group, and the gaps between groups.

    The gaps are the demographic-parity and equalized-odds differences, each with a 95%
    interval and a verdict decided from that interval.

    Rates come from the confusion counts of the shared prediction table at the
    threshold 0.5 (exact in raw mode: the threshold is a bin edge; they equal
    fairlearn's ``MetricFrame`` rates, which the tests check). Groups too small for
    their figures to mean anything are shown with their counts and left out of the
    comparisons (the rule and its numbers are stated in the report). Intervals are
    symmetric bootstrap intervals from the table's replicates, which in private mode
    include the privacy noise; the gaps' intervals come from the signed pairwise
    differences, so they contain the estimate and are valid near zero.

    Parameters
    ----------
    mitigate : {"equalized_odds", "equal_opportunity", "demographic_parity"}, optional
        Also fit Hardt-Price-Srebro post-processing for this constraint on half of the
        held-out rows and compare the decisions on the other half (raw mode only).
    proxy : str, optional
        A column of proxy groups: the multicalibration check then also bounds the violation
        of the true groups from the proxy groups (Bharti et al., ICML 2025).
    proxy_error : float, optional
        The proxy's public error rate ``P(true group != proxy group)``, in [0, 1]; required
        with ``proxy`` and only with it.
    calibration : bool, default=True
        Report multiaccuracy and multicalibration by group (raw mode only).

    Examples
    --------
    >>> section = FairnessSection(mitigate="equalized_odds")
    >>> section.name, section.mitigate, section.calibration
    ('fairness', 'equalized_odds', True)
    """

    name = "fairness"
    title = "Fairness"

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "mitigate": [None, Options(MITIGATIONS)],
        "proxy": [None, str],
        "proxy_error": [None, Interval(numbers.Real, 0, 1, closed="both")],
        "calibration": ["boolean"],
    }

    def __init__(
        self,
        *,
        mitigate: str | None = None,
        proxy: str | None = None,
        proxy_error: float | None = None,
        calibration: bool = True,
    ) -> None:
        check_params(
            {"mitigate": mitigate, "proxy": proxy, "proxy_error": proxy_error, "calibration": calibration},
            self._parameter_constraints,
            type(self).__name__,
        )
        if (proxy is None) != (proxy_error is None):
            raise ParameterError(
                "proxy and proxy_error go together: name the proxy column and give its public error "
                "rate P(true group != proxy group), e.g. --proxy region --proxy-error 0.1.",
                argument="proxy_error" if proxy is not None else "proxy",
            )
        self.mitigate = mitigate
        self.proxy = proxy
        self.proxy_error = None if proxy_error is None else float(proxy_error)
        self.calibration = calibration

    @override
    def _from_table(
        self, ctx: AuditContext, tab: PredictionTable, budget: Accountant | None
    ) -> SectionResult:
        """Group rates, gaps and their checks from the shared prediction table."""
        per_attr: dict[str, dict[str, Any]] = {}
        checks: list[Check] = []
        for attr, levels in zip(tab.attributes, tab.levels, strict=True):
            rates = rates_from_counts(confusion_from_bins(tab.by_attribute(attr)))
            rates["count"] = tab.group_counts(attr)
            reps = rates_from_counts(confusion_from_bins(tab.by_attribute(attr, tab.replicates)))
            ok = tab.evaluable(attr)
            idx = np.flatnonzero(ok)
            diffs, diff_int = _differences(rates, reps, idx)
            rate_int = {}
            for m in RATES:
                r_lo, r_hi = symmetric_interval(rates[m], reps[m], limits=(0, 1))
                rate_int[m] = np.column_stack([r_lo, r_hi]).tolist()
            rule = size_rule(tab, attr)
            hw = tab.count_halfwidth(attr)
            classes = binned_metrics(tab.by_attribute(attr))
            per_attr[attr] = {
                "groups": [str(lv) for lv in levels],
                "evaluable": [bool(v) for v in ok],
                "rates": {m: [float(v) for v in rates[m]] for m in (*RATES, "count")},
                "rate_intervals": rate_int,
                "count_intervals": [[max(0.0, float(n) - hw), float(n) + hw] for n in rates["count"]],
                "positives": [float(v) for v in np.rint(classes["positives"])],
                "negatives": [float(v) for v in np.rint(classes["negatives"])],
                "min_group": {
                    "rows": MIN_GROUP,
                    "positives": tab.min_class(attr),
                    "negatives": tab.min_class(attr),
                },
                "differences": diffs,
                "difference_intervals": diff_int,
                "size_rule": rule,
            }
            small = [
                f"{lv} ({n:,.0f} rows)" for lv, n, o in zip(levels, rates["count"], ok, strict=True) if not o
            ]
            compared = ", ".join(
                f"{lv} ({n:,.0f})" for lv, n, o in zip(levels, rates["count"], ok, strict=True) if o
            )
            need = tab.min_class(attr)
            minimum = f"at least {MIN_GROUP} held-out rows, {need:,.0f} positives and {need:,.0f} negatives"
            hint = group_hint(tab, attr) if idx.size < 2 else ""
            for k, label in zip(DIFFS, LABELS, strict=True):
                v = diffs[k]
                lo, hi = diff_int[k]
                full_rule = (
                    f"{interval_rule(MAX_DIFFERENCE, at_most=True)}; {size_rule(tab, attr, short=True)}; "
                    f"{GAP_METHOD}"
                )
                if idx.size < 2:
                    why = (
                        f"{attr} has a single value: no comparison exists"
                        if len(levels) == 1
                        else f"fewer than two groups large enough to compare ({len(levels)} groups)"
                    )
                    detail = f"not evaluable: {why}" + (
                        f"; groups need {minimum}; too small: {', '.join(small)}" if small else ""
                    )
                else:
                    detail = (
                        f"difference {v:.3f} (95% interval {lo:.3f}..{hi:.3f}; threshold {MAX_DIFFERENCE}); "
                        f"groups compared ({minimum} each): {compared}"
                        + (f"; too small to evaluate: {', '.join(small)}" if small else "")
                    )
                checks.append(
                    Check(
                        f"{label} across {attr}",
                        None,
                        detail,
                        status=interval_verdict(lo, hi, MAX_DIFFERENCE, at_most=True),
                        rule=full_rule,
                        hint=hint,
                    )
                )
        notes = [
            f"Decision threshold 0.5 on the predicted probability; intervals ({LEVEL:.0%}): symmetric "
            f"bootstrap intervals from {N_BOOT} replicates of the held-out rows (estimate +- the "
            "95% quantile of |replicate - estimate|); the gaps' intervals come from the signed "
            "pairwise differences (Bonferroni over the pairs), so they contain the estimate and "
            "stay valid near zero.",
            "Demographic-parity difference: largest gap in selection rate between the groups "
            "compared. Equalized-odds difference: the larger of the TPR and FPR gaps (fairlearn's "
            "definitions).",
        ]
        notes.append(
            "Differentially private: computed from the DP prediction histogram shared with "
            "Performance (the same projected counts, so group sizes agree); the bootstrap is "
            "parametric and includes the privacy noise."
            if budget is not None
            else "Raw statistics on the held-out rows (not differentially private)."
        )
        figures: dict[str, Any] = {
            "threshold": 0.5,
            "n_boot": N_BOOT,
            "interval_level": LEVEL,
            "by_attribute": per_attr,
        }
        self._extras(ctx, budget is not None, figures, checks, notes)
        return SectionResult(self.name, self.title, figures, checks, notes)

    def _extras(
        self, ctx: AuditContext, private: bool, figures: dict[str, Any], checks: list[Check], notes: list[str]
    ) -> None:
        """Multicalibration (and the proxy bound) and the mitigation, or the reason they are left out."""
        if self.proxy is not None and self.proxy not in ctx.data.columns:
            raise DataError(
                f"the proxy column {self.proxy!r} is not in the table; name one of its columns "
                "(the column names are public: this does not depend on the rows).",
                argument="proxy",
            )
        wanted = [
            name
            for name, on in (
                ("multicalibration", self.calibration or self.proxy is not None),
                ("mitigation", self.mitigate is not None),
            )
            if on
        ]
        if private:
            if wanted:
                figures["left_out"] = wanted
                notes.append(
                    f"Left out in private mode: {' and '.join(wanted)}. The post-processor's LP and the "
                    "calibration tables read individual held-out rows, and trustlab has no DP release "
                    "of them yet; nothing was spent on them."
                )
            return
        if "multicalibration" in wanted:
            figures["calibration"], more = calibration_figures(ctx, self.proxy, self.proxy_error)
            checks.extend(more)
            notes.append(
                f"Multiaccuracy |E[g (f - y)]| and l1 multicalibration violation of each group on "
                f"{N_LEVELS} score levels (Bharti et al., ICML 2025), with bootstrap intervals; the "
                f"multicalibration check compares the worst group with {MAX_MULTICALIBRATION} (a "
                "convention)."
                + (
                    f" Proxy {self.proxy}: the bound V(true) <= V(proxy) + min(err, sqrt(MSE err)) with the "
                    f"public error rate err = {self.proxy_error:g} holds exactly when err is the proxy's "
                    "error rate on these rows."
                    if self.proxy is not None
                    else ""
                )
            )
        if self.mitigate is not None:
            figures["mitigation"], more = mitigation_figures(ctx, self.mitigate, MAX_DIFFERENCE)
            figures["mitigation_constraint"] = self.mitigate
            checks.extend(more)
            notes.append(
                f"Mitigation ({self.mitigate}): Hardt-Price-Srebro randomised per-group thresholds "
                "(trustlab.fairness.HardtPostProcessor, an LP solved with HiGHS) fitted on one half "
                "of the held-out rows (a public per-row hash) and judged on the other half, beside the "
                "model's own 0.5-threshold decisions on the same rows."
            )

    def render(self, result: SectionResult) -> str:
        """The section's HTML (drawn by :mod:`trustlab.audit.render._fairness`; needs matplotlib).

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._fairness import render_fairness

        return render_fairness(result)
