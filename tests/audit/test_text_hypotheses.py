"""The Explain section's hypotheses about the target from a free-text column (issue 28, HypotheSAEs)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit.sections._text_hypotheses import text_columns
from trustlab.audit.sections.explain import ExplainSection
from trustlab.audit.summary import findings
from trustlab.datasets import Schema
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
    assert found["source"] == "detected"
    assert any("'review' was detected as free text by the column screening" in note for note in res.notes)
    html = text_report.to_html()
    assert (
        "Hypotheses about the outcome from the text column &#x27;review&#x27;, detected as free text by "
        "the column screening" in html
    )


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
    assert text_columns(ctx) == [("note", 7.0, "detected")]
    # declared in the schema: read whatever its word count, before the detected ones; a declared
    # target, or a declared column without any text, is not read
    object.__setattr__(
        ctx, "schema", Schema.from_dict({"columns": {c: {"text": True} for c in ("code", "y", "empty")}})
    )
    object.__setattr__(ctx, "data", df.assign(empty=[None, 3] * 25))
    assert text_columns(ctx) == [("code", 1.0, "declared"), ("note", 7.0, "detected")]


_NOTE_SCHEMA = {"note": {"text": True}}


def _short_notes(n: int = 240, seed: int = 0) -> pd.DataFrame:
    """A short free-text column ``note`` (one or two words: below the detection threshold) that
    carries the outcome (10% flipped), a row-unique multi-word ``memo`` (detected), a feature."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    flip = rng.random(n) < 0.1
    pos, neg = ["late", "late again", "overdue"], ["paid", "paid early", "on time"]
    return pd.DataFrame(
        {
            "note": [rng.choice(pos if yi ^ f else neg) for yi, f in zip(y, flip, strict=True)],
            "memo": [
                f"call number {i} about the {rng.choice(['bill', 'card', 'loan'])} today" for i in range(n)
            ],
            "age": rng.integers(18, 80, n),
            "group": rng.choice(["a", "b"], n),
            "outcome": np.where(y == 1, "yes", "no"),
        }
    )


@pytest.fixture(scope="module")
def declared_report():
    section = ExplainSection(recourse=False, text_encoder=word_vector_encoder(16, random_state=0))
    schema = Schema.from_dict({"columns": _NOTE_SCHEMA})
    return Audit(model="logistic", sections=[section], schema=schema, random_state=0).run(
        _short_notes(), target="outcome", sensitive=["group"]
    )


def test_declared_short_text_column_gets_hypotheses_and_is_no_feature(declared_report):
    """A column declared ``"text": true`` is read whatever its word count (median 1 here, below
    MIN_WORDS) and says "declared"; the screening's free text says "detected"; neither is a feature."""
    (res,) = declared_report.results
    found = {f["column"]: f for f in res.figures["text_hypotheses"]}
    assert [found[c]["source"] for c in ("note", "memo")] == ["declared", "detected"]
    assert found["note"]["median_words"] < 3 and found["note"]["hypotheses"]
    labels = {h["label"] for h in found["note"]["hypotheses"] if h["significant"]}
    # every significant hypothesis names a word of the planted notes ("mentions 'time'" is one: which
    # words the word-vector SAE keeps as features varies with the host's floating point)
    planted = r"\b(late|again|overdue|paid|early|on|time)\b"
    assert labels and all(re.search(planted, label) for label in labels), labels
    assert any("'note' was declared as text in the schema (left out of the model" in n for n in res.notes)
    assert any("'memo' was detected as free text by the column screening" in n for n in res.notes)
    assert declared_report.meta["features"] == ["age"]
    flag = next(f for f in declared_report.meta["column_flags"] if f["column"] == "note")
    assert flag["kind"] == "declared_text" and flag["dropped"]
    found_here = findings(declared_report.results, declared_report.meta)
    assert not any("note" in f["text"] for f in found_here)  # a declaration, not a warning
    html = declared_report.to_html()
    assert "text column &#x27;note&#x27;, declared as text in the schema (HypotheSAEs" in html


def test_declared_text_column_is_no_feature_without_the_explain_section():
    """Without the declaration the short ``note`` would be a categorical feature (six levels)."""
    frame = _short_notes(120)
    plain = Audit(model="logistic", sections=[], random_state=0).context(
        frame, target="outcome", sensitive="group"
    )
    assert "note" in plain.features
    schema = Schema.from_dict({"columns": _NOTE_SCHEMA})
    ctx = Audit(model="logistic", sections=[], schema=schema, random_state=0).context(
        frame, target="outcome", sensitive="group"
    )
    assert ctx.features == ["age"]
    kept = Audit(model="logistic", sections=[], schema=schema, keep=["note"], random_state=0).context(
        frame, target="outcome", sensitive="group"
    )
    assert kept.features == ["note", "age"]  # kept as asked, still flagged


def test_private_audit_with_declared_text_column_runs_and_leaves_it_out():
    """Private mode: the declaration (a public fact) leaves the column out of the DP model's features;
    the Data section releases nothing about it, and the Explain section is not run (raw only)."""
    frame = _short_notes(200)
    schema = Schema.from_dict(
        {
            "columns": _NOTE_SCHEMA
            | {
                "age": {"bounds": [18, 80]},
                "group": {"categories": ["a", "b"]},
                "outcome": {"categories": ["no", "yes"]},
            }
        }
    )
    report = Audit(model="logistic", private=True, epsilon=1.0, schema=schema, random_state=0).run(
        frame, target="outcome", sensitive="group"
    )
    assert "note" not in report.meta["features"] and "age" in report.meta["features"]
    assert {(f["column"], f["kind"]) for f in report.meta["column_flags"]} == {("note", "declared_text")}
    data = next(r for r in report.results if r.name == "data")
    assert "note" in data.figures["not_released"]
    assert "note" not in {c["name"] for c in data.figures["column_summaries"]}
    assert "explain" not in {r.name for r in report.results}


def test_no_text_column_no_hypotheses(raw_report):
    explain = next(r for r in raw_report.results if r.name == "explain")
    assert "text_hypotheses" not in explain.figures
