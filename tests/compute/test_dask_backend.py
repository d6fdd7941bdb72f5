"""trustlab.compute on a Dask LocalCluster of 2 worker processes vs in process: same results."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("dask.distributed")  # the fixture `client` (tests/conftest.py)

from trustlab.compute.backend import compute  # noqa: E402
from trustlab.compute.bootstrap import PoissonBootstrap, poisson_weights  # noqa: E402
from trustlab.compute.cluster import connect  # noqa: E402
from trustlab.compute.groups import CrossCounts, GridHistogram, GroupConfusion  # noqa: E402
from trustlab.compute.private import dp_histogram_of_counts  # noqa: E402
from trustlab.compute.statistics import CodeHistogram, Moments, Several, ValueCounts  # noqa: E402
from trustlab.errors import DataError, ParameterError, TrustlabError  # noqa: E402
from trustlab.privacy.accounting import Accountant  # noqa: E402
from trustlab.privacy.statistics import dp_histogram  # noqa: E402


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 20_011  # prime: partitions of unequal sizes
    x = rng.normal(3.0, 2.0, n)
    x[rng.random(n) < 0.05] = np.nan
    g = rng.choice(["a", "b", "c"], n).astype(object)
    g[rng.random(n) < 0.02] = None
    p = rng.random(n)
    return pd.DataFrame(
        {
            "x": x,
            "g": g,
            "y": (rng.random(n) < p).astype(int),
            "p": p,
            "k": rng.integers(0, 7, n),
        }
    )


def _stats() -> Several:
    return Several(
        {
            "moments": Moments("x"),
            "counts": ValueCounts("g"),
            "codes": CodeHistogram("k", 7),
            "cross": CrossCounts({"g": ["a", "b", "c"], "y": [0, 1]}),
            "confusion": GroupConfusion("g", ["a", "b", "c"], "y", "p"),
            "hist": GridHistogram("x", -5.0, 10.0, 64),
            "boot": PoissonBootstrap("x", n_boot=40, seed=3),
        }
    )


@pytest.mark.parametrize("npartitions", [1, 7])
def test_dask_on_cluster_matches_in_process(client, table, npartitions):
    local = compute(_stats(), table)
    # each partition's index restarts at 0, as when the partitions are Parquet files
    parts = dd.from_pandas(table, npartitions=npartitions).map_partitions(lambda d: d.reset_index(drop=True))
    remote = compute(_stats(), parts, client=client)
    # counts: bit for bit
    assert remote["counts"] == local["counts"]
    np.testing.assert_array_equal(remote["codes"], local["codes"])
    np.testing.assert_array_equal(remote["cross"], local["cross"])
    np.testing.assert_array_equal(remote["confusion"].counts, local["confusion"].counts)
    np.testing.assert_array_equal(remote["hist"].counts, local["hist"].counts)
    assert remote["hist"].missing == local["hist"].missing == int(table["x"].isna().sum())
    assert remote["moments"]["rows"] == local["moments"]["rows"] == len(table)
    assert remote["moments"]["missing"] == local["moments"]["missing"]
    assert remote["moments"]["min"] == local["moments"]["min"]
    # sums: float tolerance (the order of additions differs)
    for key in ("mean", "std"):
        assert remote["moments"][key] == pytest.approx(local["moments"][key], rel=1e-12)
    # the Poisson bootstrap's weights depend on (seed, replicate, row position) only
    assert remote["boot"].mean == pytest.approx(local["boot"].mean, rel=1e-12)
    np.testing.assert_allclose(remote["boot"].replicates, local["boot"].replicates, rtol=1e-12)


def test_counts_equal_pandas_reference(table):
    r = compute(_stats(), table, chunksize=999)
    assert r["counts"] == {
        (None if pd.isna(k) else k): int(v) for k, v in table["g"].value_counts(dropna=False).items()
    }
    conf = r["confusion"].counts
    sub = table[table["g"] == "a"]
    assert conf[0, 1, 1] == int(((sub["p"] >= 0.5) & (sub["y"] == 1)).sum())
    rates = r["confusion"].rates()
    share_b = (table.loc[table["g"] == "b", "p"] >= 0.5).mean()
    assert rates.loc["b", "selection_rate"] == pytest.approx(share_b)
    np.testing.assert_array_equal(r["codes"], np.bincount(table["k"], minlength=7))
    edges = np.linspace(-5, 10, 65)
    ref, _ = np.histogram(np.clip(table["x"].dropna(), -5, 10), bins=edges)
    np.testing.assert_array_equal(r["hist"].counts, ref)


def test_poisson_bootstrap_independent_of_chunking_and_calibrated(table):
    a = compute(PoissonBootstrap("x", n_boot=200, seed=1), table)
    b = compute(PoissonBootstrap("x", n_boot=200, seed=1), table, chunksize=1234)
    np.testing.assert_allclose(a.replicates, b.replicates, rtol=1e-12)
    x = table["x"].dropna().to_numpy()
    se = x.std(ddof=1) / np.sqrt(x.size)
    # the replicates' sd estimates the standard error: with 200 replicates its relative
    # standard error is about 1/sqrt(2*199) = 5%; allow 4 of them
    assert np.std(a.replicates, ddof=1) == pytest.approx(se, rel=0.2)
    lo, hi = a.interval()
    assert lo < x.mean() < hi
    other = compute(PoissonBootstrap("x", n_boot=200, seed=2), table)
    assert not np.allclose(other.replicates, a.replicates)


def test_poisson_weights_distribution():
    w = poisson_weights(np.arange(200_000), 3, seed=9).ravel()
    n = w.size
    freq = np.bincount(w, minlength=6)[:4] / n
    expect = np.exp(-1) / np.array([1, 1, 2, 6])
    # binomial standard errors at n = 600,000: below 7e-4; allow 5 of them
    np.testing.assert_allclose(freq, expect, atol=3.5e-3)
    assert w.mean() == pytest.approx(1.0, abs=5 * np.sqrt(1 / n))


def test_dp_ledger_identical_to_in_process(client, table):
    """Noise once after merging: the same release plan and ledger as the in-process mechanism."""
    codes = table["k"].to_numpy()
    local_acc, remote_acc = Accountant(2.0, name="audit"), Accountant(2.0, name="audit")
    local = local_acc.record(dp_histogram(codes, 7, 1.0, description="k counts"))
    merged = compute(CodeHistogram("k", 7), dd.from_pandas(table, npartitions=5), client=client)
    remote = remote_acc.record(dp_histogram_of_counts(merged, 1.0, description="k counts"))
    lk, rk = local_acc.ledger(), remote_acc.ledger()
    assert len(lk) == len(rk) == 1
    strip = lambda e: {k: v for k, v in vars(e).items() if k not in ("value", "release")}  # noqa: E731
    assert strip(lk[0]) == strip(rk[0])
    assert local.parameters == remote.parameters and local.epsilon == remote.epsilon
    assert local_acc.remaining_epsilon == remote_acc.remaining_epsilon
    # the noise is centred on the exact merged counts (scale 1: |noise| < 40 with prob 1 - 1e-16)
    assert np.abs(np.asarray(remote.value) - np.bincount(codes, minlength=7)).max() < 40


def test_unreachable_scheduler_fails_fast():
    with pytest.raises(ParameterError, match="no Dask scheduler answered") as info:
        connect("tcp://127.0.0.1:9", timeout=1.0)
    assert info.value.argument == "dask"
    with pytest.raises(ParameterError, match="scheduler address"):
        connect("not an address")


def test_failed_partition_is_a_data_error(client):
    frame = dd.from_pandas(pd.DataFrame({"x": [1.0, 2.0]}), npartitions=1)
    with pytest.raises(DataError, match="KeyError"):
        compute(Moments("missing_column"), frame, client=client)


def test_bad_counts_and_bounds():
    with pytest.raises(DataError, match="non-negative integers"):
        dp_histogram_of_counts([1, -2], 1.0)
    # no check on the (private) total: large counts are released like small ones
    assert dp_histogram_of_counts([10**12, 0], 1.0).value.shape == (2,)
    with pytest.raises(ParameterError):
        GridHistogram("x", 1.0, 1.0, 4)
    with pytest.raises(ParameterError):
        CrossCounts({})


@settings(max_examples=30, deadline=None)
@given(
    counts=st.one_of(
        st.lists(st.integers(-5, 5), max_size=5),
        st.lists(st.floats(allow_nan=True), max_size=3),
        st.text(max_size=3),
        st.none(),
    ),
    eps=st.one_of(st.floats(allow_nan=True), st.integers(-3, 3), st.none()),
)
def test_fuzz_dp_histogram_of_counts(counts, eps):
    try:
        dp_histogram_of_counts(counts, eps)
    except TrustlabError:
        pass
