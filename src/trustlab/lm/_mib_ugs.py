"""Uniform gradient sampling (UGS): a learned Bernoulli edge mask (Li & Janson 2024), MIB's other mask method.

UGS [1]_ gives every edge ``e`` a logit ``theta_e`` and keeps it with probability ``p_e = sigmoid(theta_e)``;
it minimises the expected loss of the model under the random circuit plus ``lamb`` times the expected
number of edges. For the gradient of ``E[L]`` in ``p_e``, ``E[L | e kept] - E[L | e ablated]``, each
sampled mask draws ``u ~ U(0, 1)`` per edge and sets the gate to
``z_e = clip(1/2 - (u - p_e) / w_e, 0, 1)`` with window ``w_e = p_e (1 - p_e)``: 1 (kept) when ``u`` falls
below the window, 0 (ablated) above it, and uniform in (0, 1) inside it. Only the samples inside the window
carry a gradient, ``dL/dz_e``, whose average over a uniform ``z_e`` is that difference; they are re-weighted
by the number of samples that fell inside. Each step draws ``n_samples`` masks for each of ``batch_size``
clean inputs; the loss is the KL divergence of the masked model's answer-position distribution from the
full model's; edges left dangling by a sampled circuit (not on a path from the input to the logits) are
dropped from it; a node penalty ``node_reg * sum_h N/2 tanh(2 s_h / N)`` over the attention heads ``h``
(``s_h`` the expected edges in and out of ``h``, ``N`` the number of heads) favours circuits that use few
heads. MIB [2]_ scores the edges by ``p_e``.

References
----------
.. [1] Li, Janson. "Optimal ablation for interpretability". NeurIPS 2024.
.. [2] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.lm._mib_graph import EdgeGraph, graph_forward

__all__ = ["UGSFit", "fit_ugs", "prune_rows", "ugs_gates"]

_IN_WINDOW = 1e-3  # a gate strictly between this and 1 - this is a gradient sample (as [1]'s code)


def ugs_gates(theta: torch.Tensor, u: torch.Tensor, window: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gates ``z`` (same shape as ``u``) and which of them fell inside the window (the gradient samples).

    ``z`` equals 1 below the window, 0 above it, linear inside, with ``dz/dtheta = p (1 - p)`` there: the
    derivative of ``p`` itself (the window width is held constant and its ``1 / w`` cancelled).
    """
    p = torch.sigmoid(theta)
    w = (window * p * (1 - p)).detach().clamp_min(1e-12)
    p = w * p - (w - 1) * p.detach()  # the value of p, the gradient of w p ([1]'s scale invariance)
    z = (0.5 - (u - p) / w).clamp(0.0, 1.0)
    inside = (z > _IN_WINDOW) & (z < 1 - _IN_WINDOW)
    return z, inside.detach()


def prune_rows(graph: EdgeGraph, keep: torch.Tensor) -> torch.Tensor:
    """Drop dangling edges from a batch of 0/1 circuits ``keep`` of shape ``(batch, n_sources, n_dests)``.

    Batched :func:`trustlab.lm._mib_graph.prune_mask`: an edge stays if its source is reachable from the
    input and its destination's node reaches the logits, both through circuit edges.
    """
    m = keep.bool() & torch.as_tensor(graph.valid, device=keep.device)
    owner = torch.as_tensor(graph.dest_owner(), device=keep.device)
    n_src, batch = len(graph.sources), keep.shape[0]
    reach = torch.zeros(batch, n_src, dtype=torch.bool, device=keep.device)
    reach[:, 0] = True
    for s in range(1, n_src):
        cols = owner == s
        reach[:, s] = (m[:, :, cols] & reach[:, :, None]).flatten(1).any(1)
    useful_dest = (owner == -1).expand(batch, -1).clone()
    useful_src = torch.zeros(batch, n_src, dtype=torch.bool, device=keep.device)
    for s in range(n_src - 1, -1, -1):
        useful_src[:, s] = (m[:, s] & useful_dest).any(1)
        if s > 0:
            useful_dest[:, owner == s] = useful_src[:, s : s + 1]
    return m & reach[:, :, None] & useful_dest[:, None, :]


def _head_membership(graph: EdgeGraph) -> np.ndarray:
    """``(n_heads_total, n_edges)`` 0/1: the edges out of or into each attention head."""
    owner = graph.dest_owner()
    heads = [i for i, name in enumerate(graph.sources) if name.startswith("a")]
    out = np.zeros((len(heads), graph.n_edges))
    for row, h in enumerate(heads):
        out[row] = (graph.edges[:, 0] == h) | (owner[graph.edges[:, 1]] == h)
    return out


@dataclass(frozen=True)
class UGSFit:
    """What :func:`fit_ugs` learned: the logits ``theta``, and per step the KL and the expected edge share."""

    theta: np.ndarray
    kl: np.ndarray
    density: np.ndarray


def fit_ugs(
    ctx: Any,
    *,
    steps: int,
    lamb: float,
    node_reg: float,
    lr: float,
    batch_size: int,
    n_samples: int,
    init_logit: float,
    window: float,
    clip: float,
    seed: int,
) -> UGSFit:
    """Learn UGS's edge logits on a task context (a ``_Context`` of :mod:`trustlab.lm.mib`).

    AdamW (betas 0.9, 0.995, no weight decay) on ``theta``, gradient norm clipped at ``clip``; each step
    takes the next ``batch_size`` clean inputs of a seeded shuffle (cycling) and ``n_samples`` masks each.
    """
    g = ctx.graph
    dtype, device = ctx.corrupt_acts.dtype, ctx.corrupt_acts.device
    gen = torch.Generator().manual_seed(int(seed))
    rows = torch.as_tensor(g.edges[:, 0], device=device)
    cols = torch.as_tensor(g.edges[:, 1], device=device)
    members = torch.as_tensor(_head_membership(g), dtype=dtype, device=device)
    n_heads = max(1, members.shape[0])
    with torch.no_grad():
        full, _, _ = ctx.run(ctx.clean)
        p_full = full.log_softmax(-1)
    theta = torch.full((g.n_edges,), float(init_logit), dtype=dtype, device=device, requires_grad=True)
    opt = torch.optim.AdamW([theta], lr=lr, betas=(0.9, 0.995), weight_decay=0.0)
    n_items = len(ctx.clean)
    order = torch.randperm(n_items, generator=gen)
    cursor, kls, density = 0, np.empty(steps), np.empty(steps)
    for step in range(steps):
        if cursor + batch_size > n_items:
            order, cursor = torch.randperm(n_items, generator=gen), 0
        idx = order[cursor : cursor + min(batch_size, n_items)].repeat(n_samples).to(device)
        cursor += batch_size
        b = len(idx)
        u = torch.rand((b, g.n_edges), generator=gen, dtype=dtype).to(device)
        with torch.enable_grad():
            z, inside = ugs_gates(theta, u, window)
            count = inside.sum(0)
            weight = torch.where(count > 0, b / count.clamp_min(1), torch.zeros_like(z[0]))
            z = weight * z + (1 - weight) * z.detach()
            mask = torch.zeros((b, *g.valid.shape), dtype=dtype, device=device)
            mask = mask.index_put((torch.arange(b, device=device)[:, None], rows[None], cols[None]), z)
            with torch.no_grad():
                live = prune_rows(g, mask > 0).to(dtype)
            logits, _, _ = graph_forward(
                ctx.model,
                g,
                ctx.clean[idx],
                ctx.pos[idx],
                mask=mask * live,
                corrupt=ctx.corrupt_acts[idx],
                weights=ctx.weights,
            )
            ref = p_full[idx]
            kl = (ref.exp() * (ref - logits.log_softmax(-1))).sum(-1).mean()
            p = torch.sigmoid(theta)
            node = (torch.tanh(2 * (members @ p) / n_heads) * n_heads / 2).sum()
            loss = kl + lamb * p.sum() + node_reg * node
            (grad,) = torch.autograd.grad(loss, [theta])
        grad = torch.nan_to_num(grad, nan=0.0, posinf=0.0, neginf=0.0)
        norm = grad.norm()
        theta.grad = grad * (clip / norm).clamp(max=1.0) if norm > 0 else grad
        opt.step()
        kls[step] = float(kl.detach())
        density[step] = float(p.detach().mean())
    return UGSFit(theta.detach().cpu().numpy().astype(float), kls, density)
