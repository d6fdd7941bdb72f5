"""The audit's *Explain* section: what drives the model's predictions.

For tree models (HistGradientBoosting, XGBoost, LightGBM, scikit-learn forests and
boosting, alone or as the last step of a Pipeline) it runs FastPD on a subsample of
the test rows (which are also the background): global importance (mean |SHAP|),
PD curves of the top features and the strongest pairwise interactions. For linear
models it reports standardised coefficients and a *recourse check* (confined
regions, Lawless et al., ICML 2025): the share of test individuals whose negative
prediction no allowed action can flip, and up to five confined regions (boxes of
the raw feature space where everyone is fixed), or a certificate that none exists.
The default action set: numeric non-sensitive columns may move anywhere in their
range (the schema's public bounds when declared), categorical and sensitive
columns are immutable. In private mode the section is left out (``raw_only``:
explanations are not released under DP yet).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.audit.section import AuditContext, Check, Section, SectionResult
from trustlab.audit.sections._columns import suspect_columns
from trustlab.errors import DataError, ModelError, ParameterError

__all__ = ["BACKGROUND_KEY", "ExplainSection"]

_MAX_ROWS = 500
BACKGROUND_KEY = "explain_background_state"
"""Context cache key of a precomputed FastPD background (a ``FastPDBackgroundState`` of the
model's last step): when present, FastPD is fitted from it instead of from the explained rows
(the distributed audit counts every held-out row on the workers; see ``audit._scale_explain``)."""
_RECOURSE_RULE = (
    "pass when no test individual has a fixed negative prediction (an exact check of every "
    "individual; not evaluable when the check cannot run)"
)
_COMPUTED_RULE = "pass when an explanation could be computed for the model"
_TOP = 10
_N_CURVES = 3


def _split_pipeline(model: Any) -> tuple[Any, Any]:
    if type(model).__name__ == "Pipeline" and len(model.steps) > 1:
        return model[:-1], model[-1]
    return None, model


def _output_unit(est: Any) -> str:
    """The unit of the explained output: log-odds for boosted and linear classifiers.

    FastPD reads trees in the model's raw output space: the margin (log-odds) of boosted
    classifiers, the class-1 probability of forests and single trees (they average leaf
    class shares), the prediction of regressors.
    """
    kind = type(est).__name__
    if not hasattr(est, "predict_proba"):
        return "model output"
    if any(word in kind for word in ("Forest", "ExtraTrees", "DecisionTree", "ExtraTree")):
        return "probability of the positive class"
    return "log-odds"


def _category_levels(pre: Any) -> dict[str, list[str]]:
    """Level names of the ordinal-coded categorical inputs of a fitted preprocessor.

    Reads the ``OrdinalEncoder`` s of a ``ColumnTransformer`` (alone or as the last step
    of a ``Pipeline``), keyed by their output feature names, so that a partial-dependence
    curve over codes ``0..k-1`` can be drawn over the level names.
    """
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OrdinalEncoder

    ct = pre[-1] if isinstance(pre, Pipeline) else pre
    if not isinstance(ct, ColumnTransformer) or not hasattr(ct, "transformers_"):
        return {}
    out: dict[str, list[str]] = {}
    for name, trans, cols in ct.transformers_:
        enc = trans[-1] if isinstance(trans, Pipeline) else trans
        if not isinstance(enc, OrdinalEncoder) or not hasattr(enc, "categories_"):
            continue
        for col, cats in zip(list(cols), enc.categories_, strict=False):
            key = f"{name}__{col}" if ct.verbose_feature_names_out else str(col)
            out[key] = [str(c) for c in cats]
    return out


def _feature_names(pre: Any, X: Any, n: int) -> list[str]:
    if pre is not None:
        try:
            return [str(c) for c in pre.get_feature_names_out()]
        except (AttributeError, ValueError):
            return [f"x{j}" for j in range(n)]
    return [str(c) for c in getattr(X, "columns", range(n))]


class ExplainSection(Section):
    """Global importance, PD curves and interactions (FastPD), or linear coefficients.

    References
    ----------
    .. [1] Liu, J., Steensgaard, T., Wright, M. N., Pfister, N., Hiabu, M. "Fast
       Estimation of Partial Dependence Functions using Trees". ICML 2025.
    .. [2] Lawless, C., Weng, T., Ustun, B., Udell, M. "Understanding Fixed
       Predictions via Confined Regions". ICML 2025.

    Parameters
    ----------
    recourse : bool, default True
        Run the recourse check for linear models.
    recourse_time_limit : float, default 5.0
        Seconds for the confined-region search (all regions together).
    recourse_max_regions : int, default 5
    recourse_immutable, recourse_increase_only, recourse_decrease_only : sequence of str
        Columns to treat as immutable or one-directional, on top of the defaults
        (categorical and sensitive columns immutable).
    text_hypotheses : bool, default True
        For each free-text column (at most two: those the schema declares as text, then those
        the column screening left out of the model as free text), test HypotheSAEs
        hypotheses about the target on the held-out rows; the report says whether each was
        declared or detected (:mod:`trustlab.audit.sections._text_hypotheses`).
    text_encoder : callable, optional
        ``text_encoder(texts) -> ndarray (n, d)``: the text embeddings HypotheSAEs reads.
        Default: all-MiniLM-L6-v2 when ``trustlab[text]`` is installed, else fixed random word
        vectors (a bag-of-words stand-in); the report says which.

    Examples
    --------
    >>> section = ExplainSection()
    >>> section.name, section.title
    ('explain', 'Explain')
    """

    name = "explain"
    title = "Explain"
    budget_weight = 0.5
    raw_only = True  # explanations are not released under DP yet
    private_reason = (
        "Left out in private mode: the explanations (FastPD importance and PD curves, the recourse "
        "check, the text-column hypotheses of HypotheSAEs) read individual rows and trustlab has no "
        "differentially private release of them yet; nothing was spent on this section."
    )

    def __init__(
        self,
        *,
        recourse: bool = True,
        recourse_time_limit: float = 5.0,
        recourse_max_regions: int = 5,
        recourse_immutable: tuple[str, ...] = (),
        recourse_increase_only: tuple[str, ...] = (),
        recourse_decrease_only: tuple[str, ...] = (),
        text_hypotheses: bool = True,
        text_encoder: Any = None,
    ) -> None:
        self.recourse = recourse
        self.text_hypotheses = text_hypotheses
        self.text_encoder = text_encoder
        self.recourse_time_limit = recourse_time_limit
        self.recourse_max_regions = recourse_max_regions
        self.recourse_immutable = recourse_immutable
        self.recourse_increase_only = recourse_increase_only
        self.recourse_decrease_only = recourse_decrease_only

    def _recourse(self, ctx: AuditContext) -> tuple[dict[str, Any], list[Check], list[str]]:
        """The recourse check's figures, checks and notes (confined regions)."""
        from trustlab.explain.recourse_audit import recourse_check

        name = "recourse for every test individual"
        schema = ctx.schema
        bounds = {}
        declared: dict[str, list[str]] = {"no": [], "increase": [], "decrease": []}
        for c in ctx.features:
            bd = schema.bounds(c) if schema is not None else None
            if bd is not None:
                bounds[c] = bd
            how = schema.actionable(c) if schema is not None else None
            if how in declared:
                declared[how].append(c)
        try:
            res = recourse_check(
                ctx.model,
                ctx.X_train,
                ctx.X_test,
                sensitive=ctx.sensitive,
                immutable=(*self.recourse_immutable, *declared["no"]),
                increase_only=(*self.recourse_increase_only, *declared["increase"]),
                decrease_only=(*self.recourse_decrease_only, *declared["decrease"]),
                bounds=bounds,
                max_regions=self.recourse_max_regions,
                time_limit=self.recourse_time_limit,
            )
        except (ModelError, DataError, ParameterError) as exc:
            # the section passes only its own settings and the data's ranges, so a
            # ParameterError here is about the data (e.g. a feature whose whole range lies
            # within 1e-9): the check is not evaluable, the audit goes on
            return (
                {"status": "skipped", "reason": str(exc)},
                [Check(name, None, f"recourse check skipped: {exc}", rule=_RECOURSE_RULE)],
                [f"Recourse check skipped: {exc}"],
            )
        f = res.to_dict()
        k = len(f["regions"])
        if f["certified"]:
            region_text = "no confined region exists in the population region (recourse certified)"
        else:
            region_text = f"{k} confined region(s) found (search status: {f['status']})"
        detail = (
            f"{f['n_fixed']} of {f['n_checked']} test individuals ({f['share_fixed']:.1%}) have a "
            f"fixed negative prediction; {region_text}"
        )
        checks = [Check(name, f["n_fixed"] == 0 if f["n_checked"] else None, detail, rule=_RECOURSE_RULE)]
        if k:
            ok = f["consistent"] and all(r["verified"] for r in f["regions"])
            checks.append(
                Check(
                    "confined regions agree with the pointwise check",
                    ok,
                    f"{sum(r['n_rows'] for r in f['regions'])} test rows inside the regions, all fixed"
                    if ok
                    else "a test row inside a region has recourse (solver tolerance?)",
                    rule="pass when every test row inside a confined region is fixed by the pointwise check",
                )
            )
        immutable = ", ".join(f["immutable"]) or "none"
        one_way = "".join(
            f"; {label} only: {', '.join(cols)}"
            for label, cols in (
                ("increase", (*self.recourse_increase_only, *declared["increase"])),
                ("decrease", (*self.recourse_decrease_only, *declared["decrease"])),
            )
            if cols
        )
        notes = [
            "Recourse check (confined regions): numeric columns other than the sensitive ones "
            "may change within their range (schema bounds where declared), as the schema's "
            f"'actionable' field allows; immutable: {immutable}{one_way}. A fixed prediction is "
            "one that no such change can flip; a confined region is a box of the feature space "
            "in which every individual is fixed, found from the model alone, so it also covers "
            "people not in the data.",
        ]
        if f["status"] == "time_limit":
            notes.append(
                f"The confined-region search stopped at its {self.recourse_time_limit:g} s limit; "
                "the regions listed are confined, but the list may be incomplete."
            )
        if f["n_skipped"]:
            notes.append(f"{f['n_skipped']} test rows with missing values were left out of the check.")
        return f, checks, notes

    def compute(self, ctx: AuditContext, budget: Any = None) -> SectionResult:
        """Explain the model on the held-out rows, and the target from free text (raw mode only).

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.
        budget : optional
            Unused (the section runs only outside private mode: ``raw_only``).

        Returns
        -------
        SectionResult
        """
        result = self._explain_model(ctx)
        if self.text_hypotheses:
            from trustlab.audit.sections._text_hypotheses import text_hypotheses

            found, notes = text_hypotheses(ctx, self.text_encoder)
            if found:
                result.figures["text_hypotheses"] = found
            result.notes.extend(notes)
        return result

    def _explain_model(self, ctx: AuditContext) -> SectionResult:
        """Explain the model on the held-out rows (FastPD, or the linear reader)."""
        from trustlab.explain import FastPD, coef_intercept

        pre, est = _split_pipeline(ctx.model)
        X = ctx.X_test
        rng = np.random.default_rng(ctx.random_state)
        if len(X) > _MAX_ROWS:
            X = X.iloc[np.sort(rng.choice(len(X), _MAX_ROWS, replace=False))]
        raw: Any = pre.transform(X) if pre is not None else X
        if hasattr(raw, "toarray"):
            raw = raw.toarray()
        try:
            Z = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError):  # e.g. a user's model that takes text columns as they are
            why = (
                "the model's inputs are not all numeric (a model that takes text columns itself); "
                "FastPD and the linear reader need numbers: pass a scikit-learn Pipeline whose "
                "first steps encode the columns"
            )
            return SectionResult(
                self.name,
                self.title,
                {"method": "none"},
                [Check("explanation computed", None, why, rule=_COMPUTED_RULE)],
                [f"No explanation: {why}."],
            )
        names = _feature_names(pre, X, Z.shape[1])
        unit = _output_unit(est)
        suspect = [s["column"] for s in suspect_columns(ctx)]
        background = ctx._shared.get(BACKGROUND_KEY)
        if background is None:
            notes = [f"Explained {len(Z)} test rows (also the background); values are in {unit}."]
        else:
            notes = [
                f"Explained {len(Z)} test rows (a hash sample of the held-out rows); the background "
                f"is {background.n_rows:,} held-out rows (all of them, or a hash sample of about "
                "1,000,000), counted by leaf on the workers; "
                f"values are in {unit}."
            ]
        linear = coef_intercept(est)
        if linear is not None and linear[0].size == Z.shape[1]:
            coef = linear[0]
            std = Z.std(axis=0)
            imp = np.abs(coef) * std
            lin_order = [int(j) for j in np.argsort(-imp)[:_TOP]]
            figures: dict[str, Any] = {
                "method": "linear",
                "unit": unit,
                "importance": [[names[j], float(imp[j])] for j in lin_order],
                "coefficients": [[names[j], float(coef[j])] for j in lin_order],
                "intercept": float(linear[1]),
                "suspect": suspect,
            }
            notes.append(
                f"Linear model: importance is |coefficient| x the feature's standard deviation (in "
                f"{unit} per standard deviation of the feature as the model sees it, after its "
                "preprocessing)."
            )
            checks = [Check("explanation computed", True, "standardised coefficients", rule=_COMPUTED_RULE)]
            if self.recourse:
                rec, rec_checks, rec_notes = self._recourse(ctx)
                figures["recourse"] = rec
                checks += rec_checks
                notes += rec_notes
            return SectionResult(self.name, self.title, figures, checks, notes)
        try:
            fpd = FastPD(est).fit(Z) if background is None else FastPD(est).fit_background_state(background)
        except ModelError as exc:
            return SectionResult(
                self.name,
                self.title,
                {"method": "none"},
                [Check("explanation computed", None, str(exc), rule=_COMPUTED_RULE)],
                [f"No explanation: {exc}"],
            )
        phi = fpd.shap_values(Z)
        imp = np.abs(phi).mean(axis=0)
        order = [int(j) for j in np.argsort(-imp)[:_TOP]]
        levels = _category_levels(pre) if pre is not None else {}
        curves = []
        for j in order[:_N_CURVES]:
            lv = levels.get(names[j])
            if lv is not None:  # an ordinal-coded category: its codes 0..k-1, drawn over the names
                grid, v = fpd.pd_curve(j, np.arange(len(lv), dtype=float))
            else:
                grid, v = fpd.pd_curve(j, grid_resolution=30)
            curve: dict[str, Any] = {"feature": names[j], "grid": grid.tolist(), "pd": v.tolist()}
            if lv is not None:
                curve["levels"] = lv
            curves.append(curve)
        comp_imp = fpd.importance(Z, max_order=2)
        pairs = [(str(k), float(v)) for k, v in comp_imp.items() if ":" in str(k)][:5]
        fname = {str(f): names[i] for i, f in enumerate(fpd.feature_names_in_)}
        inter = [[" × ".join(fname.get(p, p) for p in k.split(":")), v] for k, v in pairs]
        strength = fpd.interaction_strength(Z)
        add_err = float(np.abs(fpd.expected_value_ + phi.sum(axis=1) - fpd.predict(Z)).max())
        figures = {
            "method": "fastpd",
            "unit": unit,
            "expected_value": float(fpd.expected_value_),
            "importance": [[names[j], float(imp[j])] for j in order],
            "pd_curves": curves,
            "interactions": inter,
            "interaction_strength": float(strength),
            "n_rows": len(Z),
            "n_background": len(Z) if background is None else int(background.n_rows),
            "suspect": suspect,
        }
        checks = [
            Check(
                "SHAP values add up to the prediction",
                add_err < 1e-5,
                f"max |base + sum SHAP - margin| = {add_err:.2g}",
                rule="pass when base value + sum of SHAP values equals the margin within 1e-5 on every row",
            )
        ]
        notes.append(
            f"Importance: mean |SHAP value| over the explained rows, in {unit}. Partial dependence: "
            f"the model's average output ({unit}) when the feature is set to each value, the other "
            "features kept as they are; a categorical feature is drawn over its level names."
        )
        notes.append(
            f"Interaction strength {strength:.1%}: the share of prediction variance that "
            "main effects do not explain."
        )
        return SectionResult(self.name, self.title, figures, checks, notes)

    def render(self, result: SectionResult) -> str:
        """The section's HTML (drawn by :mod:`trustlab.audit.render._explain`; needs matplotlib).

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._explain import render_explain

        return render_explain(result)
