"""Fuzzy-boundary graph contrastive learning against GRACE (catalog row 004-06).

Y. Lin, H. Cai, J.-Y. Hang, H. Wang, Z. Yang, G. Lyu, "Mitigating Local Cohesion and Global
Sparseness in Graph Contrastive Learning with Fuzzy Boundaries", ICML 2025.
:class:`FuzzyBoundaryGCL` learns node embeddings of one graph with GRACE's contrastive loop (or,
``backbone="gae"``, a pre-trained graph auto-encoder fine-tuned with GRACE's contrastive term,
the paper's setting) and, switched on by ``fuzzy=True``, the paper's fuzzy-boundary
construction and contraction terms;
:func:`cluster_quality` measures what the paper claims they improve (intra-cluster
compactness, inter-cluster separation, k-means NMI/ARI, linear-probe accuracy);
:func:`make_community_graph` and :func:`load_karate_communities` are the graphs of the claim
tests. The paper's full text was not reachable: the reconstruction and every choice are in
docs/explain/fuzzy-boundary-gcl.md.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, MissingDependencyError, NotFittedError, ParameterError
from trustlab.explain._gcl_data import load_karate_communities, make_community_graph

__all__ = [
    "ClusterQuality",
    "FuzzyBoundaryGCL",
    "cluster_quality",
    "load_karate_communities",
    "make_community_graph",
]


def _graph(adjacency: Any) -> sparse.csr_matrix:
    from trustlab.fairness._graph_gen_inputs import check_adjacency  # shared graph checks (lazy)

    try:
        return check_adjacency(adjacency)
    except DataError as exc:
        if "no edges" not in str(exc):
            raise
        raise DataError(
            "adjacency has no edges; graph contrastive learning needs at least one edge "
            "(pass the graph's edges, or embed the features alone without a graph).",
            argument="adjacency",
        ) from None


def _features(features: Any, n_nodes: int) -> np.ndarray:
    from trustlab.fairness._graph_gen_inputs import check_node_features

    return check_node_features(features, n_nodes)


def _pair(value: Any, name: str) -> tuple[float, float]:
    """Two probabilities in [0, 1), one per view (GRACE's p_1, p_2)."""
    try:
        p = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        p = ()
    if len(p) != 2 or not all(0.0 <= v < 1.0 for v in p):
        raise ParameterError(
            f"{name} must be two probabilities in [0, 1), one per view, e.g. (0.2, 0.4); got {value!r}.",
            argument=name,
        )
    return (p[0], p[1])


class FuzzyBoundaryGCL(ParamsValidationMixin, BaseEstimator):
    """Node embeddings by graph contrastive learning with fuzzy boundaries (or plain GRACE).

    The encoder is GRACE's: two GCN layers (``hidden_dim``, then ``n_components`` units, ReLU),
    trained on two views of the graph (edges dropped with probabilities ``drop_edge``, feature
    columns masked with ``mask_feature``) through a projection head with the symmetric InfoNCE
    loss at ``temperature``, whose negatives are all other nodes of both views. With
    ``fuzzy=True`` the fuzzy-boundary terms join after ``warmup`` epochs (the paper fine-tunes
    a pre-trained encoder):

    - ``n_clusters`` centres start at k-means of the normalised embeddings; each epoch every
      node gets fuzzy c-means memberships ``u_ik`` (fuzzifier ``m``) and the centres take one
      fuzzy c-means step;
    - the **fuzzy boundary** of cluster ``k`` is the alpha-cut ``{i : u_ik >= alpha}``, wider
      than the crisp (argmax) cluster: it reaches into the neighbouring clusters;
    - **construction**: nodes in a common fuzzy boundary (co-membership
      ``S_ij = sum_k u_ik u_jk`` over the alpha-cut) are soft positives of each other
      (``construction_weight``) and their negative terms are down-weighted by ``1 - S_ij``:
      the local groups inside a boundary are bridged, not pushed apart;
    - **contraction**: ``contraction_weight * mean_i sum_k u_ik^m ||z_i - c_k||^2`` over the
      alpha-cut pulls the dispersed members of each fuzzy boundary to its centre.

    With ``fuzzy=False`` the loop is GRACE, step for step (the baseline).

    Parameters
    ----------
    n_clusters : int, default=2
        Number of fuzzy boundaries (clusters); used only with ``fuzzy=True``.
    n_components : int, default=32
        Embedding dimension.
    hidden_dim, projection_dim : int, default=64, 32
        Width of the first GCN layer and of the projection head.
    n_epochs : int, default=200
        Full-batch epochs (GRACE's Cora setting).
    learning_rate : float, default=0.005
    weight_decay : float, default=1e-5
        L2 added to the gradients (GRACE's setting).
    temperature : float, default=0.5
        InfoNCE temperature tau.
    drop_edge, mask_feature : tuple of two floats, default=(0.2, 0.4), (0.3, 0.4)
        Edge-dropping and feature-masking probabilities of the two views (GRACE's Cora values).
    fuzzy : bool, default=True
        Switch on the fuzzy-boundary terms; False is the GRACE baseline.
    fuzzifier : float, default=2.0
        Fuzzy c-means exponent ``m > 1``. In high dimensions ``m = 2`` gives near-uniform
        memberships that never reach ``alpha`` (Cora, 128-d, 7 clusters: largest membership
        ~0.15), which switches the fuzzy terms off; use 1.5 there (docs/explain/fuzzy-boundary-gcl.md).
    alpha : float, default=0.3
        Membership cut of the fuzzy boundary, in (0, 1).
    construction_weight, contraction_weight : float, default=1.0, 1.0
        Weights of the two fuzzy-boundary terms.
    warmup : int, default=50
        Pre-training epochs before the fuzzy terms start: GRACE epochs with
        ``backbone="grace"``; with ``backbone="gae"`` reconstruction-only epochs, for both arms.
    backbone : {"grace", "gae"}, default="grace"
        ``"grace"``: the loop above. ``"gae"``: the paper's setting as far as it is known, a
        pre-trained graph auto-encoder (Kipf & Welling, 2016: GCN encoder with a linear output
        layer, inner-product decoder, weighted cross-entropy on ``A + I``) pre-trained for
        ``warmup`` epochs on reconstruction alone, then fine-tuned on reconstruction + the
        GRACE contrastive term (+ the fuzzy terms with ``fuzzy=True``); ``fuzzy=False`` is the
        same loop without the fuzzy terms. Reconstruction is dense (``n x n``).
    random_state : None, int or numpy Generator
        Drives the initialisation, the views and k-means.

    Attributes
    ----------
    embedding_ : ndarray of shape (n_nodes, n_components)
        Embeddings of the fitted graph (the encoder on the whole graph, no augmentation).
    cluster_centers_ : ndarray of shape (n_clusters, n_components) or None
        Unit-norm centres of the fuzzy boundaries (None with ``fuzzy=False``).
    membership_ : ndarray of shape (n_nodes, n_clusters) or None
        Fuzzy memberships of the fitted nodes (rows sum to 1; None with ``fuzzy=False``).
    labels_ : ndarray of shape (n_nodes,) or None
        Crisp cluster of each node (argmax membership; None with ``fuzzy=False``).
    loss_curve_ : ndarray of shape (n_epochs,)
    n_features_in_ : int

    References
    ----------
    Y. Lin et al., "Mitigating Local Cohesion and Global Sparseness in Graph Contrastive
    Learning with Fuzzy Boundaries", ICML 2025. Y. Zhu et al., "Deep Graph Contrastive
    Representation Learning" (GRACE), ICML Workshop on Graph Representation Learning 2020.

    Examples
    --------
    >>> from trustlab.explain import FuzzyBoundaryGCL, make_community_graph
    >>> a, x, y = make_community_graph(60, 2, random_state=0)
    >>> gcl = FuzzyBoundaryGCL(n_clusters=2, n_epochs=20, warmup=5, random_state=0).fit(a, x)
    >>> gcl.embedding_.shape, gcl.membership_.shape
    ((60, 32), (60, 2))
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "n_clusters": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "hidden_dim": [Interval(numbers.Integral, 1, None, closed="left")],
        "projection_dim": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "temperature": [Interval(numbers.Real, 0, None, closed="neither")],
        "drop_edge": [tuple, list],
        "mask_feature": [tuple, list],
        "fuzzy": ["boolean"],
        "fuzzifier": [Interval(numbers.Real, 1, None, closed="neither")],
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "construction_weight": [Interval(numbers.Real, 0, None, closed="left")],
        "contraction_weight": [Interval(numbers.Real, 0, None, closed="left")],
        "warmup": [Interval(numbers.Integral, 0, None, closed="left")],
        "backbone": [Options({"grace", "gae"})],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_clusters: int = 2,
        n_components: int = 32,
        hidden_dim: int = 64,
        projection_dim: int = 32,
        n_epochs: int = 200,
        learning_rate: float = 0.005,
        weight_decay: float = 1e-5,
        temperature: float = 0.5,
        drop_edge: tuple[float, float] = (0.2, 0.4),
        mask_feature: tuple[float, float] = (0.3, 0.4),
        fuzzy: bool = True,
        fuzzifier: float = 2.0,
        alpha: float = 0.3,
        construction_weight: float = 1.0,
        contraction_weight: float = 1.0,
        warmup: int = 50,
        backbone: str = "grace",
        random_state: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.n_components = n_components
        self.hidden_dim = hidden_dim
        self.projection_dim = projection_dim
        self.n_epochs = n_epochs
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.temperature = temperature
        self.drop_edge = drop_edge
        self.mask_feature = mask_feature
        self.fuzzy = fuzzy
        self.fuzzifier = fuzzifier
        self.alpha = alpha
        self.construction_weight = construction_weight
        self.contraction_weight = contraction_weight
        self.warmup = warmup
        self.backbone = backbone
        self.random_state = random_state

    def fit(self, adjacency: Any, features: Any = None) -> FuzzyBoundaryGCL:
        """Learn the encoder on one graph.

        Parameters
        ----------
        adjacency : array-like, sparse matrix or networkx graph of shape (n_nodes, n_nodes)
            A simple undirected graph: 0/1, symmetric, no self-loops (the GCN adds its own),
            at least one edge. Disconnected graphs and isolated nodes are accepted: the GCN
            propagates within components and an isolated node keeps its own features.
        features : array-like of shape (n_nodes, d) or None
            Node features without NaN; None gives each node a one-hot identity feature (the
            usual input of a featureless graph; the encoder then cannot embed another graph).

        Returns
        -------
        self
        """
        self._validate_params()
        drop, mask = _pair(self.drop_edge, "drop_edge"), _pair(self.mask_feature, "mask_feature")
        a = _graph(adjacency)
        n = a.shape[0]
        x = np.eye(n) if features is None else _features(features, n)
        if self.fuzzy and self.n_clusters > n:
            raise ParameterError(
                f"n_clusters={self.n_clusters} exceeds the graph's {n} nodes; use at most {n} clusters.",
                argument="n_clusters",
            )
        if self.fuzzy and self.warmup >= self.n_epochs:
            raise ParameterError(
                f"warmup={self.warmup} leaves no fuzzy epoch of n_epochs={self.n_epochs}; "
                "use warmup < n_epochs (or fuzzy=False for GRACE alone).",
                argument="warmup",
            )
        try:
            from trustlab.explain._gcl_train import GCLConfig, train_gcl
        except ImportError as exc:  # pragma: no cover - torch is in the dev extra
            raise MissingDependencyError(
                "FuzzyBoundaryGCL needs torch; install it with `pip install trustlab[torch]`.",
                argument="torch",
            ) from exc
        on = bool(self.fuzzy)
        cfg = GCLConfig(
            n_components=int(self.n_components),
            hidden_dim=int(self.hidden_dim),
            projection_dim=int(self.projection_dim),
            n_epochs=int(self.n_epochs),
            learning_rate=float(self.learning_rate),
            weight_decay=float(self.weight_decay),
            temperature=float(self.temperature),
            drop_edge=drop,
            mask_feature=mask,
            n_clusters=int(self.n_clusters),
            fuzzifier=float(self.fuzzifier),
            alpha=float(self.alpha),
            construction_weight=float(self.construction_weight) if on else 0.0,
            contraction_weight=float(self.contraction_weight) if on else 0.0,
            warmup=int(self.warmup) if on else int(self.n_epochs),
            seed=int(make_generator(self.random_state).integers(2**31 - 1)),
            backbone=str(self.backbone),
            pretrain=int(self.warmup) if self.backbone == "gae" else 0,
        )
        with threadpool_limits(1):
            fitted = train_gcl(a, x, cfg)
        self.weights_ = fitted.weights
        self.embedding_ = fitted.embedding
        self.cluster_centers_ = fitted.centers
        self.membership_ = fitted.membership
        self.labels_ = None if fitted.membership is None else fitted.membership.argmax(axis=1)
        self.loss_curve_ = fitted.loss_curve
        self.n_features_in_ = x.shape[1]
        self.identity_features_ = features is None
        self.n_nodes_ = n
        self.backbone_ = str(self.backbone)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "embedding_"):
            raise NotFittedError(
                "FuzzyBoundaryGCL is not fitted; call fit(adjacency, features) first.", argument="self"
            )

    def transform(self, adjacency: Any = None, features: Any = None) -> np.ndarray:
        """Embed a graph with the trained encoder (no augmentation).

        Parameters
        ----------
        adjacency : array-like, sparse matrix, networkx graph or None
            None returns the fitted graph's embeddings (``embedding_``).
        features : array-like of shape (n_nodes, n_features_in_) or None
            The new graph's node features (required unless the model was fitted with
            identity features on a graph of the same size).

        Returns
        -------
        ndarray of shape (n_nodes, n_components)
        """
        self._check_fitted()
        if adjacency is None:
            if features is not None:
                raise ParameterError(
                    "features without adjacency: pass both to embed a graph, or neither for embedding_.",
                    argument="features",
                )
            return self.embedding_.copy()
        a = _graph(adjacency)
        n = a.shape[0]
        if features is None:
            if not (self.identity_features_ and n == self.n_nodes_):
                raise DataError(
                    "features is None but the encoder expects "
                    f"{self.n_features_in_} features per node; pass the new graph's features.",
                    argument="features",
                )
            x = np.eye(n)
        else:
            x = _features(features, n)
        if x.shape[1] != self.n_features_in_:
            raise DataError(
                f"features has {x.shape[1]} columns but the encoder was fitted on {self.n_features_in_}; "
                "pass the same features.",
                argument="features",
            )
        from trustlab.explain._gcl_train import encode

        with threadpool_limits(1):
            return encode(a, x, self.weights_, linear_out=self.backbone_ == "gae")

    def fit_transform(self, adjacency: Any, features: Any = None) -> np.ndarray:
        """Fit on the graph and return its node embeddings (``fit(adjacency, features).embedding_``).

        Parameters
        ----------
        adjacency, features
            As in :meth:`fit`.

        Returns
        -------
        ndarray of float, shape (n_nodes, dim)
        """
        return self.fit(adjacency, features).embedding_.copy()


@dataclass(frozen=True)
class ClusterQuality:
    """How well embeddings group the known clusters (:func:`cluster_quality`).

    Attributes
    ----------
    nmi, ari : float
        Normalised mutual information and adjusted Rand index of k-means (``k`` = number of
        labels, on the L2-normalised embeddings) against the labels.
    compactness : float
        Mean distance of a node to its own label's centroid (lower: more compact).
    separation : float
        Mean distance between the label centroids (higher: more separated).
    compactness_ratio : float
        ``compactness / separation`` (lower is better).
    silhouette : float
        Silhouette of the labels on the normalised embeddings (higher is better).
    probe_accuracy : float
        Linear-probe (logistic regression) accuracy, stratified ``cv``-fold cross-validation.
    local_groups : float
        Mean number, over the classes, of separate groups a class falls into at radius ``eps``
        (connected components of the graph linking a class's nodes closer than ``eps``: DBSCAN
        with one sample per core). 1 is a cohesive class; more is the paper's *local cohesion*
        (a class split into small groups), as in its quantitative analysis at DBSCAN radii.

    See Also
    --------
    cluster_quality : builds it.
    """

    nmi: float
    ari: float
    compactness: float
    separation: float
    compactness_ratio: float
    silhouette: float
    probe_accuracy: float
    local_groups: float


def _n_groups(z: np.ndarray, eps: float) -> int:
    """Connected components of the ``eps``-neighbourhood graph of the rows of ``z``."""
    from scipy.sparse.csgraph import connected_components
    from scipy.spatial.distance import cdist

    return int(connected_components(sparse.csr_matrix(cdist(z, z) < eps), directed=False)[0])


@validate_params(
    {
        "cv": [Interval(numbers.Integral, 2, None, closed="left")],
        "eps": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
)
def cluster_quality(
    embeddings: Any, labels: Any, *, cv: int = 5, eps: float = 0.3, random_state: Any = 0
) -> ClusterQuality:
    """Intra-cluster compactness, inter-cluster separation, k-means NMI/ARI and a linear probe.

    The quantities the fuzzy-boundary paper reports for node embeddings (Lin et al., ICML
    2025): clustering quality (NMI, ARI of k-means), node classification (here a linear probe)
    and the compactness/separation of the true clusters. Distances are Euclidean between
    L2-normalised embeddings (the space the contrastive loss works in).

    Parameters
    ----------
    embeddings : array-like of shape (n_nodes, d)
    labels : array-like of shape (n_nodes,)
        Known cluster of each node: at least two clusters, each with at least ``cv`` nodes.
    cv : int, default=5
        Folds of the linear probe.
    eps : float, default=0.3
        Radius of :attr:`ClusterQuality.local_groups` (distances between unit vectors are in
        [0, 2]).
    random_state : None, int or numpy Generator, default=0
        Seeds k-means and the probe's folds.

    Returns
    -------
    ClusterQuality

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[1, 0.1], [1, -0.1], [1, 0], [0.1, 1], [-0.1, 1], [0, 1]] * 2)
    >>> q = cluster_quality(z, [0, 0, 0, 1, 1, 1] * 2, cv=2)
    >>> round(q.nmi, 3), round(q.probe_accuracy, 3), q.compactness < q.separation
    (1.0, 1.0, True)
    """
    from sklearn.cluster import KMeans
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, silhouette_score
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    z = check_numeric_array(embeddings, "embeddings", ndim=2, min_rows=2)
    y = np.asarray(labels)
    if y.ndim != 1 or y.shape[0] != z.shape[0]:
        raise DataError(
            f"labels must be 1-dimensional with one label per row of embeddings ({z.shape[0]}), "
            f"got shape {y.shape}.",
            argument="labels",
        )
    classes, codes = np.unique(y, return_inverse=True)
    counts = np.bincount(codes)
    if classes.size < 2 or counts.min() < cv:
        raise DataError(
            f"labels need at least 2 clusters of at least cv={cv} nodes each; got sizes {counts.tolist()}.",
            argument="labels",
        )
    zn = z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
    seed = int(make_generator(random_state).integers(2**31 - 1))
    k = classes.size
    with threadpool_limits(1):
        pred = KMeans(k, n_init=10, random_state=seed).fit_predict(zn)
        probe = cross_val_score(
            LogisticRegression(max_iter=2000),
            zn,
            codes,
            cv=StratifiedKFold(cv, shuffle=True, random_state=seed),
        )
    centroids = np.stack([zn[codes == c].mean(axis=0) for c in range(k)])
    compact = float(np.mean([np.linalg.norm(zn[codes == c] - centroids[c], axis=1).mean() for c in range(k)]))
    iu = np.triu_indices(k, 1)
    sep = float(np.linalg.norm(centroids[:, None, :] - centroids[None, :, :], axis=2)[iu].mean())
    return ClusterQuality(
        nmi=float(normalized_mutual_info_score(codes, pred)),
        ari=float(adjusted_rand_score(codes, pred)),
        compactness=compact,
        separation=sep,
        compactness_ratio=compact / max(sep, 1e-12),
        silhouette=float(silhouette_score(zn, codes)),
        probe_accuracy=float(probe.mean()),
        local_groups=float(np.mean([_n_groups(zn[codes == c], float(eps)) for c in range(k)])),
    )
