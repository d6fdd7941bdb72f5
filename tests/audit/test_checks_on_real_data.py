"""Per-group calibration, degenerate held-out sets, no skill, unscorable private models (issue 26 §1)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit.registry import default_sections
from trustlab.audit.sections.performance import MAX_GROUP_ECE, PerformanceSection
from trustlab.errors import DataError


class _Sigmoid:
    """A fitted 'user model': p = sigmoid(2 a), whatever the group."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X):
        p = 1 / (1 + np.exp(-2 * np.asarray(X["a"], dtype=float)))
        return np.column_stack([1 - p, p])


def _miscalibrated(n: int = 6000, seed: int = 0) -> pd.DataFrame:
    """Group v (a fifth of the rows) has outcomes 0.25 more often than the model says."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    g = np.where(rng.random(n) < 0.2, "v", "u")
    p = 1 / (1 + np.exp(-2 * a))
    p = np.where(g == "v", np.clip(p + 0.25, 0, 1), p)
    return pd.DataFrame({"a": a, "g": g, "y": (rng.random(n) < p).astype(int)})


def _sections(*names):
    return [s for s in default_sections() if s.name in names]


def test_per_group_calibration_check_fails_the_miscalibrated_group():
    df = _miscalibrated()
    report = Audit(model=_Sigmoid(), sections=_sections("performance")).run(df, target="y", sensitive="g")
    perf = report["performance"]
    check = next(c for c in perf.checks if c.name == "Calibration within each group of g")
    assert check.status == "fail", check
    assert check.detail.startswith("v ECE")  # the worst group first
    v = next(r for r in perf.figures["by_group"]["g"] if r["group"] == "v")
    assert v["intervals"]["ece"][0] > MAX_GROUP_ECE
    # the overall figure is dominated by the calibrated majority; the group check is what catches v
    counts = perf.figures["calibration_bin_counts"]
    assert sum(counts["g"]["v"]) == pytest.approx(v["count"])
    assert sum(counts["overall"]) == pytest.approx(perf.figures["overall"]["count"])
    html = report.to_html()
    assert "rows per bin" in html


def test_per_group_calibration_passes_a_calibrated_model():
    rng = np.random.default_rng(1)
    n = 8000
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "g": rng.choice(["u", "v"], n)})
    df["y"] = (rng.random(n) < 1 / (1 + np.exp(-2 * a))).astype(int)
    perf = Audit(model=_Sigmoid(), sections=_sections("performance")).run(df, target="y", sensitive="g")
    check = next(c for c in perf["performance"].checks if c.name.startswith("Calibration within"))
    assert check.status == "pass", check


def test_zero_width_interval_is_not_evaluable():
    df = _miscalibrated(2000)
    runner = Audit(model=_Sigmoid())
    ctx = runner.context(df, target="y", sensitive="g")
    # three held-out rows of one outcome in one score bin: every bootstrap replicate is the same
    pick = np.flatnonzero((ctx.y_test == 1) & (ctx.proba_test >= 0.90) & (ctx.proba_test < 0.95))[:3]
    assert pick.size == 3
    tiny = dataclasses.replace(ctx, test_index=ctx.test_index[pick], proba_test=ctx.proba_test[pick])
    checks = {c.name: c for c in PerformanceSection().compute(tiny, None).checks}
    assert checks["Calibration"].status == "not_evaluable", checks["Calibration"]
    assert "zero width" in checks["Calibration"].detail
    assert checks["Calibration"].hint == (
        "evaluable with at least 30 held-out rows (now 3): more data or a larger --test-size"
    )


def test_minimum_held_out_rows():
    df = _miscalibrated(3000)
    with pytest.raises(DataError, match="held-out") as info:
        Audit(model="logistic", test_size=0.001).run(df, target="y", sensitive="g")
    assert info.value.argument == "test_size"


def test_no_skill_marks_fairness_and_calibration_passes_vacuous():
    rng = np.random.default_rng(3)
    n = 3000
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "g": rng.choice(["u", "v"], n)})
    df["y"] = rng.integers(0, 2, n)  # a fair coin: no signal
    report = Audit(model="logistic", sections=_sections("performance", "fairness")).run(
        df, target="y", sensitive="g"
    )
    assert report.meta["no_skill"]["chance"]
    checks = [c for _, c in report.checks]
    fair = [c for c in report["fairness"].checks if c.status == "pass"]
    assert fair and all(c.vacuous for c in fair)
    assert not any(c.vacuous for c in checks if c.status != "pass")
    assert report.to_dict()["sections"]["fairness"]["checks"][0]["vacuous"] in (True, False)
    html = report.to_html()
    top = html[html.index('id="summary"') : html.index('id="performance"')]
    assert "No skill" in top and "vacuous" in top


def test_a_skilled_model_has_no_vacuous_pass():
    df = _miscalibrated(4000)
    report = Audit(model=_Sigmoid(), sections=_sections("performance", "fairness")).run(
        df, target="y", sensitive="g"
    )
    assert not report.meta["no_skill"]
    assert not any(c.vacuous for _, c in report.checks)


def _private_case(tmp_path):
    import pickle

    from sklearn.linear_model import LogisticRegression

    from trustlab.datasets import Schema

    df = _miscalibrated(600)
    model = LogisticRegression().fit(df[["a"]].assign(b=df["a"] ** 2), df["y"])  # trained on a and b
    schema = {
        "columns": {"a": {"bounds": [-5, 5]}, "g": {"categories": ["u", "v"]}, "y": {"categories": [0, 1]}}
    }
    (tmp_path / "s.json").write_text(__import__("json").dumps(schema))
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    df.to_csv(tmp_path / "d.csv", index=False)
    return df, model, Schema.from_dict(schema)


def test_private_model_that_cannot_score_the_declared_columns_is_refused(tmp_path):
    from trustlab.errors import ModelError

    df, model, schema = _private_case(tmp_path)
    with pytest.raises(ModelError, match="'b'") as info:
        Audit(model=model, private=True, epsilon=1.0, schema=schema).run(df, target="y", sensitive="g")
    assert info.value.argument == "model"


def test_private_model_that_cannot_score_exit_2(tmp_path, capsys):
    from trustlab.cli import main

    _private_case(tmp_path)
    args = [f"{tmp_path}/d.csv", "--target", "y", "--sensitive", "g", "--private", "--epsilon", "1"]
    args += ["--schema", f"{tmp_path}/s.json", "--model", f"{tmp_path}/m.pkl", "--out", f"{tmp_path}/r"]
    with pytest.raises(SystemExit) as stop:
        main(["audit", *args])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error (--model):") and "'b'" in lines[0], err


def test_summary_ranks_findings_and_links_each_once():
    from trustlab.audit.section import Check, SectionResult
    from trustlab.audit.summary import findings

    perf = SectionResult(
        "performance",
        "Performance",
        {},
        [Check("Calibration", None, "ECE 0.2", status="inconclusive"), Check("X", None, "d", status="fail")],
    )
    fair = SectionResult("fairness", "Fairness", {}, [Check("Gap", None, "0.0", status="pass", vacuous=True)])
    meta = {
        "column_flags": [
            {"column": "nr", "kind": "entity_id", "meaning": "m", "detail": "d", "dropped": True},
        ],
        "private": True,
        "model": "DP-SGD logistic regression",
        "model_status": "trained; 'hgb' has no DP trainer in trustlab, so a logistic regression was trained",
    }
    found = findings([perf, fair], meta)
    assert [f["severity"] for f in found] == ["fail", "warning", "warning", "inconclusive", "vacuous"]
    assert "not 'hgb'" in found[1]["text"] and "--group nr" in found[2]["action"]
    assert all(f["section"] in ("performance", "fairness", "data") for f in found)
    # with the group declared, the panel is no longer a finding
    assert len(findings([perf, fair], meta | {"group": "nr"})) == len(found) - 1


def test_a_distributed_report_says_keep_and_group_are_in_process_only():
    from trustlab.audit.screening import ColumnFlag
    from trustlab.audit.summary import findings

    flags = [
        ColumnFlag("nr", "entity_id", "545 values with a median of 8 rows each", dropped=True).to_dict(),
        ColumnFlag("id", "row_id", "a different value on each row", dropped=True).to_dict(),
    ]
    for scale, said in (({"backend": "dask"}, True), (None, False)):
        actions = [f["action"] for f in findings([], {"column_flags": flags, "scale": scale})]
        assert len(actions) == 2 and "--group nr" in actions[0] and "--keep id" in actions[1]
        assert all(("not with --dask yet" in a) is said for a in actions)
