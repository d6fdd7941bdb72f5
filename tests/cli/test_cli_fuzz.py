"""Property-based probes of the command line with hostile files and flags (issue 11 §4).

Properties: ``trustlab audit`` and ``trustlab schema`` exit 0 or 2, never 1 (1 is an
internal error); exit 2 prints exactly one line on stderr; the report folder is complete
(both files, valid JSON) or absent, and a folder holding a previous report keeps it whole
when a run fails.

Files: CSV tables of 0 to 50 rows with hostile numbers (NaN, inf, 1e308, subnormal),
unicode and duplicate headers, one-value and tiny groups; schema files that are
folders, Latin-1, not JSON, or wrong shapes. Flags: repeated or unknown columns, bad
numbers, an --out that is a file. The default profile (derandomized, a dozen examples
per test) runs in CI; ``--run-slow`` runs a longer random profile.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.cli import main

FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SLOW = settings(FAST, max_examples=150, derandomize=False)
PROFILES = [pytest.param(FAST, id="fast"), pytest.param(SLOW, id="slow", marks=pytest.mark.slow)]

HOSTILE = [0.0, 1.0, 1e308, -1e308, 5e-324, np.nan, np.inf, -np.inf, 2.5, 2.5]
SCHEMAS = {
    "good": '{"columns": {"g": {"categories": ["a", "b"]}, "y": {"categories": ["no", "yes"]},'
    ' "x": {"bounds": [-5, 5]}}}',
    "latin1": '{"columns": {"é": {"categories": ["a"]}}}'.encode("latin-1"),
    "not-json": "{columns",
    "list": "[]",
    "null-bounds": '{"columns": {"x": {"bounds": null}}}',
    "nan": '{"columns": {"x": {"bounds": [NaN, 1]}}}',
    "deep": "[" * 100_000 + "]" * 100_000,
}


@st.composite
def csv_tables(draw: Any) -> pd.DataFrame:
    """Structure drawn by hypothesis, cells filled from a drawn seed (varied rows even when simple)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = int(rng.choice([40, 50, 30, 0, 1, 3], p=[0.3, 0.3, 0.25, 0.05, 0.05, 0.05]))
    outcomes = draw(st.sampled_from([["no", "yes"], ["no", "yes"], ["yes"], ["no", "yes", "maybe", ""]]))
    groups = draw(st.sampled_from([["a", "b"], ["a", "b"], ["a"], ["a", "b", "ä"]]))
    x = rng.normal(size=n)
    hostile = rng.random(n) < draw(st.sampled_from([0.0, 0.1, 1.0]))
    frame = pd.DataFrame(
        {
            "y": rng.choice(outcomes, size=n),
            "g": rng.choice(groups, size=n),
            "x": np.where(hostile, rng.choice(np.array(HOSTILE), size=n), x),
            "ü 列": rng.integers(0, 3, size=n),
        }
    )
    if rng.random() < 0.15:
        frame.columns = ["y", "g", "x", "x"]  # duplicate header: pandas renames it x.1
    return frame


flags = st.fixed_dictionaries(
    {
        "target": st.sampled_from(["y", "y", "y", "g", "nope", ""]),
        "sensitive": st.sampled_from(["g", "g", "g", "g,g", "y", "nope", ",", "g,ü 列"]),
        "model": st.sampled_from(["logistic", "logistic", "hgb", "forest"]),
        "private": st.booleans(),
        "epsilon": st.sampled_from(["1", "1", "0", "-1", "nan", "inf", "1e400", None]),
        "schema": st.sampled_from(["good", "good", None, *SCHEMAS, "folder", "missing"]),
        "extra": st.sampled_from(
            [[], [], ["--seed", "-1"], ["--test-size", "0"], ["--test-size", "x"], ["--ignore", "x"]]
        ),
        "out": st.sampled_from(["new", "new", "previous", "file"]),
    }
)


def _run(argv: list[str], capsys: Any) -> tuple[int, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(SystemExit) as stop:
            main(argv)
    _, err = capsys.readouterr()
    code = stop.value.code
    assert code in (0, 2), f"exit {code} for {argv}:\n{err}"
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error"), err
    return int(code), err


@pytest.mark.parametrize("profile", PROFILES)
def test_audit_exits_0_or_2_and_the_report_is_whole(
    profile: settings, tmp_path_factory: Any, capsys: Any
) -> None:
    @profile
    @given(frame=csv_tables(), f=flags)
    def check(frame: pd.DataFrame, f: dict[str, Any]) -> None:
        d = tmp_path_factory.mktemp("clifuzz")
        data = d / "data.csv"
        frame.to_csv(data, index=False)
        argv = ["audit", str(data), "--target", f["target"], "--sensitive", f["sensitive"]]
        argv += ["--model", f["model"], *f["extra"]]
        if f["private"]:
            argv.append("--private")
        if f["epsilon"] is not None:
            argv += ["--epsilon", f["epsilon"]]
        if f["schema"] is not None:
            path = d / "schema.json"
            if f["schema"] == "folder":
                path.mkdir()
            elif f["schema"] in SCHEMAS:
                text = SCHEMAS[f["schema"]]
                path.write_bytes(text if isinstance(text, bytes) else text.encode())
            argv += ["--schema", str(path)]
        out = d / "r"
        before = None
        if f["out"] == "previous":
            out.mkdir()
            (out / "report.html").write_text("<p>old</p>")
            (out / "report.json").write_text('{"old": true}')
            before = {p.name: p.read_bytes() for p in out.iterdir()}
        elif f["out"] == "file":
            out.write_text("a file")
        code, _ = _run([*argv, "--out", str(out)], capsys)
        if f["out"] == "file":
            assert code == 2 and out.read_text() == "a file"
        elif code == 0:
            assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json"]
            assert "meta" in json.loads((out / "report.json").read_text())
        elif before is not None:
            assert {p.name: p.read_bytes() for p in out.iterdir()} == before
        else:
            assert not out.exists()
        assert not [p for p in d.iterdir() if p.name.startswith(".r.")]  # no temporary folder left

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_schema_exits_0_or_2(profile: settings, tmp_path_factory: Any, capsys: Any) -> None:
    @profile
    @given(
        frame=csv_tables(),
        epsilon=st.sampled_from([None, "1", "0.01", "0", "nan", "1e7"]),
        delta=st.sampled_from(["1e-6", "0", "1", "-1"]),
        categorical=st.sampled_from([None, "x", "nope", "y,g"]),
    )
    def check(frame: pd.DataFrame, epsilon: Any, delta: str, categorical: Any) -> None:
        d = tmp_path_factory.mktemp("schemafuzz")
        data = d / "data.csv"
        frame.to_csv(data, index=False)
        out = d / "schema.json"
        argv = ["schema", str(data), "--out", str(out), "--delta", delta]
        argv += ["--epsilon", epsilon] if epsilon is not None else []
        argv += ["--categorical", categorical] if categorical is not None else []
        code, _ = _run(argv, capsys)
        if code == 0:
            draft = json.loads(out.read_text())
            assert set(draft["columns"]) == {str(c) for c in pd.read_csv(data).columns}
        else:
            assert not out.exists()
        assert [p.name for p in d.iterdir() if p.name.startswith(".")] == []

    check()


def test_a_deeply_nested_schema_is_a_user_error(tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "t.csv"
    pd.DataFrame({"y": ["no", "yes"] * 20, "g": ["a", "b"] * 20, "x": range(40)}).to_csv(data, index=False)
    schema = tmp_path / "s.json"
    schema.write_text(SCHEMAS["deep"])  # type: ignore[arg-type]
    code, err = _run(
        ["audit", str(data), "--target", "y", "--sensitive", "g", "--private", "--epsilon", "1",
         "--schema", str(schema), "--out", str(tmp_path / "r")],
        capsys,
    )  # fmt: skip
    assert code == 2 and "nested too deeply" in err
