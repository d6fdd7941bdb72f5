"""L2H (LogitsHierarchy) beside scikit-learn's AgglomerativeClustering and SciPy linkage.

Data: an 8-class Gaussian mixture whose class means follow a known depth-3 binary tree
(offsets 4, 2, 1 along random directions in 8 dimensions, noise 1.0), and scikit-learn's
digits. The flat model is k-means (K = 8 on the mixture, K = 20 on digits); L2H uses its
logits ``-d**2 / T``. Peers: Ward AgglomerativeClustering on the points (full tree), and SciPy
average linkage on the k-means centroids (same leaves as L2H). Purity from the same
``dendrogram_purity`` (classes, and the mixture's superclasses); LCA-F1 against the known tree.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

TRUE_TREE = np.array(
    [[0, 1, 1, 2], [2, 3, 1, 2], [4, 5, 1, 2], [6, 7, 1, 2], [8, 9, 2, 4], [10, 11, 2, 4], [12, 13, 3, 8]],
    float,
)


def _mixture(n_per: int, noise: float = 1.0, seed: int = 0, d: int = 8) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(3, d))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    X, y = [], []
    for c in range(8):
        bits = [(c >> 2) & 1, (c >> 1) & 1, c & 1]
        mu = sum((2 * b - 1) * s * v for b, s, v in zip(bits, (4.0, 2.0, 1.0), dirs, strict=True))
        X.append(mu + noise * rng.normal(size=(n_per, d)))
        y += [c] * n_per
    return np.vstack(X), np.array(y)


def _timed(fn, repeats: int):  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def run(quick: bool = False) -> dict:
    from scipy.cluster.hierarchy import linkage
    from sklearn.cluster import AgglomerativeClustering, KMeans
    from sklearn.datasets import load_digits

    from trustlab.explain.hierarchy import LogitsHierarchy, dendrogram_purity, lca_f1

    repeats = 2 if quick else 5
    n_per = 250 if quick else 1000
    X_mix, y_mix = _mixture(n_per)
    X_dig, y_dig = load_digits(return_X_y=True)
    rows = []
    for name, X, y, k, levels in (
        (f"mixture n={X_mix.shape[0]}", X_mix, y_mix, 8, (0, 1, 2)),
        (f"digits n={X_dig.shape[0]}", X_dig, y_dig, 20, (0,)),
    ):
        km = KMeans(k, n_init=5, random_state=0).fit(X)
        t_l2h, h = _timed(lambda km=km, X=X: LogitsHierarchy(model=km).fit(X), repeats)
        t_agg, agg = _timed(
            lambda X=X: AgglomerativeClustering(n_clusters=None, distance_threshold=0, linkage="ward").fit(X),
            repeats,
        )
        cent = linkage(km.cluster_centers_, method="average")
        points = np.arange(len(y))
        rows.append(
            {
                "case": name,
                "metric": "time: L2H on k-means logits vs Ward on points, s",
                "trustlab": t_l2h,
                "peer": t_agg,
                "peer_over_trustlab": t_agg / t_l2h,
            }
        )
        for level in levels:
            ys = y >> level
            ours = h.dendrogram_purity(ys)
            ward = dendrogram_purity(agg.children_, points, ys)
            avg = dendrogram_purity(cent, h.labels_, ys)
            what = "classes" if level == 0 else f"superclasses (2**{level} classes each)"
            rows.append(
                {
                    "case": name,
                    "metric": f"dendrogram purity, {what} (SciPy avg on centroids: {avg:.3f})",
                    "trustlab": ours,
                    "peer": ward,
                    "peer_over_trustlab": ward / ours,
                }
            )
        if name.startswith("mixture"):
            rows.append(
                {
                    "case": name,
                    "metric": "LCA-F1 against the known tree",
                    "trustlab": lca_f1(h.linkage_, h.labels_, y, TRUE_TREE),
                    "peer": lca_f1(agg.children_, points, y, TRUE_TREE),
                    "peer_over_trustlab": float("nan"),
                }
            )
    # scale: random logits, N = 1e6 (quick: 1e5), K = 100
    n_big = 100_000 if quick else 1_000_000
    z = np.random.default_rng(0).normal(size=(n_big, 100)).astype(np.float64) * 3
    t_big, _ = _timed(lambda: LogitsHierarchy().fit(z), 1)
    rows.append(
        {
            "case": f"random logits N={n_big:.0e}, K=100",
            "metric": "L2H time, s (no peer: Ward on 1e6 points is out of reach)",
            "trustlab": t_big,
            "peer": float("nan"),
            "peer_over_trustlab": float("nan"),
        }
    )
    return {
        "title": "L2H vs AgglomerativeClustering (peer = scikit-learn Ward, full tree on points)",
        "rows": rows,
        "notes": [
            "L2H time excludes fitting k-means (the flat model is given); "
            "Ward builds its tree from the points",
            "the purity figure in the metric text: SciPy average linkage "
            "on the k-means centroids (same leaves)",
            f"median of {repeats} runs",
        ],
    }
