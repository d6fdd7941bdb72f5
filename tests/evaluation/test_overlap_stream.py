"""Train-test overlap (001-03) read as a stream: files, folders and iterators give the in-memory report."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import trustlab.evaluation.overlap as overlap
from trustlab.errors import TrustlabError
from trustlab.evaluation import exact_substring_overlap, train_test_overlap
from trustlab.evaluation.overlap import tokenize

FIELDS = ["n_ngrams", "n_overlapping", "contaminated", "ngram_frequency", "ngram_instance"]


def _words(rng: np.random.Generator, k: int, vocab: int = 30) -> str:
    return " ".join(f"w{i}" for i in rng.integers(0, vocab, k))


def _corpus() -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(3)
    docs = [_words(rng, int(rng.integers(1, 120))) for _ in range(30)]
    docs[4] = "Straße ΑΣ. Ünï " + docs[4] + " ΣΑΣ ÉTÉ"  # non-ASCII pieces between ASCII ones
    docs[7] = docs[7] + " " + "ünï " * 20 + docs[8]
    docs[9] = "   \n\t"
    test = [_words(rng, 12) for _ in range(20)] + [
        "straße ασ ünï " + docs[4].split()[4],
        " ".join(docs[7].split()[-22:]),
    ]
    return docs, test


def _assert_same(a, b) -> None:
    for field in FIELDS:
        assert getattr(a, field).tolist() == getattr(b, field).tolist(), field
    assert (a.n_train_ngrams, a.n_train_tokens) == (b.n_train_ngrams, b.n_train_tokens)


def _write(docs: list[str], folder: Path) -> list[Path]:
    folder.mkdir()
    lines = [json.dumps({"text": d, "id": i}) if i % 2 else json.dumps(d) for i, d in enumerate(docs[:10])]
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    with gzip.open(folder / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": d}) + "\n" for d in docs[10:20])
    texts = folder / "texts"
    texts.mkdir()
    for i, d in enumerate(docs[20:]):
        (texts / f"{i:02d}.txt").write_text(d, encoding="utf-8")
    (texts / ".hidden.txt").write_bytes(b"\x00\xff")  # skipped: hidden
    return [folder / "a.jsonl", folder / "b.jsonl.gz", texts]


@pytest.mark.parametrize("n", [13])  # n = 1 to 4: the hypothesis test below
def test_streamed_files_and_iterators_give_the_in_memory_report(n: int, tmp_path, monkeypatch) -> None:
    docs, test = _corpus()
    whole = train_test_overlap(docs, test, n=n)
    # ground truth: a naive set of n-gram tuples
    grams: set[tuple[str, ...]] = set()
    for d in docs:
        t = tokenize(d)
        grams.update(tuple(t[i : i + n]) for i in range(len(t) - n + 1))
    hits = [sum(tuple(t[i : i + n]) in grams for i in range(len(t) - n + 1)) for t in map(tokenize, test)]
    assert whole.n_overlapping.tolist() == hits and whole.n_overlapping.sum() > 0
    assert whole.n_train_tokens == sum(len(tokenize(d)) for d in docs)
    paths = _write(docs, tmp_path / "corpus")
    # documents cut into ~40-character pieces, batches of a few pieces: every n-gram still counted once
    monkeypatch.setattr(overlap, "_CHUNK_CHARS", 40)
    _assert_same(train_test_overlap(docs, test, n=n), whole)
    _assert_same(train_test_overlap(iter(docs), test, n=n), whole)
    _assert_same(train_test_overlap(paths, test, n=n), whole)
    _assert_same(train_test_overlap(tmp_path / "corpus", test, n=n), whole)
    _assert_same(train_test_overlap(paths[:1] + docs[10:], test, n=n), whole)  # paths and documents mixed
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(t) + "\n" for t in test), encoding="utf-8")
    _assert_same(train_test_overlap(paths, tmp_path / "test.jsonl", n=n), whole)


def test_exact_substring_overlap_streamed_in_small_pieces_is_exact(tmp_path, monkeypatch) -> None:
    docs, test = _corpus()
    whole = exact_substring_overlap(docs, test, min_length=5)
    assert whole.longest_match[-1] == len(tokenize(test[-1]))  # a 22-token copy
    paths = _write(docs, tmp_path / "corpus")
    monkeypatch.setattr(overlap, "_CHUNK_CHARS", 40)  # pieces of a few tokens: matches cross the cuts
    for train in (paths,):
        got = exact_substring_overlap(train, test, min_length=5)
        assert got.longest_match.tolist() == whole.longest_match.tolist()
        assert got.covered_fraction.tolist() == whole.covered_fraction.tolist()


def test_a_generator_is_read_incrementally_in_bounded_memory(monkeypatch) -> None:
    """A 1 MB corpus of fresh strings from a generator: peak traced memory stays far below it."""
    monkeypatch.setattr(overlap, "_CHUNK_CHARS", 20_000)
    rng = np.random.default_rng(0)
    block = [_words(rng, 3000, vocab=20_000) for _ in range(4)]  # ~20 kB each
    test = [block[0][:200], _words(rng, 30, vocab=20_000)]
    n_docs = 1_000_000 // len(block[0])
    tracemalloc.start()
    try:
        report = train_test_overlap((block[i % 4] + f" d{i}" for i in range(n_docs)), test, n=13)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.contaminated.tolist() == [True, False]
    assert report.ngram_frequency[0] == len(range(0, n_docs, 4))
    assert peak < 800_000, peak  # 1 MB corpus (7.8 MB peak before streaming): one 20 kB batch stays


@pytest.mark.parametrize(
    ("make", "argument"),
    [
        (lambda d: [d / "missing.jsonl"], "train"),
        (lambda d: [d / "binary.bin"], "train"),
        (lambda d: [d / "latin1.txt"], "train"),
        (lambda d: [d / "bad.jsonl"], "train"),
        (lambda d: [d / "notext.jsonl"], "train"),
        (lambda d: [d / "empty"], "train"),
        (lambda d: iter([]), "train"),
        (lambda d: [d / "ok.txt", 3], "train"),
        (lambda d: b"bytes", "train"),
    ],
)
def test_bad_files_name_the_argument(make, argument: str, tmp_path) -> None:
    (tmp_path / "binary.bin").write_bytes(b"abc\x00\x01\x02" * 10)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{not json\n')
    (tmp_path / "notext.jsonl").write_text('{"body": "no text entry"}\n')
    (tmp_path / "empty").mkdir()
    (tmp_path / "ok.txt").write_text("some words here")
    with pytest.raises(TrustlabError) as info:
        train_test_overlap(make(tmp_path), ["some words here"], n=2)
    assert info.value.argument == argument
    with pytest.raises(TrustlabError) as info:
        train_test_overlap([tmp_path / "ok.txt"], [tmp_path / "missing.jsonl"], n=2)
    assert info.value.argument == "test"
    with pytest.raises(TrustlabError) as info:
        train_test_overlap([tmp_path / "ok.txt"], ["x"], n=0)
    assert info.value.argument == "n"


def test_cli_reads_training_files_and_exits_2_with_one_line_on_bad_input(tmp_path) -> None:
    from trustlab.cli import app

    docs, test = _corpus()
    paths = _write(docs, tmp_path / "corpus")
    (tmp_path / "test.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in test))
    runner = CliRunner()
    args = ["overlap", *map(str, paths), "--test", str(tmp_path / "test.jsonl"), "--n", "3"]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "m.csv")])
    assert res.exit_code == 0, res.output
    expected = train_test_overlap(docs, test, n=3)
    assert json.loads(res.stdout) == json.loads(json.dumps(expected.summary()))
    rows = (tmp_path / "m.csv").read_text().splitlines()
    assert rows[0].startswith("instance,n_ngrams,n_overlapping,binary") and len(rows) == len(test) + 1
    (tmp_path / "binary.bin").write_bytes(b"\xff\xfe\x00\x00")
    (tmp_path / "empty.txt").write_text(" \n")
    good_test = ["--test", str(tmp_path / "test.jsonl")]
    for bad, flag in [
        ([str(tmp_path / "missing.txt"), *good_test], "TRAIN"),
        ([str(tmp_path / "binary.bin"), *good_test], "TRAIN"),
        ([*map(str, paths), "--n", "0", *good_test], "--n"),
        ([str(tmp_path / "empty.txt"), *good_test], "TRAIN"),  # an empty corpus
        ([*map(str, paths), "--test", str(tmp_path / "empty.txt")], "--test"),
    ]:
        res = runner.invoke(app, ["overlap", *bad])
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error ({flag})"), res.stderr


@settings(max_examples=25, deadline=None)
@given(
    docs=st.lists(st.text(alphabet="ab Σσ.\n\t'İ_9", max_size=60), min_size=1, max_size=4),
    block=st.integers(1, 12),
    n=st.integers(1, 4),
)
def test_cutting_documents_into_pieces_changes_nothing(docs: list[str], block: int, n: int) -> None:
    """Any text (final sigma, dotted I, white space runs) cut at any block size: the same n-gram counts."""
    test = [" ".join(tokenize(d)) for d in docs] + ["a b a b"]
    try:
        whole = train_test_overlap(docs, test, n=n)
    except TrustlabError:
        return  # all documents blank
    saved = overlap._CHUNK_CHARS
    overlap._CHUNK_CHARS = block
    try:
        _assert_same(train_test_overlap(docs, test, n=n), whole)
    finally:
        overlap._CHUNK_CHARS = saved
