"""The Fairness section's options: --mitigate (Hardt post-processing), multicalibration and --proxy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from trustlab.audit import Audit
from trustlab.audit.sections.fairness import FairnessSection
from trustlab.cli import app
from trustlab.datasets import load_default
from trustlab.errors import DataError, ParameterError
from trustlab.fairness import multiaccuracy_violation, multicalibration_violation


@pytest.fixture(scope="module")
def benefits():
    frame, info, schema = load_default()
    return frame, info, schema


@pytest.fixture(scope="module")
def report(benefits):
    frame, info, _ = benefits
    section = FairnessSection(mitigate="equalized_odds", proxy="state", proxy_error=0.05)
    return Audit(sections=[section]).run(frame, target=info.target, sensitive=list(info.sensitive))


def _result(report):
    return report.results[0]


def test_mitigation_before_after_and_verdicts(report):
    res = _result(report)
    mit = res.figures["mitigation"]
    assert set(mit) == {"sex", "nwhite"}
    for attr, fig in mit.items():
        assert fig["evaluated"] and fig["rows"]["fit"] > 0 and fig["rows"]["evaluate"] > 0
        for side in ("before", "after"):
            for est, lo, hi in fig[side]["gaps"].values():
                assert 0 <= lo <= est <= hi <= 1
            acc, lo, hi = fig[side]["accuracy"]
            assert lo <= acc <= hi
        check = next(c for c in res.checks if c.name == f"Equalized odds across {attr} after mitigation")
        est, lo, hi = fig["after"]["gaps"]["equalized_odds"]
        expected = "pass" if hi <= 0.1 else "fail" if lo > 0.1 else "inconclusive"
        assert check.status == expected


def test_calibration_matches_the_library_and_the_proxy_bound(report):
    res = _result(report)
    cal = res.figures["calibration"]
    assert cal["proxy"] == "state"
    by_sex = cal["by_attribute"]["sex"]
    # the section bins scores on n_levels levels exactly as the library does
    ctx_rows = report.results[0].figures["by_attribute"]["sex"]["rates"]["count"]
    assert sum(by_sex["rows"]) == pytest.approx(sum(ctx_rows))
    for est, lo, hi in by_sex["mc"] + by_sex["ma"]:
        assert lo <= est <= hi
    proxy = cal["by_attribute"]["state"]
    slack = proxy["slack"]
    assert slack == pytest.approx(min(0.05, np.sqrt(proxy["mse"] * 0.05)))
    assert [b[0] for b in proxy["bound"]] == pytest.approx([m[0] + slack for m in proxy["mc"]])
    check = next(c for c in res.checks if c.name == "True multicalibration via proxy state")
    assert check.status in ("pass", "inconclusive")  # an upper bound never fails


def test_binned_violation_equals_library_function():
    from trustlab.audit.sections._fairness_extras import N_LEVELS, _cells, _violations

    rng = np.random.default_rng(3)
    p = rng.uniform(size=500)
    y = (rng.uniform(size=500) < p**2).astype(int)
    g = rng.integers(0, 3, size=500)
    ma, mc = _violations(_cells(y, p, g, 3), np.array(500))
    # the library's violations on the same grid
    rounded = np.rint(p * N_LEVELS) / N_LEVELS
    lib = multicalibration_violation(y, rounded, groups=g, n_levels=N_LEVELS)
    assert mc == pytest.approx(lib.to_numpy(), abs=1e-12)
    assert ma == pytest.approx(multiaccuracy_violation(y, rounded, groups=g).to_numpy(), abs=1e-12)


def test_private_mode_leaves_them_out(benefits):
    frame, info, schema = benefits
    section = FairnessSection(mitigate="demographic_parity", proxy="state", proxy_error=0.1)
    rep = Audit(sections=[section], private=True, epsilon=1.0, schema=schema).run(
        frame, target=info.target, sensitive=list(info.sensitive)
    )
    res = rep.results[0]
    assert "mitigation" not in res.figures and "calibration" not in res.figures
    assert any("Left out in private mode: multicalibration and mitigation" in n for n in res.notes)
    assert rep.epsilon_spent == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"mitigate": "fairness"}, "mitigate"),
        ({"proxy": "state"}, "proxy_error"),
        ({"proxy_error": 0.1}, "proxy"),
        ({"proxy": "state", "proxy_error": 1.5}, "proxy_error"),
        ({"calibration": "yes"}, "calibration"),
    ],
)
def test_bad_options(kwargs, argument):
    with pytest.raises(ParameterError) as info:
        FairnessSection(**kwargs)
    assert info.value.argument == argument


def test_proxy_column_checks(benefits):
    frame, info, _ = benefits
    with pytest.raises(DataError) as err:
        Audit(sections=[FairnessSection(proxy="nope", proxy_error=0.1)]).run(
            frame, target=info.target, sensitive=["sex"]
        )
    assert err.value.argument == "proxy"
    holes = frame.copy()
    holes["state"] = holes["state"].astype(float)
    holes.loc[holes.index[::2], "state"] = np.nan
    with pytest.raises(DataError) as err:
        Audit(sections=[FairnessSection(proxy="state", proxy_error=0.1)]).run(
            holes, target=info.target, sensitive=["sex"]
        )
    assert err.value.argument == "proxy" and "missing" in str(err.value)


def test_cli_flags(tmp_path):
    runner = CliRunner()
    bad = runner.invoke(app, ["audit", "--out", str(tmp_path / "a"), "--mitigate", "bogus"])
    assert bad.exit_code == 2 and "--mitigate" in bad.output and "Traceback" not in bad.output
    lone = runner.invoke(app, ["audit", "--out", str(tmp_path / "b"), "--proxy", "state"])
    assert lone.exit_code == 2 and "--proxy-error" in lone.output


def test_report_renders_the_tables(report):
    html = report.to_html()
    assert "Mitigation: equalized odds post-processing" in html
    assert "Multiaccuracy and multicalibration" in html and "bound on the true violation" in html
    data = json.loads(report.to_json())
    assert "mitigation" in json.dumps(data)
