"""Hierarchy quality: dendrogram purity, leaf purity and an LCA-based F1."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError


def check_tree(linkage: Any, name: str = "linkage") -> tuple[np.ndarray, int]:
    """Children pairs ``(L - 1, 2)`` of a full binary tree over ``L`` leaves (SciPy convention)."""
    z = check_numeric_array(linkage, name, ndim=2, min_rows=1)
    if z.shape[1] not in (2, 4):
        raise DataError(
            f"{name} must be a SciPy linkage (n-1, 4) or children pairs (n-1, 2) such as "
            f"AgglomerativeClustering.children_; got shape {z.shape}.",
            argument=name,
        )
    children = z[:, :2]
    if not np.array_equal(children, np.round(children)):
        raise DataError(f"{name}'s first two columns must be node ids (integers).", argument=name)
    children = children.astype(np.int64)
    n_leaves = z.shape[0] + 1
    used = np.zeros(2 * n_leaves - 1, dtype=bool)
    for s, (a, b) in enumerate(children):
        top = n_leaves + s
        if not (0 <= a < top and 0 <= b < top) or a == b or used[a] or used[b]:
            raise DataError(
                f"{name} row {s} ({a}, {b}) is not a merge of two unmerged nodes; pass a full "
                "tree (for AgglomerativeClustering: compute_full_tree=True, distance_threshold=0).",
                argument=name,
            )
        used[a] = used[b] = True
    return children, n_leaves


def check_labels(values: Any, name: str, n: int | None = None) -> np.ndarray:
    """Integer codes 0..m-1 of a label vector (any hashable labels)."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError(
            f"{name} must be a non-empty 1-d array of labels; got shape {arr.shape}.", argument=name
        )
    if n is not None and arr.size != n:
        raise DataError(f"{name} has {arr.size} entries; expected {n} (one per sample).", argument=name)
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise DataError(f"{name} holds NaN or infinite labels.", argument=name)
    try:
        _, codes = np.unique(arr, return_inverse=True)
    except TypeError:
        raise DataError(
            f"{name} holds labels that cannot be compared (mixed types).", argument=name
        ) from None
    return codes.reshape(-1)


def _node_counts(children: np.ndarray, leaf_counts: np.ndarray) -> np.ndarray:
    n_leaves = leaf_counts.shape[0]
    counts = np.zeros((2 * n_leaves - 1, leaf_counts.shape[1]))
    counts[:n_leaves] = leaf_counts
    for s, (a, b) in enumerate(children):
        counts[n_leaves + s] = counts[a] + counts[b]
    return counts


def leaf_class_counts(leaf: np.ndarray, y: np.ndarray, n_leaves: int) -> np.ndarray:
    """``M[l, c]`` = samples of class ``c`` in leaf ``l``."""
    if leaf.max() >= n_leaves:
        raise DataError(
            f"leaf_labels reaches {int(leaf.max())} but the tree has {n_leaves} leaves (0..{n_leaves - 1}).",
            argument="leaf_labels",
        )
    n_classes = int(y.max()) + 1
    m = np.zeros((n_leaves, n_classes))
    np.add.at(m, (leaf, y), 1.0)
    return m


def dendrogram_purity_counts(children: np.ndarray, m: np.ndarray) -> float:
    """DP from the leaf-by-class count matrix (Heller & Ghahramani 2005)."""
    counts = _node_counts(children, m)
    n_leaves = m.shape[0]
    sizes = counts.sum(axis=1)
    total = float((m.sum(axis=0) * (m.sum(axis=0) - 1) / 2).sum())
    if total == 0:
        raise DataError(
            "y has no two samples of the same class: dendrogram purity is undefined.", argument="y"
        )
    leaf_size = np.where(sizes[:n_leaves] > 0, sizes[:n_leaves], 1)[:, None]
    acc = float((m * (m - 1) / 2 * m / leaf_size).sum())
    a, b = children[:, 0], children[:, 1]
    node = np.arange(n_leaves, 2 * n_leaves - 1)
    node_size = np.where(sizes[node] > 0, sizes[node], 1)[:, None]
    acc += float((counts[a] * counts[b] * counts[node] / node_size).sum())
    return acc / total


def lca_f1_counts(children: np.ndarray, m: np.ndarray, true_children: np.ndarray) -> float:
    """Pair-averaged precision/recall of the points under the predicted vs the true LCA."""
    n_leaves, n_classes = m.shape
    class_sizes = m.sum(axis=0)
    # true tree over classes: class sets (indicator) and the LCA of every class pair
    members = np.zeros((2 * n_classes - 1, n_classes), dtype=bool)
    members[np.arange(n_classes), np.arange(n_classes)] = True
    lca = np.diag(np.arange(n_classes))
    lca = lca.astype(np.int64)
    for s, (a, b) in enumerate(true_children):
        members[n_classes + s] = members[a] | members[b]
        ia, ib = np.flatnonzero(members[a]), np.flatnonzero(members[b])
        lca[np.ix_(ia, ib)] = n_classes + s
        lca[np.ix_(ib, ia)] = n_classes + s
    true_size = members.astype(float) @ class_sizes  # points under each true node
    counts = _node_counts(children, m)
    inter = counts @ members.T.astype(float)  # |points under pred node u and true node v|
    pred_size = counts.sum(axis=1)
    prec = rec = weight = 0.0

    def add(pairs: np.ndarray, u: int) -> None:
        nonlocal prec, rec, weight
        if pairs.sum() == 0:
            return
        i_uv = inter[u][lca]
        prec += float((pairs * i_uv).sum() / pred_size[u])
        rec += float((pairs * i_uv / true_size[lca]).sum())
        weight += float(pairs.sum())

    for leaf in range(n_leaves):  # pairs inside one leaf cluster: the leaf is their LCA
        c = m[leaf]
        pairs = np.triu(np.outer(c, c), 1) + np.diag(c * (c - 1) / 2)
        add(pairs, leaf)
    for s, (a, b) in enumerate(children):
        add(np.outer(counts[a], counts[b]), n_leaves + s)
    if weight == 0:
        raise DataError("lca_f1 needs at least two samples.", argument="y")
    p, r = prec / weight, rec / weight
    return 2 * p * r / (p + r) if p + r > 0 else 0.0
