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


def _naive_helm(train: list[str], test: list[str], n: int, cap: int) -> list[tuple[float, ...]]:
    """HELM's binary / Jaccard / token overlap, written directly over tuples (the reference)."""
    from collections import Counter

    freq: Counter = Counter()
    for doc in train:
        t = tokenize(doc)
        freq.update(tuple(t[i : i + n]) for i in range(len(t) - n + 1))
    rows = []
    for doc in test:
        t = tokenize(doc)
        grams = [freq[tuple(t[i : i + n])] for i in range(len(t) - n + 1)]
        ok = [c > 0 and (cap == 0 or c <= cap) for c in grams]
        # token j is covered when a counting n-gram starts in [j - n + 1, j]; its weight is
        # the running minimum of the counts since the covering run began
        covered, weighted, budget, weight = 0, 0.0, 0, 0
        for c in grams + [0] * (n - 1):
            if c and (cap == 0 or c <= cap or (weight and weight <= cap)):
                budget, weight = n, (min(c, weight) if weight else c)
            if budget:
                budget, covered, weighted = budget - 1, covered + 1, weighted + 1 / weight
            else:
                weight = 0
        m = len(grams)
        rows.append(
            (
                float(any(ok)),
                sum(ok) / m,
                sum(1 / c for c, k in zip(grams, ok, strict=True) if k) / m,
                covered / len(t),
                weighted / len(t),
            )
        )
    return rows


@pytest.mark.parametrize(("n", "cap"), [(2, 0), (3, 0), (3, 2), (1, 5)])
def test_frequency_weighted_metrics_agree_with_a_direct_helm_computation(n: int, cap: int) -> None:
    rng = np.random.default_rng(10 + n + cap)
    train = [" ".join(_words(rng, 200, vocab=30)) for _ in range(10)]
    test = [" ".join(_words(rng, int(rng.integers(n, 25)), vocab=30)) for _ in range(40)]
    got = train_test_overlap(train, test, n=n).metrics(max_frequency=cap)
    np.testing.assert_allclose(got.to_numpy(), np.array(_naive_helm(train, test, n, cap)), rtol=1e-12)


def test_frequency_filter_drops_boilerplate_and_keeps_a_rare_copy() -> None:
    rng = np.random.default_rng(5)
    boiler = " ".join(_words(rng, 20))
    rare = " ".join(_words(rng, 20))
    train = [boiler] * 30 + [rare] + [" ".join(_words(rng, 100)) for _ in range(50)]
    report = train_test_overlap(train, [boiler, rare, " ".join(_words(rng, 20))], n=13)
    assert report.metrics()["binary"].tolist() == [1.0, 1.0, 0.0]
    filtered = report.metrics(max_frequency=10)
    assert filtered["binary"].tolist() == [0.0, 1.0, 0.0]
    assert report.metrics()["weighted_jaccard"].round(6).tolist() == [round(1 / 30, 6), 1.0, 0.0]
    with pytest.raises(TrustlabError, match="max_frequency"):
        report.metrics(max_frequency=-1)


def test_chunked_tokenisation_gives_the_same_report(monkeypatch) -> None:
    # The training corpus is tokenised a chunk of documents at a time; chunk size changes nothing.
    import trustlab.evaluation.overlap as overlap

    rng = np.random.default_rng(11)
    train = [" ".join(_words(rng, int(rng.integers(1, 80)), vocab=25)) for _ in range(40)]
    test = [" ".join(_words(rng, 30, vocab=25)) + " never-seen" for _ in range(20)]
    whole = train_test_overlap(train, test, n=3)
    monkeypatch.setattr(overlap, "_CHUNK_CHARS", 60)
    chunked = train_test_overlap(train, test, n=3)
    assert chunked.n_overlapping.tolist() == whole.n_overlapping.tolist()
    assert chunked.ngram_frequency.tolist() == whole.ngram_frequency.tolist()
    assert chunked.n_train_ngrams == whole.n_train_ngrams
