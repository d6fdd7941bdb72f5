"""Task decodability (row 004-14): trustlab's leave-one-out kNN beside scikit-learn's.

Same representations (clustered synthetic ones shaped like a model's query representations:
``n_tasks`` Gaussian task centres plus noise, the paper's ``N = 100`` prompts per task, and a
larger case), same ``k = 10``, same leave-one-out rule and tie-break. The peer is
scikit-learn's ``KNeighborsClassifier`` (brute force, ``kneighbors()`` without a query, which
leaves each point out) followed by a majority vote (``scipy.stats.mode``, smallest label on
ties). Agreement: the TD scores (TD overall and per task).
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def _data(n_tasks: int, n_per_task: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = np.repeat(np.arange(n_tasks), n_per_task)
    centres = rng.normal(size=(n_tasks, dim))
    return centres[z] * 0.3 + rng.normal(size=(len(z), dim)), z


def _peer(h: np.ndarray, z: np.ndarray, k: int) -> np.ndarray:
    from scipy.stats import mode
    from sklearn.neighbors import KNeighborsClassifier

    knn = KNeighborsClassifier(k, algorithm="brute").fit(h, z)
    idx = knn.kneighbors(return_distance=False)
    return mode(z[idx], axis=1, keepdims=False).mode


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run(quick: bool = False) -> dict:
    from trustlab.lm.task_vectors import task_decodability

    repeats = 3 if quick else 7
    rows = []
    for n_tasks, n_per, dim in [(4, 100, 32), (12, 100, 256)] if not quick else [(4, 100, 32)]:
        h, z = _data(n_tasks, n_per, dim)
        ours_td, ours_per = task_decodability(h, z, k=10)
        pred_peer = _peer(h, z, 10)
        peer_per = np.array([(pred_peer[z == t] == t).mean() for t in range(n_tasks)])
        t_ours = _median_time(lambda h=h, z=z: task_decodability(h, z, k=10), repeats)
        t_peer = _median_time(lambda h=h, z=z: _peer(h, z, 10), repeats)
        rows.append(
            {
                "prompts x dim": f"{len(z)} x {dim}",
                "trustlab s": t_ours,
                "sklearn s": t_peer,
                "speed ratio (sklearn / trustlab)": t_peer / t_ours,
                "TD trustlab": ours_td,
                "TD sklearn": float((pred_peer == z).mean()),
                "max per-task TD gap": float(np.abs(ours_per - peer_per).max()),
            }
        )
    return {
        "title": "task decodability: leave-one-out kNN (k = 10), trustlab vs scikit-learn",
        "rows": rows,
        "notes": ["median of repeats after one warm-up; per-task TD gap 0 = the same votes per task"],
    }
