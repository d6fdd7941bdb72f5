import numpy as np
import pandas as pd
import pytest

from trustlab.compute import CodeHistogram, Moments, ValueCounts, compute


@pytest.fixture()
def frame():
    rng = np.random.default_rng(1)
    x = rng.normal(size=1000)
    x[::17] = np.nan
    return pd.DataFrame({"x": x, "c": rng.choice(["a", "b", None], 1000), "k": rng.integers(0, 7, 1000)})


@pytest.mark.parametrize("chunksize", [None, 1, 33, 999])
def test_chunked_equals_whole(frame, chunksize):
    m = compute(Moments("x"), frame, chunksize=chunksize)
    x = frame["x"].dropna()
    assert m["missing"] == frame["x"].isna().sum()
    assert m["mean"] == pytest.approx(x.mean(), rel=1e-12)
    assert m["std"] == pytest.approx(x.std(), rel=1e-9)
    assert compute(ValueCounts("c"), frame, chunksize=chunksize)[None] == frame["c"].isna().sum()
    h = compute(CodeHistogram("k", 7), frame, chunksize=chunksize)
    assert h.tolist() == np.bincount(frame["k"], minlength=7).tolist()


def test_dask_backend_matches(frame):
    dd = pytest.importorskip("dask.dataframe")
    ddf = dd.from_pandas(frame, npartitions=5)
    assert compute(Moments("x"), ddf)["mean"] == pytest.approx(frame["x"].mean(), rel=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="DataFrame"):
        compute(Moments("x"), [1, 2])
