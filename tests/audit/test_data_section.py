"""Data section (raw mode): one pass of mergeable statistics gives pandas' own figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit._scale_stats import COLUMNS_KEY
from trustlab.audit.registry import default_sections


def test_column_summaries_equal_pandas():
    rng = np.random.default_rng(2)
    n = 5000
    df = pd.DataFrame(
        {
            "a": np.where(rng.random(n) < 0.1, np.nan, rng.normal(5, 2, n)),
            "b": rng.integers(0, 4, n),
            "c": pd.Categorical(np.where(rng.random(n) < 0.05, None, rng.choice(["p", "q", "r"], n))),
            "g": rng.choice(["u", "v"], n),
        }
    )
    df["y"] = (rng.random(n) < 0.4).astype(int)
    secs = [s for s in default_sections() if s.name == "data"]
    runner = Audit(model="logistic", sections=secs)
    report = runner.run(df, target="y", sensitive="g")
    fig = report["data"].figures
    assert fig["rows"] == n
    by = {c["name"]: c for c in fig["column_summaries"]}
    a = df["a"]
    assert by["a"]["missing"] == int(a.isna().sum())
    assert by["a"]["mean"] == pytest.approx(a.mean(), rel=1e-12)
    assert by["a"]["std"] == pytest.approx(a.std(), rel=1e-9)
    assert (by["a"]["min"], by["a"]["max"]) == (a.min(), a.max())
    assert by["c"]["missing"] == int(df["c"].isna().sum())
    assert by["c"]["top"] == [[str(k), int(v)] for k, v in df["c"].value_counts().items()]
    assert by["c"]["missing_rate"] == df["c"].isna().mean()
    # the statistics were computed once, in one pass, and cached for any later reader
    ctx = runner.context(df, target="y", sensitive="g")
    assert COLUMNS_KEY not in ctx._shared
    secs[0].compute(ctx, None)
    assert set(ctx._shared[COLUMNS_KEY]) == {str(i) for i in range(df.shape[1])}
