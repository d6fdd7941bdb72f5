"""The Fairness section's optional parts: Hardt post-processing and multiaccuracy/multicalibration.

- :func:`mitigation_figures` (``--mitigate``): fits trustlab's
  :class:`~trustlab.fairness.HardtPostProcessor` on half of the held-out rows (a public
  per-row hash decides the half) and compares the model's decisions before and after on
  the other half: rates by group, disparities and accuracy, each with a bootstrap
  interval, and a check of the mitigated disparity decided from its interval.
- :func:`calibration_figures`: multiaccuracy and multicalibration violations per group
  (Bharti et al., ICML 2025), and with ``--proxy COL`` the paper's upper bound on the
  true violation computed from proxy groups only. An upper bound can show that the true
  violation is small, never that it is large: that check passes or is inconclusive.

Both are raw-mode figures. In private mode the section leaves them out and says why:
the post-processor's LP and the calibration tables read individual rows and have no DP
release in trustlab yet.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from trustlab.audit._hints import rows_hint
from trustlab.audit.prediction_table import LEVEL, MIN_GROUP
from trustlab.audit.section import AuditContext, Check, interval_rule, interval_verdict
from trustlab.audit.sections._columns import group_labels
from trustlab.audit.split import row_split
from trustlab.errors import DataError
from trustlab.fairness import HardtPostProcessor, SmallGroupWarning, bootstrap_counts, rates_from_counts
from trustlab.uncertainty import gap_interval, symmetric_interval

__all__ = [
    "MAX_MULTICALIBRATION",
    "MITIGATIONS",
    "N_LEVELS",
    "calibration_figures",
    "mitigation_figures",
]

MITIGATIONS = {
    "equalized_odds": "Equalized odds",
    "equal_opportunity": "Equal opportunity",
    "demographic_parity": "Demographic parity",
}
"""The constraints ``--mitigate`` accepts, with the disparity each one targets."""

_GAPS = {
    "demographic_parity": ("selection_rate",),
    "equal_opportunity": ("true_positive_rate",),
    "equalized_odds": ("true_positive_rate", "false_positive_rate"),
}
MAX_MULTICALIBRATION = 0.05
"""Threshold of the worst group's l1 multicalibration violation (a convention, stated in the report)."""
N_LEVELS = 10
"""Levels of the calibration grid (few levels keep the plug-in violation's upward bias small)."""
N_BOOT = 400
_RATES = ("selection_rate", "true_positive_rate", "false_positive_rate")
_SPLIT_KEY = 104_729  # the fit/evaluate halves differ from the Uncertainty section's halves


def _gap_figures(
    y: np.ndarray, pred: np.ndarray, codes: np.ndarray, k: int, rng: np.random.Generator
) -> dict[str, Any]:
    """Rates by group, the three disparities and accuracy, each with a bootstrap interval."""
    counts = np.bincount(codes * 4 + pred * 2 + y, minlength=4 * k).reshape(k, 2, 2).astype(float)
    reps = bootstrap_counts(counts, n_boot=N_BOOT, random_state=rng)
    rates, rrates = rates_from_counts(counts), rates_from_counts(reps)
    gaps: dict[str, list[float]] = {}
    pairs = k * (k - 1) // 2  # Bonferroni over the pairs of groups and the rates, as in the section's gaps
    for name, keys in _GAPS.items():
        parts = [gap_interval(rates[m], rrates[m], n_comparisons=len(keys) * pairs) for m in keys]
        gaps[name] = [max(p[i] for p in parts) for i in range(3)]
    correct = counts[:, 0, 0] + counts[:, 1, 1]
    acc = float(correct.sum() / counts.sum())
    racc = (reps[:, :, 0, 0] + reps[:, :, 1, 1]).sum(axis=1) / reps.sum(axis=(1, 2, 3))
    lo, hi = symmetric_interval(acc, racc, limits=(0, 1))
    return {
        "rates": {m: [float(v) for v in rates[m]] for m in _RATES},
        "gaps": gaps,
        "accuracy": [acc, float(lo), float(hi)],
    }


def mitigation_figures(
    ctx: AuditContext, constraint: str, threshold: float
) -> tuple[dict[str, Any], list[Check]]:
    """Before/after figures of Hardt post-processing for each sensitive attribute.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context (raw mode).
    constraint : {"equalized_odds", "equal_opportunity", "demographic_parity"}
        The post-processor's constraint.
    threshold : float
        The disparity threshold of the checks.

    Returns
    -------
    figures : dict
        Per attribute: the groups compared, the rows in each half, and ``before`` /
        ``after`` rates, disparities ``[estimate, low, high]`` and accuracy.
    checks : list of Check
        One per attribute: the targeted disparity after mitigation, from its interval.
    """
    test = ctx.data.iloc[ctx.test_index]
    fit = row_split(test, 0.5, seed=int(ctx.random_state) + _SPLIT_KEY)
    y = np.asarray(ctx.y_test, dtype=int)
    score = np.clip(np.asarray(ctx.proba_test, dtype=float), 0.0, 1.0)
    rng = np.random.default_rng(ctx.random_state)  # raw mode: the bootstrap's and the randomised rule's seed
    label = MITIGATIONS[constraint]
    rule = (
        f"{interval_rule(threshold, at_most=True)}; post-processor fitted on one half of the "
        "held-out rows, judged on the other"
    )
    out: dict[str, Any] = {}
    checks: list[Check] = []
    for attr in ctx.sensitive:
        g = group_labels(ctx.sensitive_test[attr])
        levels = sorted(set(g))
        usable = [
            lv
            for lv in levels
            if all(
                len(np.unique(y[half & (g == lv)])) == 2 and (half & (g == lv)).sum() >= MIN_GROUP // 2
                for half in (fit, ~fit)
            )
        ]
        left_out = [lv for lv in levels if lv not in usable]
        name = f"{label} across {attr} after mitigation"
        if len(usable) < 2:
            why = (
                "a single value"
                if len(levels) == 1
                else "fewer than two groups with both outcomes in each half"
            )
            out[attr] = {"evaluated": False, "reason": why, "left_out": left_out}
            hint = (
                f"evaluable with two groups of {attr} that have both outcomes and {MIN_GROUP // 2} rows in "
                "each half of the held-out rows (more data or a larger --test-size)"
            )
            checks.append(
                Check(
                    name,
                    None,
                    f"not evaluable: {attr} has {why}",
                    status="not_evaluable",
                    rule=rule,
                    hint=hint,
                )
            )
            continue
        keep = np.isin(g, usable)
        codes = np.searchsorted(np.array(usable), g)
        tr, ev = fit & keep, ~fit & keep
        with warnings.catch_warnings():  # small groups are reported in the check, not on stderr
            warnings.simplefilter("ignore", SmallGroupWarning)
            post = HardtPostProcessor(constraint=constraint, random_state=rng.integers(2**31)).fit(
                score[tr], y[tr], sensitive_features=g[tr]
            )
        after = np.asarray(post.predict(score[ev], sensitive_features=g[ev]), dtype=int)
        before = (score[ev] >= 0.5).astype(int)
        res_before = _gap_figures(y[ev], before, codes[ev], len(usable), rng)
        res_after = _gap_figures(y[ev], after, codes[ev], len(usable), rng)
        est, lo, hi = res_after["gaps"][constraint]
        b_est = res_before["gaps"][constraint][0]
        out[attr] = {
            "evaluated": True,
            "groups": usable,
            "left_out": left_out,
            "rows": {"fit": int(tr.sum()), "evaluate": int(ev.sum())},
            "small_groups": [str(v) for v in post.small_groups_],
            "before": res_before,
            "after": res_after,
        }
        detail = (
            f"{label.lower()} difference {b_est:.3f} before, {est:.3f} after "
            f"(95% interval {lo:.3f}..{hi:.3f}; "
            f"threshold {threshold}); accuracy {res_before['accuracy'][0]:.3f} before, "
            f"{res_after['accuracy'][0]:.3f} after"
            + (
                f"; left out (too few rows or one outcome in a half): {', '.join(left_out)}"
                if left_out
                else ""
            )
            + (
                "; too few positives or negatives to estimate the rates of "
                f"{', '.join(map(str, post.small_groups_))} (fewer than 30 rows or 10 of either "
                "outcome in the fitting half): parity fitted to them may not hold on new rows"
                if post.small_groups_
                else ""
            )
        )
        checks.append(
            Check(name, None, detail, status=interval_verdict(lo, hi, threshold, at_most=True), rule=rule)
        )
    return out, checks


def _cells(y: np.ndarray, p: np.ndarray, codes: np.ndarray, k: int) -> np.ndarray:
    """Counts ``cells[g, v, t]``: rows of group ``g`` whose score rounds to level ``v`` with label ``t``."""
    v = np.rint(p * N_LEVELS).astype(int)
    return (
        np.bincount((codes * (N_LEVELS + 1) + v) * 2 + y, minlength=k * (N_LEVELS + 1) * 2)
        .reshape(k, N_LEVELS + 1, 2)
        .astype(float)
    )


def _violations(cells: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MA and l1 MC violation per group of the binned table (leading axes carried through)."""
    levels = np.arange(N_LEVELS + 1) / N_LEVELS
    rows = cells.sum(axis=-1)
    bias = levels * rows - cells[..., 1]  # sum over the cell of (f_m - y)
    nn = np.asarray(n, dtype=float)[..., None]
    return np.abs(bias.sum(axis=-1)) / nn, np.abs(bias).sum(axis=-1) / nn


def _violation_replicates(cells: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap replicates of the MA and MC violations (multinomial over cells = the row bootstrap)."""
    n = cells.sum()
    draws = rng.multinomial(int(n), (cells / n).reshape(-1), size=N_BOOT).reshape(N_BOOT, *cells.shape)
    return _violations(draws.astype(float), np.array(n))


def _bias_corrected(estimate: float, replicates: np.ndarray) -> tuple[float, float, float]:
    """Bootstrap bias correction ``2 est - mean(reps)`` with the replicates' 95% spread, clipped at 0.

    A plug-in l1 violation sums ``|level - mean label|`` over small cells, so sampling noise
    alone makes it positive: on 1,400 held-out rows and 10 levels about 0.03 for a perfectly
    calibrated model. The correction removes that first-order bias before the verdict.
    """
    centre = float(np.mean(replicates))
    half = float(np.quantile(np.abs(replicates - centre), LEVEL))
    corrected = max(0.0, 2.0 * estimate - centre)
    return corrected, max(0.0, corrected - half), corrected + half


def calibration_figures(
    ctx: AuditContext, proxy: str | None, proxy_error: float | None
) -> tuple[dict[str, Any], list[Check]]:
    """Multiaccuracy and multicalibration violations per group; with a proxy, the bound on the true one.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context (raw mode).
    proxy : str or None
        A column whose values are proxy group labels (``--proxy``).
    proxy_error : float or None
        The proxy's public error rate ``P(g != g_hat)``, applied to every proxy group
        (``--proxy-error``); required with ``proxy``.

    Returns
    -------
    figures : dict
        ``by_attribute`` (and ``proxy``): per group ``ma``/``mc`` ``[estimate, low, high]``,
        and for the proxy the ``bound`` per group.
    checks : list of Check
        Worst-group multicalibration per attribute (pass/fail/inconclusive from the
        interval); with a proxy, the bound on the true worst-group violation (pass or
        inconclusive: an upper bound cannot show a violation).
    """
    y = np.asarray(ctx.y_test, dtype=int)
    p = np.clip(np.asarray(ctx.proba_test, dtype=float), 0.0, 1.0)
    rng = np.random.default_rng(ctx.random_state)
    rule = (
        f"{interval_rule(MAX_MULTICALIBRATION, at_most=True)}; l1 multicalibration violation of the "
        f"worst group on {N_LEVELS} score levels, bootstrap bias-corrected, bootstrap interval ({LEVEL:.0%})"
    )
    columns: dict[str, np.ndarray] = {a: group_labels(ctx.sensitive_test[a]) for a in ctx.sensitive}
    if proxy is not None:
        raw = ctx.data[proxy].iloc[ctx.test_index]
        if raw.isna().any():
            raise DataError(
                f"the proxy column {proxy!r} has {int(raw.isna().sum())} missing value(s) among the "
                "held-out rows; the proxy bound needs a proxy group for every row: fill them or "
                "choose another column.",
                argument="proxy",
            )
        columns[proxy] = group_labels(raw)
    figures: dict[str, Any] = {"n_levels": N_LEVELS, "threshold": MAX_MULTICALIBRATION, "by_attribute": {}}
    checks: list[Check] = []
    for attr, g in columns.items():
        levels = sorted(set(g))
        codes = np.searchsorted(np.array(levels), g)
        cells = _cells(y, p, codes, len(levels))
        ma, mc = _violations(cells, np.array(len(y)))
        rma, rmc = _violation_replicates(cells, rng)
        ma_lo, ma_hi = symmetric_interval(ma, rma, limits=(0, 1))  # violations are >= 0
        mc_lo, mc_hi = symmetric_interval(mc, rmc, limits=(0, 1))
        res: dict[str, Any] = {
            "groups": levels,
            "rows": [int(v) for v in np.bincount(codes, minlength=len(levels))],
            "ma": [[float(a), float(b), float(c)] for a, b, c in zip(ma, ma_lo, ma_hi, strict=True)],
            "mc": [[float(a), float(b), float(c)] for a, b, c in zip(mc, mc_lo, mc_hi, strict=True)],
        }
        if attr == proxy and proxy_error is not None:
            w_lo, w_hi = symmetric_interval(mc.max(), rmc.max(axis=1), limits=(0, 1))
            res.update(
                worst_mc=[float(mc.max()), float(w_lo), float(w_hi)], worst_group=levels[int(np.argmax(mc))]
            )
            mse = float(np.mean((p - y) ** 2))
            slack = min(proxy_error, math.sqrt(mse * proxy_error))
            res.update(
                proxy_error=proxy_error,
                mse=mse,
                slack=slack,
                bound=[[v + slack, lo + slack, hi + slack] for v, lo, hi in res["mc"]],
            )
            b, b_lo, b_hi = (float(mc.max()) + slack, float(w_lo) + slack, float(w_hi) + slack)
            bounded = b_hi <= MAX_MULTICALIBRATION
            checks.append(
                Check(
                    f"True multicalibration via proxy {attr}",
                    None,
                    f"bound on the worst true group's violation {b:.3f} "
                    f"(95% interval {b_lo:.3f}..{b_hi:.3f}; "
                    f"threshold {MAX_MULTICALIBRATION}) = worst proxy-group violation {mc.max():.3f} + "
                    f"min(err, sqrt(MSE err)) = {slack:.3f} with err = {proxy_error:g}, MSE = {mse:.3f}",
                    status="pass" if bounded else "inconclusive",
                    rule=(
                        f"pass when the 95% interval of the bound lies at or below {MAX_MULTICALIBRATION}; "
                        "inconclusive otherwise (an upper bound cannot show a violation)"
                    ),
                )
            )
            figures["proxy"] = attr
        else:
            sizes = np.bincount(codes, minlength=len(levels))
            ok = sizes >= MIN_GROUP
            res["evaluable"] = [bool(v) for v in ok]
            small = [f"{lv} ({n:,} rows)" for lv, n, o in zip(levels, sizes, ok, strict=True) if not o]
            compared = ", ".join(f"{lv} ({n:,})" for lv, n, o in zip(levels, sizes, ok, strict=True) if o)
            groups_text = f"groups compared (at least {MIN_GROUP} held-out rows each): {compared}" + (
                f"; too small to evaluate: {', '.join(small)}" if small else ""
            )
            hint = ""
            if not ok.any():
                detail, status = f"not evaluable: {groups_text}", "not_evaluable"
                hint = "evaluable with " + rows_hint(
                    int(sizes.max(initial=0)), MIN_GROUP, f"held-out rows in a group of {attr}"
                )
            else:
                j = int(np.flatnonzero(ok)[np.argmax(mc[ok])])
                est, lo_w, hi_w = _bias_corrected(float(mc[ok].max()), rmc[:, ok].max(axis=1))
                res.update(worst_mc=[est, lo_w, hi_w], worst_group=levels[j], worst_mc_plugin=float(mc[j]))
                detail = (
                    f"worst group {levels[j]}: l1 violation {est:.3f} bias-corrected (plug-in {mc[j]:.3f}; "
                    f"95% interval {lo_w:.3f}..{hi_w:.3f}; threshold {MAX_MULTICALIBRATION}); {groups_text}"
                )
                status = interval_verdict(lo_w, hi_w, MAX_MULTICALIBRATION, at_most=True)
            checks.append(
                Check(f"Multicalibration across {attr}", None, detail, status=status, rule=rule, hint=hint)
            )
        figures["by_attribute"][attr] = res
    return figures, checks
