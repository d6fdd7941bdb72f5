"""The graphs of the fuzzy-boundary GCL claim tests (row 004-06; private module).

A planted-partition SBM with noisy community features (a stated generative process) and
Zachary's karate club as it ships with networkx (factions as clusters). Data card:
docs/data-card.md. Re-exported by :mod:`trustlab.explain.graph_contrastive`.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from scipy import sparse

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import ParameterError

__all__ = ["load_karate_communities", "make_community_graph"]


@validate_params(
    {
        "n_nodes": [Interval(numbers.Integral, 4, None, closed="left")],
        "n_communities": [Interval(numbers.Integral, 2, None, closed="left")],
        "p_within": [Interval(numbers.Real, 0, 1, closed="right")],
        "p_between": [Interval(numbers.Real, 0, 1, closed="left")],
        "n_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "feature_signal": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_community_graph(
    n_nodes: int = 200,
    n_communities: int = 4,
    p_within: float = 0.1,
    p_between: float = 0.02,
    n_features: int = 16,
    feature_signal: float = 0.6,
    random_state: Any = None,
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """A planted-partition SBM with noisy community features (the claim tests' stated process).

    Node ``i`` is in community ``i * n_communities // n_nodes`` (equal blocks). Each pair is
    linked independently with probability ``p_within`` inside a community and ``p_between``
    across. Community ``c`` has a mean ``mu_c ~ N(0, I)`` in ``n_features`` dimensions; node
    features are ``feature_signal * mu_c + N(0, I)``: weak alone, informative with the graph.

    Parameters
    ----------
    n_nodes : int, default=200
    n_communities : int, default=4
    p_within, p_between : float, default=0.1, 0.02
    n_features : int, default=16
    feature_signal : float, default=0.6
    random_state : None, int or numpy Generator

    Returns
    -------
    adjacency : scipy.sparse.csr_matrix of shape (n_nodes, n_nodes)
    features : ndarray of shape (n_nodes, n_features)
    communities : ndarray of shape (n_nodes,)

    Examples
    --------
    >>> a, x, y = make_community_graph(40, 2, random_state=0)
    >>> a.shape, x.shape, np.bincount(y).tolist()
    ((40, 40), (40, 16), [20, 20])
    """
    if n_communities > n_nodes:
        raise ParameterError(
            f"n_communities={n_communities} exceeds n_nodes={n_nodes}; use at most n_nodes communities.",
            argument="n_communities",
        )
    rng = make_generator(random_state)
    y = np.arange(n_nodes) * n_communities // n_nodes
    prob = np.where(y[:, None] == y[None, :], p_within, p_between)
    upper = np.triu(rng.random((n_nodes, n_nodes)) < prob, k=1)
    a = sparse.csr_matrix((upper | upper.T).astype(float))
    means = rng.standard_normal((n_communities, n_features))
    x = feature_signal * means[y] + rng.standard_normal((n_nodes, n_features))
    return a, x, y.astype(np.intp)


def load_karate_communities() -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """Zachary's karate club (ships with networkx) with one-hot identity features and its factions.

    The 34 members' 78 ties (Zachary 1977); the label is the faction each member joined after
    the split (``1`` for ``"Officer"``, ``0`` for ``"Mr. Hi"``). The graph has no node features;
    the features are the identity (one-hot per member), the usual input of a GCN on a
    featureless graph. Data card: docs/data-card.md.

    Returns
    -------
    adjacency : scipy.sparse.csr_matrix of shape (34, 34)
    features : ndarray of shape (34, 34)
    factions : ndarray of shape (34,)

    Examples
    --------
    >>> a, x, y = load_karate_communities()
    >>> a.shape, x.shape, int(a.nnz // 2), int(y.sum())
    ((34, 34), (34, 34), 78, 17)
    """
    from trustlab.fairness._graph_gen_data import load_karate_fairness

    a, _, factions = load_karate_fairness()
    return a, np.eye(a.shape[0]), factions
