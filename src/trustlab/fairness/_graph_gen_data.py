"""Graphs with a sensitive node attribute for fair graph generation (row 003-04).

A stochastic block model with planted homophily and feature bias (a stated generative process),
Zachary's karate club as it ships with networkx (faction = sensitive attribute), and a
similarity graph over a sample of the shipped Ecdat ``Benefits`` workers built the way NIFTY
(Agarwal et al., UAI 2021) builds its German / Credit / Bail graphs. Data card: docs/data-card.md.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from scipy import sparse
from threadpoolctl import threadpool_limits

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import make_generator
from trustlab.errors import ParameterError

__all__ = [
    "BENEFITS_GRAPH_FEATURES",
    "KARATE_FEATURES",
    "load_benefits_graph",
    "load_karate_fairness",
    "make_biased_sbm",
]

KARATE_FEATURES = ("laplacian_pe1", "laplacian_pe2", "log_strength", "clustering")
_BENEFITS_NUMERIC = ("stateur", "statemb", "age", "tenure", "yrdispl", "rr")
_BENEFITS_BINARY = ("school12", "smsa", "married", "dkids", "dykids", "head")
BENEFITS_GRAPH_FEATURES = _BENEFITS_NUMERIC + _BENEFITS_BINARY
_BENEFITS_ROWS = 4877
_SENSITIVE_CODE = {"sex": "female", "nwhite": "yes"}


@validate_params(
    {
        "n_nodes": [Interval(numbers.Integral, 8, None, closed="left")],
        "minority": [Interval(numbers.Real, 0, 0.5, closed="right")],
        "p_within": [Interval(numbers.Real, 0, 1, closed="right")],
        "p_between": [Interval(numbers.Real, 0, 1, closed="left")],
        "n_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_biased": [Interval(numbers.Integral, 0, None, closed="left")],
        "feature_shift": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_biased_sbm(
    n_nodes: int = 300,
    minority: float = 0.4,
    p_within: float = 0.1,
    p_between: float = 0.02,
    n_features: int = 8,
    n_biased: int = 4,
    feature_shift: float = 1.0,
    random_state: Any = None,
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """A two-group SBM with planted homophily and feature bias.

    Node ``i`` is in the minority group (``s = 1``) for the first ``round(minority * n_nodes)``
    nodes, else ``s = 0``. Each pair is linked independently with probability ``p_within`` if
    both nodes are in the same group and ``p_between`` otherwise (structural bias when
    ``p_within > p_between``). Features are ``N(0, 1)`` plus ``feature_shift * s`` on the first
    ``n_biased`` columns (feature bias).

    Parameters
    ----------
    n_nodes : int, default=300
    minority : float, default=0.4
        Fraction of nodes in group ``s = 1``.
    p_within, p_between : float, default=0.1, 0.02
        Link probabilities inside a group and across groups.
    n_features, n_biased : int, default=8, 4
        Feature count, and how many of them depend on ``s``.
    feature_shift : float, default=1.0
        Mean shift of the biased features in group 1 (in units of their noise sd).
    random_state : None, int or numpy Generator

    Returns
    -------
    adjacency : scipy.sparse.csr_matrix of shape (n_nodes, n_nodes)
    features : ndarray of shape (n_nodes, n_features)
    sensitive : ndarray of shape (n_nodes,)

    Examples
    --------
    >>> a, x, s = make_biased_sbm(60, random_state=0)
    >>> a.shape, x.shape, int(s.sum())
    ((60, 60), (60, 8), 24)
    """
    if n_biased > n_features:
        raise ParameterError(
            f"n_biased={n_biased} exceeds n_features={n_features}; bias at most every feature.",
            argument="n_biased",
        )
    rng = make_generator(random_state)
    s = np.zeros(n_nodes, dtype=np.intp)
    s[: round(minority * n_nodes)] = 1
    prob = np.where(s[:, None] == s[None, :], p_within, p_between)
    upper = np.triu(rng.random((n_nodes, n_nodes)) < prob, k=1)
    a = sparse.csr_matrix((upper | upper.T).astype(float))
    x = rng.standard_normal((n_nodes, n_features))
    x[:, :n_biased] += feature_shift * s[:, None]
    return a, x, s


def load_karate_fairness() -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """Zachary's karate club (34 members, 78 ties) with the faction as the sensitive attribute.

    The graph ships with networkx (``nx.karate_club_graph()``, Zachary 1977): ``club`` (``"Mr.
    Hi"`` / ``"Officer"``) is the sensitive attribute (``s = 1`` for ``"Officer"``). The data has
    no node features, so each member gets the features a GNN is usually given on a featureless
    graph (:data:`KARATE_FEATURES`): a two-dimensional Laplacian positional encoding (the
    eigenvectors of the 2nd and 3rd smallest eigenvalues of the normalised Laplacian, signs fixed
    so that member 0 is non-negative), ``log(1 + strength)`` with Zachary's interaction counts
    (the ``weight`` edge attribute) and the local clustering coefficient. The positional encoding
    follows the factions (feature bias), as the ties do (the factions are homophilous:
    structural bias).

    Returns
    -------
    adjacency : scipy.sparse.csr_matrix of shape (34, 34)
    features : ndarray of shape (34, 4)
    sensitive : ndarray of shape (34,)

    Examples
    --------
    >>> a, x, s = load_karate_fairness()
    >>> a.shape, x.shape, int(a.nnz // 2), int(s.sum())
    ((34, 34), (34, 4), 78, 17)
    """
    import networkx as nx

    g = nx.karate_club_graph()
    nodes = list(g.nodes)
    a = sparse.csr_matrix(nx.to_scipy_sparse_array(g, nodelist=nodes, weight=None, format="csr"), dtype=float)
    strength = np.array([g.degree(v, weight="weight") for v in nodes], dtype=float)
    clustering = nx.clustering(g)
    lap = nx.normalized_laplacian_matrix(g, nodelist=nodes, weight=None).toarray()
    with threadpool_limits(1):
        _, vecs = np.linalg.eigh(lap)
    pe = vecs[:, 1:3] * np.where(vecs[0, 1:3] < 0, -1.0, 1.0)[None, :]
    x = np.column_stack([pe, np.log1p(strength), [clustering[v] for v in nodes]]).astype(float)
    s = np.array([g.nodes[v]["club"] == "Officer" for v in nodes], dtype=np.intp)
    return a, x, s


@validate_params(
    {
        "n_nodes": [Interval(numbers.Integral, 10, _BENEFITS_ROWS, closed="both")],
        "sensitive": [Options(set(_SENSITIVE_CODE))],
        "threshold": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }
)
def load_benefits_graph(
    n_nodes: int = 300,
    sensitive: str = "sex",
    threshold: float = 0.8,
    random_state: Any = 0,
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """A feature-similarity graph of displaced workers from the shipped Ecdat ``Benefits`` table.

    Built the way NIFTY (Agarwal, Lakkaraju and Zitnik, UAI 2021) builds its German credit,
    Credit default and Bail graphs from tables: each individual is a node and is linked to the
    individuals whose feature vectors are most similar to its own. Here:

    1. ``n_nodes`` of the 4,877 workers of :func:`trustlab.datasets.load_benefits` are drawn
       without replacement (``random_state``; kept in table order).
    2. Node features (:data:`BENEFITS_GRAPH_FEATURES`): the six numeric columns ``stateur``,
       ``statemb``, ``age``, ``tenure``, ``yrdispl``, ``rr`` and the six yes/no columns
       ``school12``, ``smsa``, ``married``, ``dkids``, ``dykids``, ``head`` (yes = 1), each
       standardised over the sample (mean 0, sd 1). Left out: the outcome ``ui``, the constant
       ``bluecol``, the nominal ``state`` code and ``joblost`` and both sensitive columns
       (``sex``, ``nwhite``), so no link is made on a sensitive attribute directly.
    3. Similarity ``sim(i, j) = 1 / (1 + ||x_i - x_j||_2)``; ``i`` and ``j`` are linked when
       ``sim(i, j) > threshold * max_{l != i} sim(i, l)`` for ``i`` or for ``j`` (NIFTY's
       rule, symmetrised; NIFTY uses 0.8 for German credit, the default here).

    Every node has at least one link (its most similar worker). Deterministic given
    ``random_state``.

    Parameters
    ----------
    n_nodes : int, default=300
        Workers sampled (10 to 4,877).
    sensitive : {"sex", "nwhite"}, default="sex"
        The sensitive attribute: ``s = 1`` for ``sex == "female"`` or ``nwhite == "yes"``.
    threshold : float, default=0.8
        NIFTY's relative similarity threshold in (0, 1): lower links more workers.
    random_state : None, int or numpy Generator, default=0
        Draws the sample.

    Returns
    -------
    adjacency : scipy.sparse.csr_matrix of shape (n_nodes, n_nodes)
    features : ndarray of shape (n_nodes, 12)
    sensitive : ndarray of shape (n_nodes,)

    Examples
    --------
    >>> a, x, s = load_benefits_graph(60, random_state=0)
    >>> a.shape, x.shape, bool((a.sum(axis=1) > 0).all())
    ((60, 60), (60, 12), True)
    """
    from scipy.spatial.distance import cdist

    from trustlab.datasets import load_benefits

    df = load_benefits()
    rng = make_generator(random_state)
    rows = np.sort(rng.choice(len(df), size=int(n_nodes), replace=False))
    sample = df.iloc[rows]
    x = np.column_stack(
        [sample[list(_BENEFITS_NUMERIC)].to_numpy(dtype=float)]
        + [(sample[c] == "yes").to_numpy(dtype=float) for c in _BENEFITS_BINARY]
    )
    sd = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    sim = 1.0 / (1.0 + cdist(x, x))
    np.fill_diagonal(sim, -np.inf)
    linked = sim > threshold * sim.max(axis=1, keepdims=True)
    linked |= linked.T
    s = (sample[sensitive] == _SENSITIVE_CODE[sensitive]).to_numpy(dtype=np.intp)
    return sparse.csr_matrix(linked.astype(float)), x, s
