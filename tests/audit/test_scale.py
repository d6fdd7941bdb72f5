"""The distributed audit (Parquet files on a 2-process LocalCluster) vs the in-process audit."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("dask.distributed")  # the fixture `client` (tests/conftest.py)

from trustlab.audit import Audit
from trustlab.audit._scale import run_scaled
from trustlab.audit.registry import default_sections
from trustlab.audit.summary import findings
from trustlab.datasets import load_table
from trustlab.errors import DataError

SECTIONS = ("data", "performance", "fairness")


def _table(n: int = 6000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    g = rng.choice(["x", "y", "z"], n).astype(object)
    g[rng.random(n) < 0.03] = None
    df = pd.DataFrame(
        {
            "a": a,
            "b": rng.integers(0, 5, n).astype(float),
            "g": g,
            "h": rng.choice(["u", "v"], n),
        }
    )
    df["y"] = np.where(rng.random(n) < 1 / (1 + np.exp(-2 * a)), "yes", "no")
    df["y.1"] = (df["y"] == "yes").astype(int)  # a copy of the target: screened out in both runs
    return df


@pytest.fixture(scope="module")
def files(tmp_path_factory, parquet_parts):
    df = _table()
    root = parquet_parts(df, tmp_path_factory.mktemp("parts"))
    df.to_parquet(root.parent / "whole.parquet", index=False)
    return root, root.parent / "whole.parquet"


def _sections():
    from trustlab.audit.sections.fairness import FairnessSection

    return [
        FairnessSection(calibration=False) if s.name == "fairness" else s
        for s in default_sections()
        if s.name in SECTIONS
    ]


def _walk(a, b, path, out):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            _walk(a[k], b[k], f"{path}/{k}", out)
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            _walk(u, v, f"{path}[{i}]", out)
    elif isinstance(a, float) and isinstance(b, float):
        if not (a == b or (math.isnan(a) and math.isnan(b))):
            out.append((path, abs(a - b)))
    else:
        assert a == b, (path, a, b)


def test_dask_audit_equals_in_process(client, files):
    """Sample = every training row: same model, same held-out rows, so the same report."""
    root, whole = files
    frame = load_table(whole)
    local = Audit(model="logistic", sections=_sections()).run(frame, target="y", sensitive=["g", "h"])
    remote = run_scaled(
        Audit(model="logistic", sections=_sections()),
        root,
        target="y",
        sensitive=["g", "h"],
        client=client,
        sample_rows=10**9,
    )
    assert [r.name for r in remote.results] == list(SECTIONS)
    assert remote.meta["scale"]["rows"] == len(frame)
    assert remote.meta["scale"]["partitions"] == 4
    diffs: list = []
    for lr, rr in zip(local.results, remote.results, strict=True):
        lf, rf = lr.to_dict(), rr.to_dict()
        fig_l, fig_r = dict(lf["figures"]), dict(rf["figures"])
        if lr.name == "data":  # the identifier heuristics read the sample (here every training row)
            fig_l.pop("model_inputs"), fig_r.pop("model_inputs")
        _walk(fig_l, fig_r, lr.name, diffs)
        assert [c["status"] for c in lf["checks"]] == [c["status"] for c in rf["checks"]]
    # counts bit for bit (compared exactly above); sums within float rounding
    assert all(d < 1e-12 for _, d in diffs), diffs[:5]


def test_sample_size_and_status(client, files):
    root, _ = files
    report = run_scaled(
        Audit(model="logistic", sections=_sections()),
        root,
        target="y",
        sensitive="g",
        client=client,
        sample_rows=1000,
    )
    n_sample = report.meta["scale"]["sample_rows"]
    # a Bernoulli(rate) sample of about 4,200 training rows at rate 1000/4200: sd about 28
    assert 850 < n_sample < 1150
    assert "hash sample" in report.meta["model_status"]
    # the column screening read that sample, and the report says so
    assert [(f["column"], f["kind"]) for f in report.meta["column_flags"]] == [("y.1", "target_copy")]
    assert report.meta["features"] == ["a", "b", "h"]
    (flag,) = [f for f in findings(report.results, report.meta) if f["severity"] == "warning"]
    assert "'y.1' equals the target" in flag["text"]
    assert report.meta["screening"] == {
        "ran": True,
        "rows": n_sample,
        "note": "Columns screened for leakage, copies, identifiers and free text on the training sample "
        f"the model was fitted on ({n_sample:,} rows, a hash sample): a panel whose entities appear once "
        "each in the sample is taken for a row id or goes unnoticed.",
    }
    # every held-out row is scored on the workers, whatever the sample
    held = report["performance"].figures["overall"]["count"]
    assert 0.27 * 6000 < held < 0.33 * 6000


def test_bad_inputs_name_the_file(client, tmp_path):
    df = _table(200)
    df.iloc[:100].to_parquet(tmp_path / "a.parquet", index=False)
    df.iloc[100:].drop(columns=["y"]).to_parquet(tmp_path / "b.parquet", index=False)
    with pytest.raises(DataError, match=r"b\.parquet.*has no column"):
        run_scaled(Audit(sections=_sections()), tmp_path, target="y", sensitive="g", client=client)
    other = tmp_path / "types"
    other.mkdir()
    df.iloc[:100].to_parquet(other / "a.parquet", index=False)
    pq.write_table(
        pa.Table.from_pandas(df.iloc[100:].astype({"b": "int64"}), preserve_index=False), other / "b.parquet"
    )
    with pytest.raises(DataError, match=r"b\.parquet.*stores column 'b' as int64"):
        run_scaled(Audit(sections=_sections()), other, target="y", sensitive="g", client=client)
    holes = tmp_path / "holes"
    holes.mkdir()
    df.assign(y=df["y"].where(df.index != 5)).to_parquet(holes / "a.parquet", index=False)
    with pytest.raises(DataError, match="has 1 missing value") as info:
        run_scaled(Audit(sections=_sections()), holes, target="y", sensitive="g", client=client)
    assert info.value.argument == "target"
    empty = tmp_path / "csv"
    empty.mkdir()
    df.to_csv(empty / "a.csv", index=False)
    with pytest.raises(DataError, match="no Parquet file"):
        run_scaled(Audit(sections=_sections()), empty, target="y", sensitive="g", client=client)


def test_explain_section_on_dask(client, files):
    """The Explain section (ID's hook): FastPD's background is every held-out row, counted on the workers."""
    from trustlab.audit.split import row_split

    root, whole = files
    wanted = [s for s in default_sections() if s.name in ("data", "explain")]
    report = run_scaled(
        Audit(model="hgb", sections=wanted), root, target="y", sensitive="g", client=client, sample_rows=2000
    )
    assert [r.name for r in report.results] == ["data", "explain"]
    held = int(row_split(load_table(whole), 0.3, 0).sum())
    assert report["explain"].figures["n_background"] == held
    assert "explain" not in report.meta["scale"]["sections_left_out"]
