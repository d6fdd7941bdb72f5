"""Edge pruning: a learned hard-concrete mask over the edge graph (a mask-optimisation method of MIB).

Edge pruning [1]_ gives every edge ``e`` a gate ``z_e`` in [0, 1] drawn from a hard-concrete
distribution [2]_ with a learned location ``log_alpha_e``. A gate of 1 lets the destination read the
live source, 0 the counterfactual one (the edge-patched pass of :mod:`trustlab.lm._mib_graph`, which
interpolates linearly in between). The gates minimise the KL divergence of the masked model's
answer-position distribution from the full model's, under a sparsity constraint enforced by a
Lagrangian whose multipliers are trained by gradient ascent and whose target sparsity is annealed
from 0. The MIB benchmark [3]_ ranks the edges of mask methods by their mask values; here the gates'
probability of being open, ``P(z_e > 0)``, a monotone map of ``log_alpha``.

References
----------
.. [1] Bhaskar, Wettig, Friedman, Chen. "Finding Transformer Circuits with Edge Pruning". NeurIPS 2024.
.. [2] Louizos, Welling, Kingma. "Learning Sparse Neural Networks through L0 Regularization". ICLR 2018.
.. [3] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "HC_LEFT",
    "HC_RIGHT",
    "HC_TEMPERATURE",
    "MaskFit",
    "deterministic_gates",
    "expected_open",
    "fit_edge_mask",
    "sample_gates",
]

HC_LEFT, HC_RIGHT, HC_TEMPERATURE = -0.1, 1.1, 2.0 / 3.0  # stretch interval and temperature of [1], [2]
_EPS = 1e-6


def sample_gates(log_alpha: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Reparameterised hard-concrete sample: stretched binary concrete, clipped to [0, 1]."""
    u = torch.rand(log_alpha.shape, generator=gen, dtype=log_alpha.dtype).clamp(_EPS, 1 - _EPS)
    u = u.to(log_alpha.device)
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_alpha) / HC_TEMPERATURE)
    return (s * (HC_RIGHT - HC_LEFT) + HC_LEFT).clamp(0.0, 1.0)


def expected_open(log_alpha: torch.Tensor) -> torch.Tensor:
    """``P(z_e > 0)`` per gate (the expected L0 norm's terms, [2] eq. 12)."""
    return torch.sigmoid(log_alpha - HC_TEMPERATURE * math.log(-HC_LEFT / HC_RIGHT))


def deterministic_gates(log_alpha: np.ndarray) -> np.ndarray:
    """Evaluation-time 0/1 mask: keep the ``round(sum P(z_e > 0))`` gates of largest ``log_alpha``.

    The binarisation of [1]'s evaluation: as many edges close as the gates' expected number of zeros.
    """
    la = torch.as_tensor(np.asarray(log_alpha, dtype=float))
    n_open = round(float(expected_open(la).sum()))
    keep = np.zeros(la.numel())
    keep[np.argsort(-la.numpy(), kind="stable")[:n_open]] = 1.0
    return keep


def _target_at(step: int, warmup: int, target: float) -> float:
    """Target sparsity annealed linearly from 0 to ``target`` over ``warmup`` steps ([1]'s schedule)."""
    return target if step >= warmup or warmup == 0 else target * step / warmup


@dataclass(frozen=True)
class MaskFit:
    """What :func:`fit_edge_mask` learned.

    Attributes
    ----------
    log_alpha : ndarray, shape (n_edges,)
        Learned gate locations (the edge scores; higher keeps the edge).
    mask : ndarray of float, shape (n_edges,)
        The 0/1 circuit of :func:`deterministic_gates`.
    kl : ndarray, shape (steps,)
        Task loss (KL of the masked model from the full model) per step.
    sparsity : ndarray, shape (steps,)
        Share of sampled gates at 0 per step.
    """

    log_alpha: np.ndarray
    mask: np.ndarray
    kl: np.ndarray
    sparsity: np.ndarray


def fit_edge_mask(
    ctx: Any,
    *,
    target_sparsity: float,
    steps: int,
    lr: float,
    reg_lr: float,
    warmup: float,
    init_log_alpha: float,
    seed: int,
) -> MaskFit:
    """Learn hard-concrete edge gates on a task context (a ``_Context`` of :mod:`trustlab.lm.mib`).

    Minimises ``KL(p_full || p_masked) + l1 (s - t) + l2 (s - t)^2`` over the gates' ``log_alpha``
    (AdamW, ``lr`` with a linear warm-up over 7% of the steps and linear decay, as [1]) while the
    multipliers ``l1, l2`` ascend it (``reg_lr``); ``s`` is the share of sampled gates at zero, ``t``
    the target annealed from 0 over the first ``warmup`` share of the steps.
    """
    g = ctx.graph
    dtype, device = ctx.corrupt_acts.dtype, ctx.corrupt_acts.device
    rows = torch.as_tensor(g.edges[:, 0], device=device)
    cols = torch.as_tensor(g.edges[:, 1], device=device)
    with torch.no_grad():
        full, _, _ = ctx.run(ctx.clean)
        p_full = full.log_softmax(-1)
    gen = torch.Generator().manual_seed(int(seed))
    log_alpha = (init_log_alpha + 0.01 * torch.randn(g.n_edges, generator=gen, dtype=dtype)).to(device)
    log_alpha.requires_grad_(True)
    lambdas = torch.zeros(2, dtype=dtype, device=device, requires_grad=True)
    opt = torch.optim.AdamW(
        [{"params": [log_alpha], "lr": lr}, {"params": [lambdas], "lr": reg_lr, "maximize": True}],
        weight_decay=0.0,
    )
    warm_lr = max(1, round(0.07 * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: i / warm_lr if i < warm_lr else max(0.0, (steps - i) / max(1, steps - warm_lr))
    )
    n_warm = round(warmup * steps)
    zero = torch.zeros(g.valid.shape, dtype=dtype, device=device)
    kls, sparsities = np.empty(steps), np.empty(steps)
    for step in range(steps):
        z = sample_gates(log_alpha, gen)
        mask = zero.index_put((rows, cols), z)
        with torch.enable_grad():
            logits, _, _ = ctx.run(ctx.clean, mask=mask, corrupt=ctx.corrupt_acts)
            kl = (p_full.exp() * (p_full - logits.log_softmax(-1))).sum(-1).mean()
            gap = (1.0 - z.sum() / g.n_edges) - _target_at(step, n_warm, target_sparsity)
            loss = kl + lambdas[0] * gap + lambdas[1] * gap**2
            grads = torch.autograd.grad(loss, [log_alpha, lambdas])
        log_alpha.grad, lambdas.grad = grads
        opt.step()
        sched.step()
        kls[step] = float(kl.detach())
        sparsities[step] = float((z == 0).float().mean())
    la = log_alpha.detach().cpu().numpy().astype(float)
    return MaskFit(la, deterministic_gates(la), kls, sparsities)
