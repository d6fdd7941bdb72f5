"""Train-test overlap (001-03): trustlab's hashed n-grams beside a naive Python set of n-gram tuples.

Synthetic corpus: documents of random words (20,000-word vocabulary, about 6 bytes a word),
1 MB and 10 MB of text (and 100 MB without the naive peer, whose tuples would need several GB);
500 test instances of 60 words, 10% planted verbatim in the training documents; n = 13.
Agreement: per-instance overlap counts equal to the naive set's; accuracy: detected
contamination rate vs the planted 10%. Time per MB shows the scaling (linear in the corpus).
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def _data(megabytes: float, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(20_000)])
    n_words = int(megabytes * 1e6 / 6.9)
    docs = [" ".join(words[rng.integers(0, 20_000, 2_000)]) for _ in range(max(1, n_words // 2_000))]
    test = [" ".join(words[rng.integers(0, 20_000, 60)]) for _ in range(500)]
    for i in range(50):
        docs[i % len(docs)] += " " + test[i]
    return docs, test


def _naive(train: list[str], test: list[str], n: int) -> list[int]:
    from trustlab.evaluation.overlap import tokenize

    grams = set()
    for doc in train:
        t = tokenize(doc)
        grams.update(tuple(t[i : i + n]) for i in range(len(t) - n + 1))
    out = []
    for doc in test:
        t = tokenize(doc)
        out.append(sum(tuple(t[i : i + n]) in grams for i in range(len(t) - n + 1)))
    return out


def run(quick: bool = False) -> dict:
    from trustlab.evaluation import train_test_overlap

    sizes = [1.0] if quick else [1.0, 10.0, 100.0]
    repeats = 1 if quick else 3
    rows = []
    for mb in sizes:
        train, test = _data(mb)
        actual_mb = sum(len(d) for d in train) / 1e6
        t_ours = []
        for _ in range(repeats if mb < 100 else 1):
            t = time.perf_counter()
            report = train_test_overlap(train, test, n=13)
            t_ours.append(time.perf_counter() - t)
        to = statistics.median(t_ours)
        tp, agree = float("nan"), "n/a"
        if mb <= 10:
            t = time.perf_counter()
            naive = _naive(train, test, 13)
            tp = time.perf_counter() - t
            agree = str(naive == report.n_overlapping.tolist())
        rows.append(
            {
                "corpus_MB": round(actual_mb, 1),
                "trustlab_s": to,
                "trustlab_s_per_MB": to / actual_mb,
                "naive_set_s": tp,
                "naive_over_trustlab": tp / to,
                "counts_agree": agree,
                "contamination_rate": report.contamination_rate,
                "planted_rate": 0.1,
            }
        )
    return {"title": "Train-test 13-gram overlap: hashed NumPy vs naive tuple set", "rows": rows}
