"""Input checks for fair graph generation (row 003-04): adjacency, node features, sensitive groups."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, DataTypeError

__all__ = ["check_adjacency", "check_node_features", "check_sensitive_groups"]

MIN_NODES = 4


def check_adjacency(adjacency: Any, name: str = "adjacency") -> sparse.csr_matrix:
    """A simple undirected graph as a 0/1 CSR matrix: square, symmetric, no self-loops, >= 1 edge.

    Accepts a dense array-like, a SciPy sparse matrix or array, or a ``networkx`` graph (its
    nodes in ``G.nodes`` order; edge weights are ignored).
    """
    if type(adjacency).__module__.startswith("networkx"):
        import networkx as nx

        if adjacency.is_directed():
            raise DataError(f"{name}: the networkx graph is directed; pass G.to_undirected().", argument=name)
        adjacency = nx.to_scipy_sparse_array(adjacency, weight=None, format="csr")
    if sparse.issparse(adjacency):
        a = sparse.csr_matrix(adjacency, dtype=float)
        if a.nnz and not np.all(np.isfinite(a.data)):
            raise DataError(f"{name} contains NaN or infinite values; pass a 0/1 matrix.", argument=name)
    else:
        a = sparse.csr_matrix(check_numeric_array(adjacency, name, ndim=2, min_rows=1))
    n, m = a.shape
    if n != m:
        raise DataError(f"{name} must be square (n_nodes x n_nodes), got shape {a.shape}.", argument=name)
    if n < MIN_NODES:
        raise DataError(f"{name} has {n} node(s); a graph needs at least {MIN_NODES} nodes.", argument=name)
    a.eliminate_zeros()
    if a.nnz and not np.all(a.data == 1.0):
        raise DataError(
            f"{name} must hold 0/1 entries (an unweighted graph); binarise it with (A > 0).", argument=name
        )
    if a.diagonal().any():
        raise DataError(
            f"{name} has self-loops (non-zero diagonal); remove them with A.setdiag(0).", argument=name
        )
    if (a != a.T).nnz:
        raise DataError(
            f"{name} is not symmetric: pass an undirected graph (e.g. the union A + A.T > 0).", argument=name
        )
    if a.nnz == 0:
        raise DataError(f"{name} has no edges; a graph generator needs at least one edge.", argument=name)
    a.sort_indices()
    return a


def check_node_features(features: Any, n_nodes: int, name: str = "features") -> np.ndarray:
    """Node features as an (n_nodes, d) float array without NaN, one row per node."""
    if sparse.issparse(features):
        raise DataTypeError(f"{name}: sparse features are not supported; pass a dense array.", argument=name)
    x = check_numeric_array(features, name, ndim=2, min_rows=1)
    if x.shape[0] != n_nodes:
        raise DataError(
            f"{name} has {x.shape[0]} rows but the graph has {n_nodes} nodes; pass one row per node.",
            argument=name,
        )
    if x.shape[1] == 0:
        raise DataError(f"{name} has no columns; pass at least one feature or features=None.", argument=name)
    return x


def check_sensitive_groups(
    sensitive: Any, n_nodes: int, name: str = "sensitive"
) -> tuple[np.ndarray, np.ndarray]:
    """Group labels and integer codes (0..K-1, K >= 2, every group with >= 2 nodes) of a node attribute."""
    if sensitive is None or isinstance(sensitive, str | bytes):
        raise DataError(f"{name} must be one label per node, got {type(sensitive).__name__}.", argument=name)
    s = np.asarray(sensitive)
    if s.ndim != 1 or s.shape[0] != n_nodes:
        raise DataError(
            f"{name} must be 1-dimensional with one label per node ({n_nodes}), got shape {s.shape}.",
            argument=name,
        )
    if s.dtype.kind == "f" and not np.all(np.isfinite(s)):
        raise DataError(f"{name} contains NaN; give every node a group.", argument=name)
    if s.dtype.kind == "O" and any(v is None for v in s):
        raise DataError(f"{name} contains None; give every node a group.", argument=name)
    try:
        labels, codes = np.unique(s, return_inverse=True)
    except TypeError:
        raise DataTypeError(
            f"{name} mixes label types that cannot be sorted; use one type.", argument=name
        ) from None
    if labels.size < 2:
        raise DataError(f"{name} has one group only; fairness needs at least two groups.", argument=name)
    counts = np.bincount(codes)
    if counts.min() < 2:
        raise DataError(
            f"{name}: group {labels[int(np.argmin(counts))]!r} has {int(counts.min())} node; "
            "every group needs at least 2 nodes (merge rare groups).",
            argument=name,
        )
    return labels, codes.astype(np.intp)
