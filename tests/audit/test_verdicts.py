"""Verdicts that can be trusted (issue 11 section 1): four states, decided from intervals.

* pass / fail / inconclusive / not evaluable, with the rule that decided;
* every interval contains its estimate (gaps near zero included);
* a straddling interval is inconclusive (seen: EO 0.100, CI 0.020-0.199, threshold 0.1 -> PASS);
* a sensitive column with one value is not evaluable, a group absent from or small in the
  held-out rows is reported as too small with its count, and nothing crashes.
"""

from __future__ import annotations

import json
import math
from html import escape

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit.section import Check, interval_verdict
from trustlab.audit.split import row_split
from trustlab.uncertainty import gap_interval, symmetric_interval


@pytest.mark.parametrize(
    "low,high,threshold,at_most,expected",
    [
        (0.020, 0.199, 0.1, True, "inconclusive"),  # the EO 0.100 example
        (0.0, 0.1, 0.1, True, "pass"),  # "at most": the threshold itself passes
        (0.0, 0.0999, 0.1, True, "pass"),
        (0.1001, 0.3, 0.1, True, "fail"),
        (0.1, 0.3, 0.1, True, "inconclusive"),
        (0.55, 0.7, 0.5, False, "pass"),
        (0.3, 0.5, 0.5, False, "fail"),
        (0.45, 0.7, 0.5, False, "inconclusive"),
        (math.nan, math.nan, 0.1, True, "not_evaluable"),
        (0.0, math.inf, 0.1, True, "not_evaluable"),
    ],
)
def test_interval_verdict(low, high, threshold, at_most, expected):
    assert interval_verdict(low, high, threshold, at_most=at_most) == expected


def test_check_states_and_compatibility():
    assert Check("a", True, "d").status == "pass" and Check("a", False, "d").status == "fail"
    assert Check("a", None, "d").status == "not_evaluable"
    c = Check("a", True, "d", status="inconclusive", rule="r")  # status wins; passed follows it
    assert c.passed is None and c.to_dict() == {
        "name": "a",
        "status": "inconclusive",
        "passed": None,
        "detail": "d",
        "rule": "r",
        "vacuous": False,
        "hint": "",
    }
    assert Check("a", None, "d", status="fail").passed is False
    with pytest.raises(ValueError, match="status"):
        Check("a", None, "d", status="maybe")


def test_intervals_contain_their_estimates():
    rng = np.random.default_rng(0)
    for _ in range(300):
        k = int(rng.integers(2, 6))
        centre = rng.uniform(0, 1, k) * rng.choice([0.0, 0.05, 1.0])  # many gaps near zero
        sd = rng.uniform(0.001, 0.2)
        reps = np.clip(centre + rng.normal(0, sd, (200, k)) + rng.normal(0, sd / 2), 0, 1)
        est = np.clip(centre + rng.normal(0, sd / 3, k), 0, 1)
        gap, lo, hi = gap_interval(est, reps, centre=centre)
        assert 0.0 <= lo <= gap <= hi, (gap, lo, hi)
        lo_r, hi_r = symmetric_interval(est, reps, centre=centre, limits=(0, 1))
        assert np.all((lo_r <= est) & (est <= hi_r))
    # the "difference 0.002 (95% CI 0.005..0.127)" case: replicates of a max-min gap sit above zero
    reps = np.column_stack([rng.normal(0.5, 0.03, 1000), rng.normal(0.502, 0.03, 1000)])
    gap, lo, hi = gap_interval([0.5, 0.502], reps)
    assert gap == pytest.approx(0.002) and lo == 0.0 and gap <= hi


def test_gap_interval_near_zero_has_nominal_coverage():
    """Two groups with equal rates (true gap 0): the interval covers 0 in about 95% of samples."""
    rng = np.random.default_rng(1)
    n, p, hits = 400, 0.3, 0
    for _ in range(300):
        a, b = rng.binomial(n, p) / n, rng.binomial(n, p) / n
        reps = np.column_stack([rng.binomial(n, a, 500) / n, rng.binomial(n, b, 500) / n])
        _, lo, _ = gap_interval([a, b], reps)
        hits += lo <= 0.0
    # binomial(300, 0.95): below 0.90 with probability < 1e-3
    assert hits / 300 >= 0.90


def _statuses(report) -> dict[str, str]:
    return {c.name: c.status for _, c in report.checks}


def test_raw_and_private_reports_intervals(raw_report, private_report, interval_check):
    assert interval_check(raw_report) > 40
    assert interval_check(private_report) > 40


def _frame(n: int = 600, seed: int = 0, **groups: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    names = list(groups) or ["a", "b"]
    probs = np.array(list(groups.values()) or [0.5, 0.5])
    g = rng.choice(names, size=n, p=probs / probs.sum())
    y = (x + rng.normal(scale=0.8, size=n) > 0).astype(int)
    return pd.DataFrame({"x": x, "z": rng.uniform(size=n), "group": g, "label": np.where(y, "yes", "no")})


def test_one_valued_sensitive_column_is_not_evaluable():
    report = Audit(model="logistic").run(_frame().assign(group="a"), target="label", sensitive="group")
    st = _statuses(report)
    for name in ("Demographic parity across group", "Equalized odds across group", "AUC gap across group"):
        assert st[name] == "not_evaluable", name
    detail = {c.name: c.detail for _, c in report.checks}
    assert "single value" in detail["Demographic parity across group"]
    hint = {c.name: c.hint for _, c in report.checks}["Demographic parity across group"]
    assert hint == "evaluable with a sensitive column of at least 2 groups (group has 1)"
    assert report["fairness"].figures["by_attribute"]["group"]["groups"] == ["a"]
    html = report.to_html()
    assert "NOT EVALUABLE" in html and "PASS" in html


def test_group_absent_from_held_out_rows_is_reported_not_a_crash():
    frame = _frame()
    # rows of a third group that all fall on the training side of the split
    extra = frame.iloc[:60].assign(group="c")
    extra = extra[~row_split(extra.reset_index(drop=True), 0.3, 0)].iloc[:8]
    report = Audit(model="logistic").run(pd.concat([frame, extra]), target="label", sensitive="group")
    fair = report["fairness"].figures["by_attribute"]["group"]
    i = fair["groups"].index("c")
    assert fair["rates"]["count"][i] == 0 and fair["evaluable"][i] is False
    assert "c (0 rows)" in {c.name: c.detail for _, c in report.checks}["Equalized odds across group"]
    perf = {r["group"]: r for r in report["performance"].figures["by_group"]["group"]}
    assert perf["c"]["count"] == 0 and not perf["c"]["evaluable"]
    report.to_html()
    json.loads(report.to_json())


def test_small_group_is_left_out_of_the_comparison_with_its_count():
    report = Audit(model="logistic").run(
        _frame(n=900, a=0.49, b=0.49, c=0.02), target="label", sensitive="group"
    )
    fair = report["fairness"].figures["by_attribute"]["group"]
    i = fair["groups"].index("c")
    n_c = fair["rates"]["count"][i]
    assert 0 < n_c < 30 and fair["evaluable"] == [True, True, False]
    detail = {c.name: c.detail for _, c in report.checks}["Demographic parity across group"]
    assert f"c ({n_c:,.0f} rows)" in detail and "too small" in detail
    assert all(not c.hint for _, c in report.checks if c.status != "not_evaluable")
    # the difference is over the groups compared only
    rates = np.array(fair["rates"]["selection_rate"][:2])
    assert fair["differences"]["demographic_parity_difference"] == pytest.approx(abs(rates[0] - rates[1]))


def test_straddling_gap_is_inconclusive_and_verdicts_follow_intervals():
    """Groups whose rates differ by about the threshold with wide intervals: neither pass nor fail."""
    rng = np.random.default_rng(3)
    n = 700
    g = rng.choice(["a", "b"], n)
    x = rng.normal(size=n)
    y = (x + 0.28 * (g == "a") + rng.normal(scale=0.6, size=n) > 0).astype(int)
    frame = pd.DataFrame({"x": x, "group": g, "label": y, "z": rng.uniform(size=n)})
    report = Audit(model="logistic").run(frame, target="label", sensitive="group")
    fair = report["fairness"].figures["by_attribute"]["group"]
    gaps = [c for c in report["fairness"].checks if "parity" in c.name or "Equalized odds" in c.name]
    assert len(gaps) == 2
    for check in gaps:
        key = "demographic_parity_difference" if "parity" in check.name else "equalized_odds_difference"
        lo, hi = fair["difference_intervals"][key]
        assert check.status == interval_verdict(lo, hi, 0.1, at_most=True)
        assert "interval" in check.detail and "inconclusive when it straddles 0.1" in check.rule
    statuses = [c.status for c in report["fairness"].checks]
    assert "inconclusive" in statuses, [c.detail for c in report["fairness"].checks]


def test_report_json_and_html_show_four_states(raw_report, raw_html, tmp_path):
    _, json_path = raw_report.save(tmp_path)
    data = json.loads(json_path.read_text())
    assert data["schema_version"] == "1.3"
    checks = [c for s in data["sections"].values() for c in s["checks"]]
    assert all(set(c) == {"name", "status", "passed", "detail", "rule", "vacuous", "hint"} for c in checks)
    assert data["not_in_report"] == []  # a raw in-process report leaves nothing out
    assert {c["status"] for c in checks} >= {"pass", "fail", "inconclusive"}
    html = raw_html
    for word in ("PASS", "FAIL", "INCONCLUSIVE", "inconclusive</div>", "not evaluable</div>", "Rule:"):
        assert word in html, word
    counts = raw_report.status_counts
    assert sum(counts.values()) == len(raw_report.checks)


def test_private_report_says_in_one_line_what_it_leaves_out(private_report, private_html):
    """Issue 26 §2: sections that release nothing in private mode are one line, not headings."""
    left = {i["name"]: i for i in private_report.to_dict()["not_in_report"]}
    names = ("Targeting", "Uncertainty", "Unlearning", "Robustness", "multicalibration (Fairness)")
    for name in (*names, "Explain", "Error analysis"):  # the last two are never run (raw_only)
        assert left[name]["why"] == "private" and left[name]["reason"].startswith("Left out in private mode")
    screening = left["column screening (leakage, copies, identifiers, free text)"]
    assert "did not run" in screening["reason"] and private_report.meta["screening"]["ran"] is False
    html = private_html
    summary = html[html.index('id="summary"') : html.index('id="data"')]
    line = summary[summary.index("Not in this report") :]
    line = line[: line.index("</p>")]
    assert "Targeting, Uncertainty, Unlearning, Robustness" in line and "private mode" in line
    assert "Explain" in line and "HypotheSAEs" in left["Explain"]["reason"]
    for name in ("targeting", "uncertainty", "unlearning", "robustness"):
        assert f'href="#{name}"' not in html and f'id="{name}"' not in html, name
    assert 'id="fairness"' in html and 'href="#fairness"' in html


def test_private_not_evaluable_checks_say_what_would_make_them_evaluable(private_report, private_html):
    """Benefits at epsilon 1 with two sensitive columns: each group needs 315 positives and as many
    negatives (10 noise sd); female (about 350 held-out rows) and nwhite=yes (about 200) are far
    below, so the gaps are not evaluable, and a larger epsilon would decide them."""
    na = [c for _, c in private_report.checks if c.status == "not_evaluable"]
    assert {c.name for c in na} >= {"Demographic parity across sex", "Equalized odds across nwhite"}
    html = private_html
    summary = html[html.index('id="summary"') : html.index('id="data"')]
    for c in na:
        assert c.hint.startswith("evaluable with an --epsilon "), c.hint
        assert "times larger" in c.hint and "more held-out rows of " in c.hint
        assert html.count(escape(c.hint)) >= 2  # in the summary and in its section
        assert escape(c.hint) in summary
