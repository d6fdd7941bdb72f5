"""Train-test overlap (001-03): trustlab's streamed hashed n-grams beside a naive Python set of n-gram tuples.

Synthetic corpus: documents of random words (20,000-word vocabulary, about 7 bytes a word),
1 MB, 10 MB and 100 MB of text written as a JSON-lines file; 500 test instances of 60 words, 10%
planted verbatim in the training documents; n = 13. trustlab runs twice in a fresh process
each: on the documents read into a list ("in memory") and on the file's path ("streamed", the
corpus never held). Reported: seconds and seconds per MB, peak resident memory above the
process's state before the call (Linux VmHWM, reset through /proc/self/clear_refs; the
in-memory run also holds its list of documents, not counted), equality of the two reports,
agreement of the per-instance counts with the naive set (up to 10 MB; at 100 MB its tuples would
need several GB), and the detected contamination rate vs the planted 10%.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

_CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from trustlab.evaluation import train_test_overlap

def rss(key):
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) / 1024 for l in f if l.startswith(key + ":"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

mode, corpus, test_file, repeats = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
test = json.loads(Path(test_file).read_text())
train = [json.loads(line)["text"] for line in corpus.open()] if mode == "memory" else [corpus]
times, peaks = [], []
for _ in range(repeats):
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    base = rss("VmRSS")
    t = time.perf_counter()
    r = train_test_overlap(train, test, n=13)
    times.append(time.perf_counter() - t)
    peaks.append(rss("VmHWM") - base)
print(json.dumps({"s": sorted(times)[len(times) // 2], "peak_MiB": max(peaks),
                  "overlapping": r.n_overlapping.tolist(), "freq": r.ngram_frequency.tolist(),
                  "rate": r.contamination_rate, "train_ngrams": r.n_train_ngrams}))
"""


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
    from trustlab.evaluation.overlap import tokenize  # imported by run() before timing

    grams: set[tuple[str, ...]] = set()
    for doc in train:
        t = tokenize(doc)
        grams.update(tuple(t[i : i + n]) for i in range(len(t) - n + 1))
    out = []
    for doc in test:
        t = tokenize(doc)
        out.append(sum(tuple(t[i : i + n]) in grams for i in range(len(t) - n + 1)))
    return out


def _child(mode: str, corpus: Path, test: Path, repeats: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(corpus), str(test), str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict:
    import time

    import trustlab.evaluation.overlap  # noqa: F401  (not in the naive set's time)

    sizes = [1.0] if quick else [1.0, 10.0, 100.0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mb in sizes:
            train, test = _data(mb)
            actual_mb = sum(len(d) for d in train) / 1e6
            corpus, test_file = Path(tmp) / "train.jsonl", Path(tmp) / "test.json"
            with corpus.open("w") as f:
                f.writelines(json.dumps({"text": d}) + "\n" for d in train)
            test_file.write_text(json.dumps(test))
            tp, agree = float("nan"), "n/a"
            if mb <= 10:
                t = time.perf_counter()
                naive = _naive(train, test, 13)
                tp = time.perf_counter() - t
            del train
            repeats = 1 if quick or mb >= 100 else 3
            memory = _child("memory", corpus, test_file, repeats)
            stream = _child("stream", corpus, test_file, repeats)
            if mb <= 10:
                agree = str(naive == stream["overlapping"])
            rows.append(
                {
                    "corpus_MB": round(actual_mb, 1),
                    "in_memory_s_per_MB": memory["s"] / actual_mb,
                    "streamed_s": stream["s"],
                    "streamed_s_per_MB": stream["s"] / actual_mb,
                    "in_memory_peak_MiB": memory["peak_MiB"],
                    "streamed_peak_MiB": stream["peak_MiB"],
                    "same_report": all(
                        memory[k] == stream[k] for k in ("overlapping", "freq", "train_ngrams")
                    ),
                    "naive_set_s": tp,
                    "naive_over_streamed": tp / stream["s"],
                    "counts_agree_naive": agree,
                    "contamination_rate": stream["rate"],
                    "planted_rate": 0.1,
                }
            )
    return {
        "title": "Train-test 13-gram overlap: streamed hashed n-grams vs in-memory list vs naive tuple set",
        "rows": rows,
        "notes": [f"median of {1 if quick else 3} runs below 100 MB, one at 100 MB; fresh process per run"],
    }
