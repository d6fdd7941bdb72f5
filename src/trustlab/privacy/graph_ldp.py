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
from trustlab.privacy._selection import bernoulli, uniform_int
from trustlab.privacy.release import Release

__all__ = [
    "hoa",
    "multibit_encode",
    "multibit_rectify",
    "nfr",
    "optimal_m",
    "optimal_pm_dimensions",
    "piecewise_encode",
    "piecewise_rectify",
]

_MECHANISM = "multi-bit mechanism (local DP, per node)"
_PM_MECHANISM = "piecewise mechanism on a public grid (local DP, per node)"


def optimal_m(epsilon: float, d: int) -> int:
    """LPGNN's choice of the number of perturbed dimensions: ``max(1, min(d, floor(eps / 2.18)))``.

    Parameters
    ----------
    epsilon : float
        Per-node LDP budget.
    d : int
        Number of feature dimensions.

    Returns
    -------
    int
        Dimensions the multi-bit mechanism perturbs per node, in ``[1, d]``.

    References
    ----------
    Sajadmanesh and Gatica-Perez, "Locally Private Graph Neural Networks", CCS 2021.

    Examples
    --------
    >>> from trustlab.privacy.graph_ldp import optimal_m
    >>> optimal_m(1.0, 10), optimal_m(8.0, 10), optimal_m(100.0, 10)
    (1, 3, 10)
    """
    return max(1, min(int(d), math.floor(epsilon / 2.18)))


def _sample_dimensions(n: int, d: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of ``m`` dimensions per node, uniform without replacement (OS randomness)."""
    words = np.frombuffer(os.urandom(8 * n * d), dtype=np.uint64).reshape(n, d)
    return np.repeat(np.arange(n), m), np.argsort(words, axis=1)[:, :m].ravel()


def _check_and_snap(
    features: Any, epsilon: Any, bounds: Any, m: Any, grid: Any, default_m: Any
) -> tuple[np.ndarray, int, float, float]:
    """Validate an LDP encoder's arguments; the features' levels on the public grid, ``m``, bounds.

    Checks depend on shapes and public parameters only, never on the feature values: a NaN
    is replaced by the centre of the public bounds and an infinity by the bound it points to
    (a public default), so no exception or branch depends on a node's private vector.
    """
    x = np.asarray(features, dtype=float)
    if x.ndim != 2 or x.size == 0:
        raise DataError(f"features must be a non-empty 2-D array, got shape {x.shape}", argument="features")
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"epsilon must be a positive finite number, got {epsilon!r}", argument="epsilon")
    if epsilon > 50:
        raise ParameterError(
            f"epsilon={epsilon!r} per node is no privacy (e^50 odds); local DP budgets are at most ~10",
            argument="epsilon",
        )
    lo, hi = (float(b) for b in bounds)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError("bounds must be two finite numbers lo < hi", argument="bounds")
    if isinstance(grid, bool) or not isinstance(grid, int) or not 1 <= grid <= 4096:
        raise ParameterError(f"grid must be an integer in [1, 4096], got {grid!r}", argument="grid")
    d = x.shape[1]
    m = default_m(epsilon, d) if m is None else m
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= d:
        raise ParameterError(f"m must be an integer in [1, {d}], got {m!r}", argument="m")
    x = np.nan_to_num(x, nan=(lo + hi) / 2, posinf=hi, neginf=lo)  # public defaults, no branch
    level = np.rint((np.clip(x, lo, hi) - lo) / (hi - lo) * grid).astype(np.int64)  # public grid
    return level, m, lo, hi


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

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.graph_ldp import multibit_encode
    >>> rel = multibit_encode(np.full((5, 4), 0.5), epsilon=4.0, m=2)
    >>> rel.value.shape, rel.value.dtype, rel.epsilon
    ((5, 4), dtype('int8'), 4.0)
    >>> (np.abs(rel.value).sum(axis=1) == 2).all()  # m non-zero reports per node
    np.True_
    """
    level, m, lo, hi = _check_and_snap(features, epsilon, bounds, m, grid, optimal_m)
    n, d = level.shape
    e = math.exp(epsilon / m)
    rows, cols = _sample_dimensions(n, d, m)
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
    """The server's unbiased estimate of every feature from the reports (post-processing).

    LPGNN's multi-bit rectifier: ``x' = d (hi - lo) / (2 m) * (e^(eps/m) + 1) / (e^(eps/m) - 1)
    * y + (lo + hi) / 2`` for each report ``y`` in ``{-1, 0, +1}``.

    Parameters
    ----------
    release : Release
        The output of :func:`multibit_encode` (its ``parameters`` hold ``m``, ``d`` and the
        bounds).

    Returns
    -------
    numpy.ndarray of shape (n_nodes, d)
        Unbiased float estimates of the features; unreported dimensions estimate the centre
        of the bounds.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.graph_ldp import multibit_encode, multibit_rectify
    >>> rel = multibit_encode(np.full((5, 4), 0.5), epsilon=4.0, m=2)
    >>> est = multibit_rectify(rel)
    >>> est.shape, bool(((est == 0.5) == (rel.value == 0)).all())
    ((5, 4), True)
    """
    p = release.parameters
    lo, hi = p["bounds"]
    e = math.exp(release.epsilon / p["m"])
    scale = p["d"] * (hi - lo) / (2.0 * p["m"]) * (e + 1.0) / (e - 1.0)
    return scale * np.asarray(release.value, dtype=float) + (lo + hi) / 2.0


def optimal_pm_dimensions(epsilon: float, d: int) -> int:
    """Wang et al.'s number of dimensions a node perturbs with PM: ``max(1, min(d, floor(eps / 2.5)))``.

    Parameters
    ----------
    epsilon : float
        Per-node LDP budget.
    d : int
        Number of feature dimensions.

    Returns
    -------
    int
        Dimensions the piecewise mechanism perturbs per node, in ``[1, d]``.

    References
    ----------
    N. Wang, X. Xiao, Y. Yang, et al. "Collecting and Analyzing Multidimensional Data with
    Local Differential Privacy". ICDE 2019.

    Examples
    --------
    >>> from trustlab.privacy.graph_ldp import optimal_pm_dimensions
    >>> optimal_pm_dimensions(1.0, 10), optimal_pm_dimensions(8.0, 10)
    (1, 3)
    """
    return max(1, min(int(d), math.floor(epsilon / 2.5)))


def _pm_layout(epsilon_dim: float, grid: int) -> tuple[int, int, float]:
    """Window cells ``L``, output cells ``N = grid + L`` and the in-window probability."""
    window = max(1, round(grid * math.exp(-epsilon_dim / 2.0)))
    e = math.exp(epsilon_dim)
    return window, grid + window, window * e / (window * e + grid)


def piecewise_encode(
    features: Any,
    epsilon: float,
    *,
    bounds: tuple[float, float] = (0.0, 1.0),
    m: int | None = None,
    grid: int = 16,
) -> Release:
    """Perturb every node's feature vector with the piecewise mechanism (epsilon-LDP per node).

    Wang et al.'s PM (ICDE 2019), the second LDP protocol UPGNET is evaluated with, on a public
    grid. Each node samples ``m`` of its ``d`` dimensions uniformly (OS randomness) and spends
    ``epsilon / m`` on each. A value, clipped to ``bounds`` and snapped to level ``s`` of
    ``grid`` steps, is reported as one of ``N = grid + L`` output cells: the ``L`` cells
    ``s .. s + L - 1`` (its window, ``L = round(grid e^(-eps/2))``, PM's share of the range)
    each have probability ``e^eps / Z``, every other cell ``1 / Z`` (``Z = L e^eps + grid``,
    the same for every input). Any two inputs' output probabilities differ by at most
    ``e^eps``, exactly; the in-window share ``e^(eps/2) / (e^(eps/2) + 1)`` is continuous PM's.
    The draw is an exact Bernoulli coin (OpenDP) for the window, then an exact uniform cell
    within the window or outside it (:func:`uniform_int`), so the only floating-point step is
    the coin's probability, computed once from public parameters. The other dimensions report
    nothing. :func:`piecewise_rectify` maps the cells to unbiased estimates on a public grid.

    Parameters
    ----------
    features : array-like of shape (n_nodes, d)
        Each row is one node's private vector.
    epsilon : float
        Per-node LDP budget (> 0, at most 50).
    bounds : (float, float), default=(0, 1)
        Public feature range.
    m : int, optional
        Dimensions perturbed per node (default :func:`optimal_pm_dimensions`).
    grid : int, default=16
        Number of grid steps between the bounds (input resolution).

    Returns
    -------
    Release
        ``value``: int32 matrix, ``0`` for a dimension not reported, else the output cell
        ``1 .. N``; ``epsilon`` per node.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.graph_ldp import piecewise_encode
    >>> rel = piecewise_encode(np.full((5, 4), 0.5), epsilon=2.0, m=1)
    >>> rel.value.shape, rel.parameters["cells"], int((rel.value > 0).sum())
    ((5, 4), 22, 5)

    References
    ----------
    N. Wang, X. Xiao, Y. Yang, et al. "Collecting and Analyzing Multidimensional Data with
    Local Differential Privacy". ICDE 2019 (PM and its dimension sampling).
    """
    level, m, lo, hi = _check_and_snap(features, epsilon, bounds, m, grid, optimal_pm_dimensions)
    n, d = level.shape
    window, cells, p_in = _pm_layout(epsilon / m, grid)
    rows, cols = _sample_dimensions(n, d, m)
    start = level[rows, cols]
    inside = bernoulli(p_in, start.size)
    offset = np.where(inside, uniform_int(window, start.size), uniform_int(grid, start.size))
    # Outside the window, offset k in 0 .. grid-1 is the k-th cell not in s .. s+L-1.
    cell = np.where(inside | (offset < start), start * inside + offset, offset + window)
    out = np.zeros((n, d), dtype=np.int32)
    out[rows, cols] = cell + 1
    return Release(
        value=out,
        epsilon=float(epsilon),
        delta=0.0,
        mechanism=_PM_MECHANISM,
        parameters={
            "m": m,
            "d": d,
            "bounds": (lo, hi),
            "grid": grid,
            "window": window,
            "cells": cells,
            "neighbouring": "one node's feature vector replaced (local DP)",
            "notes": "features clipped to bounds and snapped to the grid; epsilon / m per sampled dimension",
        },
        description=f"piecewise-mechanism reports of {n} nodes' {d} features",
    )


def piecewise_rectify(release: Release) -> np.ndarray:
    """The server's unbiased estimate of every feature from PM reports (post-processing).

    Cell ``k`` (0-based) maps to ``alpha (k - (N - 1) / 2)`` in units where the bounds are
    ``-1, 1``, with ``alpha = Z / ((e^eps - 1) L grid / 2)``: the window's centre then moves
    with the input's level, and the expectation is the input exactly. The estimate is scaled
    by ``d / m`` for the dimension sampling and mapped back to the bounds; unreported
    dimensions estimate the centre of the bounds. Every estimate lies on a public grid.

    Parameters
    ----------
    release : Release
        The output of :func:`piecewise_encode` (its ``parameters`` hold ``m``, ``d``, the
        bounds, ``grid``, ``window`` and ``cells``).

    Returns
    -------
    numpy.ndarray of shape (n_nodes, d)
        Unbiased float estimates of the features.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.graph_ldp import piecewise_encode, piecewise_rectify
    >>> rel = piecewise_encode(np.full((5, 4), 0.5), epsilon=2.0, m=1)
    >>> est = piecewise_rectify(rel)
    >>> est.shape, bool(((est == 0.5) | (rel.value > 0)).all())
    ((5, 4), True)
    """
    p = release.parameters
    lo, hi = p["bounds"]
    eps_dim = release.epsilon / p["m"]
    window, cells, grid = p["window"], p["cells"], p["grid"]
    z = window * math.exp(eps_dim) + grid
    alpha = z / ((math.exp(eps_dim) - 1.0) * window * grid / 2.0)
    code = np.asarray(release.value, dtype=float)
    centred = np.where(code > 0, alpha * (code - 1.0 - (cells - 1) / 2.0), 0.0)
    return (lo + hi) / 2.0 + (hi - lo) / 2.0 * p["d"] / p["m"] * centred


def nfr(x: np.ndarray, mu: float) -> np.ndarray:
    """Node Feature Regularization: the L1 proximal step ``sign(x) max(|x| - mu, 0)``.

    UPGNET's NFR layer (its Theorems 5 and 6): soft-thresholding shrinks the rectified
    features towards 0, which removes much of the LDP noise on sparse features.

    Parameters
    ----------
    x : numpy.ndarray
        Features (e.g. the output of :func:`multibit_rectify`).
    mu : float
        Threshold (>= 0); 0 leaves ``x`` unchanged.

    Returns
    -------
    numpy.ndarray
        Array of the shape of ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.graph_ldp import nfr
    >>> nfr(np.array([-2.0, -0.5, 0.3, 1.5]), mu=1.0)
    array([-1. , -0. ,  0. ,  0.5])
    """
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
    """High-Order Aggregator: ``(1/K) sum_{k=1..K} A_hat^k x`` (A_hat: GCN-normalised, no self-loops).

    UPGNET's HOA layer (its Algorithm 1): averaging over ``K`` hops averages out the
    per-node LDP noise. ``A_hat = D^(-1/2) A D^(-1/2)`` with the diagonal of ``A`` removed;
    isolated nodes aggregate to 0.

    Parameters
    ----------
    adjacency : array-like or scipy.sparse matrix of shape (n_nodes, n_nodes)
        Adjacency matrix (weights allowed; self-loops are dropped).
    x : numpy.ndarray of shape (n_nodes, d)
        Node features.
    k : int
        Number of hops ``K`` (>= 1).

    Returns
    -------
    numpy.ndarray of shape (n_nodes, d)
        The aggregated features.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.graph_ldp import hoa
    >>> path = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    >>> hoa(path, np.eye(3), k=2).round(3)
    array([[0.25 , 0.354, 0.25 ],
           [0.354, 0.5  , 0.354],
           [0.25 , 0.354, 0.25 ]])
    """
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
