"""Exact-substring train-test overlap: longest verbatim matches through a token suffix array.

For every position of every test instance, the length of the longest run of tokens starting
there that occurs verbatim in the training corpus (the *matching statistics*), from a suffix
array of the training tokens built by prefix doubling with NumPy and a binary search run for
all test positions at once. Per instance: the longest match, and the share of its tokens inside
a match of at least ``min_length`` tokens (the ExactSubstr criterion of Lee et al., 2022, with
50 tokens). An instance has a training n-gram iff its longest match is at least ``n`` tokens,
so these statistics refine :func:`trustlab.evaluation.train_test_overlap`. See
``docs/evaluation/overlap.md``.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataTypeError
from trustlab.evaluation.overlap import _batch_ids, _documents, _train_batches, _vocabulary, tokenize

__all__ = ["SubstringOverlapReport", "exact_substring_overlap", "suffix_array"]

_END_TRAIN = -3  # past the end of the training corpus: smaller than every token
_END_TEST = -2  # past the end of a test instance: never equal to a training token


def suffix_array(ids: Any) -> np.ndarray:
    """Suffix array of a sequence of non-negative integer ids (prefix doubling, ``O(n log^2 n)``).

    Suffixes are ordered lexicographically, a suffix before every longer suffix it begins.

    Parameters
    ----------
    ids : array-like of int
        The sequence (e.g. token ids), non-negative.

    Returns
    -------
    numpy.ndarray of int64
        Start positions of the suffixes in sorted order.

    References
    ----------
    U. Manber and G. Myers, "Suffix Arrays: A New Method for On-Line String Searches",
    SIAM J. Computing 22(5), 1993 (prefix doubling).

    Examples
    --------
    >>> suffix_array([1, 0, 1, 0]).tolist()  # suffixes 0, 0 1 0 ... in order
    [3, 1, 2, 0]
    """
    x = np.asarray(ids, dtype=np.int64).ravel()
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, rank = np.unique(x, return_inverse=True)
    rank = rank.astype(np.int64).ravel()
    k = 1
    while True:
        second = np.full(n, -1, dtype=np.int64)
        if k < n:
            second[: n - k] = rank[k:]
        order = np.lexsort((second, rank))
        r, s = rank[order], second[order]
        new = np.empty(n, dtype=np.int64)
        new[order] = np.concatenate([[0], np.cumsum((r[1:] != r[:-1]) | (s[1:] != s[:-1]))])
        rank = new
        if rank.max() == n - 1 or k >= n:
            return order.astype(np.int64)
        k *= 2


def _compare(
    query: np.ndarray, which: np.ndarray, text: np.ndarray, starts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Common prefix of query rows ``which`` with ``text[starts:]``, and the sign of the first difference.

    ``text`` is padded with at least ``query.shape[1]`` end markers. Rows are compared on a short
    prefix first and on the full width only where that prefix ties (most comparisons end early).
    """
    width = query.shape[1]
    common = np.zeros(len(which), dtype=np.int64)
    sign = np.zeros(len(which), dtype=np.int64)
    rows = np.arange(len(which))
    for w in (min(8, width), width):
        q = query[which[rows], :w]
        t = text[starts[rows, None] + np.arange(w)[None, :]]
        differ = q != t
        found = differ.any(axis=1)
        first = np.where(found, differ.argmax(axis=1), w)
        col = np.minimum(first, w - 1)
        local = np.arange(len(rows))
        common[rows] = first
        sign[rows] = np.where(found, np.sign(q[local, col] - t[local, col]), 0)
        rows = rows[~found]
        if len(rows) == 0 or w == width:
            break
    return common, sign


def _matching_statistics(text: np.ndarray, sa: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Longest prefix of each query row (padded with ``_END_TEST``) occurring in ``text`` (padded)."""
    lo = np.zeros(len(queries), dtype=np.int64)
    hi = np.full(len(queries), len(sa), dtype=np.int64)
    while True:
        active = np.flatnonzero(lo < hi)
        if len(active) == 0:
            break
        mid = (lo[active] + hi[active]) // 2
        _, sign = _compare(queries, active, text, sa[mid])
        go_right = sign > 0
        lo[active] = np.where(go_right, mid + 1, lo[active])
        hi[active] = np.where(go_right, hi[active], mid)
    best = np.zeros(len(queries), dtype=np.int64)
    for pos in (lo - 1, lo):
        ok = np.flatnonzero((pos >= 0) & (pos < len(sa)))
        if len(ok):
            common, _ = _compare(queries, ok, text, sa[pos[ok]])
            best[ok] = np.maximum(best[ok], common)
    return best


@dataclass(frozen=True)
class SubstringOverlapReport:
    """Per-instance exact-substring overlap with a training corpus.

    Attributes
    ----------
    min_length : int
        Matches of at least this many tokens count as contamination.
    n_tokens : numpy.ndarray
        Tokens of each test instance.
    longest_match : numpy.ndarray
        Longest run of consecutive tokens of the instance found verbatim in one training document.
    covered_fraction : numpy.ndarray
        Share of the instance's tokens inside a match of at least ``min_length`` tokens (NaN for
        empty instances).
    contaminated : numpy.ndarray
        ``longest_match >= min_length``.

    See Also
    --------
    exact_substring_overlap : builds it.
    """

    min_length: int
    n_tokens: np.ndarray
    longest_match: np.ndarray
    covered_fraction: np.ndarray
    contaminated: np.ndarray

    def summary(self) -> dict[str, Any]:
        """Statistics to publish: contamination rate, mean covered share, longest-match quantiles.

        Returns
        -------
        dict
        """
        has = self.n_tokens > 0
        longest = self.longest_match[has]
        return {
            "min_length": self.min_length,
            "tokenizer": r"lower-cased \w+ runs",
            "n_instances": len(self.n_tokens),
            "contamination_rate": round(float(self.contaminated[has].mean()), 6) if has.any() else None,
            "mean_covered_fraction": round(float(self.covered_fraction[has].mean()), 6)
            if has.any()
            else None,
            "median_longest_match": float(np.median(longest)) if has.any() else None,
            "max_longest_match": int(longest.max()) if has.any() else None,
        }


@validate_params({"min_length": [Interval(numbers.Integral, 1, None, closed="left")]})
def exact_substring_overlap(train: Any, test: Any, *, min_length: int = 50) -> SubstringOverlapReport:
    """Longest verbatim match of each test instance in a training corpus, through a suffix array.

    Parameters
    ----------
    train : str, path or iterable of str and paths
        Training documents, or files holding them, as for
        :func:`~trustlab.evaluation.train_test_overlap`: read incrementally, a suffix array per
        batch of about 2 MB of text; a match never spans two documents.
    test : str, path or iterable of str and paths
        Test instances (held in memory).
    min_length : int, default 50
        Tokens a match needs to count (Lee et al.'s ExactSubstr threshold).

    Returns
    -------
    SubstringOverlapReport

    References
    ----------
    A. K. Zhang et al., "Position: Language model developers should report train-test
    overlap", ICML 2025; K. Lee et al., "Deduplicating Training Data Makes Language Models
    Better", ACL 2022 (ExactSubstr through suffix arrays).

    Examples
    --------
    >>> r = exact_substring_overlap(["a b c d e", "x y"], ["b c d y", "q"], min_length=3)
    >>> r.longest_match.tolist(), r.contaminated.tolist(), r.covered_fraction.tolist()
    ([3, 0], [True, False], [0.75, 0.0])
    """
    test_docs = _documents([test] if isinstance(test, str | os.PathLike) else test, "test")
    if isinstance(train, bytes | bytearray | dict) or not isinstance(train, str | os.PathLike | Iterable):
        raise DataTypeError(
            f"train must be a str, a path or an iterable of str or paths, got {type(train).__name__}.",
            argument="train",
        )
    test_tokens = [tokenize(d) for d in test_docs]
    n_tokens = np.array([len(t) for t in test_tokens], dtype=np.int64)
    flat = list(chain.from_iterable(test_tokens))
    codes, uniques = pd.factorize(pd.Index(flat, dtype=object)) if flat else (np.empty(0, np.int64), [])
    ids = np.asarray(codes, dtype=np.int64)
    vocab = _vocabulary(uniques)
    owner = np.repeat(np.arange(len(test_docs)), n_tokens)
    doc_end = np.cumsum(n_tokens)[owner] if len(flat) else np.zeros(0, np.int64)
    width = int(n_tokens.max()) if len(flat) else 1
    starts = np.arange(len(flat))
    chunk = max(1, 2**20 // width)  # query rows per pass: bounded memory
    match = np.zeros(len(flat), dtype=np.int64)
    # the training corpus a batch at a time; a piece continuing a document repeats the previous
    # piece's last `width - 1` tokens, so a match (never longer than a test instance) that
    # crosses a cut lies whole in the next piece: the maximum over batches is exact
    for batch, _ in _train_batches(train, width):
        lengths = np.array([len(t) for t in batch], dtype=np.int64)
        if not len(flat) or lengths.sum() == 0:
            continue
        known = _batch_ids(batch, vocab, int(lengths.sum()))
        # a token outside the test vocabulary, and each document's end, gets an id of its own:
        # no test token equals it, so no match runs through it (nor through two documents)
        text = np.insert(known, np.cumsum(lengths), -1)
        text = np.where(text >= 0, text, len(vocab[0]) + np.arange(len(text)))
        sa = suffix_array(text)
        padded = np.concatenate([text, np.full(width, _END_TRAIN, dtype=np.int64)])
        for lo in range(0, len(flat), chunk):
            grid = starts[lo : lo + chunk, None] + np.arange(width)[None, :]
            inside = grid < doc_end[lo : lo + chunk, None]
            queries = np.where(inside, ids[np.minimum(grid, len(flat) - 1)], _END_TEST)
            np.maximum(
                match[lo : lo + chunk], _matching_statistics(padded, sa, queries), out=match[lo : lo + chunk]
            )
    longest = np.zeros(len(test_docs), dtype=np.int64)
    np.maximum.at(longest, owner, match)
    # a token is covered when a match of >= min_length starting at or before it reaches it
    cover = np.zeros(len(flat) + 1, dtype=np.int64)
    good = match >= min_length
    np.add.at(cover, starts[good], 1)
    np.add.at(cover, starts[good] + match[good], -1)
    covered = np.cumsum(cover)[: len(flat)] > 0
    n_covered = np.bincount(owner[covered], minlength=len(test_docs))
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(n_tokens > 0, n_covered / np.maximum(n_tokens, 1), np.nan)
    return SubstringOverlapReport(
        min_length=int(min_length),
        n_tokens=n_tokens,
        longest_match=longest,
        covered_fraction=fraction,
        contaminated=longest >= min_length,
    )
