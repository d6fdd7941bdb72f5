"""A small graph classifier and motif graphs to explain with GIST (row 003-10; private module).

:class:`GraphGINClassifier` is a graph isomorphism network (Xu et al., ICLR 2019) on dense
adjacency batches: node features ``[1, degree]``, sum aggregation, sum and max read-out, trained
full batch in torch. :func:`make_house_graphs` is the stated process of the synthetic task.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from threadpoolctl import threadpool_limits

from trustlab._param_validation import Interval, ParamsValidationMixin, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, NotFittedError
from trustlab.explain._graph_cf_core import check_graphs, pad_graphs

__all__ = ["GraphGINClassifier", "make_house_graphs", "make_motif_graphs"]


class GraphGINClassifier(ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """A graph isomorphism network that classifies whole graphs (the oracle GIST explains).

    Each layer maps ``h -> MLP(h + A h)`` (sum aggregation, a two-layer ReLU MLP); the graph
    vector concatenates the sum and the max of the node states over the layers; a linear layer
    gives the class logits. Node features are ``[1, degree]`` (structure-only graphs). Adam on
    the full batch with cross-entropy; deterministic for ``random_state``.

    Parameters
    ----------
    hidden : int, default=32
        Width of every layer.
    n_layers : int, default=3
        Message-passing layers.
    epochs : int, default=150
        Full-batch Adam steps.
    learning_rate : float, default=0.01
        Adam's step size.
    random_state : int or None, default=None
        Seeds the initialisation.

    Attributes
    ----------
    classes_ : ndarray
        The class labels.

    Examples
    --------
    >>> graphs, y = make_house_graphs(40, random_state=0)
    >>> clf = GraphGINClassifier(epochs=30, random_state=0).fit(graphs, y)
    >>> clf.predict(graphs[:2]).shape
    (2,)

    References
    ----------
    .. [1] K. Xu, W. Hu, J. Leskovec, S. Jegelka, "How Powerful are Graph Neural Networks?",
       ICLR 2019.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "hidden": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_layers": [Interval(numbers.Integral, 1, None, closed="left")],
        "epochs": [Interval(numbers.Integral, 0, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        hidden: int = 32,
        n_layers: int = 3,
        epochs: int = 150,
        learning_rate: float = 0.01,
        random_state: int | None = None,
    ) -> None:
        self.hidden = hidden
        self.n_layers = n_layers
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.random_state = random_state

    def _init(self, n_classes: int) -> list[Any]:
        import torch

        gen = torch.Generator().manual_seed(0 if self.random_state is None else int(self.random_state))

        def dense(fan_in: int, fan_out: int) -> list[Any]:
            bound = (6.0 / (fan_in + fan_out)) ** 0.5
            w = (
                (torch.rand(fan_in, fan_out, generator=gen, dtype=torch.float32) * 2 - 1) * bound
            ).requires_grad_()
            return [w, torch.zeros(fan_out, dtype=torch.float32, requires_grad=True)]

        params: list[Any] = []
        width = 2
        for _ in range(self.n_layers):
            params += dense(width, self.hidden) + dense(self.hidden, self.hidden)
            width = self.hidden
        return params + dense(2 * self.hidden * self.n_layers, n_classes)

    @staticmethod
    def _batch(graphs: list[np.ndarray]) -> tuple[Any, Any]:
        import torch

        a_np, m_np = pad_graphs(graphs, max(len(g) for g in graphs))
        return torch.as_tensor(a_np, dtype=torch.float32), torch.as_tensor(m_np, dtype=torch.float32)[
            ..., None
        ]

    def _logits(self, params: list[Any], a: Any, mask: Any) -> Any:
        import torch

        h = torch.cat([mask, a.sum(-1, keepdim=True)], dim=-1)
        pooled = []
        for layer in range(self.n_layers):
            w1, b1, w2, b2 = params[4 * layer : 4 * layer + 4]
            h = torch.relu(torch.relu((h + a @ h) @ w1 + b1) @ w2 + b2) * mask
            pooled += [h.sum(1), (h - 1e9 * (1 - mask)).amax(1)]
        w, b = params[-2:]
        return torch.cat(pooled, dim=-1) @ w + b

    def fit(self, graphs: Any, y: Any) -> GraphGINClassifier:
        """Train on ``graphs`` (list of adjacency matrices or networkx graphs) with labels ``y``.

        Parameters
        ----------
        graphs : list of array-like or networkx graphs
            Connected undirected graphs without self-loops.
        y : array-like of shape (n_graphs,)
            Class labels (at least two classes).

        Returns
        -------
        GraphGINClassifier
        """
        import torch

        from trustlab._adam import Adam

        self._validate_params()
        gs = check_graphs(graphs)
        labels = np.asarray(y)
        if labels.shape != (len(gs),):
            raise DataError(
                f"y must hold one label per graph ({len(gs)}), got shape {labels.shape}.", argument="y"
            )
        self.classes_, codes = np.unique(labels, return_inverse=True)
        if self.classes_.size < 2:
            raise DataError("y has a single class; a classifier needs at least two.", argument="y")
        params = self._init(self.classes_.size)
        adam = Adam(params, self.learning_rate)
        target = torch.as_tensor(codes, dtype=torch.long)
        a, mask = self._batch(gs)
        with threadpool_limits(1):
            for _ in range(self.epochs):
                loss = torch.nn.functional.cross_entropy(self._logits(params, a, mask), target)
                adam.step(torch.autograd.grad(loss, params))
        self.params_ = [p.detach() for p in params]
        return self

    def predict_proba(self, graphs: Any) -> np.ndarray:
        """Class probabilities of ``graphs``.

        Parameters
        ----------
        graphs : list of array-like or networkx graphs
            Simple undirected graphs (disconnected ones allowed: counterfactuals may be).

        Returns
        -------
        ndarray of shape (n_graphs, n_classes)
        """
        import torch

        if not hasattr(self, "params_"):
            raise NotFittedError(
                "GraphGINClassifier is not fitted; call fit(graphs, y) first.", argument="self"
            )
        gs = check_graphs(graphs, connected=False)  # counterfactuals may be disconnected
        with torch.no_grad(), threadpool_limits(1):
            return torch.softmax(self._logits(self.params_, *self._batch(gs)), dim=-1).double().numpy()

    def predict(self, graphs: Any) -> np.ndarray:
        """Predicted class of each graph.

        Parameters
        ----------
        graphs : list of array-like or networkx graphs
            Simple undirected graphs.

        Returns
        -------
        ndarray of shape (n_graphs,)
        """
        return self.classes_[self.predict_proba(graphs).argmax(axis=1)]


@validate_params(
    {
        "n_graphs": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_nodes": [Interval(numbers.Integral, 8, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_house_graphs(
    n_graphs: int = 200, n_nodes: int = 12, *, random_state: Any = None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Random trees without (label 0) or with (label 1) a house motif.

    Label 0: a uniform random labelled tree on ``n_nodes`` nodes. Label 1: a uniform random
    labelled tree on ``n_nodes - 5`` nodes with a house (a 4-cycle with a triangle roof: 5 nodes,
    6 edges) joined to a random tree node by one edge. Node order is shuffled. (The Tree-house
    motif graphs of the GNN-explanation literature, at a small size.)

    Parameters
    ----------
    n_graphs : int, default=200
        Number of graphs, labels alternating 0, 1.
    n_nodes : int, default=12
        Nodes per graph (>= 8).
    random_state : None, int or numpy Generator
        Drives trees, attachment points and node order.

    Returns
    -------
    graphs : list of ndarray of shape (n_nodes, n_nodes)
    labels : ndarray of shape (n_graphs,)

    Examples
    --------
    >>> gs, ys = make_house_graphs(4, random_state=0)
    >>> [int(g.sum() / 2) for g in gs], ys.tolist()
    ([11, 13, 11, 13], [0, 1, 0, 1])
    """
    import networkx as nx

    house = nx.house_graph()
    rng = make_generator(random_state)
    graphs, labels = [], []
    for i in range(n_graphs):
        if i % 2 == 1:
            g = nx.random_labeled_tree(n_nodes - 5, seed=int(rng.integers(2**31)))
            g = nx.disjoint_union(g, house)
            g.add_edge(int(rng.integers(n_nodes - 5)), int(rng.integers(n_nodes - 5, n_nodes)))
        else:
            g = nx.random_labeled_tree(n_nodes, seed=int(rng.integers(2**31)))
        perm = rng.permutation(n_nodes)
        graphs.append(nx.to_numpy_array(g, nodelist=range(n_nodes))[np.ix_(perm, perm)])
        labels.append(i % 2)
    return graphs, np.array(labels)


_MOTIFS = ("house", "cycle", "grid")


def _motif(name: str) -> Any:
    import networkx as nx

    if name == "house":
        return nx.house_graph()  # 5 nodes, 6 edges: a 4-cycle with a triangle roof
    if name == "cycle":
        return nx.cycle_graph(6)  # 6 nodes, 6 edges
    return nx.convert_node_labels_to_integers(nx.grid_2d_graph(2, 3))  # 6 nodes, 7 edges


@validate_params(
    {
        "n_graphs": [Interval(numbers.Integral, 3, None, closed="left")],
        "n_nodes": [Interval(numbers.Integral, 9, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_motif_graphs(
    n_graphs: int = 300, n_nodes: int = 12, *, random_state: Any = None
) -> tuple[list[np.ndarray], np.ndarray]:
    """Random trees with one of three motifs attached: a three-class graph task with a known rule.

    Label 0: a house (5 nodes, 6 edges: a 4-cycle with a triangle roof); label 1: a 6-cycle;
    label 2: a 2 x 3 grid (6 nodes, 7 edges: two 4-cycles sharing an edge). The motif is
    joined by one edge to a random node of a uniform random labelled tree that fills the graph
    to ``n_nodes`` nodes; node order is shuffled. The label is the motif (the multiclass
    motif tasks of the GNN-explanation literature, at a small size).

    Parameters
    ----------
    n_graphs : int, default=300
        Number of graphs, labels cycling 0, 1, 2.
    n_nodes : int, default=12
        Nodes per graph (>= 9).
    random_state : None, int or numpy Generator
        Drives trees, attachment points and node order.

    Returns
    -------
    graphs : list of ndarray of shape (n_nodes, n_nodes)
    labels : ndarray of shape (n_graphs,)

    Examples
    --------
    >>> gs, ys = make_motif_graphs(3, random_state=0)
    >>> [int(g.sum() / 2) for g in gs], ys.tolist()
    ([13, 12, 13], [0, 1, 2])
    """
    import networkx as nx

    rng = make_generator(random_state)
    graphs, labels = [], []
    for i in range(n_graphs):
        motif = _motif(_MOTIFS[i % 3])
        k = motif.number_of_nodes()
        g = nx.disjoint_union(nx.random_labeled_tree(n_nodes - k, seed=int(rng.integers(2**31))), motif)
        g.add_edge(int(rng.integers(n_nodes - k)), int(rng.integers(n_nodes - k, n_nodes)))
        perm = rng.permutation(n_nodes)
        graphs.append(nx.to_numpy_array(g, nodelist=range(n_nodes))[np.ix_(perm, perm)])
        labels.append(i % 3)
    return graphs, np.array(labels)
