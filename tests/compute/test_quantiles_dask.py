"""DP quantiles and boxplots on a Dask LocalCluster of 2 worker processes vs in process.

The merged state is bit-for-bit the in-process state, and with the secure samplers replaced
by one seeded stand-in on the client (workers never draw noise), the figure and the ledger
are those of the in-process call.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("dask.distributed")  # the fixture `client` (tests/conftest.py)

from trustlab.compute.backend import compute  # noqa: E402
from trustlab.compute.quantiles import (  # noqa: E402
    QuantileCounts,
    dp_quantiles_of_counts,
    grouped_dp_boxplot_on,
)
from trustlab.privacy.accounting import Accountant  # noqa: E402
from trustlab.privacy.boxplot import grouped_dp_boxplot  # noqa: E402
from trustlab.privacy.quantiles import dp_quantiles  # noqa: E402


def _helpers():
    """The seeded samplers and comparisons of the sibling test file (import mode is importlib)."""
    spec = importlib.util.spec_from_file_location(
        "_quantile_helpers", Path(__file__).with_name("test_quantiles.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_h = _helpers()
BOUNDS, Seeded, _ledger, _same_logits, _same_summary = (
    _h.BOUNDS,
    _h.Seeded,
    _h._ledger,
    _h._same_logits,
    _h._same_summary,
)

CATS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n = 12_007
    x = rng.normal(0.5, 1.2, n)
    x[rng.random(n) < 0.03] = np.nan
    x[:4] = [np.inf, -np.inf, BOUNDS[0], BOUNDS[1]]
    g = rng.choice(CATS, n).astype(object)
    g[rng.random(n) < 0.05] = None
    return pd.DataFrame({"x": x, "g": g})


def test_state_on_dask_equals_in_process(client, table):
    stat = QuantileCounts("x", BOUNDS, base=1.001, group="g", categories=CATS)
    local = compute(stat, table)
    remote = compute(stat, dd.from_pandas(table, npartitions=7), client=client)
    for a, b in zip(local.groups, remote.groups, strict=True):
        _same_summary(a, b)


def test_quantiles_and_grouped_boxplots_on_dask_equal_in_process(client, table, monkeypatch):
    seeded = Seeded(monkeypatch)
    ddf = dd.from_pandas(table, npartitions=5)
    x = table["x"].to_numpy(dtype=float)
    q = [0.25, 0.5, 0.75]
    acc_a, acc_b = Accountant(10.0), Accountant(10.0)
    a, la, _ = seeded.run(lambda: dp_quantiles(x, q, 1.0, BOUNDS, accountant=acc_a))
    s = compute(QuantileCounts("x", BOUNDS), ddf, client=client)
    b, lb, _ = seeded.run(lambda: dp_quantiles_of_counts(s, q, 1.0, accountant=acc_b))
    _same_logits(la, lb)
    np.testing.assert_array_equal(a.value, b.value)
    a, la, sa = seeded.run(
        lambda: grouped_dp_boxplot(x, table["g"].to_numpy(), 2.0, BOUNDS, categories=CATS, accountant=acc_a)
    )
    b, lb, sb = seeded.run(
        lambda: grouped_dp_boxplot_on(ddf, "x", "g", CATS, 2.0, BOUNDS, client=client, accountant=acc_b)
    )
    _same_logits(la, lb)
    assert sa == sb
    assert list(a) == list(b) and all(a[k] == b[k] for k in a)
    assert a.releases == b.releases
    assert _ledger(acc_a) == _ledger(acc_b)
