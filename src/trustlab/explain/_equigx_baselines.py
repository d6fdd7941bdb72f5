"""Baselines for EquiGX on the same tensor-field network: gradients and a GNNExplainer-style mask."""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from trustlab._param_validation import Interval, validate_params
from trustlab.explain._equigx_common import _GRAPH_DOC, _prepare, _results
from trustlab.explain._equivariant_gnn import GeometricGraph, TinyTFN

__all__ = ["gnnexplainer_node_mask", "gradient_saliency"]


@validate_params({"times_input": ["boolean"]})
def gradient_saliency(
    model: TinyTFN, pos: Any, node_attr: Any, *, target: Any = None, times_input: bool = False
) -> Any:
    """Gradient baselines: ``|d f / d pos_i|`` or gradient x input.

    With ``times_input=True`` the score is ``h_i . df/dh_i + (pos_i - centroid) . df/dpos_i``
    (node attributes and centred coordinates; both terms are rotation invariant).

    Parameters
    ----------
    model : TinyTFN
    {graphs}
    target : int, sequence of int or None
        As :func:`equigx_relevance`.
    times_input : bool, default False
        Gradient x input instead of the gradient norm.

    Returns
    -------
    NodeRelevance or list of NodeRelevance

    References
    ----------
    K. Simonyan, A. Vedaldi, A. Zisserman, "Deep Inside Convolutional Networks", ICLR workshop
    2014; A. Shrikumar et al., "Not Just a Black Box", arXiv 1605.01713, 2016.

    Examples
    --------
    >>> from trustlab.explain.equigx import TinyTFN, gradient_saliency, make_shape_graphs
    >>> graphs, labels, truth = make_shape_graphs(1, random_state=0)
    >>> r = gradient_saliency(TinyTFN(1, 2), *graphs[0], target=0)
    >>> r.node.shape, bool((r.node >= 0).all())
    ((16,), True)
    """
    model, graph, targets, single = _prepare(model, pos, node_attr, target)
    p = graph.pos.clone().requires_grad_(True)
    h = graph.node_attr.clone().requires_grad_(True)
    g = GeometricGraph(p, h, graph.edge_src, graph.edge_dst, graph.batch, graph.n_graphs)
    with torch.enable_grad():
        out = model(g).gather(1, targets[:, None]).sum()
        gp, gh = torch.autograd.grad(out, [p, h])
    if times_input:
        counts = torch.bincount(graph.batch, minlength=graph.n_graphs).to(p.dtype)[:, None]
        centroid = graph.pos.new_zeros(graph.n_graphs, 3).index_add(0, graph.batch, graph.pos) / counts
        node = (h.detach() * gh).sum(1) + ((graph.pos - centroid[graph.batch]) * gp).sum(1)
        method = "grad-x-input"
    else:
        node = gp.norm(dim=1)
        method = "gradient"
    return _results(graph, targets, node, None, None, method, single)


gradient_saliency.__doc__ = (gradient_saliency.__doc__ or "").replace("{graphs}", _GRAPH_DOC)


@validate_params(
    {
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "edge_size": [Interval(numbers.Real, 0, None, closed="left")],
        "edge_ent": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def gnnexplainer_node_mask(
    model: TinyTFN,
    pos: Any,
    node_attr: Any,
    *,
    target: Any = None,
    epochs: int = 100,
    lr: float = 0.01,
    edge_size: float = 0.005,
    edge_ent: float = 1.0,
    random_state: int = 0,
) -> Any:
    """GNNExplainer-style baseline: a soft edge mask learned to keep the prediction, per node.

    The mask ``sigmoid(theta_e)`` scales every message of edge ``e`` (its spherical harmonics);
    Adam minimises ``-log p(target) + edge_size * sum(mask) + edge_ent * mean(entropy(mask))``
    (PyTorch Geometric's defaults: 100 epochs, lr 0.01, 0.005, 1.0; initial logits normal with
    std ``sqrt(2) * sqrt(2 / (2 n))``). A node's score is the mean mask of its incident edges.
    Several graphs are optimised together; as Adam acts element-wise and the loss is a sum over
    graphs, that equals optimising each alone from the same initial mask.

    Parameters
    ----------
    model : TinyTFN
    {graphs}
    target : int, sequence of int or None
        As :func:`equigx_relevance`.
    epochs, lr, edge_size, edge_ent : number
        Optimiser steps, learning rate and the two regulariser weights.
    random_state : int, default 0
        Seed of the initial mask.

    Returns
    -------
    NodeRelevance or list of NodeRelevance

    References
    ----------
    R. Ying, D. Bourgeois, J. You, M. Zitnik, J. Leskovec, "GNNExplainer: Generating Explanations
    for Graph Neural Networks", NeurIPS 2019.

    Examples
    --------
    >>> from trustlab.explain.equigx import TinyTFN, gnnexplainer_node_mask, make_shape_graphs
    >>> graphs, labels, truth = make_shape_graphs(1, random_state=0)
    >>> r = gnnexplainer_node_mask(TinyTFN(1, 2), *graphs[0], target=0, epochs=5)
    >>> bool(((r.edge > 0) & (r.edge < 1)).all())
    True
    """
    model, graph, targets, single = _prepare(model, pos, node_attr, target)
    n_edges = graph.edge_src.shape[0]
    edge_graph = graph.batch[graph.edge_src]
    counts = torch.bincount(graph.batch, minlength=graph.n_graphs).to(graph.pos.dtype)
    e_counts = torch.bincount(edge_graph, minlength=graph.n_graphs).to(graph.pos.dtype)
    std = math.sqrt(2.0) * torch.sqrt(2.0 / (2.0 * counts))[edge_graph]
    gen = torch.Generator().manual_seed(int(random_state))
    theta = (torch.randn(n_edges, generator=gen, dtype=graph.pos.dtype) * std).requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=float(lr))
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        with torch.enable_grad():
            for _ in range(int(epochs)):
                opt.zero_grad()
                mask = torch.sigmoid(theta)
                logp = (
                    torch.log_softmax(model(graph, edge_mask=mask), dim=1).gather(1, targets[:, None]).sum()
                )
                ent = -mask * torch.log(mask + 1e-15) - (1 - mask) * torch.log(1 - mask + 1e-15)
                ent_mean = (mask.new_zeros(graph.n_graphs).index_add(0, edge_graph, ent) / e_counts).sum()
                loss = -logp + edge_size * mask.sum() + edge_ent * ent_mean
                loss.backward()
                opt.step()
    finally:
        for p in model.parameters():
            p.requires_grad_(True)
    mask = torch.sigmoid(theta).detach()
    n = graph.pos.shape[0]
    total = mask.new_zeros(n).index_add(0, graph.edge_src, mask).index_add(0, graph.edge_dst, mask)
    degree = mask.new_zeros(n).index_add(0, graph.edge_src, torch.ones_like(mask))
    node = total / (2.0 * degree)
    return _results(graph, targets, node, mask, None, "gnnexplainer", single)


gnnexplainer_node_mask.__doc__ = (gnnexplainer_node_mask.__doc__ or "").replace("{graphs}", _GRAPH_DOC)
