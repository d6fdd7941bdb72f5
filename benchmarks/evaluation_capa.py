"""CAPA similarity of scikit-learn models on a shipped dataset, and time for 20 models x 10,000 items.

1. Similarity: six scikit-learn classifiers trained on half of the digits data
   (``sklearn.datasets.load_digits``, 10 options per item), probabilities on the other
   half. For every pair: CAPA (probabilistic and discrete), error consistency
   (Geirhos et al.) and Cohen's kappa on the argmax labels (scikit-learn), with the
   reference implementation ``lm-sim`` (``lmsim.metrics.CAPA``) when installed as a check
   (largest absolute difference).
2. Time: 20 models x 10,000 items x 4 options (Dirichlet probabilities), the full 20 x 20
   CAPA matrix: trustlab ``capa_matrix`` (one matrix product) vs the 190 pairwise calls of
   ``lm-sim`` (a Python loop per item) and vs 190 calls of trustlab ``capa``; median of
   repeats and ratios.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Any

import numpy as np


def _models() -> dict[str, Any]:
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC

    return {
        "logreg": LogisticRegression(max_iter=3000),
        "svc": SVC(probability=True, random_state=0),
        "knn": KNeighborsClassifier(n_neighbors=7),
        "forest": RandomForestClassifier(n_estimators=200, random_state=0),
        "hgb": HistGradientBoostingClassifier(random_state=0),
        "naive_bayes": GaussianNB(),
    }


def _similarity_part(notes: list[str]) -> list[dict[str, Any]]:
    from sklearn.datasets import load_digits
    from sklearn.metrics import cohen_kappa_score

    from trustlab.evaluation import capa, capa_matrix, error_consistency

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    tr, te = perm[: len(y) // 2], perm[len(y) // 2 :]
    probs: dict[str, np.ndarray] = {}
    for name, model in _models().items():
        p = model.fit(X[tr], y[tr]).predict_proba(X[te])
        probs[name] = p / p.sum(axis=1, keepdims=True)
    names = list(probs)
    mat = capa_matrix([probs[n] for n in names], y[te])
    try:
        from lmsim.metrics import CAPA

        ref_diff = max(
            abs(capa(probs[a], probs[b], y[te]) - CAPA().compute_k(list(probs[a]), list(probs[b]), y[te]))
            for a, b in itertools.combinations(names, 2)
        )
        notes.append(f"largest |trustlab capa - lm-sim CAPA| over the pairs: {ref_diff:.2e}")
    except ImportError:
        notes.append("lm-sim not installed: no reference check")
    rows = []
    for (i, a), (j, b) in itertools.combinations(enumerate(names), 2):
        pa, pb = probs[a].argmax(axis=1), probs[b].argmax(axis=1)
        rows.append(
            {
                "pair": f"{a} / {b}",
                "acc_a": round(float(np.mean(pa == y[te])), 3),
                "acc_b": round(float(np.mean(pb == y[te])), 3),
                "CAPA": round(float(mat[i, j]), 3),
                "CAPA discrete": round(capa(probs[a], probs[b], y[te], discrete=True), 3),
                "error consistency": round(error_consistency(probs[a], probs[b], y[te]), 3),
                "Cohen kappa (labels)": round(float(cohen_kappa_score(pa, pb)), 3),
            }
        )
    return rows


def _timing_part(repeats: int, n_models: int, n_items: int, notes: list[str]) -> dict[str, Any]:
    from trustlab.evaluation import capa, capa_matrix

    rng = np.random.default_rng(1)
    probs = [rng.dirichlet(np.ones(4) * 0.5, n_items) for _ in range(n_models)]
    y = rng.integers(0, 4, n_items)

    def timed(fn: Any, reps: int) -> float:
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return statistics.median(out)

    pairs = list(itertools.combinations(range(n_models), 2))
    t_matrix = timed(lambda: capa_matrix(probs, y), repeats)
    t_pairs = timed(lambda: [capa(probs[i], probs[j], y) for i, j in pairs], repeats)
    result = {
        "models": n_models,
        "items": n_items,
        "capa_matrix_s": round(t_matrix, 4),
        "pairwise_capa_s": round(t_pairs, 4),
    }
    try:
        from lmsim.metrics import CAPA

        lists = [list(p) for p in probs]
        t_ref = timed(lambda: [CAPA().compute_k(lists[i], lists[j], y) for i, j in pairs], 1)
        result["lm_sim_s"] = round(t_ref, 3)
        result["ratio capa_matrix / lm-sim"] = round(t_matrix / t_ref, 5)
        mat = capa_matrix(probs, y)
        i, j = pairs[0]
        notes.append(
            f"check: matrix[0,1] - lm-sim = {mat[i, j] - CAPA().compute_k(lists[i], lists[j], y):.2e}"
        )
    except ImportError:
        notes.append("lm-sim not installed: timing against trustlab's pairwise calls only")
    result["ratio capa_matrix / pairwise capa"] = round(t_matrix / t_pairs, 4)
    return result


def run(quick: bool = False) -> dict[str, Any]:
    """Similarity table on digits and the 20 x 10,000 timing; ``quick`` uses 2,000 items."""
    notes: list[str] = []
    rows = _similarity_part(notes)
    timing = _timing_part(3, 20, 2_000 if quick else 10_000, notes)
    notes.append(
        "time for the full CAPA matrix of {models} models x {items} items: capa_matrix {capa_matrix_s} s, "
        "190 pairwise capa calls {pairwise_capa_s} s".format(**timing)
        + (
            f", lm-sim {timing['lm_sim_s']} s (ratio {timing['ratio capa_matrix / lm-sim']})"
            if "lm_sim_s" in timing
            else ""
        )
    )
    return {
        "title": "Model similarity on digits (10 options): CAPA vs error consistency vs Cohen's kappa",
        "rows": rows,
        "timing": timing,
        "notes": notes,
    }
