"""Discrimination-aware multitask optimisation (DAMO) of source-free unlearning.

Wang et al. (ICML 2025), Section 3.2: three losses on the synthetic sets, the retain
loss ``L_R``, the forget loss ``L_F`` and the discriminative feature alignment
``L_Disc`` (Eq. 7, Circle-loss form), combined by a conflict-averse update
(Theorems 3.2-3.3): ``d* = g_T + sqrt(phi) g_w / ||g_w||`` with ``g_T = sum_i lam_i g_i``,
``phi = c^2 ||g_T||^2`` and ``w`` minimising ``g_w . g_T + sqrt(phi) ||g_w||`` over the
simplex.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
from scipy.optimize import minimize

from trustlab._adam import Adam
from trustlab.unlearning._source_free_inputs import check_finite, import_torch

__all__ = ["cagrad_weights", "damo", "disc_loss", "forget_loss"]


def cagrad_weights(gram: np.ndarray, lam: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    """``(w*, coefficients of d*)`` from the Gram matrix of the task gradients.

    ``d* = sum_i coef_i g_i``; ``coef = lam`` when ``c = 0``, when ``g_T = 0`` or when
    ``g_w* = 0``.
    """
    k = lam.size
    gt_sq = float(lam @ gram @ lam)
    if c == 0.0 or not gt_sq > 0.0:
        return np.full(k, 1.0 / k), lam.copy()
    sqrt_phi = c * math.sqrt(gt_sq)
    b = gram @ lam

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        gw = gram @ w
        norm = math.sqrt(max(float(w @ gw), 0.0)) + 1e-30
        return float(w @ b + sqrt_phi * norm), b + (sqrt_phi / norm) * gw

    # The objective is convex in w (linear plus the norm of a linear map): one start suffices.
    res = minimize(
        objective,
        np.full(k, 1.0 / k),
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * k,
        constraints=[{"type": "eq", "fun": lambda w: float(w.sum() - 1.0), "jac": lambda w: np.ones_like(w)}],
        options={"ftol": 1e-12, "maxiter": 200},
    )
    best = np.clip(np.asarray(res.x, dtype=float), 0.0, None)
    best = best / best.sum() if best.sum() > 0 else np.full(k, 1.0 / k)
    gw_norm = math.sqrt(max(float(best @ gram @ best), 0.0))
    if not gw_norm > 1e-12 * math.sqrt(gt_sq):
        return best, lam.copy()
    return best, lam + (sqrt_phi / gw_norm) * best


def forget_loss(logits: Any, forget: Any, retain: Any, kind: str, relabel: Any) -> Any:
    """``L_F`` on forget samples: ``-log(1 - sum_{c in C_f} p_c)`` (``"mass"``) or CE to ``relabel``."""
    torch = import_torch()
    if kind == "mass":
        return (torch.logsumexp(logits, dim=1) - torch.logsumexp(logits[:, retain], dim=1)).mean()
    return torch.nn.functional.cross_entropy(logits, relabel)


def disc_loss(feats: Any, labels: Any, centres: Any, scale: float, o_p: float, o_n: float) -> Any:
    """Eq. 7: ``mean log(1 + sum_j exp(scale a_n^j s_n^j) exp(-scale a_p s_p))`` over retain samples.

    ``labels`` index the rows of ``centres`` (one per retain class); ``s`` are cosine
    similarities of the features to the centres; the weights ``a_p = [o_p - s_p]_+`` and
    ``a_n = [s_n - o_n]_+`` are detached (as in Circle loss). With one retain class there
    is no negative and the loss is 0.
    """
    torch = import_torch()
    f = torch.nn.functional.normalize(feats, dim=1)
    cn = torch.nn.functional.normalize(centres, dim=1)
    sims = f @ cn.T
    rows = torch.arange(sims.shape[0])
    s_p = sims[rows, labels]
    a_p = (o_p - s_p).clamp_min(0.0).detach()
    a_n = (sims - o_n).clamp_min(0.0).detach()
    logit_n = scale * a_n * sims - (scale * a_p * s_p)[:, None]
    mask = torch.ones_like(sims, dtype=torch.bool)
    mask[rows, labels] = False
    logit_n = logit_n.masked_fill(~mask, float("-inf"))
    zero = torch.zeros((sims.shape[0], 1), dtype=sims.dtype)
    return torch.logsumexp(torch.cat([zero, logit_n], dim=1), dim=1).mean()


def _features(model: Any, head: Any, x: Any) -> tuple[Any, Any]:
    torch = import_torch()
    store: list[Any] = []
    handle = head.register_forward_pre_hook(lambda _m, inputs: store.append(inputs[0]))
    try:
        logits = model(x)
    finally:
        handle.remove()
    return logits, torch.flatten(store[-1], 1)


def damo(
    model: Any,
    Xr: Any,
    yr: Any,
    Xf: Any,
    *,
    forget: tuple[int, ...],
    retain: tuple[int, ...],
    head_path: str | None,
    retain_kind: str,
    forget_kind: str,
    weights: np.ndarray,
    c: float,
    epochs: int,
    lr: float,
    batch_size: int,
    scale: float,
    o_p: float,
    o_n: float,
    generator: Any,
) -> tuple[Any, dict[str, list[float]], int]:
    """Fine-tune a copy of ``model``; return (model, per-epoch mean losses, optimiser steps)."""
    torch = import_torch()
    original = copy.deepcopy(model).eval()
    for p in original.parameters():
        p.requires_grad_(False)
    work = copy.deepcopy(model).eval()
    params = [p for p in work.parameters() if p.requires_grad]
    use_disc = weights[2] > 0 and len(retain) > 1 and head_path is not None
    head_w = dict(work.named_modules())[head_path] if use_disc and head_path is not None else None
    head_o = dict(original.named_modules())[head_path] if use_disc and head_path is not None else None
    retain_t = torch.as_tensor(retain)
    pos = {cls: i for i, cls in enumerate(retain)}
    yr_pos = torch.as_tensor([pos[int(v)] for v in yr.tolist()])
    with torch.no_grad():
        teacher = torch.softmax(original(Xr), dim=1)
        relabel = retain_t[original(Xf)[:, retain_t].argmax(dim=1)]
        centres = None
        if use_disc:
            _, feats = _features(original, head_o, Xr)
            centres = torch.stack([feats[yr_pos == i].mean(dim=0) for i in range(len(retain))])
    adam = Adam(params, lr)
    lam = np.asarray(weights, dtype=float)
    history: dict[str, list[float]] = {"retain": [], "forget": [], "disc": [], "total": []}
    n_r, n_f = int(Xr.shape[0]), int(Xf.shape[0])
    n_batches = max(1, math.ceil(n_r / batch_size))
    bf = max(1, math.ceil(n_f / n_batches))
    n_steps = 0
    for _ in range(epochs):
        order_r = torch.randperm(n_r, generator=generator)
        order_f = torch.randperm(n_f, generator=generator)
        sums = np.zeros(3)
        for b in range(n_batches):
            ir = order_r[b * batch_size : (b + 1) * batch_size]
            jf = order_f[(b * bf) % n_f : (b * bf) % n_f + bf]
            if head_w is not None:
                logits_r, feats_r = _features(work, head_w, Xr[ir])
            else:
                logits_r, feats_r = work(Xr[ir]), None
            if retain_kind == "ce":
                l_r = torch.nn.functional.cross_entropy(logits_r, yr[ir])
            else:
                l_r = -(teacher[ir] * torch.log_softmax(logits_r, dim=1)).sum(dim=1).mean()
            l_f = forget_loss(work(Xf[jf]), forget, retain_t, forget_kind, relabel[jf])
            losses = [l_r, l_f]
            if feats_r is not None and centres is not None:
                losses.append(disc_loss(feats_r, yr_pos[ir], centres, scale, o_p, o_n))
            for loss in losses:
                check_finite(loss.detach(), "the unlearning objective")
            grads = []
            for i, loss in enumerate(losses):
                g = torch.autograd.grad(loss, params, retain_graph=i < len(losses) - 1, allow_unused=True)
                grads.append(
                    torch.cat(
                        [
                            (torch.zeros_like(p) if gi is None else gi).reshape(-1)
                            for p, gi in zip(params, g, strict=True)
                        ]
                    )
                )
            G = torch.stack(grads)
            gram = (G @ G.T).detach().double().numpy()
            _, coef = cagrad_weights(gram, lam[: len(losses)], c)
            direction = torch.as_tensor(coef, dtype=G.dtype) @ G
            check_finite(direction, "the unlearning direction")
            sizes = [p.numel() for p in params]
            adam.step([d.view_as(p) for d, p in zip(direction.split(sizes), params, strict=True)])
            n_steps += 1
            vals = [float(v.detach()) for v in losses] + [0.0] * (3 - len(losses))
            sums += np.asarray(vals)
        means = sums / n_batches
        history["retain"].append(float(means[0]))
        history["forget"].append(float(means[1]))
        history["disc"].append(float(means[2]))
        history["total"].append(float(lam @ means))
    for p in work.parameters():
        check_finite(p.detach(), "a parameter of the unlearned model")
    return work.eval(), history, n_steps
