"""The Robustness section: OOD scores of the held-out rows and label flips by group."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit, register_section, section_names, unregister_section
from trustlab.audit.registry import default_sections
from trustlab.audit.sections.robustness import RobustnessSection
from trustlab.datasets import load_default
from trustlab.security.robustness import prediction_flips, tabular_ood_scores


@pytest.fixture(scope="module")
def benefits():
    return load_default()


@pytest.fixture(scope="module")
def logistic_report(benefits):
    frame, info, _ = benefits
    section = RobustnessSection()
    section.max_rows = 400
    audit = Audit(model="logistic", sections=[section])
    return audit, audit.run(frame, target=info.target, sensitive=list(info.sensitive))


def test_figures_agree_with_the_library(benefits, logistic_report):
    frame, info, _ = benefits
    audit, report = logistic_report
    res = report.results[0]
    ctx = audit.context(frame, target=info.target, sensitive=list(info.sensitive))
    ood = tabular_ood_scores(ctx.X_train, ctx.X_test)
    fig = res.figures["ood"]
    assert fig["threshold"] == pytest.approx(ood.threshold)
    assert fig["share_above"] == pytest.approx(ood.share_above)
    assert [t["row"] for t in fig["top"]] == [str(ctx.X_test.index[i]) for i in ood.top_index]
    assert fig["top"][0]["score"] >= fig["top"][-1]["score"] > ood.threshold
    flips = res.figures["flips"]
    assert flips["evaluated"] and flips["rows"] == 400
    assert flips["method"].startswith("black-box search")  # a pipeline: no analytic gradient
    assert "state" not in flips["columns"] and "sex" not in flips["columns"]  # a code, a sensitive column
    lo, hi = flips["intervals"]["share"]
    assert lo <= flips["share"] <= hi
    for attr in info.sensitive:
        groups = flips["by_attribute"][attr]
        assert sum(g["rows"] for g in groups) == 400
        assert sum(g["flipped"] for g in groups) == round(flips["share"] * 400)
        judged = [g for g in groups if g["evaluated"]]
        check = next(c for c in res.checks if c.name == f"Flip share across {attr}")
        his = [g["share"][2] for g in judged]
        los = [g["share"][1] for g in judged]
        expected = "fail" if max(los) > 0.1 else "pass" if max(his) <= 0.1 else "inconclusive"
        assert check.status == expected
    names = [c.name for c in res.checks]
    assert names[:2] == [
        "Held-out rows unlike the training data",
        "Labels stable under changes of 0.05 x IQR",
    ]
    for c in res.checks:
        assert c.status in ("pass", "fail", "inconclusive", "not_evaluable")
    json.dumps(res.to_dict())


def test_flip_share_rises_with_eps(benefits):
    frame, info, _ = benefits
    shares = []
    for eps in (0.01, 0.5):
        section = RobustnessSection()
        section.eps, section.max_rows = eps, 300
        rep = Audit(model="logistic", sections=[section]).run(frame, target=info.target, sensitive=["sex"])
        shares.append(rep.results[0].figures["flips"]["share"])
    assert shares[0] < shares[1]


def test_small_groups_are_not_judged(benefits):
    frame, info, _ = benefits
    section = RobustnessSection()
    section.max_rows, section.min_group = 100, 10_000
    rep = Audit(model="logistic", sections=[section]).run(frame, target=info.target, sensitive=["sex"])
    check = rep.results[0].checks[-1]
    assert check.name == "Flip share across sex" and check.status == "not_evaluable"


def test_tree_model_gets_the_ood_part_only(benefits):
    frame, info, _ = benefits
    rep = Audit(model="hgb", sections=[RobustnessSection()]).run(frame, target=info.target, sensitive=["sex"])
    res = rep.results[0]
    assert res.figures["flips"] == {"evaluated": False, "reason": "tree model"}
    assert any("tree model" in n for n in res.notes)
    assert "ood" in res.figures and len(res.checks) == 1


def test_private_mode_leaves_it_out_and_spends_nothing(benefits):
    frame, info, schema = benefits
    rep = Audit(sections=[RobustnessSection()], private=True, epsilon=1.0, schema=schema, model="hgb").run(
        frame, target=info.target, sensitive=["sex"]
    )
    res = rep.results[0]
    assert res.figures == {"released": False} and res.checks == []
    assert "Left out in private mode" in res.notes[0]


def test_registered_and_rendered(benefits, logistic_report):
    _, report = logistic_report
    html = report.to_html()
    assert "Most unlike the training data" in html and "Flips by sex" in html
    added = "robustness" not in section_names()
    if added:
        register_section(RobustnessSection)
    try:
        assert "robustness" in section_names()
        assert any(isinstance(s, RobustnessSection) for s in default_sections())
    finally:
        if added:
            unregister_section("robustness")


def test_group_verdicts_combine_as_all_must_pass():
    from trustlab.audit.sections.robustness import _all_groups

    assert _all_groups(["pass", "pass"]) == "pass"
    assert _all_groups(["pass", "fail", "inconclusive"]) == "fail"
    assert _all_groups(["inconclusive", "pass"]) == "inconclusive"
    assert _all_groups(["pass", "inconclusive"]) == "inconclusive"


def test_flip_search_is_exact_on_a_linear_score():
    # the section's search on a pipeline agrees with the closed form for a linear model
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    res = prediction_flips(model, X, eps=0.1, method="search")
    w = model[-1].coef_[0] / model[0].scale_
    np.testing.assert_array_equal(res.flipped, np.abs(model.decision_function(X)) <= np.abs(w) @ res.radius)


def test_missing_values_and_large_tables_do_not_break_the_ood_score():
    """Missing numeric values count as typical (stated); tables above max_ood_rows are sampled."""
    from trustlab.audit import Audit

    rng = np.random.default_rng(0)
    n = 1200
    df = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": rng.choice(["x", "y"], n),
            "g": rng.choice(["m", "f"], n),
        }
    )
    df.loc[::7, "a"] = np.nan
    df["y"] = np.where(rng.random(n) < 0.5, "yes", "no")
    section = RobustnessSection()
    section.max_ood_rows = 300
    res = Audit(model="hgb", sections=[section]).run(df, target="y", sensitive="g").results[0]
    assert res.figures["ood"]["rows"] == 300
    assert any("missing or infinite numeric values" in n for n in res.notes)
    assert any("seeded sample of 300" in n for n in res.notes)
