"""Train-test overlap statistics (Zhang et al., ICML 2025 position paper; catalog 001-03)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import TrustlabError
from trustlab.evaluation import train_test_overlap
from trustlab.evaluation.overlap import ngram_hashes, tokenize


def _words(rng: np.random.Generator, k: int, vocab: int = 5000) -> list[str]:
    return [f"w{i}" for i in rng.integers(0, vocab, k)]


def _naive(train: list[str], test: list[str], n: int) -> tuple[list[int], list[int]]:
    grams = set()
    for doc in train:
        t = tokenize(doc)
        grams.update(tuple(t[i : i + n]) for i in range(len(t) - n + 1))
    totals, hits = [], []
    for doc in test:
        t = tokenize(doc)
        g = [tuple(t[i : i + n]) for i in range(len(t) - n + 1)]
        totals.append(len(g))
        hits.append(sum(x in grams for x in g))
    return totals, hits


@pytest.mark.parametrize("n", [1, 2, 3, 13])
def test_agrees_with_a_naive_ngram_set(n: int) -> None:
    rng = np.random.default_rng(n)
    train = [" ".join(_words(rng, 300, vocab=40)) for _ in range(20)]
    test = [" ".join(_words(rng, int(rng.integers(0, 30)), vocab=40)) for _ in range(50)]
    report = train_test_overlap(train, test, n=n)
    totals, hits = _naive(train, test, n)
    assert report.n_ngrams.tolist() == totals
    assert report.n_overlapping.tolist() == hits


def test_ngrams_do_not_cross_documents_and_tokens_are_normalised() -> None:
    report = train_test_overlap(["alpha beta", "gamma delta"], ["beta gamma", "ALPHA, Beta!"], n=2)
    assert report.contaminated.tolist() == [False, True]
    assert tokenize("It's 2 PM.") == ["it", "s", "2", "pm"]
    vocab: dict[str, int] = {}
    h = ngram_hashes("x y x y", 2, vocab=vocab)
    assert h[0] == h[2] and h[0] != h[1]


def test_short_instances_are_reported_apart() -> None:
    report = train_test_overlap(["a b c d e f"], ["a b", "a b c d"], n=3)
    assert report.n_ngrams.tolist() == [0, 2]
    assert np.isnan(report.overlap_fraction[0])
    summary = report.summary()
    assert summary["n_too_short"] == 1 and summary["contamination_rate"] == 1.0


@pytest.mark.claims
def test_planted_contamination_is_found_at_the_planted_rate() -> None:
    """Plant 10% of test instances verbatim and 10% half-copied: rates and fractions come back."""
    rng = np.random.default_rng(0)
    test = [" ".join(_words(rng, 40)) for _ in range(400)]
    train = [" ".join(_words(rng, 2000)) for _ in range(50)]
    full, half = list(range(0, 40)), list(range(40, 80))
    for i in full:
        train[i % 50] += " " + test[i]
    for i in half:
        train[i % 50] += " " + " ".join(test[i].split()[:20])
    report = train_test_overlap(train, test, n=13)
    assert report.contaminated[full].all() and report.contaminated[half].all()
    assert not report.contaminated[80:].any()  # random 13-grams over 5,000 words never repeat
    assert report.contamination_rate == pytest.approx(0.2)
    assert np.all(report.overlap_fraction[full] == 1.0)
    # first 20 tokens of a 40-token instance: 8 of its 28 13-grams
    assert np.allclose(report.overlap_fraction[half], 8 / 28)
    s = report.summary()
    assert s["share_fully_overlapping"] == pytest.approx(0.1)
    assert s["share_half_overlapping"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("train", "test", "n", "argument"),
    [
        ([], ["x"], 13, "train"),
        (["   "], ["x"], 13, "train"),
        (["a b"], [], 13, "test"),
        (["a b"], ["x"], 0, "n"),
        (["a b"], ["x"], -2, "n"),
        (["a b"], ["x"], 2.5, "n"),
        ([b"bytes"], ["x"], 2, "train"),
        (["a b"], [None], 2, "test"),
        (42, ["x"], 2, "train"),
        (["a b"], float("nan"), 2, "test"),
    ],
)
def test_bad_input_names_the_argument(train, test, n, argument: str) -> None:
    with pytest.raises(TrustlabError) as info:
        train_test_overlap(train, test, n=n)
    assert info.value.argument == argument


@settings(max_examples=60, deadline=None)
@given(
    train=st.one_of(st.lists(st.text(max_size=30), max_size=4), st.text(max_size=30), st.integers()),
    test=st.one_of(st.lists(st.one_of(st.text(max_size=30), st.none()), max_size=4), st.floats()),
    n=st.one_of(st.integers(-1, 5), st.floats(allow_nan=True), st.none()),
)
def test_entry_point_raises_only_trustlab_errors(train, test, n) -> None:
    try:
        report = train_test_overlap(train, test, n=n)
    except TrustlabError:
        return
    assert np.all(report.n_overlapping <= report.n_ngrams)
