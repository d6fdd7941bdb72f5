"""The audit's Uncertainty section: conformal sets per (overlapping) group, checks, private mode."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit, get_section, section_names
from trustlab.audit.section import interval_verdict
from trustlab.audit.sections.uncertainty import PRIVATE_NOTE, UncertaintySection
from trustlab.datasets import load_default

SENSITIVE = ["sex", "nwhite"]


@pytest.fixture(scope="module")
def benefits():
    df, _info, schema = load_default()
    return df, schema


@pytest.fixture(scope="module")
def full_report(benefits):
    """The default audit (every registered section) on the embedded Benefits data."""
    df, _ = benefits
    return Audit(model="logistic").run(df, target="ui", sensitive=SENSITIVE)


@pytest.fixture(scope="module")
def result(full_report):
    return full_report["uncertainty"]


def _run(df, sensitive, section=None):
    section = section or UncertaintySection()
    return Audit(model="logistic", sections=[section]).run(df, target="ui", sensitive=sensitive)[section.name]


def _rows(res):
    return {r["group"]: r for r in res.figures["groups"]}


def test_section_is_in_the_default_audit_json_and_html(full_report, result):
    assert "uncertainty" in section_names()
    assert "uncertainty" in [r.name for r in full_report.results]
    data = json.loads(full_report.to_json())["sections"]["uncertainty"]
    assert data["figures"]["alpha"] == 0.1 and data["figures"]["released"] is True
    expected = {"all", "sex=female", "sex=male", "nwhite=no", "nwhite=yes", "ui=no", "ui=yes"}
    expected |= {f"sex={s} & nwhite={w}" for s in ("female", "male") for w in ("no", "yes")}
    assert set(_rows(result)) == expected
    assert {r["kind"] for r in data["figures"]["groups"]} == {"overall", "group", "overlap", "label"}
    html = full_report.to_html()
    body = html[html.index('<section id="uncertainty">') :]
    body = body[: body.index("</section>")]
    assert body.count("<svg") == 1  # one compact figure
    assert body.count("<table") == 1  # one compact table
    assert "Kandinsky coverage" in body and "split coverage" in body
    assert "sex=female &amp; nwhite=yes" in body


def test_kandinsky_coverage_is_within_a_tolerance_from_the_group_sizes(result):
    """|coverage - (1 - alpha)| <= 4 sd of the coverage from n_cal and n_eval, plus d / n_cal for
    the Kandinsky fit's group-conditional slack (d group functions; Bairaktari et al. Thm 3.1)."""
    f = result.figures
    target = f["target"]
    rows = [r for r in f["groups"] if r["evaluated"]]
    d = len(rows) - 1  # the group functions the sets were calibrated on (all but "all")
    assert len(rows) == 11
    for r in rows:
        n_cal, n_eval = r["n_cal"], r["n_eval"]
        tol = 4 * np.sqrt(target * (1 - target) * (1 / n_cal + 1 / n_eval)) + d / n_cal
        cov = r["kandinsky"]["coverage"]
        assert abs(cov - target) <= tol, (r["group"], cov, tol)
        k = r["kandinsky"]
        assert k["coverage_low"] <= cov <= k["coverage_high"]
        assert 0 <= k["mean_set_size"] <= 2 and k["set_size_low"] <= k["mean_set_size"] <= k["set_size_high"]
    overall = _rows(result)["all"]
    assert abs(overall["kandinsky"]["coverage"] - target) <= 0.07  # 4 sd at n ~ 700 + 700


def test_alpha_is_a_class_attribute(benefits):
    df, _ = benefits

    class Wide(UncertaintySection):
        alpha = 0.3

    res = _run(df, ["sex"], Wide())
    all_row = _rows(res)["all"]
    n_cal, n_eval = all_row["n_cal"], all_row["n_eval"]
    tol = 4 * np.sqrt(0.7 * 0.3 * (1 / n_cal + 1 / n_eval))
    assert res.figures["target"] == pytest.approx(0.7)
    assert abs(all_row["kandinsky"]["coverage"] - 0.7) <= tol
    assert abs(all_row["split"]["coverage"] - 0.7) <= tol


def test_check_status_comes_from_the_interval(benefits, result):
    f = result.figures
    by_name = {c.name: c for c in result.checks}
    judged = [r for r in f["groups"] if r["evaluated"] and r["kind"] != "label"]
    assert len(by_name) == len(judged)
    for r in judged:
        c = by_name["Coverage: all evaluation rows" if r["group"] == "all" else f"Coverage: {r['group']}"]
        k = r["kandinsky"]
        assert c.status == interval_verdict(
            k["coverage_low"], k["coverage_high"], f["threshold"], at_most=False
        )
        lo, hi = map(float, re.search(r"interval ([0-9.]+)\.\.([0-9.]+)", c.detail).groups())
        assert (lo, hi) == (round(k["coverage_low"], 3), round(k["coverage_high"], 3))
        assert "0.85" in c.rule and "fewer than 30 calibration" in c.rule
    # a threshold of 0.99 (tolerance -0.09): every group whose interval lies at or below it fails
    df, _ = benefits

    class Strict(UncertaintySection):
        tolerance = -0.09

    strict = _run(df, SENSITIVE, Strict())
    statuses = {}
    for r in strict.figures["groups"]:
        if r["evaluated"] and r["kind"] != "label":
            k = r["kandinsky"]
            expected = "fail" if k["coverage_high"] <= 0.99 else "inconclusive"
            assert r["status"] == expected, r
            statuses[r["group"]] = r["status"]
    assert statuses["all"] == "fail"
    assert {c.status for c in strict.checks} <= {"fail", "inconclusive"}


def test_a_one_value_sensitive_column_is_not_evaluable(benefits):
    df, _ = benefits
    res = _run(df.assign(country="us"), ["sex", "country"])
    by_name = {c.name: c for c in res.checks}
    assert by_name["Coverage by country"].status == "not_evaluable"
    assert "one value" in by_name["Coverage by country"].detail
    assert not any("country=" in g for g in _rows(res))  # its only group is all rows
    assert res.figures["single_valued"] == ["country"]
    assert "sex=female" in _rows(res)


def test_tiny_groups_are_too_small_not_judged(benefits):
    df, _ = benefits
    rare = np.where(np.arange(len(df)) < 40, "rare", "common")  # ~6 held-out rows per half
    res = _run(df.assign(region=rare), ["region"])
    rows = _rows(res)
    assert rows["region=rare"]["status"] == "too_small" and not rows["region=rare"]["evaluated"]
    assert "kandinsky" not in rows["region=rare"]
    assert [t["group"] for t in res.figures["too_small"]] == ["region=rare"]
    assert rows["region=common"]["evaluated"]
    assert not any("rare" in c.name for c in res.checks)
    assert any("Too small" in n and "region=rare" in n for n in res.notes)
    html = UncertaintySection().render(res)
    assert "too small" in html


def test_too_few_rows_is_not_evaluable_without_error(benefits):
    df, _ = benefits
    res = _run(df.iloc[:60], ["sex"])
    assert res.checks[0].status == "not_evaluable"
    assert all(not r["evaluated"] for r in res.figures["groups"])
    UncertaintySection().render(res)


def test_private_mode_leaves_it_out_with_the_note_and_spends_nothing(benefits):
    df, schema = benefits
    frame = df.sample(800, random_state=0)
    names = ["performance", "fairness"]

    def run(extra):
        sections = [get_section(n)() for n in names] + extra
        return Audit(private=True, epsilon=1.0, schema=schema, model="logistic", sections=sections).run(
            frame, target="ui", sensitive=["sex"]
        )

    without = run([])
    with_it = run([UncertaintySection()])
    res = with_it["uncertainty"]
    assert res.notes == [PRIVATE_NOTE] and not res.checks
    assert res.figures == {"released": False, "alpha": 0.1, "target": 0.9}
    ledger = [(e.section, e.description, e.mechanism, e.epsilon) for e in with_it.ledger]
    assert ledger == [(e.section, e.description, e.mechanism, e.epsilon) for e in without.ledger]
    assert with_it.epsilon_spent == pytest.approx(1.0)
    html = with_it.to_html()
    # no heading of its own: one entry of the summary's "not in this report" line, its note folded there
    assert '<section id="uncertainty">' not in html and 'href="#uncertainty"' not in html
    summary = html[html.index('<section id="summary">') :]
    summary = summary[: summary.index("</section>")]
    assert "Not in this report</strong> — private mode" in summary and "Uncertainty" in summary
    assert "not differentially private (one row can move it)" in summary

    # a weight-0 section takes no share and is handed no accountant, even on its own: only the
    # model's DP training (trustlab fits the model) is on the ledger
    alone = Audit(
        private=True, epsilon=1.0, schema=schema, model="logistic", sections=[UncertaintySection()]
    ).run(frame, target="ui", sensitive=["sex"])
    assert [e.section for e in alone.ledger] == ["model training"]
    assert alone.epsilon_spent == pytest.approx(0.25)


def test_group_names_that_look_like_internal_names_are_kept_apart(benefits):
    """A sensitive column named ``y`` with values 0/1 (or a group named 'all') is not an outcome row."""
    df, _ = benefits
    coded = df.assign(y=df["sex"].map({"female": 0, "male": 1}).astype(object))
    res = _run(coded, ["y"])
    kinds = [(r["group"], r["kind"]) for r in res.figures["groups"]]
    assert kinds == [
        ("all", "overall"),
        ("y=0", "group"),
        ("y=1", "group"),
        ("ui=no", "label"),
        ("ui=yes", "label"),
    ]
    assert {c.name for c in res.checks} == {"Coverage: all evaluation rows", "Coverage: y=0", "Coverage: y=1"}
    assert [r["status"] for r in res.figures["groups"] if r["kind"] == "label"] == ["not_judged"] * 2
    sex = _rows(_run(coded, ["sex"]))  # same table (so the same split), groups named by sex
    y = _rows(res)
    assert y["y=0"]["n_eval"] == sex["sex=female"]["n_eval"]
    assert y["y=0"]["kandinsky"] == sex["sex=female"]["kandinsky"]  # the same groups, the same sets


def test_a_few_leaf_tree_model_keeps_coverage(benefits):
    """Issue 26, 1.3: a depth-2 tree has four probabilities, so the scores tie; Kandinsky must
    not fall below split conformal (it covered 0.80 overall and failed four groups before the
    tie-breaking noise was raised above the LP solver's tolerance)."""
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder
    from sklearn.tree import DecisionTreeClassifier

    df, _ = benefits
    X = df.drop(columns=["ui", *SENSITIVE])
    cats = [c for c in X if not pd.api.types.is_numeric_dtype(X[c])]
    model = make_pipeline(
        make_column_transformer((OneHotEncoder(handle_unknown="ignore"), cats), remainder="passthrough"),
        DecisionTreeClassifier(max_depth=2, random_state=0),
    ).fit(X, df["ui"])
    section = UncertaintySection()
    res = Audit(model=model, sections=[section]).run(df, target="ui", sensitive=SENSITIVE)[section.name]
    rows = _rows(res)
    assert rows["all"]["status"] == "pass"
    assert not [g for g, r in rows.items() if r["status"] == "fail"]
    # within 2.5 standard errors of split conformal's overall coverage on the same rows
    n_eval = rows["all"]["n_eval"]
    se = (0.09 / n_eval) ** 0.5
    assert rows["all"]["kandinsky"]["coverage"] >= rows["all"]["split"]["coverage"] - 2.5 * se
