"""Concept bottleneck models (row 002-14): CPO vs BCE concept loss, beside a black-box MLP.

Same inputs for every model; concept annotations of the training rows flipped at random with
probability ``rate`` (0, 0.2, 0.4); test concepts and labels clean. Models: sequential CBMs
(``ConceptBottleneckModel``, MLP encoder (64, 64), linear head, the same seed and schedule) with
``concept_loss="bce"`` (the standard CBM) and ``"cpo"``; and scikit-learn's ``MLPClassifier``
(64, 64) on ``X -> y`` directly (a black box: no concepts, so concept noise cannot touch it).

Data:

- ``synthetic``: ``make_concept_data`` (16 Gaussian features, 8 threshold concepts, 4-class
  rule on the concepts), 1,000 training / 4,000 test rows (``--quick``: 600 / 2,000).
- ``breast-cancer``: scikit-learn's Wisconsin diagnostic table (569 rows). Concepts: the 10
  "mean" measurements (radius, texture, ..., fractal dimension) above their training median;
  inputs: the other 20 columns (standard errors and "worst" values), standardised; task: the
  diagnosis. 70/30 split.

Figures per dataset and rate (median over seeds 0-2; ``--quick``: seed 0): test task accuracy
and concept accuracy, fit seconds, and each model's fit time over the BCE CBM's and the black box's.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np


def _breast_cancer(seed: int) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    X_all, y = data.data, data.target
    tr, te = train_test_split(np.arange(len(y)), test_size=0.3, random_state=seed, stratify=y)
    means, rest = X_all[:, :10], X_all[:, 10:]
    C = (means > np.median(means[tr], axis=0)).astype(np.float32)
    mu, sd = rest[tr].mean(0), rest[tr].std(0)
    X = ((rest - mu) / sd).astype(np.float32)
    return X[tr], C[tr], y[tr], X[te], C[te], y[te]


def _synthetic(seed: int, quick: bool) -> tuple[np.ndarray, ...]:
    from trustlab.explain.cbm import make_concept_data

    n_tr, n_te = (600, 2000) if quick else (1000, 4000)
    X, C, y = make_concept_data(n_tr + n_te, random_state=seed)
    return X[:n_tr], C[:n_tr], y[:n_tr], X[n_tr:], C[n_tr:], y[n_tr:]


def _timed_fit(est: Any, *args: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = est.fit(*args)
    return out, time.perf_counter() - t


def run(quick: bool = False) -> dict:
    import torch
    from sklearn.neural_network import MLPClassifier
    from threadpoolctl import threadpool_limits

    from trustlab.explain.cbm import ConceptBottleneckModel, flip_concepts

    torch.set_num_threads(1)
    with threadpool_limits(1):  # one BLAS thread for scikit-learn's MLP too: same footing as torch
        return _run(quick, ConceptBottleneckModel, flip_concepts, MLPClassifier)


def _run(quick: bool, ConceptBottleneckModel: Any, flip_concepts: Any, MLPClassifier: Any) -> dict:
    seeds = (0,) if quick else (0, 1, 2)
    rates = (0.0, 0.2, 0.4)
    rows = []
    for name in ("synthetic", "breast-cancer"):
        for rate in rates:
            rec: dict[str, list[tuple[float, float, float]]] = {"bce": [], "cpo": [], "black box": []}
            for seed in seeds:
                X_tr, C_tr, y_tr, X_te, C_te, y_te = (
                    _synthetic(seed, quick) if name == "synthetic" else _breast_cancer(seed)
                )
                C_noisy = flip_concepts(C_tr, rate, random_state=seed + 100)
                for loss in ("bce", "cpo"):
                    est = ConceptBottleneckModel(concept_loss=loss, random_state=seed)
                    m, secs = _timed_fit(est, X_tr, C_noisy, y_tr)
                    rec[loss].append((m.score(X_te, y_te), m.concept_accuracy(X_te, C_te), secs))
                bb = MLPClassifier((64, 64), max_iter=300, random_state=seed)
                m, secs = _timed_fit(bb, X_tr, y_tr)
                rec["black box"].append((m.score(X_te, y_te), float("nan"), secs))
            med = {k: [statistics.median(v[i] for v in vals) for i in range(3)] for k, vals in rec.items()}
            for model, (task, concept, secs) in med.items():
                rows.append(
                    {
                        "data": name,
                        "noise": rate,
                        "model": model if model == "black box" else f"CBM {model.upper()}",
                        "task_acc": round(task, 3),
                        "concept_acc": round(concept, 3) if model != "black box" else None,
                        "fit_s": round(secs, 3),
                        "time / CBM BCE": round(secs / med["bce"][2], 2),
                        "time / black box": round(secs / med["black box"][2], 2),
                    }
                )

    def drop(data: str, model: str, key: str) -> float:
        vals = {r["noise"]: r[key] for r in rows if r["data"] == data and r["model"] == model}
        return round(vals[0.0] - vals[0.4], 3)

    notes = [
        f"{d}: drop from noise 0 to 0.4, task accuracy BCE {drop(d, 'CBM BCE', 'task_acc')}, "
        f"CPO {drop(d, 'CBM CPO', 'task_acc')}; concept accuracy BCE {drop(d, 'CBM BCE', 'concept_acc')}, "
        f"CPO {drop(d, 'CBM CPO', 'concept_acc')}"
        for d in ("synthetic", "breast-cancer")
    ]
    return {
        "title": "Concept bottleneck models: CPO vs BCE under concept-label noise, beside a black-box MLP",
        "rows": rows,
        "seeds": list(seeds),
        "notes": notes,
    }
