"""Feature partitions (FeaturePartition) beside one embedding of all features.

Data: ``make_manifold_blocks`` (the paper's loop + helix simulation, six shuffled features,
noise 0.05) at n = 1,000 and n = 10,000 (n = 1,000 only with ``--quick``). trustlab partitions
the features (perplexity 30, one restart) and embeds each partition with Laplacian eigenmaps on
its learned affinity; the peer is scikit-learn's ``SpectralEmbedding`` (Laplacian eigenmaps,
kNN affinity) of all features, the single embedding the paper improves on. No installable peer
computes feature partitions (the authors' code needs a Cython build). Agreement figures: the
partition's adjusted Rand index against the true one, and each manifold's trustworthiness
(k = 10, on a 2,000-point subsample) in both embeddings.
"""

from __future__ import annotations

import time

import numpy as np


def run(quick: bool = False) -> dict:
    from sklearn.manifold import SpectralEmbedding, trustworthiness
    from sklearn.metrics import adjusted_rand_score

    from trustlab.explain.feature_partition import FeaturePartition, make_manifold_blocks

    rows = []
    for n in (1000,) if quick else (1000, 10_000):
        X, labels, clean = make_manifold_blocks(n, random_state=0)
        t = time.perf_counter()
        fp = FeaturePartition(perplexity=30, n_restarts=1, random_state=0).fit(X)
        embeddings = fp.embed(2)
        t_fp = time.perf_counter() - t
        t = time.perf_counter()
        single = SpectralEmbedding(
            2, affinity="nearest_neighbors", n_neighbors=30, random_state=0
        ).fit_transform(X)
        t_single = time.perf_counter() - t
        sub = np.random.default_rng(0).choice(n, min(n, 2000), replace=False)
        tw = []
        for m in range(2):
            k = int(np.bincount(fp.labels_[labels == m], minlength=2).argmax())
            tw.append(
                (
                    trustworthiness(clean[m][sub], embeddings[k][sub], n_neighbors=10),
                    trustworthiness(clean[m][sub], single[sub], n_neighbors=10),
                )
            )
        rows.append(
            {
                "case": f"loop+helix n={n}",
                "trustlab_s": t_fp,
                "peer_s": t_single,
                "trustlab_over_peer": t_fp / t_single,
                "partition_ARI": adjusted_rand_score(labels, fp.labels_),
                "trust_loop_ours/peer": f"{tw[0][0]:.3f}/{tw[0][1]:.3f}",
                "trust_helix_ours/peer": f"{tw[1][0]:.3f}/{tw[1][1]:.3f}",
                "iterations": fp.n_iter_,
            }
        )
    return {
        "title": "FeaturePartition vs one SpectralEmbedding of all features",
        "rows": rows,
        "notes": [
            "trustlab time includes the partition search (all annealing stages) and both embeddings",
            "peer: scikit-learn SpectralEmbedding on all features (what the paper calls a single embedding)",
        ],
    }
