"""EquiGX: layer-wise relevance propagation for spherical equivariant GNNs (catalog row 001-18).

The prediction score of a tensor-field network is decomposed layer by layer with first-order
(Deep Taylor) rules: a linear rule for sum pooling, message aggregation and the equivariant
linear layer, a three-way rule for the tensor product (node features, spherical harmonics of the
edge direction and the radial weights each take a third), and the norm-activation rule. Node
relevance is the relevance of the node's own attributes plus half of the relevance of every
edge (direction and distance) it belongs to. The network (:class:`TinyTFN`) carries irreps of
degrees 0 to ``max_degree`` (at most 3); the rules are written per irreducible channel and do not
depend on the degree. See ``docs/explain/equigx.md``.

Baselines on the same model: gradient saliency, gradient x input and a GNNExplainer-style soft
edge mask.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import torch

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.explain._equigx_baselines import gnnexplainer_node_mask, gradient_saliency
from trustlab.explain._equigx_common import _GRAPH_DOC, NodeRelevance, _prepare, _results
from trustlab.explain._equigx_data import make_distance_graphs, make_shape_graphs
from trustlab.explain._equivariant_gnn import (
    Features,
    GeometricGraph,
    TinyTFN,
    norm_activation,
    norm_scalings,
    train_tfn,
)

__all__ = [
    "NodeRelevance",
    "TinyTFN",
    "equigx_relevance",
    "gnnexplainer_node_mask",
    "gradient_saliency",
    "make_distance_graphs",
    "make_shape_graphs",
    "train_tfn",
]


# ---------------------------------------------------------------------------------------------
# the relevance rules


def _stab(z: torch.Tensor, eps: float) -> torch.Tensor:
    """``z + eps * sign(z)`` with ``sign(0) = 1`` (the LRP-epsilon stabiliser)."""
    return z + eps * torch.where(z >= 0, 1.0, -1.0).to(z.dtype)


def _taylor(
    fn: Callable[..., Sequence[torch.Tensor]],
    inputs: Sequence[torch.Tensor],
    in_irrep: Sequence[bool],
    relevance: Sequence[torch.Tensor],
    rule: str,
    eps: float,
) -> list[torch.Tensor]:
    """First-order Taylor rule for a map linear in ``inputs``: ``R_in = x * d/dx sum(c * fn(x))``.

    Every output of ``fn`` is an irrep tensor ``(..., C, 2l + 1)``. ``c = R / out`` per
    component (``rule="component"``, the authors' code; ``R`` then has the output's shape) or
    ``c = R out / |out|^2`` per irreducible channel (``rule="irrep"``; ``R`` is ``(..., C)``),
    held constant. As ``fn`` is linear in the inputs taken together, the input relevance sums to
    the output relevance. Inputs flagged in ``in_irrep`` get one relevance per irreducible channel
    (summed over ``m``) under the irrep rule.
    """
    xs = [x.detach().requires_grad_(True) for x in inputs]
    with torch.enable_grad():
        outs = fn(*xs)
        total = outs[0].new_zeros(())
        for out, r in zip(outs, relevance, strict=True):
            o = out.detach()
            if rule == "irrep" and o.shape[-1] > 1:
                coef = (r / ((o**2).sum(-1) + eps))[..., None] * o
            elif rule == "irrep":
                coef = r[..., None] / _stab(o, eps)
            else:
                coef = r / _stab(o, eps)
            total = total + (coef * out).sum()
        grads = torch.autograd.grad(total, xs, allow_unused=True)
    result = []
    for x, g, irrep in zip(xs, grads, in_irrep, strict=True):
        r = x.detach() * (torch.zeros_like(x) if g is None else g)
        result.append(r.sum(-1) if irrep and rule == "irrep" else r)
    return result


def _norm_act_rule(x: Features, relevance: list, batch: torch.Tensor, n_graphs: int) -> list:
    """The authors' norm-activation rule: divide by the channel's scaling, restore each graph's total."""
    scaled = [
        r / (a if r.dim() == 2 else a[..., None]) for r, a in zip(relevance, norm_scalings(x), strict=True)
    ]
    before = _per_graph(relevance, batch, n_graphs)
    after = _per_graph(scaled, batch, n_graphs)
    ratio = (before / torch.where(after.abs() > 0, after, torch.ones_like(after)))[batch]
    return [r * ratio.reshape(-1, *([1] * (r.dim() - 1))) for r in scaled]


def _per_graph(relevance: Sequence[torch.Tensor], batch: torch.Tensor, n_graphs: int) -> torch.Tensor:
    node = sum(r.reshape(r.shape[0], -1).sum(1) for r in relevance)
    assert isinstance(node, torch.Tensor)
    return node.new_zeros(n_graphs).index_add(0, batch, node)


def _flat(r: torch.Tensor) -> torch.Tensor:
    return r.reshape(r.shape[0], -1).sum(1)


def _conv_rules(
    conv: Any,
    x: Features,
    y: Features,
    w: torch.Tensor,
    graph: GeometricGraph,
    relevance: list,
    rule: str,
    eps: float,
) -> tuple[list, torch.Tensor]:
    """Aggregation rule, then the tensor-product rule split in thirds; returns (R_x, R_edge)."""
    n = graph.pos.shape[0]
    msg = conv.messages(x, graph.edge_src, y, w)

    def aggregate(*m: torch.Tensor) -> list:
        return list(conv.aggregate(m, graph.edge_dst, n))

    r_msg = _taylor(aggregate, list(msg), [True] * len(msg), relevance, rule, eps)
    k, j = len(x), len(y)

    def tp(*args: torch.Tensor) -> list:
        xs, ys = tuple(t[graph.edge_src] for t in args[:k]), args[k : k + j]
        return list(conv.tp(xs, ys, args[-1]))

    flags = [True] * (k + j) + [False]
    r = _taylor(tp, [*x, *y, w], flags, r_msg, rule, eps)
    r_edge = sum(_flat(t) for t in r[k:]) / 3.0
    assert isinstance(r_edge, torch.Tensor)
    return [t / 3.0 for t in r[:k]], r_edge


def _equigx_batch(
    model: TinyTFN,
    graph: GeometricGraph,
    targets: torch.Tensor,
    rule: str,
    eps: float,
    contrast: bool,
    norm_rule: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Node relevance, edge relevance and node-attribute relevance for a batch of graphs."""
    n = graph.pos.shape[0]
    with torch.no_grad():
        y, rbf = model.edge_inputs(graph)
        x0 = model.input_features(graph, y)
        xs, pre_act, weights = [x0], [], []
        x = x0
        for conv, lin in ((model.conv1, model.lin1), (model.conv2, model.lin2)):
            w = conv.fc(rbf)
            weights.append(w)
            a = conv.aggregate(conv.messages(x, graph.edge_src, y, w), graph.edge_dst, n)
            xs.append(a)
            pre = lin(a)
            pre_act.append(pre)
            x = norm_activation(pre)
            xs.append(x)
        w_final = model.final.fc(rbf)
        final = model.final.aggregate(model.final.messages(x, graph.edge_src, y, w_final), graph.edge_dst, n)
    n_out = model.n_classes
    r_graph = torch.nn.functional.one_hot(targets, n_out).to(final[0].dtype)
    if contrast and n_out > 1:
        r_graph = r_graph - (1.0 - r_graph) / (n_out - 1)
    if rule == "component":
        r_graph = r_graph[..., None]

    def pool(s: torch.Tensor) -> list:
        return [
            s.new_zeros(graph.n_graphs, *s.shape[1:]).index_add(0, graph.batch, s)
            / math.sqrt(model.num_nodes)
        ]

    r_nodes = _taylor(pool, [final[0]], [True], [r_graph], rule, eps)
    relevance, r_edge = _conv_rules(model.final, xs[4], y, w_final, graph, r_nodes, rule, eps)
    for k, (conv, lin) in ((1, (model.conv2, model.lin2)), (0, (model.conv1, model.lin1))):
        if norm_rule:
            relevance = _norm_act_rule(pre_act[k], relevance, graph.batch, graph.n_graphs)

        def linear(*t: torch.Tensor, lin: Any = lin) -> list:
            return list(lin(t))

        relevance = _taylor(linear, list(xs[2 * k + 1]), [True] * len(y), relevance, rule, eps)
        relevance, r_e = _conv_rules(conv, xs[2 * k], y, weights[k], graph, relevance, rule, eps)
        r_edge = r_edge + r_e
    f = model.n_node_attr
    r_attr = _flat(relevance[0][:, :f])
    bare = GeometricGraph(
        graph.pos, graph.node_attr[:, :0], graph.edge_src, graph.edge_dst, graph.batch, graph.n_graphs
    )

    def gather_sh(*t: torch.Tensor) -> list:
        return list(model.input_features(bare, t))

    r_sh = _taylor(gather_sh, list(y), [True] * len(y), [relevance[0][:, f:], *relevance[1:]], rule, eps)
    r_edge = r_edge + sum(_flat(t) for t in r_sh)
    node = r_attr.clone()
    node = node.index_add(0, graph.edge_src, r_edge / 2).index_add(0, graph.edge_dst, r_edge / 2)
    return node, r_edge, r_attr


@validate_params(
    {
        "rule": [Options({"irrep", "component"})],
        "eps": [Interval(numbers.Real, 0, 1, closed="neither")],
        "contrast": ["boolean"],
        "norm_rule": ["boolean"],
        "node_score": [Options({"signed", "magnitude"})],
    }
)
def equigx_relevance(
    model: TinyTFN,
    pos: Any,
    node_attr: Any,
    *,
    target: Any = None,
    rule: str = "irrep",
    eps: float = 1e-7,
    contrast: bool = False,
    norm_rule: bool = True,
    node_score: str = "signed",
) -> Any:
    """EquiGX node relevance of a tensor-field network's prediction.

    Relevance 1 is put on the explained output (the authors' one-hot start) and propagated back:
    sum pooling and message aggregation by the linear first-order rule; each tensor-product
    message to its source node's features, the spherical harmonics of the edge direction and the
    radial weights of the edge distance (a third each); the equivariant linear layer by the linear
    rule; the norm activation by dividing by each channel's scaling and restoring the graph's
    total. A node's relevance is that of its own attributes plus half of every incident edge's
    (the three-way split is the paper's Eq. 7, an equal share for each argument of the bilinear
    tensor product; the rest is reconstructed from the authors' ``LRP.py``).

    Parameters
    ----------
    model : TinyTFN
        A trained network (:func:`train_tfn`).
    {graphs}
    target : int, sequence of int or None, default None
        The explained output (one per graph); ``None`` explains the predicted class.
    rule : {{"irrep", "component"}}, default "irrep"
        ``"irrep"`` shares relevance per irreducible channel in proportion to the projection of a
        contribution on the channel's output (rotation invariant); ``"component"`` divides
        component by component as the authors' released code does (not invariant for vectors).
    eps : float, default 1e-7
        Stabiliser of the divisions (LRP-epsilon).
    contrast : bool, default False
        Start from ``+1`` on the target and ``-1/(K-1)`` on the other outputs (contrastive LRP)
        instead of the authors' one-hot start; the start then sums to 0.
    norm_rule : bool, default True
        Apply the norm-activation rule (the authors' ``Norm=True``); ``False`` passes relevance
        through the activation unchanged (their ``Norm=False``).
    node_score : {{"signed", "magnitude"}}, default "signed"
        ``"signed"``: node relevance = own-attribute relevance + half of every incident edge's
        signed relevance (conservative, as the authors' SCOP evaluation scatters it);
        ``"magnitude"``: ``|own| + half of every incident edge's |relevance|`` (not
        conservative; it stops edges of opposite signs cancelling at a node, see the docs).

    Returns
    -------
    NodeRelevance or list of NodeRelevance
        One per graph.

    References
    ----------
    H. Ling, H. Yu, Z. Jiang, N. Zou, S. Ji, "On Explaining Equivariant Graph Networks via
    Improved Relevance Propagation", ICML 2025 (PMLR 267:38013-38028).

    Examples
    --------
    >>> from trustlab.explain.equigx import TinyTFN, equigx_relevance, make_shape_graphs
    >>> graphs, labels, truth = make_shape_graphs(1, random_state=0)
    >>> model = TinyTFN(n_node_attr=1, n_classes=2, max_degree=2)
    >>> r = equigx_relevance(model, *graphs[0], target=0)
    >>> round(float(r.node.sum()), 2)
    1.0
    """
    model, graph, targets, single = _prepare(model, pos, node_attr, target)
    node, edge, attr = _equigx_batch(model, graph, targets, rule, float(eps), bool(contrast), bool(norm_rule))
    if node_score == "magnitude":
        half = edge.abs() / 2
        node = attr.abs().index_add(0, graph.edge_src, half).index_add(0, graph.edge_dst, half)
    return _results(graph, targets, node, edge, attr, f"equigx-{rule}", single)


equigx_relevance.__doc__ = (
    (equigx_relevance.__doc__ or "").replace("{graphs}", _GRAPH_DOC).replace("{{", "{").replace("}}", "}")
)
