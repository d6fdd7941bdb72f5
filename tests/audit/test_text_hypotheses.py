"""The Explain section's hypotheses about the target from a free-text column (issue 28, HypotheSAEs)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit.sections._text_hypotheses import text_columns
from trustlab.audit.sections.explain import ExplainSection
from trustlab.explain.hypotheses import make_planted_corpus, word_vector_encoder


@pytest.fixture(scope="module")
def corpus():
    return make_planted_corpus(900, random_state=0)


@pytest.fixture(scope="module")
def text_report(corpus):
    rng = np.random.default_rng(0)
    n = len(corpus.texts)
    frame = pd.DataFrame(
        {
            "review": corpus.texts,
            "age": rng.integers(18, 80, n),
            "group": rng.choice(["a", "b"], n),
            "outcome": np.where(np.asarray(corpus.y) == 1, "yes", "no"),
        }
    )
    section = ExplainSection(recourse=False, text_encoder=word_vector_encoder(64, random_state=0))
    return Audit(model="logistic", sections=[section], random_state=0).run(
        frame, target="outcome", sensitive=["group"]
    )


@pytest.mark.claims
def test_planted_topics_come_back_as_significant_held_out_hypotheses(corpus, text_report):
    """The outcome is planted on three topics: at least two come back as significant hypotheses
    labelled by their own words, with a positive coefficient, and every significant hypothesis names
    a planted topic's words (the held-out joint test at Bonferroni 0.1 / 10)."""
    (res,) = text_report.results
    (found,) = res.figures["text_hypotheses"]
    assert found["column"] == "review" and found["n_test"] > 200
    planted = {corpus.topic_names[t] for t in corpus.planted}
    hits = set()
    for h in found["hypotheses"]:
        if not h["significant"]:
            continue
        label = set(re.findall(r"[a-z]+", h["label"]))
        about = {
            name for name, ws in zip(corpus.topic_names, corpus.topic_words, strict=True) if label & set(ws)
        }
        assert about & planted, h
        assert h["coef"] > 0
        hits |= about
    assert len(hits) >= 2, found["hypotheses"]
    assert any("read as free text" in note for note in res.notes)
    html = text_report.to_html()
    assert "Hypotheses about the outcome from the text column &#x27;review&#x27;" in html


def test_only_screened_out_multi_word_columns_are_read_as_text():
    from trustlab.audit.section import AuditContext

    df = pd.DataFrame(
        {
            "note": [f"the client called about item {i} today" for i in range(50)],
            "code": [f"c{i}" for i in range(50)],
            "y": [0, 1] * 25,
        }
    )
    flags = [{"column": "note", "kind": "row_id"}, {"column": "code", "kind": "row_id"}]
    ctx = AuditContext.__new__(AuditContext)
    object.__setattr__(ctx, "column_flags", flags)
    object.__setattr__(ctx, "data", df)
    object.__setattr__(ctx, "target", "y")
    object.__setattr__(ctx, "sensitive", [])
    assert text_columns(ctx) == [("note", 7.0)]


def test_no_text_column_no_hypotheses(raw_report):
    explain = next(r for r in raw_report.results if r.name == "explain")
    assert "text_hypotheses" not in explain.figures
