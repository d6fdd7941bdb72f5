"""Task decodability (row 004-14): trustlab's leave-one-out kNN beside scikit-learn's.

Second table: the reference regressions of the decoding side (``regression_baselines``: generic
``D``-dimensional and oracle-basis ridge on each prompt's demonstrations) beside scikit-learn's
``Ridge`` fitted prompt by prompt and position by position (no intercept, ``alpha`` = noise
variance over prior variance); agreement: the largest gap of the per-basis, per-position MSE.

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


def _ridge_peer(p, noise: float) -> np.ndarray:
    from sklearn.linear_model import Ridge

    n, kk, _ = p.xs.shape
    r, nb = p.rank, p.n_bases
    err = np.zeros((2, n, kk))
    for i in range(n):
        cols = np.arange(p.basis[i] * r, (p.basis[i] + 1) * r)
        for k in range(1, kk):
            x, y, xq = p.xs[i, :k].astype(float), p.ys[i, :k].astype(float), p.xs[i, k].astype(float)
            gen = Ridge(alpha=noise**2 * nb, fit_intercept=False).fit(x[:, : nb * r], y)
            ora = Ridge(alpha=noise**2, fit_intercept=False).fit(x[:, cols], y)
            err[0, i, k] = (gen.predict(xq[None, : nb * r])[0] - p.ys[i, k]) ** 2
            err[1, i, k] = (ora.predict(xq[None, cols])[0] - p.ys[i, k]) ** 2
        err[:, i, 0] = float(p.ys[i, 0]) ** 2
    return np.stack([err[:, p.basis == b].mean(axis=1) for b in range(nb)], axis=1) / r


def _baselines_table(quick: bool) -> list[dict]:
    from trustlab.lm.task_vectors_regression import regression_baselines, sparse_regression_prompts

    rows = []
    for d, r, nb, kk in [(8, 1, 8, 6)] if quick else [(8, 1, 8, 6), (16, 4, 4, 20)]:
        p = sparse_regression_prompts(200 if quick else 400, n_dims=d, rank=r, n_bases=nb, n_points=kk)
        ours = regression_baselines(p)
        t_ours = _median_time(lambda p=p: regression_baselines(p), 3)
        t = time.perf_counter()
        peer = _ridge_peer(p, 0.1)
        t_peer = time.perf_counter() - t
        rows.append(
            {
                "D, rank, bases, points": f"{d}, {r}, {nb}, {kk}",
                "prompts": len(p.basis),
                "trustlab s (3 references)": t_ours,
                "sklearn Ridge s (2 references)": t_peer,
                "max MSE gap generic": float(np.abs(ours[0] - peer[0]).max()),
                "max MSE gap oracle": float(np.abs(ours[2] - peer[1]).max()),
            }
        )
    return rows


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
        "tables": {
            "decoding references (generic and oracle-basis ridge), trustlab vs scikit-learn Ridge": (
                _baselines_table(quick)
            )
        },
        "notes": [
            "median of repeats after one warm-up; per-task TD gap 0 = the same votes per task",
            "decoding references: one sklearn fit per prompt and position (timed once)",
        ],
    }
