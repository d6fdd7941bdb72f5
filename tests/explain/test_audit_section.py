"""Tests of the audit's Explain section on small synthetic contexts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from trustlab.audit import Audit
from trustlab.audit.section import AuditContext
from trustlab.audit.sections.explain import ExplainSection
from trustlab.datasets import Schema


def _ctx(final, private=False):
    rng = np.random.default_rng(0)
    n = 600
    data = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "income": rng.normal(3, 1, n),
            "region": rng.choice(["a", "b", "c"], n),
        }
    )
    logit = 0.1 * (data.age - 40) + data.income * (data.region == "a") - 1
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    data["y"] = y
    pre = ColumnTransformer(
        [("num", StandardScaler(), ["age", "income"]), ("cat", OneHotEncoder(), ["region"])]
    )
    model = Pipeline([("pre", pre), ("clf", final)]).fit(data[["age", "income", "region"]], y)
    train, test = np.arange(300), np.arange(300, n)
    return AuditContext(
        data=data,
        target="y",
        sensitive=["region"],
        features=["age", "income", "region"],
        y=y,
        positive_label=1,
        negative_label=0,
        train_index=train,
        test_index=test,
        model=model,
        model_name="m",
        proba_test=model.predict_proba(data.iloc[test][["age", "income", "region"]])[:, 1],
        schema=None,  # type: ignore[arg-type]
        private=private,
        random_state=0,
    )


def test_tree_pipeline_section():
    ctx = _ctx(HistGradientBoostingClassifier(max_iter=30, max_depth=3, random_state=0))
    sec = ExplainSection()
    assert sec.name == "explain" and sec.applies(ctx)
    res = sec.compute(ctx, None)
    f = res.figures
    assert f["method"] == "fastpd"
    assert f["importance"][0][0] in {"num__age", "num__income", "cat__region_a"}
    assert "cat__region_c" not in [n for n, _ in f["importance"][:2]]
    assert len(f["pd_curves"]) == 3 and f["interactions"]
    assert 0 < f["interaction_strength"] < 1
    assert all(c.passed for c in res.checks)
    html = sec.render(res)
    assert html.count("<svg") == 2 and "Interaction" in html  # importance, one row of PD curves
    assert res.to_dict()["figures"] == f


def test_linear_section_and_private_mode():
    ctx = _ctx(LogisticRegression())
    res = ExplainSection().compute(ctx, None)
    assert res.figures["method"] == "linear"
    assert res.figures["importance"][0][0] == "num__age"
    assert "<svg" in ExplainSection().render(res)
    assert not ExplainSection().applies(_ctx(LogisticRegression(), private=True))


def test_unsupported_model_is_reported_not_raised():
    from sklearn.svm import SVC

    res = ExplainSection().compute(_ctx(SVC(probability=True)), None)
    assert res.figures["method"] == "none"
    assert res.checks[0].passed is None and "supported" in res.notes[0]


@pytest.mark.parametrize("seed", [0])
def test_deterministic(seed):
    ctx = _ctx(HistGradientBoostingClassifier(max_iter=10, random_state=seed))
    a = ExplainSection().compute(ctx, None).figures
    b = ExplainSection().compute(ctx, None).figures
    assert a == b


def test_linear_section_recourse_check_certifies_or_finds_regions():
    ctx = _ctx(LogisticRegression())
    res = ExplainSection().compute(ctx, None)
    rec = res.figures["recourse"]
    # age and income may move over their whole range: every negative can be flipped
    assert rec["status"] == "certified" and rec["n_fixed"] == 0
    assert rec["immutable"] == ["region"] and set(rec["actionable"]) == {"age", "income"}
    assert [c.passed for c in res.checks] == [True, True]
    assert "recourse is certified" in ExplainSection().render(res)
    # with income immutable and age only allowed to decrease, some people are fixed
    sec = ExplainSection(recourse_immutable=("income",), recourse_decrease_only=("age",))
    res2 = sec.compute(ctx, None)
    rec2 = res2.figures["recourse"]
    assert rec2["n_fixed"] > 0 and rec2["regions"] and rec2["consistent"]
    assert rec2["n_negative"] >= rec2["n_fixed"] >= rec2["n_fixed_covered"] > 0
    assert all(r["verified"] for r in rec2["regions"])
    by_name = {c.name: c.passed for c in res2.checks}
    assert by_name["recourse for every test individual"] is False
    assert by_name["confined regions agree with the pointwise check"] is True
    page = sec.render(res2)
    assert "Confined region" in page and rec2["regions"][0]["description"].split(" ")[0] in page
    assert res2.to_dict()["figures"]["recourse"] == rec2
    assert "recourse" not in ExplainSection(recourse=False).compute(ctx, None).figures


def test_schema_actionable_field_drives_the_recourse_check():
    ctx = _ctx(LogisticRegression())
    ctx.schema = Schema.from_dict(
        {
            "columns": {
                "age": {"bounds": [0, 120], "actionable": "decrease"},
                "income": {"bounds": [-10, 10], "actionable": "no"},
            }
        }
    )
    schema_res = ExplainSection().compute(ctx, None)
    ctx.schema = None  # type: ignore[assignment]
    option_res = ExplainSection(recourse_immutable=("income",), recourse_decrease_only=("age",)).compute(
        ctx, None
    )
    by_schema, by_option = schema_res.figures["recourse"], option_res.figures["recourse"]
    # the schema's declarations act exactly like the section's options
    assert "income" in by_schema["immutable"] and by_schema["actionable"] == ["age"]
    assert by_schema["n_fixed"] == by_option["n_fixed"] > 0
    assert "decrease only: age" in schema_res.notes[-1]


def test_recourse_check_skipped_for_nonlinear_pipelines_and_trees():
    from sklearn.preprocessing import PolynomialFeatures

    ctx = _ctx(LogisticRegression())
    poly = Pipeline([("pre", ctx.model[0]), ("poly", PolynomialFeatures(2)), ("clf", LogisticRegression())])
    poly.fit(ctx.X_train, ctx.y[ctx.train_index])
    ctx.model = poly
    res = ExplainSection().compute(ctx, None)
    assert res.figures["method"] == "linear"
    assert res.figures["recourse"]["status"] == "skipped"
    assert res.checks[-1].passed is None and "not linear" in res.checks[-1].detail
    tree = ExplainSection().compute(_ctx(HistGradientBoostingClassifier(max_iter=10)), None)
    assert "recourse" not in tree.figures


def test_feature_with_a_tiny_range_skips_the_recourse_check():
    """A feature whose whole range lies within 1e-9 cannot enter the recourse solvers:
    the check is not evaluable (with the reason), the audit goes on."""
    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"x": rng.normal(size=n), "tiny": rng.normal(size=n) * 1e-300})
    df["g"] = rng.choice(["a", "b"], n)
    df["y"] = (df.x + rng.normal(size=n) > 0).astype(int)
    section = Audit(model="logistic").run(df, target="y", sensitive=["g"])["explain"]
    assert section.figures["recourse"]["status"] == "skipped"
    assert "tiny" in section.figures["recourse"]["reason"]
    assert [c.status for c in section.checks if c.name.startswith("recourse")] == ["not_evaluable"]
