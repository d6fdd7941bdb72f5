"""``trustlab audit DATA --dask ...``: a report from Parquet files, and one line + exit 2 on bad input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask.distributed")

from trustlab.cli import main

T = ["--target", "label", "--sensitive", "group"]


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask_cli")
    rng = np.random.default_rng(0)
    n = 3000
    x = rng.normal(size=n)
    df = pd.DataFrame(
        {
            "x": x,
            "z": rng.uniform(size=n),
            "group": rng.choice(["a", "b"], n),
            "label": np.where(x + rng.normal(size=n) > 0, "yes", "no"),
        }
    )
    (d / "ok").mkdir()
    for i in range(3):
        df.iloc[i * 1000 : (i + 1) * 1000].to_parquet(d / "ok" / f"p{i}.parquet", index=False)
    (d / "bad").mkdir()
    df.iloc[:1000].to_parquet(d / "bad" / "p0.parquet", index=False)
    df.iloc[1000:].drop(columns="label").to_parquet(d / "bad" / "p1.parquet", index=False)
    return d


def _error(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_unreachable_scheduler_one_line(capsys, parts, tmp_path):
    line = _error(
        capsys,
        [
            "audit",
            str(parts / "ok"),
            *T,
            "--dask",
            "tcp://127.0.0.1:9",
            "--dask-timeout",
            "1",
            "--out",
            str(tmp_path / "r"),
        ],
    )
    assert line.startswith("error (--dask): no Dask scheduler answered at tcp://127.0.0.1:9 within 1 s")


def test_missing_target_in_one_file_names_it(capsys, parts, tmp_path):
    line = _error(
        capsys, ["audit", str(parts / "bad"), *T, "--dask", "local:1", "--out", str(tmp_path / "r")]
    )
    assert "p1.parquet" in line and "has no column(s) ['label']" in line


def test_bad_flags(capsys, parts, tmp_path):
    out = ["--out", str(tmp_path / "r")]
    assert "--mitigate" in _error(
        capsys, ["audit", str(parts / "ok"), *T, "--dask", "local", "--mitigate", "equal_opportunity", *out]
    )
    assert "scheduler address" in _error(capsys, ["audit", str(parts / "ok"), *T, "--dask", "no where", *out])
    assert "--sample-rows" in _error(
        capsys, ["audit", str(parts / "ok"), *T, "--dask", "local", "--sample-rows", "5", *out]
    )


@pytest.mark.slow  # starts 2 worker processes that import trustlab (about 20 s on a quiet machine)
def test_local_cluster_report(capsys, parts, tmp_path):
    argv = ["audit", str(parts / "ok"), *T, "--dask", "local:2", "--model", "logistic"]
    with pytest.raises(SystemExit) as info:
        main([*argv, "--out", str(tmp_path / "r")])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "3,000 rows, 3 partitions, 2 workers" in out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["meta"]["scale"]["rows"] == 3000
    assert report["sections"]["data"]["figures"]["rows"] == 3000
