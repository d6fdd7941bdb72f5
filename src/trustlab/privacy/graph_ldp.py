"""UPGNET: local-DP node features for graph learning, with the HOA and NFR layers.

Each node perturbs its own feature vector with the multi-bit mechanism (epsilon-LDP per
node) before the untrusted server sees it; the server rectifies the reports (unbiased),
then applies UPGNET's Node Feature Regularization (a soft threshold, the closed-form L1
proximal step) and High-Order Aggregator (the mean of the first ``K`` powers of the
normalised adjacency without self-loops), and trains any GNN on the result. The baseline
(``BASE`` in the paper; LPGNN's mechanism without its extra layers) trains on the
rectified reports directly.

References
----------
UPGNET, a utility-enhanced framework for locally private graph learning (2025; catalog row
004-02: the copy read here gives the method, "UPGNET: Utility-Enhanced Private GNNs", with the
HOA layer as its Algorithm 1 and the NFR closed forms as its Theorems 5 and 6); built on
Sajadmanesh and Gatica-Perez, "Locally Private Graph Neural Networks", CCS 2021 (the
multi-bit mechanism and its rectifier).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import scipy.sparse as sp

from trustlab.errors import DataError, ParameterError
from trustlab.privacy._selection import bernoulli
from trustlab.privacy.release import Release

__all__ = ["hoa", "multibit_encode", "multibit_rectify", "nfr", "optimal_m"]

_MECHANISM = "multi-bit mechanism (local DP, per node)"


def optimal_m(epsilon: float, d: int) -> int:
    """LPGNN's choice of the number of perturbed dimensions: ``max(1, min(d, floor(eps / 2.18)))``."""
    return max(1, min(int(d), math.floor(epsilon / 2.18)))


def _uniform_words(shape: tuple[int, int]) -> np.ndarray:
    return np.frombuffer(os.urandom(8 * shape[0] * shape[1]), dtype=np.uint64).reshape(shape)


def multibit_encode(
    features: Any,
    epsilon: float,
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    m: int | None = None,
    grid: int = 16,
) -> Release:
    """Perturb every node's feature vector with the multi-bit mechanism (epsilon-LDP per node).

    Each node samples ``m`` of its ``d`` dimensions uniformly (OS randomness, independent of
    the data) and reports for each a sign ``+1`` with probability
    ``1/(e^(eps/m)+1) + (x - lo)/(hi - lo) * (e^(eps/m)-1)/(e^(eps/m)+1)``, else ``-1``;
    the other dimensions report 0. The coins are exact Bernoulli draws (OpenDP). Features
    are clipped to the public ``bounds`` and snapped to a public grid of ``grid + 1``
    levels first, so the coin probabilities take few distinct values.

    Parameters
    ----------
    features : array-like of shape (n_nodes, d)
        Each row is one node's private vector.
    epsilon : float
        Per-node LDP budget (> 0).
    bounds : (float, float), default=(0, 1)
        Public feature range.
    m : int, optional
        Dimensions perturbed per node (default :func:`optimal_m`).
    grid : int, default=16
        Number of grid steps between the bounds.

    Returns
    -------
    Release
        ``value``: int8 matrix of reports in ``{-1, 0, +1}``; ``epsilon`` per node.
    """
    x = np.asarray(features, dtype=float)
    if x.ndim != 2 or x.size == 0:
        raise DataError(f"features must be a non-empty 2-D array, got shape {x.shape}", argument="features")
    if not np.all(np.isfinite(x)):
        raise DataError("features holds NaN or inf: impute them first", argument="features")
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"epsilon must be a positive finite number, got {epsilon!r}", argument="epsilon")
    lo, hi = (float(b) for b in bounds)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError("bounds must be two finite numbers lo < hi", argument="bounds")
    n, d = x.shape
    m = optimal_m(epsilon, d) if m is None else m
    if not isinstance(m, int) or not 1 <= m <= d:
        raise ParameterError(f"m must be an integer in [1, {d}], got {m!r}", argument="m")
    level = np.rint((np.clip(x, lo, hi) - lo) / (hi - lo) * grid).astype(np.int64)  # public grid
    e = math.exp(epsilon / m)
    chosen = np.argsort(_uniform_words((n, d)), axis=1)[:, :m]
    rows = np.repeat(np.arange(n), m)
    cols = chosen.ravel()
    lv = level[rows, cols]
    out = np.zeros((n, d), dtype=np.int8)
    plus = np.zeros(lv.size, dtype=bool)
    for g in np.unique(lv):
        idx = np.flatnonzero(lv == g)
        prob = 1.0 / (e + 1.0) + (g / grid) * (e - 1.0) / (e + 1.0)
        plus[idx] = bernoulli(prob, idx.size)
    out[rows, cols] = np.where(plus, 1, -1).astype(np.int8)
    return Release(
        value=out,
        epsilon=float(epsilon),
        delta=0.0,
        mechanism=_MECHANISM,
        parameters={
            "m": m,
            "d": d,
            "bounds": (lo, hi),
            "grid": grid,
            "neighbouring": "one node's feature vector replaced (local DP)",
            "notes": "features clipped to bounds and snapped to the grid; epsilon / m per sampled dimension",
        },
        description=f"multi-bit reports of {n} nodes' {d} features",
    )


def multibit_rectify(release: Release) -> np.ndarray:
    """The server's unbiased estimate of every feature from the reports (post-processing)."""
    p = release.parameters
    lo, hi = p["bounds"]
    e = math.exp(release.epsilon / p["m"])
    scale = p["d"] * (hi - lo) / (2.0 * p["m"]) * (e + 1.0) / (e - 1.0)
    return scale * np.asarray(release.value, dtype=float) + (lo + hi) / 2.0


def nfr(x: np.ndarray, mu: float) -> np.ndarray:
    """Node Feature Regularization: the L1 proximal step ``sign(x) max(|x| - mu, 0)``."""
    if not (math.isfinite(mu) and mu >= 0):
        raise ParameterError(f"mu must be a finite number >= 0, got {mu!r}", argument="mu")
    return np.sign(x) * np.maximum(np.abs(x) - mu, 0.0)


def _norm_adj(adjacency: Any) -> sp.csr_matrix:
    a = sp.csr_matrix(adjacency, dtype=float)
    if a.shape[0] != a.shape[1]:
        raise DataError(f"adjacency must be square, got shape {a.shape}", argument="adjacency")
    a = a - sp.diags(a.diagonal())  # no self-loops (the paper's aggregator)
    deg = np.asarray(a.sum(axis=1)).ravel()
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    return sp.csr_matrix(sp.diags(inv) @ a @ sp.diags(inv))


def hoa(adjacency: Any, x: np.ndarray, k: int) -> np.ndarray:
    """High-Order Aggregator: ``(1/K) sum_{k=1..K} A_hat^k x`` (A_hat: GCN-normalised, no self-loops)."""
    if not isinstance(k, int) or k < 1:
        raise ParameterError(f"k must be a positive integer, got {k!r}", argument="k")
    a = _norm_adj(adjacency)
    if a.shape[0] != x.shape[0]:
        raise DataError("adjacency and features disagree on the number of nodes", argument="adjacency")
    cur, total = x, np.zeros_like(x, dtype=float)
    for _ in range(k):
        cur = a @ cur
        total += cur
    return total / k
