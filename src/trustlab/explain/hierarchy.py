"""A hierarchy from any flat clustering model's logits: L2H (catalog row 002-07).

Palumbo, Vandenhirtz, Ryser, Daunhawer and Vogt, "From Logits to Hierarchies:
Hierarchical Clustering made Simple", ICML 2025. :class:`LogitsHierarchy` turns the
(n_samples, n_clusters) logits of a fitted flat model (k-means distances, a mixture's
log-responsibilities, a classifier's logits) into a binary tree over its clusters, with a
SciPy-compatible ``linkage_``; :func:`dendrogram_purity`, :func:`leaf_purity` and
:func:`lca_f1` evaluate it against labels (and a reference tree). See
docs/explain/hierarchy.md.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab.errors import DataError, NotFittedError
from trustlab.explain._hierarchy_core import (
    AGGREGATIONS,
    check_logits,
    l2h_merges,
    merges_to_linkage_array,
    model_logits,
)
from trustlab.explain._hierarchy_metrics import (
    check_labels,
    check_tree,
    dendrogram_purity_counts,
    lca_f1_counts,
    leaf_class_counts,
)

__all__ = [
    "LogitsHierarchy",
    "dendrogram_purity",
    "lca_f1",
    "leaf_purity",
    "logits_to_hierarchy",
    "merges_to_linkage",
]

Merges = list[tuple[tuple[int, ...], tuple[int, ...]]]


@validate_params({"logits": ["array-like"], "aggregation": [Options(set(AGGREGATIONS))]})
def logits_to_hierarchy(logits: Any, aggregation: str = "sum") -> Merges:
    """The L2H merges of the clusters behind a flat model's logits.

    Steps (the paper's Algorithm 1): softmax each row; every sample keeps its argmax cluster
    for the whole run; a cluster's confidence is the mean top probability of its samples (0
    for an empty cluster). Repeat K - 1 times: the group with the lowest aggregated
    confidence is merged into the group that receives most of its samples' probability
    mass once the group's own clusters are masked out of their softmax (mass per group =
    mean over its clusters of the summed top masked probabilities). Ties go to the first
    group in list order; a merged group goes to the end of the list.

    Parameters
    ----------
    logits : array-like of shape (n_samples, n_clusters)
        Finite logits, at least 2 clusters.
    aggregation : {"sum", "mean", "max"}, default "sum"
        How a group's confidence aggregates its clusters' (the paper's Lambda).

    Returns
    -------
    list of (tuple, tuple)
        The K - 1 merges ``(absorbed group, absorbing group)`` as tuples of cluster ids.

    Examples
    --------
    >>> z = [[3.0, 2.5, 0, 0], [2.8, 2.6, 0.1, 0], [2.0, 4.0, 0, 0.2], [1.9, 4.1, 0.3, 0],
    ...      [0, 0, 5.0, 3.0], [0.1, 0, 5.2, 2.9], [0, 0.2, 2.5, 3.5], [0, 0, 2.4, 3.6]]
    >>> logits_to_hierarchy(z)
    [((0,), (1,)), ((3,), (2,)), ((0, 1), (3, 2))]

    References
    ----------
    .. [1] E. Palumbo, M. Vandenhirtz, A. Ryser, I. Daunhawer, J. E. Vogt, "From Logits to
       Hierarchies: Hierarchical Clustering made Simple", ICML 2025 (arXiv 2410.07858).
    """
    merges, _, _ = l2h_merges(check_logits(logits), aggregation)
    return merges


@validate_params({"merges": [list, tuple], "n_leaves": [Interval(numbers.Integral, 2, None, closed="left")]})
def merges_to_linkage(merges: Merges, n_leaves: int) -> np.ndarray:
    """A SciPy linkage matrix from L2H merges.

    Leaf ids are the clusters ``0..n_leaves-1``; the node made at step ``s`` gets id
    ``n_leaves + s`` and height ``s + 1`` (monotone); the fourth column counts the leaf
    clusters under the node (SciPy's convention).

    Parameters
    ----------
    merges : list of (tuple, tuple)
        From :func:`logits_to_hierarchy`.
    n_leaves : int
        Number of clusters.

    Returns
    -------
    ndarray of shape (n_leaves - 1, 4)
        Usable by :func:`scipy.cluster.hierarchy.dendrogram`.

    Examples
    --------
    >>> merges_to_linkage([((0,), (1,)), ((2,), (0, 1))], 3).tolist()
    [[0.0, 1.0, 1.0, 2.0], [2.0, 3.0, 2.0, 3.0]]
    """
    if len(merges) != n_leaves - 1:
        raise DataError(
            f"merges holds {len(merges)} merges; a full tree over {n_leaves} leaves needs {n_leaves - 1}.",
            argument="merges",
        )
    return merges_to_linkage_array([(tuple(a), tuple(b)) for a, b in merges], int(n_leaves))


def _leaf_ids(leaf_labels: Any) -> np.ndarray:
    arr = np.asarray(leaf_labels)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype.kind not in "iu" or arr.min() < 0:
        raise DataError(
            "leaf_labels must be a non-empty 1-d array of integer leaf ids >= 0 (the tree's "
            "leaves: cluster ids, or np.arange(n_samples) for a tree over samples).",
            argument="leaf_labels",
        )
    return arr.astype(np.int64)


@validate_params({"linkage": ["array-like"], "leaf_labels": ["array-like"], "y": ["array-like"]})
def dendrogram_purity(linkage: Any, leaf_labels: Any, y: Any) -> float:
    """Dendrogram purity of a tree over leaf clusters (or over samples) against class labels.

    The mean, over all pairs of samples of the same class, of the purity of their lowest
    common ancestor for that class (the fraction of the samples under it with that class);
    pairs in the same leaf use the leaf. 1 for pure leaves grouped perfectly by class.

    Parameters
    ----------
    linkage : array-like of shape (n_leaves - 1, 4) or (n_leaves - 1, 2)
        A SciPy linkage or children pairs (``AgglomerativeClustering.children_``).
    leaf_labels : array-like of shape (n_samples,)
        The leaf (0..n_leaves-1) of each sample; ``np.arange(n)`` for a tree over samples.
    y : array-like of shape (n_samples,)
        Class labels.

    Returns
    -------
    float
        In ``(0, 1]``.

    Examples
    --------
    >>> tree = [[0, 1, 1, 2], [2, 3, 2, 2], [4, 5, 3, 4]]
    >>> dendrogram_purity(tree, [0, 0, 1, 1, 2, 2, 3, 3], ["a", "a", "a", "a", "b", "b", "b", "b"])
    1.0

    References
    ----------
    .. [1] K. A. Heller, Z. Ghahramani, "Bayesian Hierarchical Clustering", ICML 2005.
    """
    children, n_leaves = check_tree(linkage)
    leaf = _leaf_ids(leaf_labels)
    codes = check_labels(y, "y", leaf.size)
    return dendrogram_purity_counts(children, leaf_class_counts(leaf, codes, n_leaves))


@validate_params({"leaf_labels": ["array-like"], "y": ["array-like"]})
def leaf_purity(leaf_labels: Any, y: Any) -> float:
    """Leaf purity: the fraction of samples carrying their leaf's majority class.

    Parameters
    ----------
    leaf_labels : array-like of shape (n_samples,)
        Cluster of each sample.
    y : array-like of shape (n_samples,)
        Class labels.

    Returns
    -------
    float

    Examples
    --------
    >>> leaf_purity([0, 0, 1, 1], ["a", "b", "b", "b"])
    0.75
    """
    leaf = check_labels(leaf_labels, "leaf_labels")
    codes = check_labels(y, "y", leaf.size)
    m = np.zeros((int(leaf.max()) + 1, int(codes.max()) + 1))
    np.add.at(m, (leaf, codes), 1.0)
    return float(m.max(axis=1).sum() / leaf.size)


@validate_params(
    {
        "linkage": ["array-like"],
        "leaf_labels": ["array-like"],
        "y": ["array-like"],
        "true_linkage": ["array-like"],
    }
)
def lca_f1(linkage: Any, leaf_labels: Any, y: Any, true_linkage: Any) -> float:
    """LCA-F1 of a predicted tree against a reference tree over the classes.

    For every pair of samples, ``A`` = the samples under their lowest common ancestor in the
    predicted tree and ``B`` = the samples under the lowest common ancestor of their classes
    in the reference tree (their class itself when they share it). Precision is the mean of
    ``|A & B| / |A|`` over pairs, recall the mean of ``|A & B| / |B|``; the score is their
    harmonic mean (1 when the predicted tree has pure leaves and the reference's shape).

    Parameters
    ----------
    linkage : array-like of shape (n_leaves - 1, 4) or (n_leaves - 1, 2)
        The predicted tree (SciPy linkage or children pairs).
    leaf_labels : array-like of shape (n_samples,)
        The leaf of each sample.
    y : array-like of shape (n_samples,)
        Class labels; their sorted unique values are the reference tree's leaves 0..C-1.
    true_linkage : array-like of shape (C - 1, 4) or (C - 1, 2)
        The reference tree over the classes.

    Returns
    -------
    float
        In ``[0, 1]``.

    Examples
    --------
    >>> tree = [[0, 1, 1, 2], [2, 3, 2, 2], [4, 5, 3, 4]]
    >>> lca_f1(tree, [0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 1, 1, 2, 2, 3, 3], tree)
    1.0
    """
    children, n_leaves = check_tree(linkage)
    true_children, n_classes = check_tree(true_linkage, "true_linkage")
    leaf_arr = _leaf_ids(leaf_labels)
    codes = check_labels(y, "y", leaf_arr.size)
    if codes.max() + 1 != n_classes:
        raise DataError(
            f"y has {int(codes.max()) + 1} classes but true_linkage is a tree over {n_classes}.",
            argument="true_linkage",
        )
    m = leaf_class_counts(leaf_arr, codes, n_leaves)
    return lca_f1_counts(children, m, true_children)


class LogitsHierarchy(ParamsValidationMixin):
    """A binary tree over a flat model's clusters, from its logits alone (L2H).

    ``fit(logits)`` or, with ``model`` set, ``fit(X)`` (the logits are then the model's
    ``predict_log_proba``, ``log(predict_proba)`` or ``decision_function``, or for k-means
    ``-transform(X)**2 / temperature``). The leaves keep the flat model's argmax
    assignments; the merges start with the least confident clusters (see
    :func:`logits_to_hierarchy`). No gradients, no refitting: O(K^2 N) at worst.

    Parameters
    ----------
    aggregation : {"sum", "mean", "max"}, default "sum"
        How a group's confidence aggregates its clusters'.
    model : object or None, default None
        A fitted flat model to take logits from; ``None``: ``fit`` receives logits.
    temperature : float or None, default None
        For k-means models only: logits are ``-d**2 / temperature``; ``None`` uses the
        median squared distance of the samples to their own centre.

    Attributes
    ----------
    merges_ : list of (tuple, tuple)
        The K - 1 merges.
    linkage_ : ndarray of shape (K - 1, 4)
        SciPy linkage over the clusters (for ``scipy.cluster.hierarchy.dendrogram``).
    labels_ : ndarray of shape (n_samples,)
        The flat (argmax) cluster of each sample.
    confidence_ : ndarray of shape (K,)
        Mean top probability of each cluster's samples.
    n_clusters_ : int
        K.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[3.0, 2.5, 0, 0], [2.8, 2.6, 0.1, 0], [2.0, 4.0, 0, 0.2],
    ...               [1.9, 4.1, 0.3, 0], [0, 0, 5.0, 3.0], [0.1, 0, 5.2, 2.9],
    ...               [0, 0.2, 2.5, 3.5], [0, 0, 2.4, 3.6]])
    >>> h = LogitsHierarchy().fit(z)
    >>> h.merges_
    [((0,), (1,)), ((3,), (2,)), ((0, 1), (3, 2))]
    >>> h.cut(2).tolist()
    [0, 0, 0, 0, 1, 1, 1, 1]

    References
    ----------
    .. [1] E. Palumbo, M. Vandenhirtz, A. Ryser, I. Daunhawer, J. E. Vogt, "From Logits to
       Hierarchies: Hierarchical Clustering made Simple", ICML 2025 (arXiv 2410.07858).
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "aggregation": [Options(set(AGGREGATIONS))],
        "model": "no_validation",
        "temperature": [Interval(numbers.Real, 0, None, closed="neither"), None],
    }

    def __init__(self, aggregation: str = "sum", model: Any = None, temperature: float | None = None) -> None:
        self.aggregation = aggregation
        self.model = model
        self.temperature = temperature

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor parameters (scikit-learn's contract).

        Parameters
        ----------
        deep : bool, default True
            Unused (no nested estimators are cloned).

        Returns
        -------
        dict
        """
        return {"aggregation": self.aggregation, "model": self.model, "temperature": self.temperature}

    def set_params(self, **params: Any) -> LogitsHierarchy:
        """Set constructor parameters; returns ``self``.

        Parameters
        ----------
        **params
            Parameter names and values.

        Returns
        -------
        LogitsHierarchy
        """
        for name, value in params.items():
            if name not in self.get_params():
                raise DataError(f"{name} is not a parameter of LogitsHierarchy.", argument=name)
            setattr(self, name, value)
        return self

    def fit(self, X: Any, y: Any = None) -> LogitsHierarchy:
        """Build the hierarchy.

        Parameters
        ----------
        X : array-like
            Logits ``(n_samples, n_clusters)`` when ``model`` is None, else the model's input.
        y : None
            Ignored (scikit-learn's signature).

        Returns
        -------
        LogitsHierarchy
            ``self``.
        """
        self._validate_params()
        if self.model is None:
            z = check_logits(X, "X")
        else:
            z = check_logits(model_logits(self.model, X, self.temperature), "model's logits")
        self.merges_, self.labels_, self.confidence_ = l2h_merges(z, self.aggregation)
        self.n_clusters_ = z.shape[1]
        self.linkage_ = merges_to_linkage_array(self.merges_, self.n_clusters_)
        return self

    def cut(self, n_clusters: int) -> np.ndarray:
        """Flat labels of the fitted samples at the level with ``n_clusters`` groups.

        Parameters
        ----------
        n_clusters : int
            Between 1 and ``n_clusters_``; ``n_clusters_`` gives ``labels_``.

        Returns
        -------
        ndarray of shape (n_samples,)
            Group ids ``0..n_clusters-1`` (numbered by each group's smallest cluster id).
        """
        if not hasattr(self, "merges_"):
            raise NotFittedError("LogitsHierarchy is not fitted; call fit() first.")
        k = self.n_clusters_
        if (
            isinstance(n_clusters, bool)
            or not isinstance(n_clusters, numbers.Integral)
            or not (1 <= n_clusters <= k)
        ):
            raise DataError(
                f"n_clusters must be an int in [1, {k}]; got {n_clusters!r}.", argument="n_clusters"
            )
        parent = np.arange(k)
        for a, b in self.merges_[: k - int(n_clusters)]:
            parent[list(a) + list(b)] = min(a + b)  # a group is named by its smallest cluster
        _, group = np.unique(parent, return_inverse=True)
        return group[self.labels_]

    def dendrogram_purity(self, y: Any) -> float:
        """:func:`dendrogram_purity` of the fitted tree against the fitted samples' labels.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Class labels of the samples passed to ``fit``.

        Returns
        -------
        float
        """
        if not hasattr(self, "linkage_"):
            raise NotFittedError("LogitsHierarchy is not fitted; call fit() first.")
        return dendrogram_purity(self.linkage_, self.labels_, y)
