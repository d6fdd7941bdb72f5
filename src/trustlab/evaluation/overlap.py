"""Train-test overlap statistics: how much of a test set appears in a training corpus.

Each test instance is split into word n-grams (default 13, as GPT-3 and HELM); the share of
them that occur in the training corpus, and whether any does, are the per-instance statistics
that Zhang et al. (ICML 2025) ask language-model developers to publish. n-grams are hashed to
64 bits and matched with NumPy, in time linear in the corpus for a fixed ``n``. See
``docs/evaluation/overlap.md``.
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, DataTypeError, ParameterError
from trustlab.evaluation._corpus import pieces, read_documents

__all__ = ["OverlapReport", "ngram_hashes", "tokenize", "train_test_overlap"]

_TOKEN = re.compile(r"\w+")
# ASCII text tokenised without the regex engine: bytes of \w (letters lower-cased, digits, "_")
# kept, every other byte a space, then split (the same tokens as `tokenize`, 5x faster)
_ASCII_WORDS = bytes(b if chr(b).isalnum() or b == ord("_") else 32 for b in range(128)).lower() + bytes(
    [32] * 128
)
_BASE = np.uint64(0x100000001B3)  # odd multiplier of the polynomial hash (FNV prime)


def tokenize(text: str) -> list[str]:
    """Lower-cased runs of word characters: the tokens n-grams are built from.

    Parameters
    ----------
    text : str

    Returns
    -------
    list of str

    Examples
    --------
    >>> tokenize("The fox's den, 2 km away.")
    ['the', 'fox', 's', 'den', '2', 'km', 'away']
    """
    if not isinstance(text, str):
        raise DataTypeError(f"text must be a str, got {type(text).__name__}.", argument="text")
    return _TOKEN.findall(text.lower())


def _train_tokens(text: str) -> list[Any]:
    """Tokens of a training piece: ``bytes`` for ASCII text (fast path), else ``str`` as :func:`tokenize`."""
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_WORDS).split()
    return _TOKEN.findall(text.lower())


def _as_str(tokens: list[Any]) -> list[str]:
    return [t.decode("ascii") if isinstance(t, bytes) else t for t in tokens]


def _mix(ids: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: spreads token ids over 64 bits before the polynomial hash."""
    z = ids.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _within_documents(token_lists: list[list[str]], n: int) -> np.ndarray:
    """Mask of the n-gram start positions (in the concatenated tokens) inside one document."""
    lengths = np.fromiter((len(t) for t in token_lists), dtype=np.int64, count=len(token_lists))
    total = int(lengths.sum())
    if total < n:
        return np.zeros(0, dtype=bool)
    doc = np.repeat(np.arange(len(lengths)), lengths)
    return doc[: total - n + 1] == doc[n - 1 :]


def _ids(tokens: list[str], vocab: dict[str, int]) -> np.ndarray:
    setdefault = vocab.setdefault
    return np.fromiter((setdefault(t, len(vocab)) for t in tokens), dtype=np.int64, count=len(tokens))


def _hash_ngrams(ids: np.ndarray, n: int) -> np.ndarray:
    return _roll(_mix(ids), n) if len(ids) >= n else np.empty(0, dtype=np.uint64)


def _roll(mixed: np.ndarray, n: int) -> np.ndarray:
    """Polynomial hash of every window of ``n`` mixed ids (``len(mixed) >= n``)."""
    count = len(mixed) - n + 1
    with np.errstate(over="ignore"):
        h = mixed[:count].copy()
        for j in range(1, n):
            h = h * _BASE + mixed[j : j + count]
    return h


def ngram_hashes(text: str, n: int = 13, *, vocab: dict[str, int] | None = None) -> np.ndarray:
    """64-bit hashes of the word n-grams of ``text``, in order.

    Parameters
    ----------
    text : str
    n : int, default 13
    vocab : dict, optional
        Token-to-id map shared between calls (hashes are comparable only under the same
        vocabulary); a new one is used when omitted.

    Returns
    -------
    numpy.ndarray of uint64
        ``max(0, len(tokens) - n + 1)`` hashes.

    Examples
    --------
    >>> vocab = {}
    >>> a = ngram_hashes("a b c a b", 2, vocab=vocab)
    >>> len(a), bool(a[0] == a[3])
    (4, True)
    """
    size = _check_n(n)
    return _hash_ngrams(_ids(tokenize(text), {} if vocab is None else vocab), size)


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ParameterError(f"n must be an integer >= 1 (13 is the usual choice), got {n!r}.", argument="n")
    return int(n)


@dataclass(frozen=True)
class OverlapReport:
    """Per-instance and aggregate n-gram overlap between a test set and a training corpus.

    Attributes
    ----------
    n : int
        n-gram length in tokens.
    n_ngrams : numpy.ndarray
        Number of n-grams of each test instance (0 when it has fewer than ``n`` tokens).
    n_overlapping : numpy.ndarray
        How many of them occur in the training corpus.
    overlap_fraction : numpy.ndarray
        ``n_overlapping / n_ngrams`` (NaN for instances without n-grams).
    contaminated : numpy.ndarray
        True where at least one n-gram of the instance occurs in the training corpus.
    n_train_ngrams : int
        n-grams of the training corpus (inside one document; repeats counted).
    ngram_frequency : numpy.ndarray
        For every n-gram of every test instance, in order, how often it occurs in the training
        corpus (0: not at all); the input of the frequency-filtered and weighted statistics.
    ngram_instance : numpy.ndarray
        The test instance each entry of ``ngram_frequency`` belongs to.
    n_train_tokens : int
        Tokens of the training corpus.

    See Also
    --------
    train_test_overlap : builds it.
    """

    n: int
    n_ngrams: np.ndarray
    n_overlapping: np.ndarray
    overlap_fraction: np.ndarray
    contaminated: np.ndarray
    n_train_ngrams: int
    ngram_frequency: np.ndarray
    ngram_instance: np.ndarray
    n_train_tokens: int = 0

    @property
    def contamination_rate(self) -> float:
        """Share of checkable test instances (at least ``n`` tokens) with any overlapping n-gram."""
        checkable = self.n_ngrams > 0
        return float(self.contaminated[checkable].mean()) if checkable.any() else float("nan")

    def summary(self) -> dict[str, Any]:
        """The statistics to publish beside evaluation results on this test set.

        Returns
        -------
        dict
            ``n``, ``tokenizer``, ``n_instances``, ``n_too_short``, ``contamination_rate``,
            ``share_half_overlapping``, ``share_fully_overlapping``, ``mean_overlap_fraction``,
            ``n_train_tokens``, ``n_train_ngrams``.
        """
        checkable = self.n_ngrams > 0
        frac = self.overlap_fraction[checkable]
        has = bool(checkable.any())
        return {
            "n": self.n,
            "tokenizer": r"lower-cased \w+ runs",
            "n_instances": len(self.n_ngrams),
            "n_too_short": int((~checkable).sum()),
            "contamination_rate": round(self.contamination_rate, 6) if has else None,
            "share_half_overlapping": round(float((frac >= 0.5).mean()), 6) if has else None,
            "share_fully_overlapping": round(float((frac >= 1.0).mean()), 6) if has else None,
            "mean_overlap_fraction": round(float(frac.mean()), 6) if has else None,
            "n_train_tokens": self.n_train_tokens,
            "n_train_ngrams": self.n_train_ngrams,
        }

    def metrics(self, max_frequency: int = 0) -> pd.DataFrame:
        """HELM's per-instance overlap metrics, optionally frequency-filtered and weighted.

        An n-gram *counts* when it occurs in the training corpus and, if ``max_frequency`` is
        positive, at most ``max_frequency`` times there (frequent n-grams are boilerplate).

        Parameters
        ----------
        max_frequency : int, default 0
            HELM's ``filter_value`` (its scripts report 0, no filter, and 10).

        Returns
        -------
        pandas.DataFrame
            One row per test instance: ``binary`` (1 if any n-gram counts), ``jaccard`` (share
            of its n-grams that count), ``weighted_jaccard`` (each counting n-gram weighted by
            ``1 / training frequency``), ``token`` (share of its tokens inside a counting
            n-gram) and ``weighted_token`` (each covered token weighted by ``1 /`` the smallest
            training frequency of the run of counting n-grams covering it). NaN for instances
            shorter than ``n`` tokens.

        References
        ----------
        A. K. Zhang et al., ICML 2025 (Algorithm 1 and the published statistics), computed as
        in HELM's data-overlap scripts (binary, Jaccard and token overlap; frequency filter
        and inverse-frequency weighting).

        Examples
        --------
        >>> r = train_test_overlap(["a b c", "a b c"], ["a b c d"], n=2)
        >>> r.metrics().round(3).to_dict("records")
        [{'binary': 1.0, 'jaccard': 0.667, 'weighted_jaccard': 0.333, 'token': 0.75, 'weighted_token': 0.375}]
        """
        if (
            isinstance(max_frequency, bool)
            or not isinstance(max_frequency, numbers.Integral)
            or max_frequency < 0
        ):
            raise ParameterError(
                "max_frequency must be an integer >= 0 (0: no filter; HELM also uses 10), "
                f"got {max_frequency!r}.",
                argument="max_frequency",
            )
        rows = []
        starts = np.searchsorted(self.ngram_instance, np.arange(len(self.n_ngrams) + 1))
        for i, m in enumerate(self.n_ngrams):
            if m == 0:
                rows.append((np.nan,) * 5)
                continue
            rows.append(
                _helm_metrics(self.ngram_frequency[starts[i] : starts[i + 1]], self.n, int(max_frequency))
            )
        return pd.DataFrame(
            rows, columns=["binary", "jaccard", "weighted_jaccard", "token", "weighted_token"]
        )


def _helm_metrics(freq: np.ndarray, n: int, cap: int) -> tuple[float, float, float, float, float]:
    """Binary, Jaccard and token overlap of one instance from its n-grams' training frequencies."""
    counts = (freq > 0) & ((freq <= cap) if cap else True)
    m = len(freq)
    jaccard = counts.sum() / m
    weighted = float(np.sum(1.0 / freq[counts])) / m
    # token overlap: a counting n-gram covers its n tokens; the weight of a run of covering
    # n-grams is the running minimum of their frequencies (HELM's order of updates)
    covered, weighted_tokens, budget, weight = 0, 0.0, 0, 0
    for f in freq.tolist() + [0] * (n - 1):
        if f and (cap == 0 or f <= cap or (weight and weight <= cap)):
            budget = n
            weight = min(f, weight) if weight else f
        if budget > 0:
            budget -= 1
            covered += 1
            weighted_tokens += 1.0 / weight
        else:
            weight = 0
    tokens = m + n - 1
    return float(counts.any()), float(jaccard), weighted, covered / tokens, weighted_tokens / tokens


_CHUNK_CHARS = 2_000_000  # training text tokenised per pass: memory stays flat in the corpus size


def _documents(value: Any, name: str) -> list[str]:
    """A small corpus (the test set) read whole: documents, or the files named by paths."""
    return read_documents(value, name)


def _train_batches(train: Any, n: int) -> Iterator[tuple[list[list[Any]], int]]:
    """Token lists of about ``_CHUNK_CHARS`` characters of training text at a time, and their token count.

    The corpus is read a piece at a time (:func:`trustlab.evaluation._corpus.pieces`); a piece
    that continues a document starts with the previous piece's last ``n - 1`` tokens, so every
    n-gram of the document lies in exactly one piece (the carried tokens are counted once).
    """
    batch: list[list[Any]] = []
    chars = tokens = 0
    carry: list[Any] = []
    blank = True
    for text, first in pieces(train, "train", block=_CHUNK_CHARS):
        blank = blank and (not text or text.isspace())
        toks = _train_tokens(text)
        tokens += len(toks)
        if not first:
            if carry and toks and type(carry[0]) is not type(toks[0]):  # ASCII and not: all str
                carry, toks = _as_str(carry), _as_str(toks)
            toks = carry + toks
        carry = toks[max(0, len(toks) - n + 1) :] if n > 1 else []
        batch.append(toks)
        chars += len(text)
        if chars >= _CHUNK_CHARS:
            yield batch, tokens
            batch, chars, tokens = [], 0, 0
    if blank:
        raise DataError("train is empty; pass at least one non-blank document.", argument="train")
    yield batch, tokens


def _vocabulary(uniques: Any) -> tuple[dict[str, int], dict[bytes, int]]:
    """Id of each distinct test token, keyed by ``str`` and (ASCII ones) by ``bytes``, in two tables.

    Two tables, as an ASCII ``str`` and its ``bytes`` share a hash (one table would compare them).
    """
    return {u: i for i, u in enumerate(uniques)}, {
        u.encode("ascii"): i for i, u in enumerate(uniques) if u.isascii()
    }


def _batch_ids(
    token_lists: list[list[Any]], vocab: tuple[dict[str, int], dict[bytes, int]], total: int
) -> np.ndarray:
    """Test-vocabulary ids of a batch's tokens, concatenated (-1: not a test token)."""
    by_str, by_bytes = vocab
    return np.fromiter(
        chain.from_iterable(
            map((by_bytes if isinstance(t[0], bytes) else by_str).get, t, repeat(-1))
            for t in token_lists
            if t
        ),
        dtype=np.int64,
        count=total,
    )


def _count_batch(
    token_lists: list[list[Any]], n: int, vocab: tuple[dict[str, int], dict[bytes, int]], grams: np.ndarray
) -> tuple[np.ndarray, int]:
    """Training frequency of each test n-gram hash in ``grams`` (sorted) within one batch, and its n-grams.

    Tokens are mapped to the *test* vocabulary (``vocab``: the id of each test token, keyed by
    ``str`` and, for the ASCII ones, by ``bytes``); an n-gram with a token outside it cannot be a
    test n-gram and is skipped, so no table grows with the training corpus.
    """
    lengths = [len(t) for t in token_lists]
    total = sum(lengths)
    within = _within_documents(token_lists, n)
    positions = int(within.sum())
    if positions == 0 or len(grams) == 0:
        return np.zeros(len(grams), dtype=np.int64), positions
    ids = _batch_ids(token_lists, vocab, total)
    unknown = np.concatenate([[0], np.cumsum(ids < 0)])
    starts = np.flatnonzero(within & (unknown[n:] == unknown[: total - n + 1]))
    mixed = _mix(np.maximum(ids, 0))
    with np.errstate(over="ignore"):
        if 4 * len(starts) > total:  # dense: hash every position, then keep the candidates
            h = _roll(mixed, n)[starts]
        else:  # sparse: hash the candidates only
            h = mixed[starts]
            for j in range(1, n):
                h = h * _BASE + mixed[starts + j]
    at = np.minimum(np.searchsorted(grams, h), len(grams) - 1)
    found = grams[at] == h
    return np.bincount(at[found], minlength=len(grams)).astype(np.int64), positions


@validate_params({"n": [Interval(numbers.Integral, 1, None, closed="left")]})
def train_test_overlap(train: Any, test: Any, *, n: int = 13) -> OverlapReport:
    """n-gram overlap of each test instance with a training corpus, read as a stream.

    The test set is indexed first (its vocabulary and its n-grams' 64-bit hashes); the training
    corpus is then read a piece at a time and never held whole: memory is bounded by one batch
    of about 2 MB of training text with its tokens, plus the test index, whatever the corpus size.

    Parameters
    ----------
    train : str, path or iterable of str and paths
        Training documents (n-grams never span two documents), or files holding them: a UTF-8
        text file is one document, a JSON-lines file (``.jsonl``; ``.gz`` optional) one document
        per line (a JSON string or an object with a ``"text"`` entry), a folder all its files.
        Paths must be :class:`os.PathLike` (a ``str`` is a document). Read once, incrementally.
    test : str, path or iterable of str and paths
        Test instances (e.g. prompt and reference joined), read the same way and held in memory.
    n : int, default 13
        n-gram length in tokens.

    Returns
    -------
    OverlapReport

    References
    ----------
    A. K. Zhang et al., "Position: Language model developers should report train-test
    overlap", ICML 2025 (Algorithm 1, overlapping n-grams).

    Examples
    --------
    >>> r = train_test_overlap(["one two three four five"], ["two three four", "six seven eight"], n=3)
    >>> r.contaminated.tolist(), r.contamination_rate
    ([True, False], 0.5)
    """
    size = _check_n(n)
    test_docs = _documents([test] if isinstance(test, str | os.PathLike) else test, "test")
    if isinstance(train, bytes | bytearray | dict) or not isinstance(train, str | os.PathLike | Iterable):
        raise DataTypeError(
            f"train must be a str, a path or an iterable of str or paths, got {type(train).__name__}.",
            argument="train",
        )
    # index the test set: its vocabulary and the sorted distinct hashes of its n-grams
    test_tokens = [tokenize(doc) for doc in test_docs]
    flat = list(chain.from_iterable(test_tokens))
    codes, uniques = pd.factorize(pd.Index(flat, dtype=object)) if flat else (np.empty(0, np.int64), [])
    vocab = _vocabulary(uniques)
    hashes = _hash_ngrams(np.asarray(codes, dtype=np.int64), size)
    inside = _within_documents(test_tokens, size)
    grams, inverse = np.unique(hashes[inside], return_inverse=True)
    # stream the training corpus: count each test n-gram's occurrences, batch by batch
    counts = np.zeros(len(grams), dtype=np.int64)
    n_positions = n_tokens = 0
    for batch, batch_tokens in _train_batches(train, size):
        found, positions = _count_batch(batch, size, vocab, grams)
        counts += found
        n_positions += positions
        n_tokens += batch_tokens
    freq = counts[inverse.ravel()]
    owner = np.repeat(np.arange(len(test_docs)), [len(t) for t in test_tokens])[: len(hashes)][inside]
    n_ngrams = np.bincount(owner, minlength=len(test_docs)).astype(np.int64)
    n_hit = np.bincount(owner[freq > 0], minlength=len(test_docs)).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(n_ngrams > 0, n_hit / np.maximum(n_ngrams, 1), np.nan)
    return OverlapReport(
        n=size,
        n_ngrams=n_ngrams,
        n_overlapping=n_hit,
        overlap_fraction=fraction,
        contaminated=n_hit > 0,
        n_train_ngrams=n_positions,
        ngram_frequency=freq.astype(np.int64),
        ngram_instance=owner.astype(np.int64),
        n_train_tokens=n_tokens,
    )
