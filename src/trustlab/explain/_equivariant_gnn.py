"""A small tensor-field network (TFN) on 3D point graphs, degrees 0 to 3, for EquiGX.

EquiGX (Ling et al., ICML 2025) explains spherical equivariant GNNs built from three layer
types: the tensor-product convolution (node features x spherical harmonics of the edge
direction, weighted per edge by a radial MLP), the equivariant linear layer and the norm
activation, followed by sum pooling. The authors use e3nn's ``FullyConnectedTensorProduct``,
``Linear`` and ``NormActivation`` with spherical harmonics up to degree ``l = 3`` (``TFN(l=3)``
in their ``SCOP.ipynb``). This module writes the same layer types in plain torch, with the
natural-parity irreps ``0e, 1o, 2e, 3o`` up to ``max_degree`` (real spherical harmonics and
Wigner 3j coupling from :mod:`trustlab.explain._equigx_so3`), so that the relevance rules in
:mod:`trustlab.explain.equigx` can reach every intermediate tensor (see
``docs/explain/equigx.md`` for why e3nn is not used).

Features are a tuple ``x = (x_0, ..., x_L)``, ``x_l`` of shape ``(n, C_l, 2l + 1)``. The tensor
product of ``x`` with the spherical harmonics ``Y = (Y_0, ..., Y_L)`` keeps every path
``l1 x l2 -> l3`` with ``|l1 - l2| <= l3 <= l1 + l2`` and ``l1 + l2 + l3`` even (for
``max_degree=1``: ``0x0->0``, ``1x1->0``, ``0x1->1``, ``1x0->1``); the odd paths (e.g. the
``1x1->1e`` cross product) would need the pseudo-tensor irreps ``0o, 1e, 2o, ...`` that the
authors' hidden layers also carry and are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from trustlab._threads import one_thread
from trustlab.errors import ParameterError
from trustlab.explain._equigx_so3 import MAX_DEGREE, allowed_paths, spherical_harmonics, wigner_3j

__all__ = ["GeometricGraph", "TinyTFN", "make_batch", "radius_graph", "train_tfn"]

Features = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class GeometricGraph:
    """Tensors of one or several 3D point graphs stacked node-wise (a batch).

    Attributes
    ----------
    pos : torch.Tensor
        Coordinates ``(n, 3)``.
    node_attr : torch.Tensor
        Invariant node features ``(n, F)`` (e.g. a one-hot node type).
    edge_src, edge_dst : torch.Tensor
        Directed edges (messages flow ``src -> dst``), self-loops included.
    batch : torch.Tensor
        Graph index of each node.
    n_graphs : int
        Number of graphs in the batch.
    """

    pos: torch.Tensor
    node_attr: torch.Tensor
    edge_src: torch.Tensor
    edge_dst: torch.Tensor
    batch: torch.Tensor
    n_graphs: int


def radius_graph(pos: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """Directed edges between points closer than ``cutoff``, self-loops included (both directions)."""
    d = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
    src, dst = np.nonzero(d < cutoff)
    return src.astype(np.int64), dst.astype(np.int64)


def make_batch(
    graphs: list[tuple[np.ndarray, np.ndarray]], cutoff: float, dtype: torch.dtype = torch.float64
) -> GeometricGraph:
    """Stack ``[(pos, node_attr), ...]`` into one :class:`GeometricGraph` with radius-graph edges."""
    pos, attr, src, dst, batch = [], [], [], [], []
    offset = 0
    for g, (p, a) in enumerate(graphs):
        s, d = radius_graph(p, cutoff)
        pos.append(p)
        attr.append(a)
        src.append(s + offset)
        dst.append(d + offset)
        batch.append(np.full(len(p), g))
        offset += len(p)
    return GeometricGraph(
        pos=torch.as_tensor(np.concatenate(pos), dtype=dtype),
        node_attr=torch.as_tensor(np.concatenate(attr), dtype=dtype),
        edge_src=torch.as_tensor(np.concatenate(src)),
        edge_dst=torch.as_tensor(np.concatenate(dst)),
        batch=torch.as_tensor(np.concatenate(batch)),
        n_graphs=len(graphs),
    )


def radial_basis(dist: torch.Tensor, cutoff: float, n_basis: int) -> torch.Tensor:
    """Gaussian radial basis on ``[0, cutoff]`` times a smooth cosine cutoff (``(E, n_basis)``)."""
    centers = torch.linspace(0.0, cutoff, n_basis, dtype=dist.dtype)
    width = cutoff / (n_basis - 1)
    envelope = 0.5 * (torch.cos(math.pi * dist.clamp(max=cutoff) / cutoff) + 1.0)
    return torch.exp(-(((dist[:, None] - centers) / width) ** 2)) * envelope[:, None] * math.sqrt(n_basis)


class TensorProduct(nn.Module):
    """Per-edge weighted tensor product of node features with the spherical harmonics ``Y``.

    For every path ``l1 x l2 -> l3`` (``allowed_paths``), ``out_l3 += sqrt(2 l3 + 1) *
    sum_{m1, m2} C[m1, m2, m3] x_l1[a, m1] Y_l2[m2] W[a, b]`` with ``C`` the Wigner 3j coupling
    and the weights ``W`` given per edge (e3nn's ``shared_weights=False`` and ``component``
    normalisation); every output degree is divided by ``sqrt(fan-in)`` (e3nn's
    ``path_normalization="element"``). Paths are ordered by ``(l3, l1, l2)``.

    Parameters
    ----------
    in_mul, out_mul : sequence of int
        Channels per degree of the input and of the output.
    sh_degree : int
        Highest degree of the spherical harmonics.
    """

    def __init__(self, in_mul: list[int], out_mul: list[int], sh_degree: int) -> None:
        super().__init__()
        self.in_mul, self.out_mul = list(in_mul), list(out_mul)
        self.paths = [
            (l1, l2, l3)
            for l3 in range(len(out_mul))
            for l1 in range(len(in_mul))
            for l2 in range(sh_degree + 1)
            if in_mul[l1] > 0 and out_mul[l3] > 0 and allowed_paths(l1, l2, l3)
        ]
        self.weight_numel = sum(in_mul[l1] * out_mul[l3] for l1, _, l3 in self.paths)
        self.fan = [sum(in_mul[p[0]] for p in self.paths if p[2] == l3) for l3 in range(len(out_mul))]
        for l1, l2, l3 in self.paths:
            self.register_buffer(f"cg_{l1}{l2}{l3}", wigner_3j(l1, l2, l3) * math.sqrt(2 * l3 + 1))

    def forward(self, x: Features, y: Features, weight: torch.Tensor) -> Features:
        n = weight.shape[0]
        out = [x[0].new_zeros(n, b, 2 * l3 + 1) for l3, b in enumerate(self.out_mul)]
        start = 0
        for l1, l2, l3 in self.paths:
            a, b = self.in_mul[l1], self.out_mul[l3]
            w = weight[:, start : start + a * b].reshape(n, a, b)
            start += a * b
            cg = getattr(self, f"cg_{l1}{l2}{l3}")
            coupled = torch.einsum("eai,ej,ijk->eak", x[l1], y[l2][:, 0, :], cg)
            out[l3] = out[l3] + torch.einsum("eak,eab->ebk", coupled, w)
        return tuple(o / math.sqrt(max(f, 1)) for o, f in zip(out, self.fan, strict=True))


class Convolution(nn.Module):
    """TFN convolution: ``m_e = TP(x_src, Y(r_e), MLP(rbf(|r_e|)))``, summed into ``dst``."""

    def __init__(
        self,
        in_mul: list[int],
        out_mul: list[int],
        sh_degree: int,
        n_basis: int,
        hidden: int,
        num_neighbors: float,
    ) -> None:
        super().__init__()
        self.tp = TensorProduct(in_mul, out_mul, sh_degree)
        self.fc = nn.Sequential(
            nn.Linear(n_basis, hidden, bias=False),
            nn.SiLU(),
            nn.Linear(hidden, self.tp.weight_numel, bias=False),
        )
        self.num_neighbors = num_neighbors

    def messages(self, x: Features, edge_src: torch.Tensor, y: Features, weight: torch.Tensor) -> Features:
        """The edge messages ``m_e`` (one per edge)."""
        return self.tp(tuple(t[edge_src] for t in x), y, weight)

    def aggregate(self, m: Features, edge_dst: torch.Tensor, n_nodes: int) -> Features:
        """Sum of the messages into their destination, over ``sqrt(num_neighbors)``."""
        scale = 1.0 / math.sqrt(self.num_neighbors)
        return tuple(t.new_zeros(n_nodes, *t.shape[1:]).index_add(0, edge_dst, t) * scale for t in m)


class EquivariantLinear(nn.Module):
    """Channel mixing within each degree (e3nn's ``o3.Linear``, no biases)."""

    def __init__(self, mul: list[int]) -> None:
        super().__init__()
        self.weights = nn.ParameterList(
            [nn.Parameter(torch.randn(c, c, dtype=torch.float64) / math.sqrt(c)) for c in mul]
        )

    def forward(self, x: Features) -> Features:
        return tuple(torch.einsum("nak,ab->nbk", t, w) for t, w in zip(x, self.weights, strict=True))


def norm_scalings(x: Features, eps: float = 1e-12) -> Features:
    """e3nn's ``NormActivation(sigmoid, normalize=True)``: per channel ``sigmoid(|x|) / |x|``.

    One scaling per irreducible channel, shape ``(n, C_l)`` for each degree.
    """
    norms = [t.norm(dim=-1).clamp_min(eps) for t in x]
    return tuple(torch.sigmoid(nrm) / nrm for nrm in norms)


def norm_activation(x: Features) -> Features:
    """Scale every irreducible channel by ``sigmoid(|x|) / |x|`` (an equivariant nonlinearity)."""
    return tuple(t * a[..., None] for t, a in zip(x, norm_scalings(x), strict=True))


class TinyTFN(nn.Module):
    """conv -> linear -> norm act -> conv -> linear -> norm act -> conv (scalars) -> sum pool.

    The layer sequence of the authors' released TFN (``BioLip.ipynb``); the first layer's input
    is the node attributes concatenated with the sum of the incident edges' spherical harmonics
    over ``sqrt(num_neighbors)``, as theirs.

    Parameters
    ----------
    n_node_attr : int
        Width of the invariant node attributes.
    n_classes : int
        Number of graph-level outputs (logits).
    hidden_s, hidden_v : int
        Channels of the hidden layers: scalars (degree 0) and each degree ``1..max_degree``.
    max_degree : int, default=3
        Highest degree ``L`` of the spherical harmonics and of the hidden irreps (``0e, 1o, 2e,
        3o`` up to ``L``), 0 to 3. The default is the authors' ``TFN(l=3)``; ``1`` gives
        scalars and vectors only (2-6x faster on CPU than ``3``).
    cutoff : float
        Radius of the graph and of the radial basis.
    n_basis, radial_hidden : int
        Radial basis size and radial MLP width.
    num_neighbors, num_nodes : float
        Typical neighbour and node counts (normalisers, as in TFN/e3nn).
    seed : int, default=0
        Seeds the weight initialisation (torch's global generator is left as it was).

    Examples
    --------
    >>> from trustlab.explain._equigx_data import make_shape_graphs
    >>> graphs, labels, _ = make_shape_graphs(2, random_state=0)
    >>> model = TinyTFN(n_node_attr=1, n_classes=2)
    >>> model(make_batch(graphs, model.cutoff)).shape
    torch.Size([2, 2])
    """

    def __init__(
        self,
        n_node_attr: int,
        n_classes: int,
        *,
        hidden_s: int = 8,
        hidden_v: int = 8,
        max_degree: int = 3,
        cutoff: float = 1.6,
        n_basis: int = 10,
        radial_hidden: int = 32,
        num_neighbors: float = 4.0,
        num_nodes: float = 16.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if (
            isinstance(max_degree, bool)
            or not isinstance(max_degree, int)
            or not 0 <= max_degree <= MAX_DEGREE
        ):
            raise ParameterError(
                f"max_degree must be an int in 0..{MAX_DEGREE} (the spherical harmonics written here); "
                f"got {max_degree!r}. Use 3 for the authors' TFN, 1 for scalars and vectors only.",
                argument="max_degree",
            )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self._build(
                n_node_attr,
                n_classes,
                [hidden_s] + [hidden_v] * max_degree,
                cutoff,
                n_basis,
                radial_hidden,
                num_neighbors,
            )
        self.num_neighbors, self.num_nodes = num_neighbors, num_nodes
        self.double()

    def _build(
        self,
        n_node_attr: int,
        n_classes: int,
        hidden: list[int],
        cutoff: float,
        n_basis: int,
        radial_hidden: int,
        num_neighbors: float,
    ) -> None:
        self.cutoff, self.n_basis = cutoff, n_basis
        self.max_degree = degree = len(hidden) - 1
        args = (degree, n_basis, radial_hidden, num_neighbors)
        self.n_node_attr, self.n_classes = n_node_attr, n_classes
        self.conv1 = Convolution([n_node_attr + 1] + [1] * degree, hidden, *args)
        self.lin1 = EquivariantLinear(hidden)
        self.conv2 = Convolution(hidden, hidden, *args)
        self.lin2 = EquivariantLinear(hidden)
        self.final = Convolution(hidden, [n_classes], *args)

    def edge_inputs(self, graph: GeometricGraph) -> tuple[Features, torch.Tensor]:
        """Spherical harmonics and radial basis of every edge.

        Parameters
        ----------
        graph : GeometricGraph
            The batch (see :func:`make_batch`).

        Returns
        -------
        y : tuple of torch.Tensor
            Spherical harmonics of degrees ``0..max_degree`` of each edge vector
            ``pos[src] - pos[dst]``, shapes ``(E, 1, 2l + 1)``.
        rbf : torch.Tensor of shape (E, n_basis)
            The radial basis of each edge length.
        """
        vec = graph.pos[graph.edge_src] - graph.pos[graph.edge_dst]
        return spherical_harmonics(vec, self.max_degree), radial_basis(
            vec.norm(dim=-1), self.cutoff, self.n_basis
        )

    def input_features(self, graph: GeometricGraph, y: Features) -> Features:
        """Node attributes and the summed spherical harmonics of the incident edges.

        Parameters
        ----------
        graph : GeometricGraph
            The batch.
        y : tuple of torch.Tensor
            The edges' spherical harmonics (first output of :meth:`edge_inputs`).

        Returns
        -------
        tuple of torch.Tensor
            Scalars ``(n, n_node_attr + 1, 1)`` (the attributes and the summed degree-0
            harmonics) and ``(n, 1, 2l + 1)`` for ``l = 1..max_degree``, the sums scaled by
            ``1 / sqrt(num_neighbors)``.
        """
        n = graph.pos.shape[0]
        scale = 1.0 / math.sqrt(self.num_neighbors)
        summed = [t.new_zeros(n, *t.shape[1:]).index_add(0, graph.edge_dst, t) * scale for t in y]
        return (torch.cat([graph.node_attr[:, :, None], summed[0]], dim=1), *summed[1:])

    def forward(self, graph: GeometricGraph, edge_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Graph logits ``(n_graphs, n_classes)``; ``edge_mask`` scales every message (GNNExplainer).

        Parameters
        ----------
        graph : GeometricGraph
            The batch.
        edge_mask : torch.Tensor of shape (E,), optional
            Weights multiplying every edge's spherical harmonics (and so its messages).

        Returns
        -------
        torch.Tensor of shape (n_graphs, n_classes)
            Sum-pooled logits.
        """
        n = graph.pos.shape[0]
        y, rbf = self.edge_inputs(graph)
        if edge_mask is not None:
            y = tuple(t * edge_mask[:, None, None] for t in y)
        x = self.input_features(graph, y)
        for conv, lin in ((self.conv1, self.lin1), (self.conv2, self.lin2)):
            x = conv.aggregate(conv.messages(x, graph.edge_src, y, conv.fc(rbf)), graph.edge_dst, n)
            x = norm_activation(lin(x))
        x = self.final.aggregate(
            self.final.messages(x, graph.edge_src, y, self.final.fc(rbf)), graph.edge_dst, n
        )
        pooled = x[0].new_zeros(graph.n_graphs, self.n_classes).index_add(0, graph.batch, x[0][:, :, 0])
        return pooled / math.sqrt(self.num_nodes)


def train_tfn(
    model: TinyTFN,
    graphs: list[tuple[np.ndarray, np.ndarray]],
    labels: np.ndarray,
    *,
    epochs: int = 30,
    batch_size: int = 32,
    lr: float = 1e-2,
    seed: int = 0,
) -> TinyTFN:
    """Train ``model`` with Adam on cross-entropy (deterministic for a seed); returns it in eval mode.

    Parameters
    ----------
    model : TinyTFN
        Trained in place.
    graphs : list of (pos (n, 3), node_attr (n, F))
        The training graphs (e.g. from ``make_shape_graphs``).
    labels : numpy.ndarray of int, shape (n_graphs,)
        Their classes.
    epochs : int, default=30
        Passes over the data.
    batch_size : int, default=32
        Graphs per batch (batches are fixed; their order is shuffled every epoch).
    lr : float, default=1e-2
        Adam's learning rate.
    seed : int, default=0
        Seeds the batch order.

    Returns
    -------
    TinyTFN
        ``model``, in eval mode.

    Examples
    --------
    >>> from trustlab.explain._equigx_data import make_shape_graphs
    >>> graphs, labels, _ = make_shape_graphs(4, random_state=0)
    >>> train_tfn(TinyTFN(n_node_attr=1, n_classes=2, max_degree=1), graphs, labels, epochs=1).training
    False
    """
    gen = torch.Generator().manual_seed(seed)
    batches = [
        (make_batch(graphs[i : i + batch_size], model.cutoff), torch.as_tensor(labels[i : i + batch_size]))
        for i in range(0, len(graphs), batch_size)
    ]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    with one_thread():  # tiny tensors: thread pools only contend
        for _ in range(epochs):
            for b in torch.randperm(len(batches), generator=gen).tolist():
                graph, target = batches[b]
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(graph), target)
                loss.backward()
                opt.step()
    return model.eval()
