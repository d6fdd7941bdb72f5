"""The Error analysis section: slices where the model errs most, measured on rows the search never saw."""

from __future__ import annotations

import numpy as np
import pandas as pd

from trustlab.audit import Audit
from trustlab.audit.registry import default_sections
from trustlab.audit.sections.errors import MIN_SLICE, error_slices


class _Ignores:
    """A fitted 'user model' that reads only x: right on region 'north', a coin flip elsewhere."""

    classes_ = np.array([0, 1])

    def predict_proba(self, X):
        p = 1 / (1 + np.exp(-4 * np.asarray(X["x"], dtype=float)))
        return np.column_stack([1 - p, p])


def _data(n: int = 6000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    region = rng.choice(["north", "south", "east"], n, p=[0.6, 0.3, 0.1])
    p = np.where(region == "south", 0.5, 1 / (1 + np.exp(-4 * x)))
    return pd.DataFrame({"x": x, "region": region, "sex": rng.choice(["f", "m"], n), "y": rng.random(n) < p})


def test_worst_slice_is_the_one_the_model_ignores():
    secs = [s for s in default_sections() if s.name in ("performance", "errors")]
    report = Audit(model=_Ignores(), sections=secs).run(_data(), target="y", sensitive="sex")
    f = report["errors"].figures
    worst = f["slices"][0]
    assert any(c == "region = south" for c in worst["conditions"]), worst
    lo, hi = worst["interval"]
    assert lo > f["overall"]["error_rate"] and lo <= worst["error_rate"] <= hi
    # measured on the estimate half only
    assert sum(s["rows"] for s in f["slices"]) == f["overall"]["rows"]
    html = report.to_html()
    top = html[html.index('id="summary"') : html.index('id="performance"')]
    assert "region = south" in top


def test_no_slice_above_overall_when_errors_are_uniform():
    rng = np.random.default_rng(1)
    n = 4000
    df = pd.DataFrame({"x": rng.normal(size=n), "g": rng.choice(["a", "b", "c"], n)})
    wrong = rng.random(n) < 0.2
    slices, _overall = error_slices(df, wrong, rng.random(n) < 0.5)
    judged = [s for s in slices if s["judged"]]
    # a false alarm needs a slice's 95% interval to miss the true rate: allow one at most
    assert sum(s["interval"][0] > 0.2 for s in judged) <= 1
    assert all(s["rows"] >= MIN_SLICE for s in judged)
