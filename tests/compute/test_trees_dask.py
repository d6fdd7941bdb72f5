"""FastPD's background statistics on a Dask LocalCluster of 2 worker processes: same state as in process."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("dask.distributed")  # the fixture `client` (tests/conftest.py)

import dask  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier  # noqa: E402

from trustlab.compute.backend import compute  # noqa: E402
from trustlab.compute.trees import FastPDBackground  # noqa: E402
from trustlab.explain._fastpd import FastPD  # noqa: E402


def test_dask_state_equals_in_process(client) -> None:
    rng = np.random.default_rng(5)
    n = 4001
    X = pd.DataFrame(
        {
            "cat": rng.integers(0, 4, n).astype(float),
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
        }
    )
    X.loc[rng.random(n) < 0.1, "a"] = np.nan
    y = (np.nan_to_num(X["a"]) * X["b"] + X["cat"] + rng.normal(size=n) > 1.5).astype(int)
    model = HistGradientBoostingClassifier(max_iter=20, max_depth=4, categorical_features=[0], random_state=0)
    with threadpool_limits(limits=1):  # HGB's OpenMP fit crawls on busy cores
        model.fit(X, y)
    frame = X.assign(target=y)
    cuts = [0, 700, 700, 2100, 2222, n]  # unequal partitions, one of them empty
    pieces = [frame.iloc[a:b] for a, b in itertools.pairwise(cuts)]
    ddf = dd.from_delayed([dask.delayed(p) for p in pieces], meta=frame.iloc[:0], verify_meta=False)
    stat = FastPDBackground(model, columns=["cat", "a", "b"], n_sample=300)
    remote = compute(stat, ddf, client=client)
    local = stat.partial(frame)
    assert remote.n_rows == n and remote.n_missing == local.n_missing
    for r, lo in zip(remote.counts, local.counts, strict=True):
        assert np.array_equal(r, lo)
    np.testing.assert_array_equal(remote.sample, local.sample)
    a = FastPD(model).fit(X)
    b = FastPD(model).fit_background_state(remote)
    np.testing.assert_allclose(b.shap_values(X[:100]), a.shap_values(X[:100]), rtol=0, atol=1e-12)
    pa, pb = a.pd(X[:100], [(1,), (0, 2)]), b.pd(X[:100], [(1,), (0, 2)])
    for key in pa:
        np.testing.assert_allclose(pb[key], pa[key], rtol=0, atol=1e-12)
