"""The distributed audit's Explain section: background counted over every held-out row, queries sampled."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from trustlab.audit._scale_explain import explain_section, explain_statistic
from trustlab.audit.section import AuditContext
from trustlab.audit.sections.explain import ExplainSection
from trustlab.audit.split import row_split
from trustlab.compute.backend import compute
from trustlab.datasets.schema import Schema
from trustlab.explain._fastpd import FastPD
from trustlab.models import make_model

SEED, TEST_SIZE = 3, 0.3


def _table(n: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "x0": rng.normal(size=n),
            "x1": rng.normal(size=n),
            "x2": rng.uniform(0, 5, n),
            "job": rng.choice(["a", "b", "c", "d"], n),
            "sex": rng.choice(["f", "m"], n),
        }
    )
    frame.loc[rng.random(n) < 0.05, "x1"] = np.nan
    logit = frame["x0"] + np.nan_to_num(frame["x1"]) * (frame["job"] == "b") - 0.3 * frame["x2"] + 0.7
    frame["y"] = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return frame


def _context(frame: pd.DataFrame, model_name: str) -> tuple[AuditContext, list[str]]:
    """The context the distributed audit builds: the training rows (here all of them) and the model."""
    from trustlab.audit._scale_stats import as_category as _as_category

    features = ["x0", "x1", "x2", "job", "sex"]
    train = _as_category(frame[~row_split(frame, TEST_SIZE, SEED)].reset_index(drop=True))
    y = (train["y"] == "yes").to_numpy().astype(np.int64)
    model = make_model(model_name, train[features], random_state=SEED)
    with threadpool_limits(limits=1):  # HGB's OpenMP fit crawls on busy cores
        model.fit(train[features], y)
    ctx = AuditContext(
        data=train,
        target="y",
        sensitive=["sex"],
        features=features,
        y=y,
        positive_label="yes",
        negative_label="no",
        train_index=np.arange(len(train)),
        test_index=np.zeros(0, dtype=np.int64),
        model=model,
        model_name=model_name,
        proba_test=np.zeros(0),
        schema=Schema(),
        private=False,
        random_state=SEED,
    )
    return ctx, features


@pytest.fixture(scope="module")
def hgb() -> tuple[pd.DataFrame, AuditContext, list[str]]:
    frame = _table()
    ctx, features = _context(frame, "hgb")
    return frame, ctx, features


def test_partitioning_does_not_matter(hgb) -> None:
    dd = pytest.importorskip("dask.dataframe")
    import dask

    frame, ctx, features = hgb
    stat = explain_statistic(ctx.model, features, test_size=TEST_SIZE, seed=SEED, n_queries=120)
    whole = compute(stat, frame)
    chunked = compute(stat, frame.sample(frac=1.0, random_state=1), chunksize=333)
    with dask.config.set(scheduler="synchronous"):
        on_dask = compute(stat, dd.from_pandas(frame, npartitions=6))
    held = int(row_split(frame, TEST_SIZE, SEED).sum())
    for other in (chunked, on_dask):
        assert other["background"].n_rows == whole["background"].n_rows == held
        for a, b in zip(other["background"].counts, whole["background"].counts, strict=True):
            assert np.array_equal(a, b)
        pd.testing.assert_frame_equal(other["queries"], whole["queries"], check_dtype=False)
    assert len(whole["queries"]) == 120


def test_section_reads_every_heldout_row(hgb) -> None:
    """Importance from the merged background equals FastPD fitted on all held-out rows (1e-9)."""
    frame, ctx, features = hgb
    merged = compute(
        explain_statistic(ctx.model, features, test_size=TEST_SIZE, seed=SEED, n_queries=200),
        frame,
        chunksize=700,
    )
    res = explain_section(ExplainSection(), ctx, merged)
    f = res.figures
    assert f["method"] == "fastpd" and f["n_rows"] == 200
    assert f["n_background"] == int(row_split(frame, TEST_SIZE, SEED).sum())
    assert all(c.passed for c in res.checks)
    assert f"the background is {f['n_background']:,} held-out rows" in res.notes[0]
    pre, est = ctx.model[:-1], ctx.model[-1]
    from trustlab.audit._scale_stats import as_category as _as_category

    held = _as_category(frame[row_split(frame, TEST_SIZE, SEED)])
    whole = FastPD(est).fit(pre.transform(held[features]))
    queries = _as_category(merged["queries"])
    imp = np.abs(whole.shap_values(pre.transform(queries[features]))).mean(axis=0)
    names = list(pre.get_feature_names_out())
    for name, value in f["importance"]:
        assert abs(value - imp[names.index(name)]) < 1e-9
    assert abs(f["expected_value"] - whole.expected_value_) < 1e-9


def test_linear_model_uses_the_queries() -> None:
    frame = _table(1500)
    ctx, features = _context(frame, "logistic")
    merged = compute(
        explain_statistic(ctx.model, features, test_size=TEST_SIZE, seed=SEED), frame, chunksize=400
    )
    assert merged["background"] is None
    res = explain_section(ExplainSection(recourse=False), ctx, merged)
    assert res.figures["method"] == "linear"
    assert res.notes[0].startswith(f"Explained {len(merged['queries'])} test rows")


def test_background_rate_counts_a_hash_sample_of_the_heldout_rows(hgb) -> None:
    """A rate below 1 counts the held-out rows of the hash sample, the same on any chunking."""
    from trustlab.audit.split import row_hash, split_from_hash, training_sample

    frame, ctx, features = hgb
    stat = explain_statistic(ctx.model, features, test_size=TEST_SIZE, seed=SEED, background_rate=0.3)
    whole = compute(stat, frame)["background"]
    chunked = compute(stat, frame, chunksize=333)["background"]
    h = row_hash(frame, SEED)
    held = split_from_hash(h, TEST_SIZE)
    assert whole.n_rows == chunked.n_rows == int(training_sample(h[held], 0.3).sum())
    assert 0.2 * held.sum() < whole.n_rows < 0.4 * held.sum()
    every = explain_statistic(ctx.model, features, test_size=TEST_SIZE, seed=SEED)
    full = compute(every, frame)["background"]
    assert full.n_rows == int(held.sum())
