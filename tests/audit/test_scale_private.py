"""The private audit on Dask (Parquet files on a 2-process LocalCluster) vs the in-process private audit."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask.distributed")  # the fixture `client` (tests/conftest.py)

from trustlab.audit import Audit
from trustlab.audit._scale import run_scaled
from trustlab.audit.sections.data import DataSection
from trustlab.audit.sections.fairness import FairnessSection
from trustlab.audit.sections.performance import PerformanceSection
from trustlab.audit.sections.privacy import PrivacySection
from trustlab.audit.split import row_split
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError

N = 3000
SCHEMA = {
    "columns": {
        "a": {"bounds": [-4, 4]},
        "b": {"bounds": [0, 4], "integer": True},
        "g": {"categories": ["x", "y", "z"]},
        "h": {"categories": ["u", "v"]},
        "y": {"categories": ["no", "yes"]},
    }
}


def _table(n: int = N, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    g = rng.choice(["x", "y", "z", "w"], n, p=[0.4, 0.3, 0.27, 0.03]).astype(object)  # "w": undeclared
    g[rng.random(n) < 0.03] = None
    b = rng.integers(0, 7, n).astype(float)  # values above the bound 4 are clipped
    b[rng.random(n) < 0.05] = np.nan
    df = pd.DataFrame({"a": a, "b": b, "g": g, "h": rng.choice(["u", "v"], n), "k": rng.normal(size=n)})
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-2 * a)), "yes", "no").astype(object)
    y[rng.random(n) < 0.02] = None  # unlabelled rows: counted in Data, left out of the model
    df["y"] = y
    return df


@pytest.fixture(scope="module")
def files(tmp_path_factory, parquet_parts):
    df = _table()
    root = parquet_parts(df, tmp_path_factory.mktemp("private_parts"))
    return root, df


def _sections():
    return [DataSection(), PerformanceSection(), FairnessSection(), PrivacySection()]


def _audit(schema: Schema, epsilon: float = 2.0) -> Audit:
    return Audit(model="logistic", private=True, epsilon=epsilon, schema=schema, sections=_sections())


def _charged(report, description: str) -> float:
    """The epsilon of the one ledger line whose description starts with ``description``."""
    (eps,) = [e.epsilon for e in report.ledger if e.description.startswith(description)]
    return eps


def _ledger(report):
    return [(e.section, e.description, e.mechanism, e.epsilon, e.delta) for e in report.ledger]


def test_ledger_identical_to_in_process(client, files):
    root, df = files
    schema = Schema.from_dict(SCHEMA)
    local = _audit(schema).run(df, target="y", sensitive=["g", "h"])
    dask = run_scaled(_audit(schema), root, target="y", sensitive=["g", "h"], client=client)
    assert _ledger(dask) == _ledger(local)
    assert [r.name for r in dask.results] == [r.name for r in local.results]
    assert dask.epsilon_spent == pytest.approx(2.0, abs=1e-9)
    # the released figures estimate the same table: row count and held-out count within the noise,
    # at a false-failure chance below 1e-5 each, derived from the epsilons the ledger charges. The
    # row count is one discrete Laplace draw of scale 1/eps (eps = 1/13 here):
    # P[|Z| >= k] = 2 t^k / (1 + t), t = exp(-eps). The former |error| < 60 failed 1.0% of runs.
    eps_rows = _charged(local, "Data: row count")
    t = math.exp(-eps_rows)
    k = math.ceil(math.log(2 / (1e-5 * (1 + t))) / eps_rows)  # 151 at eps = 1/13
    assert abs(dask["data"].figures["rows"] - N) < k
    # The held-out count sums the 480 noisy cells (4 g levels x 3 h levels x 20 bins x 2 labels) of
    # the prediction table, each discrete Laplace at scale 1/eps (sd 2.0 at eps = 0.69, so 44 in
    # all; the per-block clamp at 0 only moves a negative block total up). The exact count is the
    # split's (row_split at the audit's test_size 0.3 and seed 0, labelled rows: 830); 4.5 sd is
    # 6.8e-6 two-sided. The former 0.25 N < held < 0.35 N sat 1.8 sd below 830: it failed 3.4% of
    # 100,000 simulated tables.
    held_true = int((row_split(df, 0.3, 0) & df["y"].notna().to_numpy()).sum())
    t = math.exp(-_charged(local, "held-out rows counted by sensitive group"))
    sd = math.sqrt(480 * 2 * t / (1 - t) ** 2)
    held = dask["performance"].figures["overall"]["count"]
    assert abs(held - held_true) <= 4.5 * sd, (held, held_true, sd)
    # the structure is the schema's: levels, columns, boxes
    assert dask["data"].figures["not_released"] == local["data"].figures["not_released"] == ["k"]
    assert len(_ledger(dask)) >= 15  # model, rows, columns, table, sizes, boxes
    assert [(p["column"], p["attribute"]) for p in dask["privacy"].figures["boxplots"]] == [
        (p["column"], p["attribute"]) for p in local["privacy"].figures["boxplots"]
    ]


def _raw_counts(df: pd.DataFrame) -> set[int]:
    """Exact counts of the table a leak would show: rows, missing, groups, held-out cells' sums."""
    out = {len(df), int(df["y"].notna().sum()), int(df["b"].isna().sum())}
    for c in ("g", "h"):
        out |= {int(v) for v in df[c].value_counts(dropna=False).to_numpy()}
    return {n for n in out if n >= 50}


def test_dask_report_leaks_no_raw_count(client, files, tmp_path, monkeypatch):
    """As the in-process leak test: samplers shifted by 7, so a raw count left in the report is a leak."""
    import trustlab.privacy._boxplot_core as bx
    import trustlab.privacy._boxplot_grouped as bg
    import trustlab.privacy._sums as su
    import trustlab.privacy.quantiles as qu
    import trustlab.privacy.statistics as st

    def shifted(values, scale):
        return np.asarray(values, dtype=np.int64) + 7

    for mod in (st, su, bx, bg, qu):
        monkeypatch.setattr(mod, "add_discrete_laplace", shifted)
    root, df = files
    report = run_scaled(
        _audit(Schema.from_dict(SCHEMA)), root, target="y", sensitive=["g", "h"], client=client
    )
    assert report["data"].figures["rows"] == N + 7  # the shift went through the client's mechanism
    html_path, json_path = report.save(tmp_path)
    text = re.sub(r"<[^>]*>", " ", html_path.read_text()) + json_path.read_text()
    numbers = set(re.findall(r"\d[\d,]*\.?\d*", text))
    for n in _raw_counts(df):
        assert f"{n:,}" not in numbers and str(n) not in numbers, n
    meta = json.loads(json_path.read_text())["meta"]
    assert meta["scale"]["rows"] is None  # no public estimate: the true count is not quoted
    assert "partitions" not in meta["scale"]  # row groups follow the private row count


def test_sample_rate_reads_only_public_facts(client, files, monkeypatch):
    """The rate comes from the schema's "rows"; the files' footer counts and the data are never read."""
    import trustlab.audit._scale_private as sp

    root, _ = files
    seen = []
    real = sp.sample_rate

    def spy(sample_rows, rows, test_size):
        seen.append(rows)
        return real(sample_rows, rows, test_size)

    monkeypatch.setattr(sp, "sample_rate", spy)
    declared = Schema.from_dict(SCHEMA | {"rows": 100_000})  # a public estimate, far from the truth
    report = run_scaled(
        _audit(declared), root, target="y", sensitive=["g", "h"], client=client, sample_rows=7000
    )
    assert seen == [100_000]
    rate = 7000 / (100_000 * 0.7)
    assert report.meta["scale"]["sample_rate"] == pytest.approx(rate)
    assert "about 7,000 training rows" in report.meta["scale"]["sample_rows"]
    assert "hash sample" in report.meta["model_status"]
    assert str(N) not in report.meta["model_status"]
    # no declared estimate: every training row, rate 1 (no count is read to pick it)
    seen.clear()
    report = run_scaled(
        _audit(Schema.from_dict(SCHEMA)), root, target="y", sensitive=["g", "h"], client=client
    )
    assert seen == [] and report.meta["scale"]["sample_rate"] == 1.0


def test_structure_does_not_depend_on_the_rows(client, tmp_path):
    """A table whose rows break every raw-mode check (one outcome, missing targets, no group "z")
    runs all the same, with the same ledger as a healthy one: nothing about the rows raises."""
    df = _table(400, seed=9)
    df["y"] = np.where(df.index % 3 == 0, None, "yes")
    df["g"] = df["g"].replace({"z": "x"})
    df.to_parquet(tmp_path / "odd.parquet", index=False)
    healthy = tmp_path / "healthy"
    healthy.mkdir()
    _table(400, seed=10).to_parquet(healthy / "ok.parquet", index=False)
    schema = Schema.from_dict(SCHEMA)
    odd = run_scaled(_audit(schema), tmp_path / "odd.parquet", target="y", sensitive=["g"], client=client)
    ok = run_scaled(_audit(schema), healthy, target="y", sensitive=["g"], client=client)
    assert _ledger(odd) == _ledger(ok)
    assert [r.name for r in odd.results] == [r.name for r in ok.results]


def test_public_facts_still_raise(client, files):
    root, _ = files
    undeclared = Schema.from_dict({"columns": {k: v for k, v in SCHEMA["columns"].items() if k != "g"}})
    with pytest.raises(DataError, match="public categories") as info:
        run_scaled(_audit(undeclared), root, target="y", sensitive=["g"], client=client)
    assert info.value.argument == "schema"
    with pytest.raises(DataError, match="has no column"):
        run_scaled(_audit(Schema.from_dict(SCHEMA)), root, target="nope", sensitive=["g"], client=client)


def test_declared_text_column_on_dask_as_in_process(client, tmp_path, parquet_parts):
    """A column the schema declares text is no feature of the DP model on Dask either: same
    features, ledger and column flags as in process, nothing released about it."""
    rng = np.random.default_rng(9)
    df = _table(600, seed=9)
    df["note"] = [f"visit {i % 7} note {w}" for i, w in enumerate(rng.integers(0, 50, len(df)))]
    schema = Schema.from_dict({"columns": SCHEMA["columns"] | {"note": {"text": True}}})
    root = parquet_parts(df, tmp_path)
    local = _audit(schema).run(df, target="y", sensitive=["g", "h"])
    dask = run_scaled(_audit(schema), root, target="y", sensitive=["g", "h"], client=client)
    for report in (local, dask):
        assert "note" not in report.meta["features"] and "a" in report.meta["features"]
        assert ("note", "declared_text") in {(f["column"], f["kind"]) for f in report.meta["column_flags"]}
        assert "note" in report["data"].figures["not_released"]
    assert dask.meta["features"] == local.meta["features"]
    assert _ledger(dask) == _ledger(local)
