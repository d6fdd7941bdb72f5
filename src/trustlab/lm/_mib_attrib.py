"""EAP-IG on activations and information-flow routes: two more edge scorers of MIB's circuit track.

Public through :func:`trustlab.lm.mib.edge_scores` (``method="eap-ig-activations"`` and
``method="information-flow-routes"``), run as MIB's circuit-track code runs them [1]_:

- **EAP-IG-activations** (MIB's variant of EAP-IG [2]_): instead of interpolating the input
  embeddings, the output of one component at a time (the embedding, all heads of one block, or one
  block's MLP) is set to ``a_cf + alpha (a_clean - a_cf)``, ``alpha = k / steps`` for ``k = 1 ..
  steps``, while the rest of the model runs on from it; the gradient of the metric at every
  destination input is summed over all components and steps and multiplied by each source's
  activation difference, then divided by the number of runs.
- **Information flow routes** (IFR, Ferrando & Voita [3]_): no counterfactual and no gradient; on the
  clean run, the importance of source ``u`` to destination ``d`` at a position is the proximity of
  ``u``'s output ``o_u`` to ``d``'s input ``x_d`` (the residual sum it is a term of),
  ``max(0, ||x_d||_1 - ||x_d - o_u||_1)``, normalised over the upstream sources; the edge score is its
  mean over positions and items.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
.. [2] Hanna, Pezzelle, Belinkov. "Have Faith in Faithfulness: Going Beyond Circuit Overlap When
   Finding Model Mechanisms". COLM 2024.
.. [3] Ferrando, Voita. "Information Flow Routes: Automatically Interpreting Language Models at
   Scale". EMNLP 2024.
"""

from __future__ import annotations

import numpy as np
import torch

from trustlab.lm._mib_graph import EdgeGraph, graph_forward
from trustlab.lm._mib_task import _Context

__all__ = ["ifr_scores", "ig_activation_scores", "proximity_importance", "source_groups"]


def source_groups(graph: EdgeGraph) -> list[list[int]]:
    """MIB's interpolation units: ``input``, then per block all its heads together, then its MLP."""
    h = graph.n_heads
    groups = [[0]]
    for layer in range(graph.n_layers):
        base = 1 + layer * (h + 1)
        groups += [list(range(base, base + h)), [base + h]]
    return groups


def _to_edges(graph: EdgeGraph, per_group: list[torch.Tensor]) -> np.ndarray:
    """``(n_up, width)`` blocks per destination group, in destination order, to one score per edge."""
    full = torch.zeros(graph.valid.shape, dtype=per_group[0].dtype)
    col = 0
    for block in per_group:
        full[: block.shape[0], col : col + block.shape[1]] = block.detach().cpu()
        col += block.shape[1]
    return full.numpy()[graph.edges[:, 0], graph.edges[:, 1]].astype(float)


def ig_activation_scores(ctx: _Context, steps: int) -> np.ndarray:
    """MIB's EAP-IG-activations: per component group and step, interpolate its output, sum the gradients.

    Runs ``len(source_groups) * steps`` forward and backward passes (one batch per group, the steps
    stacked). The interpolation's baseline is whatever the context ablates to: the counterfactual
    run's outputs under patching, the constants under mean or optimal ablation. Scores are
    ``(a_clean - a_ablated) . mean gradient``, in units of the metric (MIB's sign flipped, as for EAP).
    """
    g, n = ctx.graph, len(ctx.clean)
    clean, base = ctx.clean_acts, ctx.corrupt_acts
    alphas = torch.arange(1, steps + 1, dtype=clean.dtype, device=clean.device) / steps
    interp = base[None] + alphas[:, None, None, None, None] * (clean - base)[None]  # (k, b, p, u, d)
    interp = interp.reshape(steps * n, *clean.shape[1:])
    ones = torch.as_tensor(g.valid, dtype=clean.dtype, device=clean.device)
    ids, pos = ctx.clean.repeat(steps, 1), ctx.pos.repeat(steps)
    groups = source_groups(g)
    total: list[torch.Tensor] | None = None
    for group in groups:
        corrupt = clean.repeat(steps, 1, 1, 1)
        corrupt[:, :, group] = interp[:, :, group]
        mask = ones.clone()
        mask[group] = 0.0  # every destination reads the interpolated output of the group
        corrupt.requires_grad_(True)
        with torch.enable_grad():
            logits, _, inputs = graph_forward(
                ctx.model, g, ids, pos, mask=mask, corrupt=corrupt, keep_inputs=True, weights=ctx.weights
            )
            rows = torch.arange(logits.shape[0], device=logits.device)
            metric = (logits[rows, ctx.ans.repeat(steps)] - logits[rows, ctx.cf.repeat(steps)]).sum() / n
            grads = torch.autograd.grad(metric, inputs)
        summed = [gr.reshape(steps, n, *gr.shape[1:]).sum(0) for gr in grads]  # sum over the steps
        total = summed if total is None else [a + b for a, b in zip(total, summed, strict=True)]
    assert total is not None
    diff = clean - base
    runs = len(groups) * steps
    blocks, col = [], 0
    for grad in total:
        n_up = g.n_upstream(col)
        blocks.append(torch.einsum("bpud,bped->ue", diff[:, :, :n_up], grad / runs))
        col += grad.shape[2]
    return _to_edges(g, blocks)


def proximity_importance(inputs: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """Ferrando & Voita's proximity of each term of a sum to the sum, normalised over the terms.

    Parameters
    ----------
    inputs : Tensor, shape (..., n_dest, d)
        Destination inputs ``x`` (the residual sums).
    outputs : Tensor, shape (..., n_up, d)
        Source outputs ``o_u`` (terms of those sums).

    Returns
    -------
    Tensor, shape (..., n_up, n_dest)
        ``max(0, ||x||_1 - ||x - o_u||_1)`` divided by its sum over ``u`` (0 where that sum is 0).
    """
    x = inputs.unsqueeze(-3)  # (..., 1, n_dest, d)
    o = outputs.unsqueeze(-2)  # (..., n_up, 1, d)
    prox = (x.abs().sum(-1) - (x - o).abs().sum(-1)).clamp(min=0.0)
    norm = prox.sum(-2, keepdim=True)
    return torch.where(norm > 0, prox / norm.clamp(min=torch.finfo(prox.dtype).tiny), torch.zeros_like(prox))


@torch.no_grad()
def ifr_scores(ctx: _Context) -> np.ndarray:
    """MIB's information-flow-routes edge scores: mean proximity importance over positions and items."""
    g = ctx.graph
    _, acts, inputs = ctx.run(ctx.clean, keep_inputs=True)
    blocks, col = [], 0
    for x in inputs:  # (b, p, width, d)
        n_up = g.n_upstream(col)
        imp = proximity_importance(x, acts[:, :, :n_up])  # (b, p, n_up, width)
        blocks.append(imp.mean(dim=(0, 1)))
        col += x.shape[2]
    return _to_edges(g, blocks)
