"""The E-LDA objective and its two maximisers (greedy with a lazy heap, descending thresholds).

Documents are CSR rows of word counts; ``logphi`` is the (n_topics x n_words) matrix of log
topic-word probabilities. ``f(S) = sum_d sum_w c_dw max(L0, max_{t in S_d} logphi[t, w])`` is
a sum of per-document facility-location functions (monotone submodular), so a document's
gains depend on its own topics only. See docs/explain/topics.md.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from scipy import sparse

L0 = float(np.log(1e-100))  # value of a word no selected topic covers (the author's code)
_CHUNK_CELLS = 4_000_000  # n_topics x nonzeros per vectorised gain evaluation


@dataclass
class Solution:
    """Edges chosen, per-word best values, objective and adaptive rounds."""

    edges: np.ndarray  # (n_edges, 2): document, topic (in order of addition)
    best: np.ndarray  # (nnz,): value of each (document, word) cell under the chosen topics
    best_topic: np.ndarray  # (nnz,): topic giving that value
    objective: float
    rounds: int


def _doc_gains(x: sparse.csr_matrix, logphi: np.ndarray, best: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Gains ``sum_w c_dw max(0, logphi[t, w] - best_dw)`` for the given documents, all topics."""
    out = np.empty((docs.size, logphi.shape[0]))
    per_doc = np.diff(x.indptr)[docs]
    start = 0
    while start < docs.size:
        stop = start + 1
        cells = per_doc[start] * logphi.shape[0]
        while stop < docs.size and cells + per_doc[stop] * logphi.shape[0] <= _CHUNK_CELLS:
            cells += per_doc[stop] * logphi.shape[0]
            stop += 1
        chunk = docs[start:stop]
        idx = np.concatenate([np.arange(x.indptr[d], x.indptr[d + 1]) for d in chunk])
        words, counts = x.indices[idx], x.data[idx]
        delta = np.maximum(logphi[:, words] - best[idx][None, :], 0.0) * counts[None, :]
        offsets = np.concatenate([[0], np.cumsum(per_doc[start:stop])[:-1]])
        out[start:stop] = np.add.reduceat(delta, offsets, axis=1).T
        start = stop
    return out


def _initialise(x: sparse.csr_matrix, logphi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FastInitialize: every document takes its best single topic (one adaptive round)."""
    scores = np.asarray(x @ logphi.T)  # (n_docs, n_topics): sum_w c_dw logphi[t, w]
    first = np.argmax(scores, axis=1)
    rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
    best = logphi[first[rows], x.indices]
    return first, best, first[rows].copy()


def _add(
    x: sparse.csr_matrix, logphi: np.ndarray, best: np.ndarray, best_topic: np.ndarray, d: int, t: int
) -> None:
    lo, hi = x.indptr[d], x.indptr[d + 1]
    values = logphi[t, x.indices[lo:hi]]
    better = values > best[lo:hi]
    best[lo:hi] = np.where(better, values, best[lo:hi])
    best_topic[lo:hi] = np.where(better, t, best_topic[lo:hi])


def _objective(x: sparse.csr_matrix, best: np.ndarray) -> float:
    return float(np.sum(x.data * best))


def greedy(x: sparse.csr_matrix, logphi: np.ndarray, budget: int) -> Solution:
    """FastInitialize then FastGreedy: a max-heap of each document's best marginal gain."""
    n_docs = x.shape[0]
    first, best, best_topic = _initialise(x, logphi)
    chosen = np.zeros((n_docs, logphi.shape[0]), dtype=bool)
    chosen[np.arange(n_docs), first] = True
    edges = [(d, int(first[d])) for d in range(n_docs)]
    gains = _doc_gains(x, logphi, best, np.arange(n_docs))
    gains[chosen] = -np.inf
    top = np.argmax(gains, axis=1)
    heap = [(-gains[d, top[d]], d, int(top[d])) for d in range(n_docs)]
    heapq.heapify(heap)
    rounds = 1
    while len(edges) < budget and heap:
        neg, d, t = heapq.heappop(heap)
        if -neg <= 0:
            break  # no edge improves the objective: stop early (monotone, gains only shrink)
        edges.append((d, t))
        chosen[d, t] = True
        _add(x, logphi, best, best_topic, d, t)
        rounds += 1
        g = _doc_gains(x, logphi, best, np.array([d]))[0]
        g[chosen[d]] = -np.inf
        nt = int(np.argmax(g))
        if np.isfinite(g[nt]):
            heapq.heappush(heap, (-g[nt], d, nt))
    return Solution(np.array(edges, dtype=np.int64), best, best_topic, _objective(x, best), rounds)


def threshold(x: sparse.csr_matrix, logphi: np.ndarray, budget: int, eps: float) -> Solution:
    """Descending thresholds, in parallel adaptive rounds.

    Each round adds, at once, every document's best edge whose gain is at least ``tau``; when
    none is left, ``tau`` becomes the best remaining gain divided by ``1 + eps``.
    """
    n_docs = x.shape[0]
    first, best, best_topic = _initialise(x, logphi)
    chosen = np.zeros((n_docs, logphi.shape[0]), dtype=bool)
    chosen[np.arange(n_docs), first] = True
    edges = [np.column_stack([np.arange(n_docs), first])]
    n_edges = n_docs
    gains = _doc_gains(x, logphi, best, np.arange(n_docs))
    gains[chosen] = -np.inf
    top = np.argmax(gains, axis=1)
    value = gains[np.arange(n_docs), top]
    value[~np.isfinite(value)] = 0.0
    rounds = 1
    tau = np.inf
    while n_edges < budget and np.max(value) > 0:
        ready = np.flatnonzero(value >= tau)
        if ready.size == 0:
            # nothing left above tau: the next threshold is (best gain) / (1 + eps), so every edge
            # added at it has gain >= tau >= (best gain now) / (1 + eps)
            tau = float(np.max(value)) / (1.0 + eps)
            continue
        if ready.size > budget - n_edges:
            ready = ready[np.argsort(-value[ready], kind="stable")[: budget - n_edges]]
        for d in ready:
            _add(x, logphi, best, best_topic, int(d), int(top[d]))
            chosen[d, top[d]] = True
        edges.append(np.column_stack([ready, top[ready]]))
        n_edges += ready.size
        rounds += 1
        g = _doc_gains(x, logphi, best, ready)
        g[chosen[ready]] = -np.inf
        top[ready] = np.argmax(g, axis=1)
        value[ready] = g[np.arange(ready.size), top[ready]]
        value[~np.isfinite(value)] = 0.0
    return Solution(np.vstack(edges).astype(np.int64), best, best_topic, _objective(x, best), rounds)


def per_document(x: sparse.csr_matrix, logphi: np.ndarray, n_topics_each: int) -> Solution:
    """Each document independently takes its greedy best ``n_topics_each`` topics (no shared budget).

    A document's result does not depend on the other documents of the batch: the out-of-sample
    inference that downstream causal analyses need.
    """
    n_docs = x.shape[0]
    first, best, best_topic = _initialise(x, logphi)
    chosen = np.zeros((n_docs, logphi.shape[0]), dtype=bool)
    chosen[np.arange(n_docs), first] = True
    edges = [np.column_stack([np.arange(n_docs), first])]
    rounds = 1
    docs = np.arange(n_docs)
    for _ in range(min(n_topics_each, logphi.shape[0]) - 1):
        g = _doc_gains(x, logphi, best, docs)
        g[chosen] = -np.inf
        top = np.argmax(g, axis=1)
        useful = np.flatnonzero(g[docs, top] > 0)
        for d in useful:
            _add(x, logphi, best, best_topic, int(d), int(top[d]))
        chosen[useful, top[useful]] = True
        edges.append(np.column_stack([useful, top[useful]]))
        rounds += 1
    return Solution(np.vstack(edges).astype(np.int64), best, best_topic, _objective(x, best), rounds)


def doc_topic_fractions(x: sparse.csr_matrix, best_topic: np.ndarray, n_topics: int) -> np.ndarray:
    """The fraction of each document's words assigned to each topic."""
    rows = np.repeat(np.arange(x.shape[0]), np.diff(x.indptr))
    out = np.zeros((x.shape[0], n_topics))
    np.add.at(out, (rows, best_topic), x.data)
    return out / out.sum(axis=1, keepdims=True)
