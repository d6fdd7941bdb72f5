"""The Targeting section: reach of the positive-outcome rows at a capacity, by group, with intervals."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.audit import Audit
from trustlab.audit.sections.targeting import TargetingSection
from trustlab.datasets import load_default
from trustlab.fairness import targeting_reach


@pytest.fixture(scope="module")
def benefits():
    return load_default()


@pytest.fixture(scope="module")
def report(benefits):
    frame, info, _ = benefits
    return Audit(sections=[TargetingSection()]).run(frame, target=info.target, sensitive=list(info.sensitive))


def test_reach_agrees_with_the_library_and_checks_follow_the_interval(report):
    res = report.results[0]
    assert res.figures["released"] and res.figures["capacity"] == 0.2
    for attr, fig in res.figures["by_attribute"].items():
        overall = fig["overall"][0]
        assert fig["overall"][1] <= overall <= fig["overall"][2]
        judged = [g for g in fig["groups"] if g["evaluated"]]
        check = next(c for c in res.checks if c.name == f"Reach across {attr} at capacity 0.2")
        worst = max(judged, key=lambda g: overall - g["reach"][1])
        lo, hi = overall - worst["reach"][2], overall - worst["reach"][1]
        expected = "pass" if hi <= 0.1 else "fail" if lo > 0.1 else "inconclusive"
        assert check.status == expected and worst["group"] in check.detail
    comp = res.figures["comparison"]
    assert (
        comp["intervals"]["capacity_increase"][0]
        <= comp["capacity_increase"]
        <= comp["intervals"]["capacity_increase"][1]
    )
    assert 0 < comp["r2_equivalent"] < 1


def test_reach_is_the_share_of_targets_served():
    # 10 rows, top 30% served: scores rank rows 0, 1, 2 first; targets are rows 0, 2, 5, 7
    s = np.linspace(1.0, 0.1, 10)
    y = np.zeros(10, dtype=int)
    y[[0, 2, 5, 7]] = 1
    r = targeting_reach(s, y, capacity=0.3, delta_r2=None)
    assert r.table["reach"].iloc[0] == pytest.approx(2 / 4)


def test_small_groups_are_not_judged(benefits):
    frame, info, _ = benefits
    section = TargetingSection()
    section.min_group = 10_000
    rep = Audit(sections=[section]).run(frame, target=info.target, sensitive=["sex"])
    check = rep.results[0].checks[0]
    assert check.status == "not_evaluable" and "too small to judge" in check.detail


def test_private_mode_leaves_it_out_and_spends_nothing(benefits):
    frame, info, schema = benefits
    rep = Audit(sections=[TargetingSection()], private=True, epsilon=1.0, schema=schema, model="hgb").run(
        frame, target=info.target, sensitive=["sex"]
    )
    res = rep.results[0]
    assert res.figures == {"released": False, "capacity": 0.2} and res.checks == []
    assert "Left out in private mode" in res.notes[0]


def test_renders(report):
    html = report.to_html()
    assert "Better prediction or more capacity?" in html and "share served" in html
