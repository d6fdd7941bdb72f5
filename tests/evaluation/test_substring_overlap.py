"""Exact-substring train-test overlap through a token suffix array (catalog 001-03)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import TrustlabError
from trustlab.evaluation import train_test_overlap
from trustlab.evaluation.overlap import tokenize
from trustlab.evaluation.substring_overlap import exact_substring_overlap, suffix_array


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=60))
def test_suffix_array_sorts_the_suffixes(x: list[int]) -> None:
    assert suffix_array(x).tolist() == sorted(range(len(x)), key=lambda i: x[i:])


def _naive_longest(train: list[str], test: list[str]) -> list[int]:
    docs = [tuple(tokenize(d)) for d in train]
    out = []
    for q in (tokenize(t) for t in test):
        best = 0
        for i in range(len(q)):
            length = best  # only longer matches matter
            while i + length < len(q) and any(_contains(d, tuple(q[i : i + length + 1])) for d in docs):
                length += 1
            best = max(best, length)
        out.append(best)
    return out


def _contains(doc: tuple, part: tuple) -> bool:
    k = len(part)
    return any(doc[j : j + k] == part for j in range(len(doc) - k + 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_longest_match_agrees_with_a_naive_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = np.array(["a", "b", "c", "d"])
    train = [" ".join(words[rng.integers(0, 4, 60)]) for _ in range(6)]
    test = [" ".join(words[rng.integers(0, 4, int(rng.integers(0, 15)))]) + " zz" for _ in range(25)]
    report = exact_substring_overlap(train, test, min_length=5)
    assert report.longest_match.tolist() == _naive_longest(train, test)
    assert report.contaminated.tolist() == [m >= 5 for m in _naive_longest(train, test)]


def test_agrees_with_ngram_contamination_and_never_crosses_documents() -> None:
    # An instance holds a training n-gram iff its longest verbatim match has >= n tokens.
    rng = np.random.default_rng(7)
    words = np.array([f"w{i}" for i in range(6)])
    train = [" ".join(words[rng.integers(0, 6, 80)]) for _ in range(10)]
    test = [" ".join(words[rng.integers(0, 6, 20)]) for _ in range(60)]
    for n in (3, 5, 8):
        grams = train_test_overlap(train, test, n=n)
        exact = exact_substring_overlap(train, test, min_length=n)
        assert exact.contaminated.tolist() == grams.contaminated.tolist()
    split = exact_substring_overlap(["alpha beta", "gamma delta"], ["beta gamma"], min_length=1)
    assert split.longest_match.tolist() == [1]


@pytest.mark.claims
def test_planted_spans_are_found_with_their_length_and_coverage() -> None:
    # 50 of 500 test instances (60 words) carry a 40-word span copied from a training document;
    # the rest are fresh random words (20,000-word vocabulary).
    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(20_000)])
    docs = [words[rng.integers(0, 20_000, 2_000)] for _ in range(50)]
    test = [words[rng.integers(0, 20_000, 60)] for _ in range(500)]
    for i in range(50):
        start = int(rng.integers(0, 1_960))
        test[i][10:50] = docs[i][start : start + 40]
    report = exact_substring_overlap([" ".join(d) for d in docs], [" ".join(t) for t in test], min_length=30)
    assert report.contaminated.sum() == 50 and report.contaminated[:50].all()
    assert (report.longest_match[:50] >= 40).all() and (report.longest_match[50:] <= 2).all()
    assert np.all(report.covered_fraction[:50] >= 40 / 60) and np.all(report.covered_fraction[50:] == 0)
    assert report.summary()["contamination_rate"] == 0.1


@pytest.mark.parametrize(
    ("train", "test", "min_length", "argument"),
    [
        ([], ["a"], 5, "train"),
        (["  "], ["a"], 5, "train"),
        (["a b"], [], 5, "test"),
        (["a b"], [3], 5, "test"),
        (["a b"], ["a"], 0, "min_length"),
    ],
)
def test_bad_input_names_the_argument(train, test, min_length, argument) -> None:
    with pytest.raises(TrustlabError) as info:
        exact_substring_overlap(train, test, min_length=min_length)
    assert info.value.argument == argument
