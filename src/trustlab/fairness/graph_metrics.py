"""Fairness and quality measures of generated graphs (row 003-04, FDGen).

Pure functions: the feature and structural disparity of a graph with a sensitive node attribute,
and the degree / clustering / spectral MMD between generated graphs and a reference graph
(GraphRNN's evaluation, You et al., ICML 2018). See docs/fairness/fdgen.md.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.fairness._graph_gen_inputs import check_adjacency, check_node_features, check_sensitive_groups

__all__ = ["feature_disparity", "graph_mmd", "graph_statistic", "structural_disparity"]

_SIGMA = {"degree": 1.0, "clustering": 0.1, "spectral": 0.1}
_BINS = {"clustering": (100, 1.0), "spectral": (200, 2.0)}


def feature_disparity(features: Any, sensitive: Any) -> float:
    """Largest standardised gap between two groups' mean node features, averaged over features.

    ``max_{k,l} (1/d) sum_f |mean(x_f | s=k) - mean(x_f | s=l)| / sd(x_f)``, with ``sd`` the
    standard deviation of ``x_f`` over all nodes (a feature constant over the nodes counts 0).
    Zero when every group has the same mean features: the first-moment feature bias that
    FDGen's feature term removes (docs/fairness/fdgen.md).

    Parameters
    ----------
    features : array-like of shape (n_nodes, d)
        Node features, one row per node.
    sensitive : array-like of shape (n_nodes,)
        Sensitive group of each node (at least two groups of two nodes).

    Returns
    -------
    float

    References
    ----------
    .. [1] Z. Wang, W. Zhang, "FDGen: A Fairness-Aware Graph Generation Model", ICML 2025.

    Examples
    --------
    >>> feature_disparity([[0.0], [0.0], [1.0], [1.0]], [0, 0, 1, 1])
    2.0
    """
    x = check_numeric_array(features, "features", ndim=2, min_rows=1)
    x = check_node_features(x, x.shape[0])
    _, codes = check_sensitive_groups(sensitive, x.shape[0])
    sd = x.std(axis=0)
    scale = np.where(sd > 0, sd, np.inf)
    means = np.stack([x[codes == k].mean(axis=0) for k in range(codes.max() + 1)]) / scale
    gaps = np.abs(means[:, None, :] - means[None, :, :]).mean(axis=2)
    return float(gaps.max())


def _group_densities(a: sparse.csr_matrix, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Within-group and out-group edge densities of each group, and the whole graph's density."""
    n = a.shape[0]
    k = codes.max() + 1
    onehot = sparse.csr_matrix((np.ones(n), (np.arange(n), codes)), shape=(n, k))
    block = (onehot.T @ a @ onehot).toarray()  # ordered-pair edge counts between groups
    sizes = np.bincount(codes, minlength=k).astype(float)
    within = np.diag(block) / (sizes * (sizes - 1))
    out = (block.sum(axis=1) - np.diag(block)) / (sizes * (n - sizes))
    density = a.nnz / (n * (n - 1))
    return within, out, density


def structural_disparity(adjacency: Any, sensitive: Any) -> float:
    """Largest gap between a group's within-group and out-group edge density, over the graph's density.

    ``max_k |rho(k, k) - rho(k, not k)| / rho``: ``rho(k, k)`` is the fraction of pairs inside
    group ``k`` that are linked, ``rho(k, not k)`` the fraction of pairs between ``k`` and the
    other groups, ``rho`` the density of the whole graph. Zero when links ignore the sensitive
    attribute (dyadic parity); large under homophily. It is the normalised form of the
    intra/inter-edge bias factor that FairWire's and FDGen's structural terms remove.

    Parameters
    ----------
    adjacency : array-like, sparse matrix or networkx graph of shape (n_nodes, n_nodes)
        A simple undirected graph (0/1, symmetric, no self-loops, at least one edge).
    sensitive : array-like of shape (n_nodes,)
        Sensitive group of each node.

    Returns
    -------
    float

    References
    ----------
    .. [1] Z. Wang, W. Zhang, "FDGen: A Fairness-Aware Graph Generation Model", ICML 2025.
    .. [2] O. D. Kose, Y. Shen, "FairWire: Fair Graph Generation", NeurIPS 2024.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])
    >>> structural_disparity(a, [0, 0, 1, 1])
    3.0
    """
    a = check_adjacency(adjacency)
    _, codes = check_sensitive_groups(sensitive, a.shape[0])
    within, out, density = _group_densities(a, codes)
    return float(np.max(np.abs(within - out)) / density)


@validate_params({"statistic": [Options(_SIGMA)]})
def graph_statistic(adjacency: Any, statistic: str) -> np.ndarray:
    """A graph's degree, clustering or spectral histogram (a probability vector), as GraphRNN bins it.

    ``"degree"``: counts of each degree 0, 1, ...; ``"clustering"``: local clustering
    coefficients in 100 bins on [0, 1]; ``"spectral"``: eigenvalues of the normalised Laplacian
    in 200 bins on [0, 2] (isolated nodes give eigenvalue 0).

    Parameters
    ----------
    adjacency : array-like, sparse matrix or networkx graph
        A simple undirected graph.
    statistic : {"degree", "clustering", "spectral"}

    Returns
    -------
    ndarray
        Normalised histogram.

    Examples
    --------
    >>> graph_statistic([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]], "degree")
    array([0.  , 0.25, 0.5 , 0.25])
    """
    a = check_adjacency(adjacency)
    return _histogram(a, statistic)


def _histogram(a: sparse.csr_matrix, statistic: str) -> np.ndarray:
    deg = np.asarray(a.sum(axis=1)).ravel()
    if statistic == "degree":
        counts = np.bincount(deg.astype(np.intp)).astype(float)
        return counts / counts.sum()
    if statistic == "clustering":
        triangles = np.asarray((a @ a).multiply(a).sum(axis=1)).ravel() / 2
        pairs = deg * (deg - 1) / 2
        values = np.divide(triangles, pairs, out=np.zeros_like(triangles), where=pairs > 0)
    else:
        inv = np.divide(1.0, np.sqrt(deg), out=np.zeros_like(deg), where=deg > 0)
        lap = np.diag((deg > 0).astype(float)) - (inv[:, None] * a.toarray() * inv[None, :])
        with threadpool_limits(1):  # BLAS threads oversubscribe a shared machine on these sizes
            values = np.clip(np.linalg.eigvalsh(lap), 0.0, 2.0)
    bins, top = _BINS[statistic]
    counts = np.histogram(values, bins=bins, range=(0.0, top))[0].astype(float)
    return counts / counts.sum()


def _emd_kernel(h1: np.ndarray, h2: np.ndarray, width: float, sigma: float) -> float:
    size = max(h1.size, h2.size)
    c1 = np.cumsum(np.pad(h1, (0, size - h1.size)))
    c2 = np.cumsum(np.pad(h2, (0, size - h2.size)))
    emd = float(np.abs(c1 - c2).sum() * width)
    return float(np.exp(-(emd**2) / (2 * sigma**2)))


@validate_params(
    {"statistic": [Options(_SIGMA)], "sigma": [None, Interval(numbers.Real, 0, None, closed="neither")]}
)
def graph_mmd(
    reference: Any, generated: Sequence[Any], statistic: str = "degree", *, sigma: float | None = None
) -> float:
    """Squared MMD between generated graphs and a reference graph on a degree/clustering/spectral histogram.

    GraphRNN's measure: each graph becomes a normalised histogram (:func:`graph_statistic`);
    the kernel is ``exp(-EMD(h, h')^2 / (2 sigma^2))`` with the earth mover's distance between
    the histograms in the statistic's own units; with one reference graph ``r`` and generated
    graphs ``g_1..g_m``, ``MMD^2 = k(r, r) - (2/m) sum_i k(r, g_i) + (1/m^2) sum_ij k(g_i, g_j)``
    (the V-statistic, never negative). Lower is closer.

    Parameters
    ----------
    reference : array-like, sparse matrix or networkx graph
        The real graph.
    generated : sequence of graphs
        One or more generated graphs (any node count).
    statistic : {"degree", "clustering", "spectral"}, default="degree"
    sigma : float, optional
        Kernel width; default 1 (degree), 0.1 (clustering), 0.1 (spectral).

    Returns
    -------
    float

    References
    ----------
    .. [1] J. You, R. Ying, X. Ren, W. Hamilton, J. Leskovec, "GraphRNN: Generating Realistic
       Graphs with Deep Auto-regressive Models", ICML 2018.

    Examples
    --------
    >>> ring = [[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]]
    >>> graph_mmd(ring, [ring, ring], "degree")
    0.0
    """
    sig = float(sigma) if sigma is not None else _SIGMA[statistic]
    if isinstance(generated, np.ndarray) or sparse.issparse(generated) or not isinstance(generated, Sequence):
        raise DataError(
            "generated must be a list of graphs (wrap a single graph in [ ]).", argument="generated"
        )
    if len(generated) == 0:
        raise DataError("generated is empty; pass at least one generated graph.", argument="generated")
    ref = _histogram(check_adjacency(reference, "reference"), statistic)
    gens = [_histogram(check_adjacency(g, "generated"), statistic) for g in generated]
    step = 1.0 if statistic == "degree" else _BINS[statistic][1] / _BINS[statistic][0]
    m = len(gens)
    k_rr = _emd_kernel(ref, ref, step, sig)
    k_rg = sum(_emd_kernel(ref, g, step, sig) for g in gens) / m
    k_gg = sum(_emd_kernel(g, h, step, sig) for g in gens for h in gens) / m**2
    return float(max(k_rr - 2 * k_rg + k_gg, 0.0))
