"""MIB's mask-optimisation methods and ablations: edge pruning, UGS, one circuit per budget, mean / optimal.

Public through :mod:`trustlab.lm.mib`. Edge pruning [2]_ learns a hard-concrete edge mask under a target
sparsity (:mod:`trustlab.lm._mib_prune`); UGS [3]_ learns Bernoulli keep-probabilities under an L0 penalty
(:mod:`trustlab.lm._mib_ugs`); both score edges for MIB's [1]_ faithfulness curves.
:func:`edge_pruning_circuits` fits one edge-pruning mask per edge budget (MIB's "one circuit per budget"
submission); :func:`mean_ablation` and :func:`optimal_ablation` give the constants that MIB's mean and
optimal ablations put in place of an ablated source.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
.. [2] Bhaskar, Wettig, Friedman, Chen. "Finding Transformer Circuits with Edge Pruning". NeurIPS 2024.
.. [3] Li, Janson. "Optimal ablation for interpretability". NeurIPS 2024.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ParameterError
from trustlab.lm._mib_prune import expected_open, fit_edge_mask
from trustlab.lm._mib_results import EdgeScores
from trustlab.lm._mib_task import PatchingTask, _Context
from trustlab.lm._mib_ugs import fit_ugs

__all__ = [
    "UGS",
    "EdgePruning",
    "edge_pruning",
    "edge_pruning_circuits",
    "mean_ablation",
    "optimal_ablation",
    "ugs",
]

_BUDGETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # MIB's (== mib.MIB_BUDGETS)


@dataclass(frozen=True)
class EdgePruning:
    """Result of :func:`edge_pruning`.

    Attributes
    ----------
    scores : EdgeScores
        Each gate's probability of being open, ``P(z > 0)``, a monotone map of its learned
        location ``log_alpha`` into (0, 1): ranked signed or absolute, the order is the same
        (MIB ranks mask methods by their mask values).
    log_alpha : ndarray of float, shape (n_edges,)
        The learned gate locations.
    circuit : ndarray of int
        Indices of the edges the binarised mask keeps (the ``round(sum P(z > 0))`` largest gates).
    kl : ndarray of float, shape (steps,)
        KL divergence of the masked model from the full model at each step (sampled gates).
    sparsity : ndarray of float, shape (steps,)
        Share of sampled gates at zero at each step.

    See Also
    --------
    edge_pruning : builds it.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> ep = edge_pruning(m, min_pairs(8, n_items=4, n_values=12), steps=5)
    >>> ep.log_alpha.shape, ep.kl.shape, ep.sparsity.shape
    ((13,), (5,), (5,))
    >>> bool(((ep.scores.scores > 0) & (ep.scores.scores < 1)).all())  # P(gate open)
    True
    """

    scores: EdgeScores
    log_alpha: np.ndarray
    circuit: np.ndarray
    kl: np.ndarray
    sparsity: np.ndarray


@validate_params(
    {
        "target_sparsity": [Interval(numbers.Real, 0, 1, closed="left")],
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "reg_lr": [Interval(numbers.Real, 0, None, closed="left")],
        "warmup": [Interval(numbers.Real, 0, 1, closed="both")],
        "init_log_alpha": [Interval(numbers.Real, None, None, closed="neither")],
        "random_state": ["random_state"],
    }
)
def edge_pruning(
    model: Any,
    task: PatchingTask,
    *,
    target_sparsity: float = 0.9,
    steps: int = 200,
    lr: float = 0.1,
    reg_lr: float = 0.1,
    warmup: float = 0.83,
    init_log_alpha: float = 3.0,
    random_state: Any = 0,
    ablation: Any = "patching",
) -> EdgePruning:
    """Edge pruning: learn a hard-concrete mask over the edges that keeps the model's task output [4]_.

    Every edge gets a gate ``z`` in [0, 1] (hard concrete: temperature 2/3, stretched to
    [-0.1, 1.1] and clipped); the gated edge-patched model reads ``z`` of the live source and
    ``1 - z`` of the counterfactual one. AdamW lowers the KL divergence of its answer-position
    distribution from the full model's plus a Lagrangian ``l1 (s - t) + l2 (s - t)^2`` on the
    share ``s`` of closed gates, whose multipliers ascend it and whose target ``t`` rises linearly
    from 0 to ``target_sparsity`` over the first ``warmup`` share of the steps.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A GPT-2 or Llama-family causal LM.
    task : PatchingTask
        Clean / counterfactual pairs (the gates are fit on the clean inputs).
    target_sparsity : float in [0, 1), default=0.9
        Share of edges the Lagrangian drives to zero; 0 keeps every edge.
    steps : int, default=200
        Optimisation steps (full batch). The paper runs 3,000 on GPT-2's 32,491 edges.
    lr, reg_lr : float, default=0.1
        Learning rates of the gate locations and of the multipliers (the paper: 0.8 for both,
        on a graph 700x larger; on small graphs it throws every gate to its bound at once).
    warmup : float in [0, 1], default=0.83
        Share of the steps over which the target sparsity is annealed (the paper: 2,500 of 3,000).
    init_log_alpha : float, default=3.0
        Initial gate location (``P(z = 1) = 0.75``; the paper's 10 keeps the clipped gates at 1
        with no gradient for hundreds of steps on a small graph).
    random_state : int, Generator or None, default=0
        Seeds the gate noise and the initial jitter.
    ablation : {"patching", "mean", "optimal"} or array, default="patching"
        What a closed gate reads (see :func:`trustlab.lm.mib.circuit_localization`).

    Returns
    -------
    EdgePruning
        Scores usable by :func:`circuit_localization`, the binarised circuit and the training traces.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> ep = edge_pruning(m, min_pairs(8, n_items=4, n_values=12), steps=5)
    >>> ep.scores.method, ep.scores.scores.shape, ep.kl.shape
    ('edge-pruning', (13,), (5,))
    """
    seed = int(np.random.default_rng(random_state).integers(2**31 - 1))
    ctx = _Context(model, task, ablation)
    try:
        fit = fit_edge_mask(
            ctx,
            target_sparsity=float(target_sparsity),
            steps=int(steps),
            lr=float(lr),
            reg_lr=float(reg_lr),
            warmup=float(warmup),
            init_log_alpha=float(init_log_alpha),
            seed=seed,
        )
    finally:
        ctx.close()
    p_open = expected_open(torch.as_tensor(fit.log_alpha)).numpy()
    scores = EdgeScores("edge-pruning", p_open, ctx.graph)
    return EdgePruning(scores, fit.log_alpha, np.flatnonzero(fit.mask), fit.kl, fit.sparsity)


@dataclass(frozen=True)
class UGS:
    """Result of :func:`ugs`.

    Attributes
    ----------
    scores : EdgeScores
        Each edge's keep-probability ``p_e = sigmoid(theta_e)`` (MIB's UGS edge score).
    theta : ndarray of float, shape (n_edges,)
        The learned logits.
    kl : ndarray of float, shape (steps,)
        KL divergence of the sampled circuits from the full model at each step.
    density : ndarray of float, shape (steps,)
        Mean keep-probability (expected share of edges kept) at each step.

    See Also
    --------
    ugs : builds it.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> res = ugs(m, min_pairs(8, n_items=4, n_values=12), steps=3)
    >>> res.theta.shape, res.density.shape
    ((13,), (3,))
    >>> bool(np.allclose(res.scores.scores, 1 / (1 + np.exp(-res.theta))))  # p = sigmoid(theta)
    True
    """

    scores: EdgeScores
    theta: np.ndarray
    kl: np.ndarray
    density: np.ndarray


def _ugs_lr(lamb: float, ablation: Any) -> float:
    """MIB's UGS script: the learning rate by penalty, divided by 5 under counterfactual patching."""
    lr = 0.15 if lamb <= 1e-4 else 0.1 if lamb <= 5e-4 else 0.05
    return lr / 5 if isinstance(ablation, str) and ablation == "patching" else lr


@validate_params(
    {
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "lamb": [Interval(numbers.Real, 0, None, closed="left")],
        "node_reg": [Interval(numbers.Real, 0, None, closed="left"), None],
        "lr": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "init_logit": [Interval(numbers.Real, None, None, closed="neither")],
        "window": [Interval(numbers.Real, 0, 2, closed="right")],
        "random_state": ["random_state"],
    }
)
def ugs(
    model: Any,
    task: PatchingTask,
    *,
    steps: int = 500,
    lamb: float = 1e-3,
    node_reg: float | None = None,
    lr: float | None = None,
    batch_size: int = 5,
    n_samples: int = 12,
    init_logit: float = 1.0,
    window: float = 1.0,
    random_state: Any = 0,
    ablation: Any = "patching",
) -> UGS:
    """Uniform gradient sampling: learn each edge's keep-probability under an L0 penalty [3]_.

    Minimises ``E[KL] + lamb * sum_e p_e + node_reg * (head penalty)`` over the logits ``theta`` of
    ``p_e = sigmoid(theta_e)``, estimating the gradient of the expectation over random circuits from
    gates sampled uniformly inside a window around ``p_e`` (:mod:`trustlab.lm._mib_ugs`). The defaults
    are those of the script MIB runs: penalty 1e-3, node penalty ``min(lamb / 2, 2e-4)``, initial logit 1,
    AdamW at 0.01 (0.05 / 5 under patching), batches of 5 inputs with 12 masks each, gradient norm 5.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A GPT-2 or Llama-family causal LM.
    task : PatchingTask
        Clean / counterfactual pairs (the circuits are fit on the clean inputs).
    steps : int, default=500
        Optimisation steps (MIB: one pass over IOI's 9,500 training pairs, 1,900 steps; here the pairs
        are cycled).
    lamb : float, default=1e-3
        Penalty per expected edge (MIB's single run).
    node_reg : float, optional
        Penalty on the attention heads touched; default ``min(lamb / 2, 2e-4)``.
    lr : float, optional
        AdamW learning rate; default MIB's rule (0.05, 0.1 or 0.15 by ``lamb``; a fifth under patching).
    batch_size, n_samples : int, default=5, 12
        Clean inputs per step and sampled circuits per input.
    init_logit : float, default=1.0
        Initial ``theta`` (``p = 0.73``).
    window : float in (0, 2], default=1.0
        Scale of the sampling window ``window * p (1 - p)``.
    random_state : int, Generator or None, default=0
        Seeds the batches and the gate noise.
    ablation : {"patching", "mean", "optimal"} or array, default="patching"
        What an ablated edge reads (see :func:`trustlab.lm.mib.circuit_localization`).

    Returns
    -------
    UGS
        Scores usable by :func:`trustlab.lm.mib.circuit_localization` and the training traces.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> res = ugs(m, min_pairs(8, n_items=4, n_values=12), steps=3)
    >>> res.scores.method, res.scores.scores.shape, res.kl.shape
    ('ugs', (13,), (3,))
    """
    seed = int(np.random.default_rng(random_state).integers(2**31 - 1))
    ctx = _Context(model, task, ablation)
    try:
        fit = fit_ugs(
            ctx,
            steps=int(steps),
            lamb=float(lamb),
            node_reg=min(0.5 * float(lamb), 2e-4) if node_reg is None else float(node_reg),
            lr=_ugs_lr(float(lamb), ablation) if lr is None else float(lr),
            batch_size=int(batch_size),
            n_samples=int(n_samples),
            init_logit=float(init_logit),
            window=float(window),
            clip=5.0,
            seed=seed,
        )
    finally:
        ctx.close()
    p = 1.0 / (1.0 + np.exp(-fit.theta))
    return UGS(EdgeScores("ugs", p, ctx.graph), fit.theta, fit.kl, fit.density)


def edge_pruning_circuits(
    model: Any, task: PatchingTask, *, budgets: Any = _BUDGETS, **kwargs: Any
) -> np.ndarray:
    """One edge-pruning circuit per edge budget (MIB's submission of one circuit per budget).

    For each budget ``b`` with ``0 < int(b * n_edges) < n_edges``, :func:`edge_pruning` is fit with
    ``target_sparsity = 1 - b`` and the circuit keeps its binarised gates, at most the ``int(b * n_edges)``
    largest; a budget under one edge gives the empty circuit and ``b = 1`` the whole model.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A GPT-2 or Llama-family causal LM.
    task : PatchingTask
        Clean / counterfactual pairs.
    budgets : array-like of float in (0, 1], default=MIB's ten budgets
        Shares of the edges.
    **kwargs
        Passed to :func:`edge_pruning` (not ``target_sparsity``).

    Returns
    -------
    ndarray of float, shape (n_budgets, n_edges)
        0/1 circuits in the order of the sorted, unique budgets; :func:`trustlab.lm.mib.circuit_localization`
        takes them as ``scores``.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> edge_pruning_circuits(m, min_pairs(8, n_items=4, n_values=12), budgets=[0.5, 1.0], steps=5).shape
    (2, 13)
    """
    if "target_sparsity" in kwargs:
        raise ParameterError(
            "target_sparsity is set per budget (1 - budget); pass budgets instead.",
            argument="target_sparsity",
        )
    arr = np.unique(np.asarray(budgets, dtype=float).reshape(-1))
    if arr.size == 0 or not np.isfinite(arr).all() or (arr <= 0).any() or (arr > 1).any():
        raise ParameterError(
            f"budgets must be shares of the edges in (0, 1], got {budgets!r}.", argument="budgets"
        )
    n_edges = _Context(model, task).graph.n_edges
    out = np.zeros((arr.size, n_edges))
    for i, b in enumerate(arr):
        cap = int(b * n_edges)
        if cap >= n_edges:
            out[i] = 1.0
        elif cap > 0:
            ep = edge_pruning(model, task, target_sparsity=1.0 - float(b), **kwargs)
            keep = ep.circuit[np.argsort(-ep.log_alpha[ep.circuit], kind="stable")][:cap]
            out[i, keep] = 1.0
    return out


def mean_ablation(model: Any, task: PatchingTask) -> np.ndarray:
    """MIB's mean ablation values: each source node's output averaged over the clean inputs and positions.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A GPT-2 or Llama-family causal LM.
    task : PatchingTask
        Pairs whose clean inputs define the mean (MIB: the task's own data).

    Returns
    -------
    ndarray of float, shape (n_sources, d_model)
        One constant per source node (``edge_graph(model).sources``); pass as ``ablation``.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> mean_ablation(m, min_pairs(8, n_items=4, n_values=12)).shape
    (4, 16)
    """
    ctx = _Context(model, task)
    ctx.close()
    return ctx.clean_acts.mean(dim=(0, 1)).cpu().numpy().astype(float)


@validate_params(
    {
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "patience": [Interval(numbers.Integral, 1, None, closed="left")],
        "check_every": [Interval(numbers.Integral, 1, None, closed="left")],
    }
)
def optimal_ablation(
    model: Any,
    task: PatchingTask,
    *,
    steps: int = 1000,
    lr: float = 1e-3,
    patience: int = 3,
    check_every: int = 10,
) -> np.ndarray:
    """Optimal ablation values [3]_: per source node, the constant that best replaces it alone.

    Each constant starts at the node's mean output and descends (Adam) the KL divergence of the model
    with that node replaced from the full model at the answer positions of the clean inputs; MIB's
    settings: learning rate 1e-3, at most 1,000 steps, stop after ``patience`` checks without improvement.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A GPT-2 or Llama-family causal LM.
    task : PatchingTask
        Pairs whose clean inputs the constants are fitted on.
    steps : int, default=1000
        Most Adam steps.
    lr : float, default=1e-3
        Adam's learning rate.
    patience : int, default=3
        Checks without a new best loss before stopping.
    check_every : int, default=10
        Steps between checks.

    Returns
    -------
    ndarray of float, shape (n_sources, d_model)
        One constant per source node; pass as ``ablation``.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> optimal_ablation(m, min_pairs(8, n_items=4, n_values=12), steps=3).shape
    (4, 16)
    """
    ctx = _Context(model, task)
    try:
        kw = {
            "steps": int(steps),
            "lr": float(lr),
            "patience": int(patience),
            "check_every": int(check_every),
        }
        values = ctx._values("optimal", **kw)
    finally:
        ctx.close()
    return values.cpu().numpy().astype(float)
