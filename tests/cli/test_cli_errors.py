"""Every user error of the command line exits 2 with one line naming the flag (issue 11 §2).

The cases are what a hostile user tried: a file as --out, a folder or Latin-1 or NaN-holding
schema, infinite and 1e308 values, a repeated --sensitive column, bad usage. They run
through ``trustlab.cli.main`` (the console script), so usage errors that click reports
itself are covered too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.cli import main

GOOD_SCHEMA = '{"columns": {"group": {"categories": ["a", "b"]}, "label": {"categories": ["no", "yes"]}}}'


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    rng = np.random.default_rng(0)
    n = 120
    x = rng.normal(size=n)
    base = pd.DataFrame(
        {
            "x": x,
            "z": rng.uniform(size=n),
            "group": rng.choice(["a", "b"], n),
            "label": np.where(x + rng.normal(size=n) > 0, "yes", "no"),
        }
    )
    base.to_csv(d / "t.csv", index=False)
    base.assign(x=base["x"].where(base.index != 3, np.inf)).to_csv(d / "inf.csv", index=False)
    base.assign(x=base["x"].where(base.index != 3, 1e308)).to_csv(d / "big.csv", index=False)
    base.iloc[:0].to_csv(d / "header.csv", index=False)
    (d / "schemadir").mkdir()
    (d / "latin.json").write_bytes('{"columns": {"é": {"categories": ["a"]}}}'.encode("latin-1"))
    (d / "bad.json").write_text("{not json")
    (d / "list.json").write_text("[1, 2]")
    (d / "nan.json").write_text(GOOD_SCHEMA[:-2] + ', "x": {"bounds": [NaN, 1]}}}')
    (d / "null.json").write_text(GOOD_SCHEMA[:-2] + ', "x": {"bounds": null}}}')
    (d / "good.json").write_text(GOOD_SCHEMA)
    (d / "afile").write_text("x")
    return d


T = ["--target", "label", "--sensitive", "group"]
P = ["--private", "--epsilon", "1"]
CASES = {
    "out is a file": (["{d}/t.csv", *T, "--out", "{d}/afile"], "--out", "not a folder"),
    "out under a file": (["{d}/t.csv", *T, "--out", "{d}/afile/r"], "--out", "is a file"),
    "out holds other files": (["{d}/t.csv", *T, "--out", "{d}"], "--out", "not a trustlab report"),
    "schema is a folder": (["{d}/t.csv", *T, *P, "--schema", "{d}/schemadir"], "--schema", "folder"),
    "schema not UTF-8": (["{d}/t.csv", *T, *P, "--schema", "{d}/latin.json"], "--schema", "UTF-8"),
    "schema not JSON": (["{d}/t.csv", *T, *P, "--schema", "{d}/bad.json"], "--schema", "not valid JSON"),
    "schema a list": (["{d}/t.csv", *T, *P, "--schema", "{d}/list.json"], "--schema", "columns"),
    "schema with NaN": (["{d}/t.csv", *T, *P, "--schema", "{d}/nan.json"], "--schema", "NaN"),
    "schema not filled in": (["{d}/t.csv", *T, *P, "--schema", "{d}/null.json"], "--schema", "not filled in"),
    "schema missing": (["{d}/t.csv", *T, *P, "--schema", "{d}/none.json"], "--schema", "does not exist"),
    "model is a folder": (["{d}/t.csv", *T, "--model", "{d}/schemadir"], "--model", "is a folder"),
    "infinite with logistic": (["{d}/inf.csv", *T, "--model", "logistic"], "x", "infinite"),
    "infinite with hgb": (["{d}/inf.csv", *T], "x", "infinite"),
    "1e308": (["{d}/big.csv", *T, "--model", "logistic"], "x", "beyond"),
    "repeated sensitive": (
        ["{d}/t.csv", "--target", "label", "--sensitive", "group,group"],
        "--sensitive",
        "once",
    ),
    "unknown column": (["{d}/t.csv", "--target", "label", "--sensitive", "nope"], "--sensitive", "unknown"),
    "unknown target": (["{d}/t.csv", "--target", "nope", "--sensitive", "group"], "--target", "unknown"),
    "empty table": (["{d}/header.csv", *T], "DATA", "no rows"),
    "negative seed": (["{d}/t.csv", *T, "--seed", "-1"], "--seed", "[0, "),
    "test size 1": (["{d}/t.csv", *T, "--test-size", "1"], "--test-size", "(0, 1)"),
    "epsilon nan": (
        ["{d}/t.csv", *T, "--private", "--epsilon", "nan", "--schema", "{d}/good.json"],
        "--epsilon",
        "got nan",
    ),
    "epsilon without private": (["{d}/t.csv", *T, "--epsilon", "1"], "--epsilon", "--private"),
    "private without schema": (["{d}/t.csv", *T, *P], "--schema", "trustlab schema DATA"),
    "ignore the target": (["{d}/t.csv", *T, "--ignore", "label"], "--ignore", "target"),
    "not a number": (["{d}/t.csv", *T, "--test-size", "abc"], None, "--test-size"),
    "unknown flag": (["{d}/t.csv", *T, "--bogus"], None, "--bogus"),
    "alpha 0": (["{d}/t.csv", *T, "--alpha", "0"], "--alpha", "between 0 and 1"),
    "alpha 1.5": (["{d}/t.csv", *T, "--alpha", "1.5"], "--alpha", "between 0 and 1"),
    "alpha nan": (["{d}/t.csv", *T, "--alpha", "nan"], "--alpha", "between 0 and 1"),
}


def test_alpha_reaches_the_uncertainty_section(files, capsys, monkeypatch):
    """--alpha sets the Uncertainty section's miscoverage (the run is stopped before fitting)."""
    from trustlab.audit import Audit
    from trustlab.errors import TrustlabError

    seen = {}

    def stop(self, *args, **kwargs):
        seen.update({s.name: s for s in self.sections})
        raise TrustlabError("stopped by the test", argument="--alpha")

    monkeypatch.setattr(Audit, "run", stop)
    with pytest.raises(SystemExit):
        main(["audit", f"{files}/t.csv", *T, "--alpha", "0.2"])
    assert seen["uncertainty"].alpha == 0.2


@pytest.mark.parametrize("case", sorted(CASES))
def test_user_error_is_one_line_exit_2(files, capsys, case):
    args, flag, message = CASES[case]
    with pytest.raises(SystemExit) as stop:
        main(["audit", *(a.format(d=files) for a in args)])
    out, err = capsys.readouterr()
    assert stop.value.code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and out == ""
    if flag is not None:
        assert lines[0].startswith(f"error ({flag}):"), lines[0]
    assert message in lines[0]


def test_out_is_checked_before_the_audit(files, capsys, monkeypatch):
    """A bad --out fails before any data is read or model fitted."""
    import trustlab.datasets

    def boom(*args, **kwargs):
        raise AssertionError("the table was read before --out was checked")

    monkeypatch.setattr(trustlab.datasets, "load_table", boom)
    with pytest.raises(SystemExit) as stop:
        main(["audit", f"{files}/t.csv", *T, "--out", f"{files}/afile"])
    assert stop.value.code == 2


def test_internal_error_exits_1_with_a_traceback(files, capsys, monkeypatch):
    import trustlab.audit

    def bug(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(trustlab.audit.Audit, "run", bug)
    with pytest.raises(SystemExit) as stop:
        main(["audit", f"{files}/t.csv", *T, "--out", f"{files}/new"])
    err = capsys.readouterr().err
    assert stop.value.code == 1 and "internal error" in err and "Please report it" in err


def test_help_and_no_arguments_exit_0(capsys):
    for argv in ([], ["--help"], ["schema", "--help"]):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 0
        assert "Usage" in capsys.readouterr().out
