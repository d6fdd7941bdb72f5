"""Optimal ablation: one constant per source node that best stands in for it (Li & Janson 2024, MIB's "OA").

Optimal ablation [1]_ replaces a component's output by the constant that minimises the expected loss of
the model with that component ablated. MIB [2]_ computes one such constant per source node of the edge
graph (the embedding, every attention head's output, every MLP's output), each fitted with that node
alone ablated, starting from the node's mean output and descending with Adam (learning rate 1e-3, at
most 1,000 steps, stopped when the loss has not improved at 3 checks in a row, one check every 10
steps). The loss here is the KL divergence of the ablated model's answer-position distribution from the
full model's, the loss [1]_ uses for circuit discovery; see docs/lm-mib.md for MIB's choice.

References
----------
.. [1] Li, Janson. "Optimal ablation for interpretability". NeurIPS 2024.
.. [2] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trustlab.lm._mib_graph import EdgeGraph, graph_forward

__all__ = ["fit_optimal_ablation", "mean_values"]


def mean_values(acts: torch.Tensor) -> torch.Tensor:
    """Each source node's output averaged over items and token positions: shape ``(n_sources, d_model)``."""
    return acts.detach().mean(dim=(0, 1))


def fit_optimal_ablation(
    model: Any,
    graph: EdgeGraph,
    weights: Any,
    ids: torch.Tensor,
    positions: torch.Tensor,
    start: torch.Tensor,
    *,
    steps: int,
    lr: float,
    patience: int,
    check_every: int,
) -> tuple[torch.Tensor, np.ndarray]:
    """Fit every source's optimal constant at once; returns the constants and the mean KL per step.

    Copy ``j`` of the batch ablates source ``j`` alone (every edge out of it reads the constant), so the
    summed loss separates over the constants and one Adam run equals one run per source.
    """
    n_src, n = len(graph.sources), ids.shape[0]
    valid = torch.as_tensor(graph.valid, dtype=start.dtype, device=start.device)
    masks = valid.repeat(n_src, 1, 1)
    masks[torch.arange(n_src), torch.arange(n_src)] = 0.0
    masks = masks.repeat_interleave(n, dim=0)
    rows_ids, rows_pos = ids.repeat(n_src, 1), positions.repeat(n_src)
    with torch.no_grad():
        full, _, _ = graph_forward(model, graph, ids, positions, weights=weights)
        p_full = full.log_softmax(-1).repeat(n_src, 1)
    values = start.detach().clone().requires_grad_(True)
    opt = torch.optim.Adam([values], lr=lr)
    best, stale, trace = float("inf"), 0, []
    for step in range(steps):
        corrupt = values[None, None].expand(n_src * n, ids.shape[1], -1, -1)
        with torch.enable_grad():
            logits, _, _ = graph_forward(
                model, graph, rows_ids, rows_pos, mask=masks, corrupt=corrupt, weights=weights
            )
            kl = (p_full.exp() * (p_full - logits.log_softmax(-1))).sum(-1)
            loss = kl.reshape(n_src, n).mean(1).sum()
            (grad,) = torch.autograd.grad(loss, [values])
        values.grad = grad
        opt.step()
        opt.zero_grad(set_to_none=True)
        trace.append(float(loss.detach()) / n_src)
        if step % check_every == 0:
            if trace[-1] < best:
                best, stale = trace[-1], 0
            else:
                stale += 1
                if stale >= patience:
                    break
    return values.detach(), np.asarray(trace)
