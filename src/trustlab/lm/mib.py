"""MIB's circuit-localisation track: edge scores by patching, attribution and masks; integrated faithfulness.

A circuit is a set of edges of the residual-stream graph (:mod:`trustlab.lm._mib_graph`). Edges
are scored by exact activation patching, by edge attribution patching (EAP) [2]_, by EAP with
integrated gradients on the inputs (EAP-IG) [3]_ or on the activations (MIB's EAP-IG-activations), by
information flow routes (IFR, [6]_; both in :mod:`trustlab.lm._mib_attrib`), by edge pruning (a
learned hard-concrete mask, [4]_), by uniform gradient sampling (UGS, a learned Bernoulli mask, [5]_; both in
:mod:`trustlab.lm._mib_methods`) or at random. The benchmark [1]_ then keeps the top edges at
budgets from 0.1% to 100% of the edges (or takes one circuit per budget), measures each circuit's
faithfulness ``f = (m(C) - m(∅)) / (m(N) - m(∅))`` with the edges off the circuit ablated (by
counterfactual patching, the default, or by mean or optimal ablation), and integrates: CPR, the area
under ``f`` (circuits from signed scores; higher is better), and CMD, the area under ``|1 - f|``
(circuits from absolute scores; lower is better). See docs/lm-mib.md.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
.. [2] Syed, Rager, Conmy. "Attribution Patching Outperforms Automated Circuit Discovery".
   BlackboxNLP 2024.
.. [3] Hanna, Pezzelle, Belinkov. "Have Faith in Faithfulness: Going Beyond Circuit Overlap When
   Finding Model Mechanisms". COLM 2024.
.. [4] Bhaskar, Wettig, Friedman, Chen. "Finding Transformer Circuits with Edge Pruning". NeurIPS 2024.
.. [5] Li, Janson. "Optimal ablation for interpretability". NeurIPS 2024.
.. [6] Ferrando, Voita. "Information Flow Routes: Automatically Interpreting Language Models at
   Scale". EMNLP 2024.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import DataError, ParameterError
from trustlab.lm._mib_attrib import ifr_scores, ig_activation_scores
from trustlab.lm._mib_graph import EdgeGraph, check_names, edge_graph, graph_forward, prune_mask
from trustlab.lm._mib_methods import (
    UGS,
    EdgePruning,
    edge_pruning,
    edge_pruning_circuits,
    mean_ablation,
    optimal_ablation,
    ugs,
)
from trustlab.lm._mib_results import CircuitLocalization, EdgeScores, FaithfulnessCurve
from trustlab.lm._mib_siit import SIITCircuit, siit_sorting_model
from trustlab.lm._mib_task import ABLATIONS, PatchingTask, _Context, min_pairs

__all__ = [
    "ABLATIONS",
    "METHODS",
    "MIB_BUDGETS",
    "UGS",
    "CircuitLocalization",
    "EdgePruning",
    "EdgeScores",
    "FaithfulnessCurve",
    "PatchingTask",
    "SIITCircuit",
    "circuit_faithfulness",
    "circuit_localization",
    "edge_auroc",
    "edge_graph",
    "edge_pruning",
    "edge_pruning_circuits",
    "edge_scores",
    "faithfulness_curve",
    "mean_ablation",
    "min_pairs",
    "optimal_ablation",
    "siit_sorting_model",
    "ugs",
]

METHODS = (
    "activation-patching",
    "eap",
    "eap-ig",
    "eap-ig-activations",
    "information-flow-routes",
    "edge-pruning",
    "ugs",
    "random",
)
MIB_BUDGETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def _patching_scores(ctx: _Context, rows_per_pass: int = 512) -> np.ndarray:
    """``m(N) - m(N without e)`` for every edge, several edges per forward pass."""
    g, n = ctx.graph, len(ctx.clean)
    per = max(1, rows_per_pass // n)
    full = torch.as_tensor(g.valid, dtype=ctx.corrupt_acts.dtype, device=ctx.corrupt_acts.device)
    out = np.empty(g.n_edges)
    for start in range(0, g.n_edges, per):
        chunk = g.edges[start : start + per]
        masks = full.repeat(len(chunk), 1, 1)
        masks[torch.arange(len(chunk)), chunk[:, 0], chunk[:, 1]] = 0.0
        k = len(chunk)
        with torch.no_grad():
            logits, _, _ = graph_forward(
                ctx.model,
                g,
                ctx.clean.repeat(k, 1),
                ctx.pos.repeat(k),
                mask=masks.repeat_interleave(n, dim=0),
                corrupt=ctx.corrupt_acts.repeat(k, 1, 1, 1),
                weights=ctx.weights,
            )
        rows = torch.arange(k * n, device=logits.device)
        diff = logits[rows, ctx.ans.repeat(k)] - logits[rows, ctx.cf.repeat(k)]
        out[start : start + k] = ctx.m_full - diff.reshape(k, n).mean(1).cpu().numpy()
    return out


def _gradient_scores(ctx: _Context, steps: int) -> np.ndarray:
    """EAP (``steps = 1``: the gradient at the clean input) or EAP-IG-inputs (``steps`` points)."""
    g = ctx.graph
    clean_emb, corr_emb = ctx.clean_acts[:, :, 0], ctx.corrupt_acts[:, :, 0]
    total: list[torch.Tensor] | None = None
    for k in range(1, steps + 1):
        emb = (corr_emb + (k / steps) * (clean_emb - corr_emb)).requires_grad_(True)
        with torch.enable_grad():
            logits, _, inputs = ctx.run(ctx.clean, embed_override=emb, keep_inputs=True)
            grads = torch.autograd.grad(ctx.metric(logits), inputs)
        total = list(grads) if total is None else [a + b for a, b in zip(total, grads, strict=True)]
    assert total is not None
    diff = ctx.clean_acts - ctx.corrupt_acts  # (b, p, n_sources, d)
    full = torch.zeros(g.valid.shape, dtype=diff.dtype)
    col = 0
    for grad in total:
        width = grad.shape[2]
        n_up = g.n_upstream(col)
        full[:n_up, col : col + width] = torch.einsum("bpud,bped->ue", diff[:, :, :n_up], grad / steps).cpu()
        col += width
    return full.numpy()[g.edges[:, 0], g.edges[:, 1]].astype(float)


@validate_params(
    {
        "method": [Options(set(METHODS))],
        "ig_steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def edge_scores(
    model: Any,
    task: PatchingTask,
    *,
    method: str = "eap-ig",
    ig_steps: int = 5,
    random_state: Any = 0,
    ablation: Any = "patching",
) -> EdgeScores:
    """Score every edge of a causal LM's graph for a task (MIB's circuit-discovery step).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A GPT-2 or Llama-family causal LM (Llama, Mistral, Qwen2, Mixtral).
    task : PatchingTask
        Clean / counterfactual pairs.
    method : str, default="eap-ig"
        One of :data:`METHODS`: ``"activation-patching"`` (exact patching of each edge, one forward
        pass per edge), ``"eap"`` (edge attribution patching, one forward and backward pass),
        ``"eap-ig"`` (EAP with integrated gradients on the input embeddings, ``ig_steps`` passes;
        MIB's EAP-IG-inputs), ``"eap-ig-activations"`` (MIB's EAP-IG-activations: the output of one
        component group at a time interpolated, ``ig_steps`` passes per group), ``"information-flow-routes"``
        (IFR [6]_: each source's proximity to its destination's input on the clean run; no counterfactual,
        no gradient, scores in [0, 1]), ``"edge-pruning"`` / ``"ugs"`` (the learned gates of
        :func:`edge_pruning` or the keep-probabilities of :func:`ugs` at their defaults) or ``"random"``
        (standard-normal scores).
    ig_steps : int, default=5
        Interpolation points of both EAP-IG variants (the benchmark's default).
    random_state : int, Generator or None, default=0
        Seeds the random baseline and the mask methods' noise.
    ablation : {"patching", "mean", "optimal"} or array, default="patching"
        What an ablated edge reads while scoring (MIB's "EAP (mean)", "EAP (OA)"; see
        :func:`circuit_localization`); for ``"eap-ig-activations"`` also the end of the interpolation.
        Ignored by ``"random"`` and ``"information-flow-routes"``.

    Returns
    -------
    EdgeScores
        Scores in units of the metric: ``m(N) - m(N without e)`` or its estimate.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> task = min_pairs(8, n_items=4, n_values=12)
    >>> edge_scores(m, task, method="eap").scores.shape
    (13,)
    """
    if method not in METHODS:
        raise ParameterError(
            f"method must be one of {', '.join(METHODS)}, got {method!r}.", argument="method"
        )
    if method == "edge-pruning":
        return edge_pruning(model, task, random_state=random_state, ablation=ablation).scores
    if method == "ugs":
        return ugs(model, task, random_state=random_state, ablation=ablation).scores
    no_cf = method in ("random", "information-flow-routes")  # random: the graph only; IFR: the clean run
    ctx = _Context(model, task, "patching" if no_cf else ablation)
    try:
        if method == "random":
            scores = np.random.default_rng(random_state).standard_normal(ctx.graph.n_edges)
        elif method == "information-flow-routes":
            scores = ifr_scores(ctx)
        elif method == "eap-ig-activations":
            scores = ig_activation_scores(ctx, int(ig_steps))
        elif method == "activation-patching":
            scores = _patching_scores(ctx)
        else:
            scores = _gradient_scores(ctx, 1 if method == "eap" else int(ig_steps))
    finally:
        ctx.close()
    return EdgeScores(method, scores, ctx.graph)


def _score_array(scores: Any, graph: EdgeGraph, budgets: np.ndarray) -> np.ndarray:
    """One score per edge (1-D), or one 0/1 circuit per budget (2-D, each within its budget)."""
    arr = np.asarray(scores.scores if isinstance(scores, EdgeScores) else scores, dtype=float)
    if arr.ndim == 2 and arr.shape == (budgets.size, graph.n_edges):
        sizes = (arr != 0).sum(1)
        if not np.isin(arr, (0.0, 1.0)).all() or (sizes > (budgets * graph.n_edges).astype(int)).any():
            raise DataError(
                "scores given as one circuit per budget must be 0/1 rows holding at most int(budget * "
                f"n_edges) edges each (budgets {budgets.tolist()}); got sizes {sizes.tolist()}.",
                argument="scores",
            )
        return arr
    arr = arr.reshape(-1)
    if arr.shape != (graph.n_edges,) or not np.isfinite(arr).all():
        raise DataError(
            f"scores must be EdgeScores, {graph.n_edges} finite numbers (one per edge of this model) or one "
            f"0/1 circuit per budget, shape ({budgets.size}, {graph.n_edges}); got {arr.size} numbers.",
            argument="scores",
        )
    return arr


def _budgets(budgets: Any) -> np.ndarray:
    arr = np.asarray(budgets, dtype=float).reshape(-1)
    if arr.size == 0 or not np.isfinite(arr).all() or (arr <= 0).any() or (arr > 1).any():
        raise ParameterError(
            f"budgets must be shares of the edges in (0, 1], e.g. MIB's {MIB_BUDGETS}; got {budgets!r}.",
            argument="budgets",
        )
    return np.unique(arr)


def _curve(
    ctx: _Context, scores: np.ndarray, budgets: np.ndarray, absolute: bool, prune: bool
) -> FaithfulnessCurve:
    g = ctx.graph
    key = np.abs(scores) if absolute else scores
    order = np.argsort(-key, kind="stable")
    counts, faith = [], []
    for i, b in enumerate(budgets):
        ids = np.flatnonzero(scores[i]) if scores.ndim == 2 else order[: int(b * g.n_edges)]
        mask = g.mask(ids)
        if prune:
            mask = prune_mask(g, mask)
        counts.append(int(mask.sum()))
        if counts[-1] == 0 or counts[-1] == g.n_edges:  # the empty circuit / the model: f = 0 / 1 exactly
            faith.append(float(counts[-1] > 0))
        else:
            faith.append(ctx.faithfulness(mask))
    n = np.asarray(counts)
    return FaithfulnessCurve(budgets, n, n / g.n_edges, np.asarray(faith), absolute)


@validate_params({"budgets": ["array-like"], "absolute": ["boolean"], "prune": ["boolean"]})
def faithfulness_curve(
    model: Any,
    task: PatchingTask,
    scores: EdgeScores | Any,
    *,
    budgets: Any = MIB_BUDGETS,
    absolute: bool = False,
    prune: bool = True,
    ablation: Any = "patching",
) -> FaithfulnessCurve:
    """Faithfulness of the top-scored circuits at each edge budget.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model the scores belong to.
    task : PatchingTask
        Pairs to evaluate on (MIB evaluates on held-out pairs).
    scores : EdgeScores or array-like of float, shape (n_edges,) or (n_budgets, n_edges)
        One score per edge, or one 0/1 circuit per (sorted) budget holding at most
        ``int(budget * n_edges)`` edges (MIB's second submission format; see :func:`edge_pruning_circuits`).
    budgets : array-like of float in (0, 1], default=MIB_BUDGETS
        Shares of the edges; the circuit keeps the ``int(budget * n_edges)`` top edges.
    absolute : bool, default=False
        Rank edges by absolute score (as for CMD) instead of signed score (as for CPR).
    prune : bool, default=True
        Drop edges that cannot affect the output before counting (MIB's evaluation); the
        faithfulness is the same either way, only the circuit sizes change.
    ablation : {"patching", "mean", "optimal"} or array, default="patching"
        What a destination reads from a source over an edge off the circuit: the source's output on the
        counterfactual input (MIB's default interchange intervention), its mean output over the clean
        inputs (:func:`mean_ablation`), its optimal-ablation constant fitted on them
        (:func:`optimal_ablation`, MIB's settings), or given constants, shape ``(n_sources, d_model)``
        (e.g. those functions applied to other pairs).

    Returns
    -------
    FaithfulnessCurve
        Sizes and faithfulness per budget.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> task = min_pairs(8, n_items=4, n_values=12)
    >>> curve = faithfulness_curve(m, task, edge_scores(m, task, method="eap"), budgets=[0.5, 1.0])
    >>> bool(curve.n_edges[0] <= 6), curve.n_edges[-1].item(), curve.faithfulness[-1].item()
    (True, 13, 1.0)
    """
    budget_arr = _budgets(budgets)
    ctx = _Context(model, task, ablation)
    try:
        arr = _score_array(scores, ctx.graph, budget_arr)
        return _curve(ctx, arr, budget_arr, bool(absolute), bool(prune))
    finally:
        ctx.close()


@validate_params({"budgets": ["array-like"]})
def circuit_localization(
    model: Any,
    task: PatchingTask,
    scores: EdgeScores | Any,
    *,
    budgets: Any = MIB_BUDGETS,
    ablation: Any = "patching",
) -> CircuitLocalization:
    """MIB's CPR and CMD for one set of edge scores.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model the scores belong to.
    task : PatchingTask
        Evaluation pairs.
    scores : EdgeScores or array-like of float, shape (n_edges,) or (n_budgets, n_edges)
        One score per edge, or one 0/1 circuit per (sorted) budget holding at most
        ``int(budget * n_edges)`` edges (MIB's second submission format; see :func:`edge_pruning_circuits`).
    budgets : array-like of float in (0, 1], default=MIB_BUDGETS
        Edge budgets of the curves.
    ablation : {"patching", "mean", "optimal"} or array, default="patching"
        What a destination reads from a source over an edge off the circuit: the source's output on the
        counterfactual input (MIB's default interchange intervention), its mean output over the clean
        inputs (:func:`mean_ablation`), its optimal-ablation constant fitted on them
        (:func:`optimal_ablation`, MIB's settings), or given constants, shape ``(n_sources, d_model)``
        (e.g. those functions applied to other pairs).

    Returns
    -------
    CircuitLocalization
        ``cpr`` (area under the signed-score curve), ``cmd`` (area under ``|1 - f|`` of the
        absolute-score curve) and both curves.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> task = min_pairs(8, n_items=4, n_values=12)
    >>> loc = circuit_localization(m, task, edge_scores(m, task, method="random"))
    >>> float(loc.signed.fractions[-1]), loc.cpr <= 1.0
    (1.0, True)
    """
    budget_arr = _budgets(budgets)
    ctx = _Context(model, task, ablation)
    try:
        arr = _score_array(scores, ctx.graph, budget_arr)
        signed = _curve(ctx, arr, budget_arr, False, True)
        absolute = _curve(ctx, arr, budget_arr, True, True)
    finally:
        ctx.close()
    return CircuitLocalization(signed.area, absolute.area_from_one, signed, absolute)


def circuit_faithfulness(model: Any, task: PatchingTask, edges: Any, *, ablation: Any = "patching") -> float:
    """Faithfulness of one circuit given by edge names (``"a0.h1->m0"``) or edge indices.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model.
    task : PatchingTask
        Evaluation pairs.
    edges : iterable of str or of int
        The circuit's edges.
    ablation : {"patching", "mean", "optimal"} or array, default="patching"
        How edges off the circuit are ablated (see :func:`circuit_localization`).

    Returns
    -------
    float
        ``(m(C) - m(∅)) / (m(N) - m(∅))``.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> task = min_pairs(8, n_items=4, n_values=12)
    >>> round(circuit_faithfulness(m, task, range(13)), 4)  # every edge: the model itself
    1.0
    >>> abs(circuit_faithfulness(m, task, [])) < 1e-6  # no edge: the counterfactual run
    True
    >>> f = circuit_faithfulness(m, task, ["a0.h0->logits", "m0->logits"])  # edges by name
    """
    ctx = _Context(model, task, ablation)
    try:
        items = [edges] if isinstance(edges, str) else list(edges)
        if all(isinstance(e, str) for e in items):
            ids = check_names(ctx.graph, items)
        else:
            ids = np.asarray(items, dtype=np.int64)
            if ids.size and (ids.min() < 0 or ids.max() >= ctx.graph.n_edges):
                raise ParameterError(
                    f"edges: indices must lie in [0, {ctx.graph.n_edges}).", argument="edges"
                )
        return ctx.faithfulness(ctx.graph.mask(ids))
    finally:
        ctx.close()


def edge_auroc(scores: EdgeScores, circuit: Any, *, absolute: bool = True) -> float:
    """Area under the ROC curve of edge scores against a known circuit (MIB's InterpBench metric).

    Parameters
    ----------
    scores : EdgeScores
        One score per edge.
    circuit : iterable of str or of int
        The known circuit's edges (names such as ``"a0.h1->m0"``, or edge indices).
    absolute : bool, default=True
        Rank edges by absolute score (an edge can matter either way).

    Returns
    -------
    float
        The chance that a circuit edge outranks a non-circuit edge (ties count half); 0.5 is chance.

    Examples
    --------
    >>> from trustlab.lm._mib_graph import _graph_shape
    >>> g = _graph_shape(1, 2)
    >>> s = EdgeScores("random", np.arange(g.n_edges, dtype=float), g)
    >>> edge_auroc(s, [g.n_edges - 1, g.n_edges - 2])
    1.0
    """
    if not isinstance(scores, EdgeScores):
        raise ParameterError(f"scores must be EdgeScores, got {type(scores).__name__}.", argument="scores")
    g = scores.graph
    items = [circuit] if isinstance(circuit, str | int) else list(circuit)
    if items and all(isinstance(e, str) for e in items):
        ids = check_names(g, items)
    else:
        ids = np.asarray(items, dtype=np.int64).reshape(-1)
    if ids.size == 0 or ids.size >= g.n_edges or ids.min() < 0 or ids.max() >= g.n_edges:
        raise ParameterError(
            f"circuit must name at least one and fewer than all {g.n_edges} edges, by name or index.",
            argument="circuit",
        )
    from sklearn.metrics import roc_auc_score

    labels = np.zeros(g.n_edges, dtype=bool)
    labels[ids] = True
    key = np.abs(scores.scores) if absolute else scores.scores
    return float(roc_auc_score(labels, key))
