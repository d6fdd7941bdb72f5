"""Performance section: exact figures from merged score counts equal the row-level ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, brier_score_loss, roc_auc_score

from trustlab.audit import Audit
from trustlab.audit.registry import default_sections
from trustlab.compute.backend import compute
from trustlab.compute.scores import ScoreCounts
from trustlab.uncertainty import calibration_table, expected_calibration_error


def _data(n: int = 4000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    df = pd.DataFrame({"a": a, "g": rng.choice(["u", "v"], n)})
    df["y"] = (rng.random(n) < 1 / (1 + np.exp(-2 * a))).astype(int)
    return df


def _performance(**kw):
    secs = [s for s in default_sections() if s.name == "performance"]
    return Audit(model="logistic", sections=secs, **kw)


def test_overall_figures_equal_sklearn_on_the_held_out_rows():
    df = _data()
    runner = _performance()
    ctx = runner.context(df, target="y", sensitive="g")
    fig = runner.run(df, target="y", sensitive="g")["performance"].figures["overall"]
    y, p = ctx.y_test, ctx.proba_test
    assert fig["count"] == y.size
    assert fig["accuracy"] == accuracy_score(y, p >= 0.5)  # counts: exact
    assert fig["roc_auc"] == pytest.approx(roc_auc_score(y, p), abs=1e-13)
    assert fig["brier"] == pytest.approx(brier_score_loss(y, p), abs=1e-13)
    assert fig["ece"] == pytest.approx(expected_calibration_error(y, p), abs=1e-13)


def test_positive_zero_scores_the_positive_class():
    """Regression: with positive=0 the audit took the negative class's column (AUC 1 - AUC)."""
    df = _data()
    auc = {
        pos: _performance(positive=pos)
        .run(df, target="y", sensitive="g")["performance"]
        .figures["overall"]["roc_auc"]
        for pos in (1, 0)
    }
    # positive=0 relabels the outcome; a model refitted on it ranks the rows in reverse order,
    # so its AUC for predicting 0 equals the AUC for predicting 1
    assert auc[0] == pytest.approx(auc[1], abs=1e-9)
    assert auc[0] > 0.7


def test_score_counts_with_ties_and_rounding():
    rng = np.random.default_rng(5)
    n = 20_000
    p = np.round(rng.random(n), 2)  # many ties
    y = (rng.random(n) < p).astype(int)
    df = pd.DataFrame({"p": p, "y": y})
    exact = compute(ScoreCounts("p", "y"), df, chunksize=3001)
    assert not exact.rounded
    m = exact.metrics()
    assert m["roc_auc"] == pytest.approx(roc_auc_score(y, p), abs=1e-13)
    curve = calibration_table(y, p)[["mean_predicted", "fraction_positive"]].to_numpy()
    np.testing.assert_allclose(np.array(m["curve"]), curve, atol=1e-13)
    g = np.where(rng.random(n) < 0.5, "a", "b")
    grouped = compute(ScoreCounts("p", "y", group="g", levels=["a", "b"]), df.assign(g=g), chunksize=2999)
    for i, level in enumerate(["a", "b"]):
        sel = g == level
        assert grouped.metrics(i)["roc_auc"] == pytest.approx(roc_auc_score(y[sel], p[sel]), abs=1e-13)
        assert grouped.metrics(i)["brier"] == pytest.approx(brier_score_loss(y[sel], p[sel]), abs=1e-13)
    # beyond max_distinct the scores are floored to a grid: the same result on any chunking
    a = compute(ScoreCounts("p", "y", max_distinct=50, grid_bits=4), df, chunksize=997)
    b = compute(ScoreCounts("p", "y", max_distinct=50, grid_bits=4), df)
    assert a.rounded and b.rounded
    np.testing.assert_array_equal(a.score, b.score)
    np.testing.assert_array_equal(a.positives, b.positives)
    # flooring keeps every score below 0.5 below it: accuracy at 0.5 is unchanged
    assert a.metrics()["accuracy"] == accuracy_score(y, p >= 0.5)


def test_score_counts_coarsen_to_the_finest_grid_the_whole_table_fits():
    """A state never exceeds max_distinct pairs, and its grid does not depend on the chunking."""
    rng = np.random.default_rng(7)
    p = rng.random(30_000)
    y = (rng.random(p.size) < p).astype(int)
    df = pd.DataFrame({"p": p, "y": y})
    want = next(b for b in range(24, 0, -1) if np.unique(np.floor(p * 2.0**b)).size <= 1000)
    tables = [
        compute(ScoreCounts("p", "y", max_distinct=1000), df, chunksize=c) for c in (30_000, 4_001, 997, 97)
    ]
    for t in tables:
        assert t.rounded and t.grid_bits == want and t.score.size <= 1000
        np.testing.assert_array_equal(t.score, tables[0].score)
        np.testing.assert_array_equal(t.negatives, tables[0].negatives)
        np.testing.assert_array_equal(t.positives, tables[0].positives)
    np.testing.assert_array_equal(t.score, np.unique(np.floor(p * 2.0**want) / 2.0**want))
    assert int(t.positives.sum()) == int(y.sum())
    assert abs(t.metrics()["roc_auc"] - roc_auc_score(y, p)) < t.metrics()["auc_tie_share"]
