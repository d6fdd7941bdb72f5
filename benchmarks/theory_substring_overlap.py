"""Exact-substring train-test overlap (001-03): token suffix array beside the hashed 13-gram method.

Same synthetic data as ``theory_overlap`` (random-word documents, 20,000-word vocabulary; 500
test instances of 60 words, 10% planted verbatim), written as a JSON-lines file that both methods
read as a stream (1, 10 and 100 MB). Agreement: an instance is contaminated at
``min_length = 13`` exactly when it holds a training 13-gram, so the two methods must flag the
same instances; accuracy: every planted instance has a 60-token match. No suffix-array peer is
installed (pydivsufsort is not a dependency): the n-gram method is the baseline.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchmarks.theory_overlap import _data


def run(quick: bool = False) -> dict:
    from trustlab.evaluation import exact_substring_overlap, train_test_overlap

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "train.jsonl"
        for mb in [1.0] if quick else [1.0, 10.0, 100.0]:
            train, test = _data(mb)
            actual_mb = sum(len(d) for d in train) / 1e6
            with corpus.open("w") as f:
                f.writelines(json.dumps({"text": d}) + "\n" for d in train)
            del train
            t = time.perf_counter()
            exact = exact_substring_overlap([corpus], test, min_length=13)
            t_exact = time.perf_counter() - t
            t = time.perf_counter()
            grams = train_test_overlap([corpus], test, n=13)
            t_grams = time.perf_counter() - t
            rows.append(
                {
                    "corpus_MB": round(actual_mb, 1),
                    "suffix_array_s": t_exact,
                    "suffix_array_s_per_MB": t_exact / actual_mb,
                    "ngram_s": t_grams,
                    "suffix_over_ngram": t_exact / t_grams,
                    "same_flags": bool((exact.contaminated == grams.contaminated).all()),
                    "planted_longest_min": int(exact.longest_match[:50].min()),
                    "contamination_rate": float(exact.contaminated.mean()),
                }
            )
    return {"title": "Exact-substring overlap: suffix array vs hashed 13-grams, both streamed", "rows": rows}
