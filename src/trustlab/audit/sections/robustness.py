"""The Robustness section: held-out rows unlike the training data, and label flips.

Two questions about the fitted model on the held-out rows
(:mod:`trustlab.security.robustness`):

1. *Which held-out rows are unlike anything the model was trained on?* The distance of
   each held-out row to its 5th nearest training row (numeric columns scaled by the
   training IQR, categories one-hot), the share above the 95th percentile of the training
   rows' own distances (about 5% when the held-out rows come from the same population),
   and the rows most unlike the training data. Model-agnostic: trees included.
2. *Do predictions flip under small changes of the numeric inputs?* For each held-out
   row (up to ``max_rows``, a seeded sample), whether some change of at most
   ``eps`` x the feature's training IQR on every numeric feature changes the predicted
   label; the share of rows that flip, overall and per sensitive group, with Wilson
   intervals. Torch models and bare scikit-learn logistic regressions / MLPs are searched
   by gradient, other models by a black-box search (stated); tree models are piecewise
   constant and get part 1 only (stated). Columns that look like identifiers, codes or
   weights are not perturbed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab.audit.section import (
    AuditContext,
    Check,
    SectionResult,
    interval_rule,
    interval_verdict,
)
from trustlab.audit.sections._base import RawOnlySection
from trustlab.audit.sections._columns import group_labels, suspect_columns

__all__ = ["RobustnessSection"]

_PRIVATE_NOTE = (
    "Left out in private mode: the nearest-neighbour distances and the perturbation search read "
    "individual rows and trustlab has no DP release of them; nothing was spent on this section."
)


class RobustnessSection(RawOnlySection):
    """OOD scores of the held-out rows and the share of predictions that flip under small changes.

    Attributes
    ----------
    eps : float, default 0.05
        Perturbation radius per numeric feature, as a multiple of its training IQR.
    max_rows : int, default 1000
        Held-out rows searched for flips (a seeded sample when there are more).
    n_top : int, default 10
        Held-out rows listed as the most unlike the training data.
    max_ood_share : float, default 0.10
        The share of held-out rows above the training 95th percentile may reach this
        (twice the nominal 5%) before the check fails.
    max_flip_share : float, default 0.10
        Share of rows whose label may flip before a flip check fails.
    min_group : int, default 30
        Fewest searched rows a group needs to be judged.
    max_ood_rows : int, default 20000
        Training rows indexed and held-out rows scored by the OOD score (seeded samples
        when there are more: the nearest-neighbour search grows with both).
    max_levels : int, default 30
        Levels of a category column one-hot encoded for the OOD score: the most frequent
        training levels; the rest count as one level (a free-text or id-like column of
        thousands of levels would otherwise make the search thousands of columns wide).

    See Also
    --------
    trustlab.security.robustness.tabular_ood_scores, trustlab.security.robustness.prediction_flips

    References
    ----------
    Sun, Y. et al. "Out-of-Distribution Detection with Deep Nearest Neighbors". ICML 2022.
    Madry, A. et al. "Towards Deep Learning Models Resistant to Adversarial Attacks". ICLR 2018.
    """

    name = "robustness"
    title = "Robustness"
    private_note = _PRIVATE_NOTE
    eps: float = 0.05
    max_rows: int = 1000
    n_top: int = 10
    max_ood_share: float = 0.10
    max_flip_share: float = 0.10
    min_group: int = 30
    max_ood_rows: int = 20_000
    max_levels: int = 30

    @override
    def _raw(self, ctx: AuditContext) -> SectionResult:
        """OOD scores of the held-out rows, the most unlike rows, and the flip shares by group."""
        from trustlab.security._robustness_flips import wilson
        from trustlab.security._robustness_models import is_tree_model
        from trustlab.security.robustness import prediction_flips, tabular_ood_scores

        X_train, X_test = ctx.X_train, ctx.X_test
        figures: dict[str, Any] = {"released": True, "model": ctx.model_name}
        checks: list[Check] = []
        notes: list[str] = []
        if len(X_train) < 6 or len(X_test) == 0:
            notes.append("Too few training or held-out rows for the nearest-neighbour score.")
            return SectionResult(self.name, self.title, {"released": False}, checks, notes)

        ref, scored, ood_notes = _ood_inputs(
            X_train, X_test, int(self.max_ood_rows), int(ctx.random_state), int(self.max_levels)
        )
        notes.extend(ood_notes)
        ood = tabular_ood_scores(ref, scored, n_top=int(self.n_top))
        lo, hi = ood.share_interval
        # a row's id and what makes it unusual, never its whole record (the privacy stance:
        # a full record of an outlier can single a person out)
        top = [
            {
                "row": str(scored.index[int(pos)]),
                "score": float(score),
                "unusual": _unusual(ref, scored.iloc[int(pos)]),
            }
            for pos, score in zip(ood.top_index, ood.top_scores, strict=True)
        ]
        figures["ood"] = {
            "n_neighbors": ood.n_neighbors,
            "threshold": ood.threshold,
            "share_above": ood.share_above,
            "intervals": {"share_above": [lo, hi]},
            "rows": len(scored),
            "median_score": float(np.median(ood.scores)),
            "top": top,
        }
        checks.append(
            Check(
                "Held-out rows unlike the training data",
                None,
                f"{ood.share_above:.3f} of {len(scored):,} held-out rows lie beyond the training rows' 95th "
                f"percentile distance (95% interval {lo:.3f}..{hi:.3f}; nominal 0.05, threshold "
                f"{self.max_ood_share:g})",
                status=interval_verdict(lo, hi, float(self.max_ood_share), at_most=True),
                rule=interval_rule(float(self.max_ood_share), at_most=True),
            )
        )
        notes.append(
            f"OOD score: distance of each held-out row to its {ood.n_neighbors}th nearest training row, "
            "numeric columns centred on the training median and divided by the training IQR, "
            "categories one-hot (a different category adds 1 per column, like one IQR). The "
            "threshold is the 95th percentile of the training rows' distances to the other training "
            "rows. Model-agnostic (Sun et al., ICML 2022)."
        )

        if is_tree_model(ctx.model):
            figures["flips"] = {"evaluated": False, "reason": "tree model"}
            notes.append(
                f"{ctx.model_name} is a tree model: its predictions are piecewise constant in each "
                "feature, so there is no gradient to search for label flips; this section reports the "
                "model-agnostic OOD score only."
            )
            return SectionResult(self.name, self.title, figures, checks, notes)

        skip = {s["column"] for s in suspect_columns(ctx)}
        cols = [
            c
            for c in X_test.columns
            if c not in skip
            and c not in ctx.sensitive
            and np.issubdtype(np.asarray(X_test[c]).dtype, np.number)
            and not str(X_test[c].dtype) == "category"
        ]
        if not cols:
            figures["flips"] = {"evaluated": False, "reason": "no numeric feature"}
            notes.append("No numeric feature to perturb: the flip search was not run.")
            return SectionResult(self.name, self.title, figures, checks, notes)
        rng = np.random.default_rng(ctx.random_state)
        n = len(X_test)
        take = (
            np.sort(rng.choice(n, size=int(self.max_rows), replace=False))
            if n > self.max_rows
            else np.arange(n)
        )
        sample = X_test.iloc[take]
        finite = np.isfinite(sample[cols].to_numpy(dtype=float)).all(axis=1)
        sample = sample[finite]
        model = ctx.model
        if not hasattr(model, "predict") and hasattr(model, "predict_proba"):
            model = _ProbaLabels(model)  # a user's model with probabilities only
        flips = prediction_flips(
            model,
            sample,
            eps=float(self.eps),
            reference=X_train,
            columns=cols,
            random_state=ctx.random_state,
        )
        flo, fhi = flips.interval
        by_attr: dict[str, Any] = {}
        rule = interval_rule(float(self.max_flip_share), at_most=True)
        checks.append(
            Check(
                f"Labels stable under changes of {self.eps:g} x IQR",
                None,
                f"{flips.share:.3f} of {len(sample):,} searched held-out rows flip (95% interval "
                f"{flo:.3f}..{fhi:.3f}; threshold {self.max_flip_share:g})",
                status=interval_verdict(flo, fhi, float(self.max_flip_share), at_most=True),
                rule=rule,
            )
        )
        sens = ctx.sensitive_test.iloc[take][finite] if ctx.sensitive else None
        group_rule = (
            f"per group (at least {self.min_group} searched rows), a 95% Wilson interval of the flip "
            f"share: pass when every group's lies at or below {self.max_flip_share:g}, fail when one "
            "lies above, inconclusive otherwise"
        )
        for attr in ctx.sensitive:
            assert sens is not None
            labels = group_labels(sens[attr])
            groups = []
            judged_groups: list[tuple[str, float, float, float]] = []  # group, share, low, high
            for g in sorted(set(labels)):
                m = labels == g
                k, size = int(flips.flipped[m].sum()), int(m.sum())
                glo, ghi = wilson(k, size)
                judged = size >= self.min_group
                groups.append(
                    {
                        "group": g,
                        "rows": size,
                        "flipped": k,
                        "share": [k / size, glo, ghi],
                        "evaluated": judged,
                    }
                )
                if judged:
                    judged_groups.append((g, k / size, glo, ghi))
            by_attr[attr] = groups
            name = f"Flip share across {attr}"
            if not judged_groups:
                detail = f"not evaluable: no group of {attr} has {self.min_group} searched rows"
                hint = f"evaluable with at least {self.min_group} held-out rows in one group of {attr}"
                checks.append(Check(name, None, detail, status="not_evaluable", rule=group_rule, hint=hint))
                continue
            # every judged group must pass: fail when one interval lies above the threshold,
            # pass when all lie at or below it, inconclusive otherwise
            thr = float(self.max_flip_share)
            statuses = [interval_verdict(lo_, hi_, thr, at_most=True) for _, _, lo_, hi_ in judged_groups]
            status = _all_groups(statuses)
            g, share, glo, ghi = max(judged_groups, key=lambda t: t[1])
            detail = (
                f"highest flip share {share:.3f} ({g}; 95% interval {glo:.3f}..{ghi:.3f}); "
                f"{statuses.count('pass')} of {len(statuses)} judged groups lie at or below {thr:g}"
            )
            checks.append(Check(name, None, detail, status=status, rule=group_rule))
        figures["flips"] = {
            "evaluated": True,
            "eps": flips.eps,
            "method": flips.method,
            "columns": [str(c) for c in flips.columns],
            "radius": [float(r) for r in flips.radius],
            "rows": len(sample),
            "share": flips.share,
            "intervals": {"share": [flo, fhi]},
            "by_attribute": by_attr,
        }
        notes.append(
            f"Flip search: each searched held-out row may move by at most {self.eps:g} x the training IQR "
            f"on each of {len(cols)} numeric feature(s) ({', '.join(map(str, cols))}); method: "
            f"{flips.method}. A search finds flips but cannot prove there are none, so the shares are "
            "lower bounds. Columns that look like identifiers, codes or weights and the sensitive "
            "columns are not perturbed; intervals are 95% Wilson."
        )
        if len(take) < n:
            notes.append(
                f"The flip search ran on a seeded sample of {len(take):,} of the {n:,} held-out rows."
            )
        return SectionResult(self.name, self.title, figures, checks, notes)

    def render(self, result: SectionResult) -> str:
        """The section's HTML: checks, the most unlike rows and the flip shares by group.

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            An HTML fragment.
        """
        from trustlab.audit.render._robustness import render_robustness

        return render_robustness(result)


def _all_groups(statuses: list[str]) -> str:
    """Every group must pass: fail if one fails, pass if all pass, inconclusive otherwise."""
    if "fail" in statuses:
        return "fail"
    return "pass" if statuses and set(statuses) == {"pass"} else "inconclusive"


class _ProbaLabels:
    """``predict`` as the most probable class, for a model that only has ``predict_proba``."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(np.argmax(self.model.predict_proba(X), axis=1))


def _ood_inputs(
    X_train: Any, X_test: Any, max_rows: int, seed: int, max_levels: int = 30
) -> tuple[Any, Any, list[str]]:
    """The OOD score's inputs: seeded samples, missing numbers at the median, many-level columns capped.

    Each frame keeps at most ``max_rows`` rows; a category column keeps its ``max_levels``
    most frequent training levels, every other level counted as one.
    """
    notes: list[str] = []
    rng = np.random.default_rng(seed)
    ref, scored = X_train, X_test
    if len(ref) > max_rows:
        ref = ref.iloc[np.sort(rng.choice(len(ref), size=max_rows, replace=False))]
    if len(scored) > max_rows:
        scored = scored.iloc[np.sort(rng.choice(len(scored), size=max_rows, replace=False))]
    if len(ref) < len(X_train) or len(scored) < len(X_test):
        notes.append(
            f"The OOD score indexes a seeded sample of {len(ref):,} of the {len(X_train):,} training rows "
            f"and scores {len(scored):,} of the {len(X_test):,} held-out rows."
        )
    numeric = [
        c
        for c in ref.columns
        if pd.api.types.is_numeric_dtype(ref[c]) and not isinstance(ref[c].dtype, pd.CategoricalDtype)
    ]
    if numeric:
        ref_num = ref[numeric].astype(float).replace([np.inf, -np.inf], np.nan)
        scored_num = scored[numeric].astype(float).replace([np.inf, -np.inf], np.nan)
        missing = int(ref_num.isna().to_numpy().sum() + scored_num.isna().to_numpy().sum())
        if missing:
            fill = ref_num.median().fillna(0.0)
            ref = ref.assign(**{c: ref_num[c].fillna(fill[c]) for c in numeric})
            scored = scored.assign(**{c: scored_num[c].fillna(fill[c]) for c in numeric})
            notes.append(
                f"{missing:,} missing or infinite numeric values were set to the training median for the "
                "OOD score only (such a value then counts as typical)."
            )
    capped = []
    for c in ref.columns:
        if c in numeric:
            continue
        counts = ref[c].astype(object).value_counts(dropna=True)
        if len(counts) <= max_levels:
            continue
        keep = set(counts.index[:max_levels])
        ref = ref.assign(**{c: _capped(ref[c], keep)})
        scored = scored.assign(**{c: _capped(scored[c], keep)})
        capped.append(f"{c} ({len(counts):,} levels)")
    if capped:
        notes.append(
            f"Many-level column(s) {', '.join(capped)}: the OOD score one-hot encodes the {max_levels} "
            "most frequent training levels of each and counts every other level as one, "
            f"'{_OTHER}' (a free-text or id-like column says little about how unusual a row is)."
        )
    return ref, scored, notes


_OTHER = "(other level)"


def _capped(values: Any, keep: set[Any]) -> Any:
    """A category column with every level outside ``keep`` (missing values kept) as :data:`_OTHER`."""
    col = values.astype(object)
    return col.where(col.isna() | col.isin(keep), _OTHER)


def _unusual(ref: Any, row: Any, n: int = 3) -> list[dict[str, Any]]:
    """The (at most ``n``) features that make ``row`` most unlike the training rows ``ref``.

    A numeric feature scores its distance from the training median in training IQRs (the
    OOD score's unit); a category scores 1 when its level is rarer than 5% of the training
    rows. Only the feature and the size of the difference are returned, never the value.
    """
    out = []
    for c in ref.columns:
        col = ref[c]
        if pd.api.types.is_numeric_dtype(col) and not isinstance(col.dtype, pd.CategoricalDtype):
            x = np.asarray(col, dtype=float)
            q1, med, q3 = np.nanpercentile(x, [25, 50, 75])
            iqr = q3 - q1 if q3 > q1 else (np.nanmax(x) - np.nanmin(x)) or 1.0
            z = (float(row[c]) - med) / iqr
            if np.isfinite(z) and abs(z) >= 1.5:
                side = "above" if z > 0 else "below"
                out.append({"feature": str(c), "score": abs(z), "how": f"{abs(z):.1f} IQR {side} the median"})
        else:
            missing = bool(pd.isna(row[c]))
            share = float(col.isna().mean() if missing else (col.astype(object) == row[c]).mean())
            what = "missing, as in" if missing else "a level of"
            if share < 0.05:
                out.append({"feature": str(c), "score": 1.0, "how": f"{what} {share:.1%} of training rows"})
    out.sort(key=lambda d: -d["score"])
    return out[:n]
