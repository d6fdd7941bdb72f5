"""The audit's *Explain* section: what drives the model's predictions.

For tree models (HistGradientBoosting, XGBoost, LightGBM, scikit-learn forests and
boosting, alone or as the last step of a Pipeline) it runs FastPD on a subsample of
the test rows (which are also the background): global importance (mean |SHAP|),
PD curves of the top features and the strongest pairwise interactions. For linear
models it reports standardised coefficients. In private mode the section is left
out (``applies`` is False): explanations are not released under DP yet.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from trustlab.audit.section import AuditContext, Check, Section, SectionResult
from trustlab.errors import ModelError

__all__ = ["ExplainSection"]

_MAX_ROWS = 500
_TOP = 10
_N_CURVES = 3


def _split_pipeline(model: Any) -> tuple[Any, Any]:
    if type(model).__name__ == "Pipeline" and len(model.steps) > 1:
        return model[:-1], model[-1]
    return None, model


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
    """

    name = "explain"
    title = "Explain"
    budget_weight = 0.5

    def applies(self, ctx: AuditContext) -> bool:
        """Not in private mode: explanations are not released under DP yet."""
        return not ctx.private

    def compute(self, ctx: AuditContext, budget: Any = None) -> SectionResult:
        from trustlab.explain import FastPD

        pre, est = _split_pipeline(ctx.model)
        X = ctx.X_test
        rng = np.random.default_rng(ctx.random_state)
        if len(X) > _MAX_ROWS:
            X = X.iloc[np.sort(rng.choice(len(X), _MAX_ROWS, replace=False))]
        raw: Any = pre.transform(X) if pre is not None else X
        if hasattr(raw, "toarray"):
            raw = raw.toarray()
        Z = np.asarray(raw, dtype=np.float64)
        names = _feature_names(pre, X, Z.shape[1])
        notes = [f"Explained {len(Z)} test rows (also the background) in raw model output."]
        if hasattr(est, "coef_") and np.ndim(est.coef_) <= 2 and np.size(est.coef_) == Z.shape[1]:
            coef = np.ravel(est.coef_)
            std = Z.std(axis=0)
            imp = np.abs(coef) * std
            lin_order = [int(j) for j in np.argsort(-imp)[:_TOP]]
            figures: dict[str, Any] = {
                "method": "linear",
                "importance": [[names[j], float(imp[j])] for j in lin_order],
                "coefficients": [[names[j], float(coef[j])] for j in lin_order],
            }
            notes.append(
                "Linear model: importance is |coefficient| x feature standard deviation. "
                "A recourse certification (confined regions) is not part of the report yet."
            )
            checks = [Check("explanation computed", True, "standardised coefficients")]
            return SectionResult(self.name, self.title, figures, checks, notes)
        try:
            fpd = FastPD(est).fit(Z)
        except ModelError as exc:
            return SectionResult(
                self.name,
                self.title,
                {"method": "none"},
                [Check("explanation computed", None, str(exc))],
                [f"No explanation: {exc}"],
            )
        phi = fpd.shap_values(Z)
        imp = np.abs(phi).mean(axis=0)
        order = [int(j) for j in np.argsort(-imp)[:_TOP]]
        curves = []
        for j in order[:_N_CURVES]:
            grid, v = fpd.pd_curve(j, grid_resolution=30)
            curves.append({"feature": names[j], "grid": grid.tolist(), "pd": v.tolist()})
        comp_imp = fpd.importance(Z, max_order=2)
        pairs = [(str(k), float(v)) for k, v in comp_imp.items() if ":" in str(k)][:5]
        fname = {str(f): names[i] for i, f in enumerate(fpd.feature_names_in_)}
        inter = [[" × ".join(fname.get(p, p) for p in k.split(":")), v] for k, v in pairs]
        strength = fpd.interaction_strength(Z)
        add_err = float(np.abs(fpd.expected_value_ + phi.sum(axis=1) - fpd.predict(Z)).max())
        figures = {
            "method": "fastpd",
            "expected_value": float(fpd.expected_value_),
            "importance": [[names[j], float(imp[j])] for j in order],
            "pd_curves": curves,
            "interactions": inter,
            "interaction_strength": float(strength),
            "n_rows": len(Z),
        }
        checks = [
            Check(
                "SHAP values add up to the prediction",
                add_err < 1e-5,
                f"max |base + sum SHAP - margin| = {add_err:.2g}",
            )
        ]
        notes.append(
            f"Interaction strength {strength:.1%}: the share of prediction variance that "
            "main effects do not explain."
        )
        return SectionResult(self.name, self.title, figures, checks, notes)

    def render(self, result: SectionResult) -> str:
        from trustlab.audit.plots import figure_to_svg, new_figure

        f = result.figures
        parts = []
        if f.get("importance"):
            names = [n for n, _ in f["importance"]][::-1]
            vals = [v for _, v in f["importance"]][::-1]
            fig, ax = new_figure(6.0, 0.3 * len(names) + 1.2)
            ax.barh(names, vals, color="C0")
            label = "mean |SHAP| (raw output)" if f.get("method") == "fastpd" else "importance"
            ax.set_xlabel(label)
            ax.set_title("Global feature importance")
            parts.append(figure_to_svg(fig))
        for c in f.get("pd_curves", []):
            fig, ax = new_figure(5.0, 3.0)
            ax.plot(c["grid"], c["pd"], color="C0", lw=2)
            ax.set_xlabel(c["feature"])
            ax.set_ylabel("partial dependence (raw output)")
            ax.set_title(f"Partial dependence on {c['feature']}")
            parts.append(figure_to_svg(fig))
        if f.get("interactions"):
            rows = "".join(
                f"<tr><td>{html.escape(n)}</td><td>{v:.4g}</td></tr>" for n, v in f["interactions"]
            )
            parts.append(
                "<table><thead><tr><th>Interaction</th><th>mean |component|</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>"
            )
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
        return "".join(parts) + (f"<ul>{notes}</ul>" if notes else "")
