"""Tests of the audit's Privacy section (PrivacySection)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.audit.section import AuditContext
from trustlab.audit.sections.privacy import PrivacySection
from trustlab.datasets.schema import Schema
from trustlab.privacy.accounting import Accountant


def _ctx(private: bool, bounds: bool = True) -> AuditContext:
    rng = np.random.default_rng(0)
    n = 2000
    df = pd.DataFrame(
        {
            "income": rng.lognormal(3, 1, n),
            "age": rng.integers(18, 90, n).astype(float),
            "sex": rng.choice(["f", "m"], n),
            "y": rng.integers(0, 2, n),
        }
    )
    cols = {"sex": {"categories": ["f", "m"]}}
    if bounds:
        cols |= {"income": {"bounds": [0, 500]}, "age": {"bounds": [18, 99]}}
    idx = np.arange(n)
    return AuditContext(
        data=df,
        target="y",
        sensitive=["sex"],
        features=["income", "age"],
        y=df["y"].to_numpy(),
        positive_label=1,
        negative_label=0,
        train_index=idx[:1000],
        test_index=idx[1000:],
        model=None,
        model_name="none",
        proba_test=np.zeros(1000),
        schema=Schema.from_dict({"columns": cols}),
        private=private,
        random_state=0,
    )


def test_private_spends_exactly_its_share():
    acc = Accountant(0.6, name="privacy")
    sec = PrivacySection()
    res = sec.compute(_ctx(True), acc)
    assert acc.spent_epsilon == pytest.approx(0.6)
    assert sum(e.epsilon for e in acc.ledger()) == pytest.approx(0.6)
    assert res.figures["private"] is True
    assert {p["column"] for p in res.figures["boxplots"]} == {"income", "age"}
    box = res.figures["boxplots"][1]["groups"]["f"]
    assert box["q1"] <= box["median"] <= box["q3"]
    html = sec.render(res)
    assert html.count("<svg") == 1 and "DP boxplots" in html  # one grid of panels


def test_private_without_bounds_skips_and_still_spends():
    acc = Accountant(0.5)
    res = PrivacySection().compute(_ctx(True, bounds=False), acc)
    assert acc.spent_epsilon == pytest.approx(0.5)
    assert any("no public bounds" in n for n in res.notes)
    assert res.figures["boxplots"] == []


def test_nonprivate_draws_nothing():
    """Issue 26 s2: no exploratory raw boxes (no units, flagged columns); the Data section describes them."""
    assert not PrivacySection().applies(_ctx(False))
    res = PrivacySection().compute(_ctx(False), None)
    assert res.figures["boxplots"] == [] and any("Data section" in n for n in res.notes)
    assert "<svg" not in PrivacySection().render(res)
