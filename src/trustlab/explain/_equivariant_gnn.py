"""A small tensor-field network (TFN) on 3D point graphs, with degrees 0 and 1, for EquiGX.

EquiGX (Ling et al., ICML 2025) explains spherical equivariant GNNs built from three layer
types: the tensor-product convolution (node features x spherical harmonics of the edge
direction, weighted per edge by a radial MLP), the equivariant linear layer and the norm
activation, followed by sum pooling. The authors use e3nn's ``FullyConnectedTensorProduct``,
``Linear`` and ``NormActivation`` with degrees up to 3. This module writes the same layer types
for the irreps ``0e`` (scalars) and ``1o`` (vectors) only, in plain torch, so that the relevance
rules in :mod:`trustlab.explain.equigx` can reach every intermediate tensor (see
``docs/explain/equigx.md`` for why e3nn is not used).

Features are a pair ``(s, v)``: ``s`` of shape ``(n, C0)`` (scalars) and ``v`` of shape
``(n, C1, 3)`` (vectors). The tensor product of ``(s, v)`` with the spherical harmonics
``Y = (Y0, Y1)`` (``Y0 = 1``, ``Y1 = sqrt(3) u`` for the unit edge direction ``u``) keeps the
four E(3)-equivariant paths ``0x0->0``, ``1x1->0`` (dot product), ``0x1->1`` and ``1x0->1``; the
``1x1->1e`` cross product is left out (it would need pseudovector channels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = ["GeometricGraph", "TinyTFN", "make_batch", "make_shape_graphs", "radius_graph", "train_tfn"]

Features = tuple[torch.Tensor, torch.Tensor]


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


def spherical_harmonics(edge_vec: torch.Tensor) -> Features:
    """Degree-0 and degree-1 real spherical harmonics, e3nn's ``component`` normalisation.

    ``Y0 = 1`` and ``Y1 = sqrt(3) u`` with ``u`` the unit vector (zero for a zero vector, as
    e3nn's ``normalize=True``). Returned as features ``(Y0 (E, 1), Y1 (E, 1, 3))``.
    """
    norm = edge_vec.norm(dim=-1, keepdim=True)
    unit = torch.where(norm > 0, edge_vec / norm.clamp_min(1e-12), torch.zeros_like(edge_vec))
    return torch.ones_like(norm), math.sqrt(3.0) * unit[:, None, :]


def radial_basis(dist: torch.Tensor, cutoff: float, n_basis: int) -> torch.Tensor:
    """Gaussian radial basis on ``[0, cutoff]`` times a smooth cosine cutoff (``(E, n_basis)``)."""
    centers = torch.linspace(0.0, cutoff, n_basis, dtype=dist.dtype)
    width = cutoff / (n_basis - 1)
    envelope = 0.5 * (torch.cos(math.pi * dist.clamp(max=cutoff) / cutoff) + 1.0)
    return torch.exp(-(((dist[:, None] - centers) / width) ** 2)) * envelope[:, None] * math.sqrt(n_basis)


class TensorProduct(nn.Module):
    """Per-edge weighted tensor product of node features ``(s, v)`` with ``Y = (Y0, Y1)``.

    ``out_s = (s Y0) W00 + (v . Y1 / sqrt 3) W11`` and ``out_v = (s x Y1) W01 + (v Y0) W10``, the
    weights ``W`` given per edge (e3nn's ``shared_weights=False``), each path scaled by
    ``1 / sqrt(fan-in)`` as e3nn's ``path_normalization="element"``.
    """

    def __init__(self, in_s: int, in_v: int, out_s: int, out_v: int) -> None:
        super().__init__()
        self.shapes = {"00": (in_s, out_s), "11": (in_v, out_s), "01": (in_s, out_v), "10": (in_v, out_v)}
        self.shapes = {k: v for k, v in self.shapes.items() if v[0] > 0 and v[1] > 0}
        self.weight_numel = sum(a * b for a, b in self.shapes.values())
        self.out_s, self.out_v = out_s, out_v
        self.fan_s = sum(self.shapes[k][0] for k in ("00", "11") if k in self.shapes)
        self.fan_v = sum(self.shapes[k][0] for k in ("01", "10") if k in self.shapes)

    def forward(self, x: Features, y: Features, weight: torch.Tensor) -> Features:
        s, v = x
        y0, y1 = y
        n = weight.shape[0]
        views, start = {}, 0
        for key, (a, b) in self.shapes.items():
            views[key] = weight[:, start : start + a * b].reshape(n, a, b)
            start += a * b
        out_s = s.new_zeros(n, self.out_s)
        out_v = s.new_zeros(n, self.out_v, 3)
        if "00" in views:
            out_s = out_s + torch.einsum("ea,eab->eb", s * y0, views["00"])
        if "11" in views:
            dot = (v * y1).sum(-1) / math.sqrt(3.0)
            out_s = out_s + torch.einsum("ea,eab->eb", dot, views["11"])
        if "01" in views:
            out_v = out_v + torch.einsum("ea,eab,ek->ebk", s, views["01"], y1[:, 0, :])
        if "10" in views:
            out_v = out_v + torch.einsum("eak,eab->ebk", v * y0[:, :, None], views["10"])
        out_s = out_s / math.sqrt(max(self.fan_s, 1))
        out_v = out_v / math.sqrt(max(self.fan_v, 1))
        return out_s, out_v


class Convolution(nn.Module):
    """TFN convolution: ``m_e = TP(x_src, Y(r_e), MLP(rbf(|r_e|)))``, summed into ``dst``."""

    def __init__(
        self, in_s: int, in_v: int, out_s: int, out_v: int, n_basis: int, hidden: int, num_neighbors: float
    ) -> None:
        super().__init__()
        self.tp = TensorProduct(in_s, in_v, out_s, out_v)
        self.fc = nn.Sequential(
            nn.Linear(n_basis, hidden, bias=False),
            nn.SiLU(),
            nn.Linear(hidden, self.tp.weight_numel, bias=False),
        )
        self.num_neighbors = num_neighbors

    def messages(self, x: Features, edge_src: torch.Tensor, y: Features, weight: torch.Tensor) -> Features:
        """The edge messages ``m_e`` (one per edge)."""
        return self.tp((x[0][edge_src], x[1][edge_src]), y, weight)

    def aggregate(self, m: Features, edge_dst: torch.Tensor, n_nodes: int) -> Features:
        """Sum of the messages into their destination, over ``sqrt(num_neighbors)``."""
        scale = 1.0 / math.sqrt(self.num_neighbors)
        s = m[0].new_zeros(n_nodes, m[0].shape[1]).index_add(0, edge_dst, m[0]) * scale
        v = m[1].new_zeros(n_nodes, *m[1].shape[1:]).index_add(0, edge_dst, m[1]) * scale
        return s, v


class EquivariantLinear(nn.Module):
    """Channel mixing within each degree (e3nn's ``o3.Linear``, no biases)."""

    def __init__(self, n_s: int, n_v: int) -> None:
        super().__init__()
        self.ws = nn.Parameter(torch.randn(n_s, n_s, dtype=torch.float64) / math.sqrt(n_s))
        self.wv = nn.Parameter(torch.randn(n_v, n_v, dtype=torch.float64) / math.sqrt(n_v))

    def forward(self, x: Features) -> Features:
        return x[0] @ self.ws, torch.einsum("nak,ab->nbk", x[1], self.wv)


def norm_scalings(x: Features, eps: float = 1e-12) -> Features:
    """e3nn's ``NormActivation(sigmoid, normalize=True)``: per channel ``sigmoid(|x|) / |x|``."""
    ns = x[0].abs().clamp_min(eps)
    nv = x[1].norm(dim=-1).clamp_min(eps)
    return torch.sigmoid(ns) / ns, torch.sigmoid(nv) / nv


def norm_activation(x: Features) -> Features:
    """Scale every irreducible channel by ``sigmoid(|x|) / |x|`` (an equivariant nonlinearity)."""
    a, b = norm_scalings(x)
    return x[0] * a, x[1] * b[..., None]


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
        Scalar and vector channels of the hidden layers.
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
        cutoff: float = 1.6,
        n_basis: int = 10,
        radial_hidden: int = 32,
        num_neighbors: float = 4.0,
        num_nodes: float = 16.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self._build(
                n_node_attr, n_classes, hidden_s, hidden_v, cutoff, n_basis, radial_hidden, num_neighbors
            )
        self.num_neighbors, self.num_nodes = num_neighbors, num_nodes
        self.double()

    def _build(
        self,
        n_node_attr: int,
        n_classes: int,
        hidden_s: int,
        hidden_v: int,
        cutoff: float,
        n_basis: int,
        radial_hidden: int,
        num_neighbors: float,
    ) -> None:
        self.cutoff, self.n_basis = cutoff, n_basis
        args = (n_basis, radial_hidden, num_neighbors)
        self.n_node_attr = n_node_attr
        self.conv1 = Convolution(n_node_attr + 1, 1, hidden_s, hidden_v, *args)
        self.lin1 = EquivariantLinear(hidden_s, hidden_v)
        self.conv2 = Convolution(hidden_s, hidden_v, hidden_s, hidden_v, *args)
        self.lin2 = EquivariantLinear(hidden_s, hidden_v)
        self.final = Convolution(hidden_s, hidden_v, n_classes, 0, *args)

    def edge_inputs(self, graph: GeometricGraph) -> tuple[Features, torch.Tensor]:
        """Spherical harmonics and radial basis of every edge.

        Parameters
        ----------
        graph : GeometricGraph
            The batch (see :func:`make_batch`).

        Returns
        -------
        y : tuple of torch.Tensor
            Degree-0 and degree-1 spherical harmonics of each edge vector ``pos[src] - pos[dst]``,
            shapes ``(E, 1)`` and ``(E, 1, 3)``.
        rbf : torch.Tensor of shape (E, n_basis)
            The radial basis of each edge length.
        """
        vec = graph.pos[graph.edge_src] - graph.pos[graph.edge_dst]
        return spherical_harmonics(vec), radial_basis(vec.norm(dim=-1), self.cutoff, self.n_basis)

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
            Scalars ``(n, n_node_attr + 1)`` (the attributes and the summed degree-0 harmonics)
            and vectors ``(n, 1, 3)``, the sums scaled by ``1 / sqrt(num_neighbors)``.
        """
        n = graph.pos.shape[0]
        scale = 1.0 / math.sqrt(self.num_neighbors)
        y0 = y[0].new_zeros(n, 1).index_add(0, graph.edge_dst, y[0]) * scale
        y1 = y[1].new_zeros(n, 1, 3).index_add(0, graph.edge_dst, y[1]) * scale
        return torch.cat([graph.node_attr, y0], dim=1), y1

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
            y = (y[0] * edge_mask[:, None], y[1] * edge_mask[:, None, None])
        x = self.input_features(graph, y)
        for conv, lin in ((self.conv1, self.lin1), (self.conv2, self.lin2)):
            x = conv.aggregate(conv.messages(x, graph.edge_src, y, conv.fc(rbf)), graph.edge_dst, n)
            x = norm_activation(lin(x))
        x = self.final.aggregate(
            self.final.messages(x, graph.edge_src, y, self.final.fc(rbf)), graph.edge_dst, n
        )
        pooled = x[0].new_zeros(graph.n_graphs, x[0].shape[1]).index_add(0, graph.batch, x[0])
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
        The training graphs (e.g. from :func:`make_shape_graphs`).
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
    >>> graphs, labels, _ = make_shape_graphs(4, random_state=0)
    >>> train_tfn(TinyTFN(n_node_attr=1, n_classes=2), graphs, labels, epochs=1).training
    False
    """
    gen = torch.Generator().manual_seed(seed)
    batches = [
        (make_batch(graphs[i : i + batch_size], model.cutoff), torch.as_tensor(labels[i : i + batch_size]))
        for i in range(0, len(graphs), batch_size)
    ]
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(epochs):
        for b in torch.randperm(len(batches), generator=gen).tolist():
            graph, target = batches[b]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(graph), target)
            loss.backward()
            opt.step()
    return model.eval()


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random 3D rotation matrix (QR of a Gaussian matrix, sign-fixed, det +1)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


_TETRAHEDRON = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float) / np.sqrt(8.0)
_SQUARE = np.array([[0.5, 0.5, 0], [0.5, -0.5, 0], [-0.5, -0.5, 0], [-0.5, 0.5, 0]], dtype=float)


def make_shape_graphs(
    n_graphs: int,
    *,
    n_noise: int = 12,
    half_width: float = 2.0,
    min_noise_distance: float = 1.25,
    random_state: int = 0,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, list[np.ndarray]]:
    """3D point graphs whose class is the shape of a planted four-point motif (EquiGX's "Shapes").

    Generative process (``docs/data-card.md``): the label ``y`` is 0 or 1 with probability 1/2;
    the motif is a regular tetrahedron (``y = 0``) or a square (``y = 1``), both with edge length
    1, randomly rotated and shifted by ``U[-0.5, 0.5]^3``; then ``n_noise`` points are drawn
    uniformly in ``[-half_width, half_width]^3``, each rejected while it lies closer than
    ``min_noise_distance`` to any point placed before. All nodes carry the same attribute (a
    single 1), so only the geometry tells the classes apart; the motif's four nodes are the
    ground truth.

    Parameters
    ----------
    n_graphs : int
        Number of graphs.
    n_noise : int, default=12
        Noise points per graph (each graph has ``4 + n_noise`` nodes).
    half_width : float, default=2.0
        Noise points are uniform in ``[-half_width, half_width]^3``.
    min_noise_distance : float, default=1.25
        Smallest distance of a noise point to any point placed before it.
    random_state : int, default=0
        Seeds the draw.

    Returns
    -------
    graphs : list of (pos (n, 3), node_attr (n, 1))
        The node coordinates (in random order) and the constant attribute.
    labels : ndarray of int
        0 for a tetrahedron, 1 for a square.
    truth : list of boolean ndarray
        The motif nodes of each graph.

    Examples
    --------
    >>> graphs, labels, truth = make_shape_graphs(2, random_state=0)
    >>> graphs[0][0].shape, int(truth[0].sum())
    ((16, 3), 4)
    """
    rng = np.random.default_rng(random_state)
    graphs, labels, truth = [], [], []
    for _ in range(n_graphs):
        y = int(rng.integers(2))
        motif = (_TETRAHEDRON if y == 0 else _SQUARE) @ random_rotation(rng).T + rng.uniform(-0.5, 0.5, 3)
        points = np.empty((4 + n_noise, 3))
        points[:4] = motif
        k = 4
        while k < 4 + n_noise:
            p = rng.uniform(-half_width, half_width, 3)
            if np.min(np.sum((points[:k] - p) ** 2, axis=1)) >= min_noise_distance**2:
                points[k] = p
                k += 1
        order = rng.permutation(len(points))
        pos = points[order]
        graphs.append((pos, np.ones((len(pos), 1))))
        labels.append(y)
        truth.append(order < 4)
    return graphs, np.asarray(labels, dtype=np.int64), truth
