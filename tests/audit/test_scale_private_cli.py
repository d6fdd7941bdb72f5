"""`trustlab audit DATA --private --dask local:2`: a private report from Parquet; bad input one line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask.distributed")

from trustlab.cli import main

T = ["--target", "label", "--sensitive", "group"]
SCHEMA = {
    "columns": {
        "x": {"bounds": [-4, 4]},
        "group": {"categories": ["a", "b"]},
        "label": {"categories": ["no", "yes"]},
    }
}


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    d = tmp_path_factory.mktemp("private_dask_cli")
    rng = np.random.default_rng(1)
    n = 2000
    x = rng.normal(size=n)
    df = pd.DataFrame(
        {
            "x": x,
            "group": rng.choice(["a", "b"], n),
            "label": np.where(x + rng.normal(size=n) > 0, "yes", "no"),
        }
    )
    (d / "ok").mkdir()
    for i in range(2):
        df.iloc[i * 1000 : (i + 1) * 1000].to_parquet(d / "ok" / f"p{i}.parquet", index=False)
    (d / "schema.json").write_text(json.dumps(SCHEMA))
    return d


# starts its own 2-process cluster (~20 s CPU); test_scale_private covers the private Dask audit
@pytest.mark.slow
def test_private_dask_report_written(capsys, parts, tmp_path):
    out = tmp_path / "r"
    argv = [
        "audit",
        str(parts / "ok"),
        *T,
        "--private",
        "--epsilon",
        "2",
        "--schema",
        str(parts / "schema.json"),
    ]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--model", "logistic", "--dask", "local:2", "--out", str(out)])
    assert info.value.code == 0
    stdout = capsys.readouterr().out
    assert "differentially private on Dask" in stdout and "2000" not in stdout.replace(",", "")
    report = json.loads((out / "report.json").read_text())
    assert (out / "report.html").exists()
    assert report["meta"]["private"] is True
    assert list(report["sections"]) == ["data", "performance", "fairness", "privacy"]
    assert report["privacy_ledger"]["spent_epsilon"] == pytest.approx(2.0, abs=1e-9)
    assert sum(e["epsilon"] for e in report["privacy_ledger"]["releases"]) == pytest.approx(2.0, abs=1e-9)


def test_private_dask_bad_input_one_line(capsys, parts, tmp_path):
    """Private mode without categories for the sensitive column: one line naming --schema, exit 2."""
    (tmp_path / "s.json").write_text(json.dumps({"columns": {"label": SCHEMA["columns"]["label"]}}))
    argv = [
        "audit",
        str(parts / "ok"),
        *T,
        "--private",
        "--epsilon",
        "1",
        "--schema",
        str(tmp_path / "s.json"),
    ]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--dask", "local:1", "--out", str(tmp_path / "r")])
    assert info.value.code == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    assert "schema" in lines[0] and "public categories" in lines[0]
