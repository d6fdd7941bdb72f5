"""Inputs and results shared by EquiGX and its baselines (see :mod:`trustlab.explain.equigx`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain._equivariant_gnn import GeometricGraph, TinyTFN, make_batch

__all__ = ["NodeRelevance"]


@dataclass(frozen=True)
class NodeRelevance:
    """Relevance of the nodes (and edges) of one graph for one output.

    Attributes
    ----------
    node : ndarray (n,)
        Node scores (higher = more relevant). For EquiGX with ``node_score="signed"`` they sum
        to the relevance put on the output (1 for the target class) up to the stabiliser.
    target : int
        The explained output.
    edge_src, edge_dst : ndarray (E,)
        The directed radius-graph edges (self-loops included); empty for the baselines that
        score nodes directly.
    edge : ndarray (E,)
        EquiGX: relevance of each edge's direction (spherical harmonics) and distance (radial
        weights), summed over the layers; GNNExplainer: the learned edge mask.
    node_attr : ndarray (n,)
        EquiGX: the part of ``node`` carried by the node attributes themselves.
    method : str
        Which explainer made it.

    See Also
    --------
    trustlab.explain.equigx.equigx_relevance : builds it (its example shows one).
    """

    node: np.ndarray
    target: int
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge: np.ndarray
    node_attr: np.ndarray
    method: str


# ---------------------------------------------------------------------------------------------
# input checks


def _check_model(model: Any) -> TinyTFN:
    if not isinstance(model, TinyTFN):
        raise ModelError(
            f"model must be a trustlab TinyTFN (the rules are written for its layer types); got "
            f"{type(model).__name__}. Build one with TinyTFN(n_node_attr, n_classes) and train_tfn.",
            argument="model",
        )
    return model


def _check_graphs(model: TinyTFN, pos: Any, node_attr: Any) -> tuple[list, bool]:
    """Validate one graph (arrays) or several (sequences of arrays); return [(pos, attr)], single."""
    single = isinstance(pos, np.ndarray) or (
        isinstance(pos, Sequence) and len(pos) > 0 and np.ndim(pos[0]) == 1
    )
    pos_list = [pos] if single else list(pos)
    attr_list = [node_attr] if single else list(node_attr)
    if len(pos_list) == 0:
        raise DataError("pos is empty; pass an (n, 3) array of coordinates.", argument="pos")
    if len(attr_list) != len(pos_list):
        raise DataError(
            f"node_attr holds {len(attr_list)} graphs but pos holds {len(pos_list)}; pass one per graph.",
            argument="node_attr",
        )
    graphs = []
    for p_raw, a_raw in zip(pos_list, attr_list, strict=True):
        p = check_numeric_array(p_raw, "pos", ndim=2, min_rows=2)
        if p.shape[1] != 3:
            raise DataError(f"pos must have 3 columns (x, y, z); got shape {p.shape}.", argument="pos")
        a = check_numeric_array(a_raw, "node_attr", ndim=2, min_rows=1)
        if a.shape != (len(p), model.n_node_attr):
            raise DataError(
                f"node_attr must have shape (n_nodes, {model.n_node_attr}) = ({len(p)}, "
                f"{model.n_node_attr}) to match pos and the model; got {a.shape}.",
                argument="node_attr",
            )
        d = np.linalg.norm(p[:, None] - p[None], axis=-1)
        np.fill_diagonal(d, np.inf)
        if np.min(d) < 1e-9:
            i, j = np.unravel_index(np.argmin(d), d.shape)
            raise DataError(
                f"pos has coincident points {i} and {j}: their edge has no direction; merge or move them.",
                argument="pos",
            )
        if np.min(d) >= model.cutoff:
            raise DataError(
                f"the radius graph of pos has no edges (no two points closer than the model's cutoff "
                f"{model.cutoff}); rescale pos or use a model with a larger cutoff.",
                argument="pos",
            )
        graphs.append((p, a))
    return graphs, single


def _check_targets(model: TinyTFN, target: Any, graph: GeometricGraph) -> torch.Tensor:
    n_classes = model.n_classes
    if target is None:
        with torch.no_grad():
            return model(graph).argmax(1)
    values = np.atleast_1d(np.asarray(target))
    if values.dtype.kind not in "iu" or values.ndim != 1 or len(values) not in (1, graph.n_graphs):
        raise ParameterError(
            f"target must be None, an int or one int per graph; got {target!r}.", argument="target"
        )
    if values.min() < 0 or values.max() >= n_classes:
        raise ParameterError(
            f"target must lie in [0, {n_classes - 1}] (the model's outputs); got {target!r}.",
            argument="target",
        )
    return torch.as_tensor(np.broadcast_to(values, (graph.n_graphs,)).copy())


_GRAPH_DOC = """pos : array (n, 3) or sequence of arrays
        Coordinates of one graph, or of several graphs (then a list is returned).
    node_attr : array (n, F) or sequence of arrays
        Invariant node attributes (``F = model.n_node_attr``), one array per graph."""


def _split(graph: GeometricGraph, values: torch.Tensor, per_edge: bool) -> list[np.ndarray]:
    index = graph.batch[graph.edge_src] if per_edge else graph.batch
    arr = values.detach().numpy()
    return [arr[(index == g).numpy()] for g in range(graph.n_graphs)]


def _results(
    graph: GeometricGraph,
    targets: torch.Tensor,
    node: torch.Tensor,
    edge: torch.Tensor | None,
    attr: torch.Tensor | None,
    method: str,
    single: bool,
) -> Any:
    nodes = _split(graph, node, False)
    edge_mask = graph.batch[graph.edge_src]
    offsets = np.concatenate([[0], np.cumsum(np.bincount(graph.batch.numpy(), minlength=graph.n_graphs))])
    out = []
    for g in range(graph.n_graphs):
        sel = (edge_mask == g).numpy()
        has_edges = edge is not None
        out.append(
            NodeRelevance(
                node=nodes[g],
                target=int(targets[g]),
                edge_src=graph.edge_src.numpy()[sel] - offsets[g]
                if has_edges
                else np.zeros(0, dtype=np.int64),
                edge_dst=graph.edge_dst.numpy()[sel] - offsets[g]
                if has_edges
                else np.zeros(0, dtype=np.int64),
                edge=edge.detach().numpy()[sel] if edge is not None else np.zeros(0),
                node_attr=_split(graph, attr, False)[g] if attr is not None else np.zeros(0),
                method=method,
            )
        )
    return out[0] if single else out


def _prepare(
    model: Any, pos: Any, node_attr: Any, target: Any
) -> tuple[TinyTFN, GeometricGraph, torch.Tensor, bool]:
    model = _check_model(model)
    graphs, single = _check_graphs(model, pos, node_attr)
    graph = make_batch(graphs, model.cutoff)
    return model, graph, _check_targets(model, target, graph), single
