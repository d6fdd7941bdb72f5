"""One forward pass read for token-level exit rules, and the paper's two baseline exit scores.

Used by :mod:`trustlab.lm.saturation_probe`. The baselines are those Lioubashevski et al.
(ICML 2025) compare their probe with, as their code computes them (after Schuster et al.'s CALM,
NeurIPS 2022): the *softmax margin*, ``p_1 - p_2`` of the logit lens's softmax at the block
(``SOFTMAX_THRS_FOR_EE`` in their code: 0.4 ... 0.94), and the *state cosine*, the cosine
similarity of the residual stream after the block with that after the block before (never
at block 0; their ``COS_SIM_THR_FOR_EE``: 0.986 ... 0.995, tuned for GPT-2 XL). A token exits at
the first block whose score reaches the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.lm.hooks import _layout, run_with_hooks
from trustlab.lm.internals import _settled

BASELINES = ("softmax", "cosine")
_CHUNK = 8  # sequences per forward pass (the residual streams of a chunk are held at once)


@dataclass(frozen=True)
class _Trace:
    hidden: np.ndarray  # (L, P, d): residual stream after each block
    topk: np.ndarray  # (L, P, k): lens top-k ids per block
    margin: np.ndarray  # (L, P): lens softmax p_1 - p_2 per block
    final: np.ndarray  # (P, k): the model's final top-k ids
    target: np.ndarray  # (P,): next token, -1 at the last position of a sequence


def _trace(model: Any, ids: np.ndarray, k: int) -> _Trace:
    lay = _layout(model)
    names = [f"blocks.{i}.resid_post" for i in range(len(lay.layers))]
    hidden, topk, margin, final = [], [], [], []
    with torch.no_grad():
        for start in range(0, ids.shape[0], _CHUNK):
            out = run_with_hooks(model, ids[start : start + _CHUNK], names)
            resid = [out[name] for name in names]
            hidden.append(torch.stack([r.float().reshape(-1, r.shape[-1]).cpu() for r in resid]))
            tops, margins = [], []
            for r in resid:  # the logit lens, lm_head(final_norm(resid)), one block at a time
                lens = lay.head(lay.norm(r)).float().reshape(-1, out["logits"].shape[-1])
                tops.append(lens.topk(max(k, 2), dim=-1).indices[:, :k].cpu())
                p = torch.softmax(lens, dim=-1).topk(2, dim=-1).values
                margins.append((p[:, 0] - p[:, 1]).cpu())
            topk.append(torch.stack(tops))
            margin.append(torch.stack(margins))
            final.append(out["logits"].float().topk(k, dim=-1).indices.reshape(-1, k).cpu())
    target = np.concatenate([ids[:, 1:], np.full((ids.shape[0], 1), -1)], axis=1).reshape(-1)
    return _Trace(
        hidden=torch.cat(hidden, dim=1).numpy(),
        topk=torch.cat(topk, dim=1).numpy(),
        margin=torch.cat(margin, dim=1).numpy().astype(np.float64),
        final=torch.cat(final, dim=0).numpy(),
        target=target,
    )


def _scored(trace: _Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Lens top-1, final top-1, target and top-1 saturation block of positions with a next token."""
    rows = trace.target >= 0
    top = trace.topk[:, rows, 0]
    full = trace.final[rows, 0]
    return top, full, trace.target[rows], _settled(top == full[None])


def _first_fire(fire: np.ndarray) -> np.ndarray:
    """First block (axis 0) where ``fire`` holds; the last block when it never does."""
    fire = fire.copy()
    fire[-1] = True
    return fire.argmax(axis=0).astype(np.int64)


def _baseline_scores(trace: _Trace, rule: str) -> np.ndarray:
    """Per block and position, the softmax margin or the state cosine (``-inf`` where undefined)."""
    if rule == "softmax":
        return trace.margin
    h = trace.hidden.astype(np.float64)
    norms = np.linalg.norm(h, axis=-1)
    cos = np.sum(h[1:] * h[:-1], axis=-1) / np.maximum(norms[1:] * norms[:-1], 1e-30)
    return np.concatenate([np.full((1, h.shape[1]), -np.inf), cos])


def _smallest_reaching(scores: np.ndarray, top: np.ndarray, full: np.ndarray, agreement: float) -> float:
    """The smallest of 201 score quantiles (or inf) whose exits agree with ``full`` often enough."""
    finite = scores[np.isfinite(scores)]
    candidates = np.unique(np.quantile(finite, np.linspace(0, 1, 201))) if finite.size else np.array([])
    cols = np.arange(top.shape[1])
    for t in candidates:
        if np.mean(top[_first_fire(scores >= t), cols] == full) >= agreement:
            return float(t)
    return float("inf")
