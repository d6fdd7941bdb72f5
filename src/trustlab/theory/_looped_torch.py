"""Batched one-block looped transformers for :func:`simulate_looped` (001-13, private).

The authors' block (``kevin671/tmlt``, ``model.py``): pre-RMSNorm two-head self-attention and a
GELU feed-forward, optionally modulated per loop by a sinusoidal timestep encoding (adaLN-Zero).
``s`` independent models (one per seed) are held along a leading axis and trained at once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _init_params(torch: Any, s: int, d_in: int, d_out: int, w: int, gen: Any) -> dict[str, list[Any]]:
    """PyTorch's ``nn.Linear`` initialisation, one independent copy per seed (leading axis ``s``)."""

    def lin(i: int, o: int, zero: bool = False) -> list[Any]:
        if zero:  # adaLN-Zero, as in the authors' code: gates start at 0, scales at 1
            return [torch.zeros(s, i, o), torch.zeros(s, o)]
        b = 1 / math.sqrt(i)
        return [
            (torch.rand(s, i, o, generator=gen) * 2 - 1) * b,
            (torch.rand(s, o, generator=gen) * 2 - 1) * b,
        ]

    shapes = {"inp": (d_in, w), "qkv": (w, 3 * w), "proj": (w, w), "ff1": (w, 4 * w), "ff2": (4 * w, w)}
    p = {k: lin(*io) for k, io in (shapes | {"out": (w, d_out), "te1": (w, w), "te2": (w, w)}).items()}
    p["mod"] = lin(w, 4 * w, zero=True)
    return {k: [t.requires_grad_() for t in v] for k, v in p.items()}


def _linear(torch: Any, p: list[Any], x: Any) -> Any:
    w, b = p
    y = torch.bmm(x.reshape(x.shape[0], -1, x.shape[-1]), w) + b[:, None, :]
    return y.reshape(*x.shape[:-1], w.shape[-1])


def _forward(torch: Any, p: dict[str, list[Any]], x: Any, loops: int, variant: str) -> Any:
    """``s`` independent one-block looped transformers on ``x`` of shape ``(s, batch, N, d)``."""
    fn = torch.nn.functional
    s, b, n, _ = x.shape
    h = _linear(torch, p["inp"], x)
    w, heads = h.shape[-1], 2
    dh = w // heads

    def rms(u: Any) -> Any:  # RMSNorm without a gain (the authors' norm1 / norm2)
        return u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + 1e-6)

    if variant != "plain":  # sinusoidal encoding of t -> MLP -> SiLU -> (alpha1, alpha2, gamma1, gamma2)
        freqs = torch.exp(-math.log(10000.0) * torch.arange(w // 2) / (w // 2))
        t = torch.arange(loops, dtype=torch.float32) * (variant == "timestep")
        enc = torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], dim=1)
        te = _linear(torch, p["te2"], fn.silu(_linear(torch, p["te1"], enc.expand(s, loops, w))))
        mod = _linear(torch, p["mod"], fn.silu(te))[:, :, None, None, :]  # (s, loops, 1, 1, 4w)
    for k in range(loops):
        if variant == "plain":
            a1 = a2 = 1.0
            z1 = rms(h)
        else:
            a1, a2, g1, g2 = mod[:, k].chunk(4, dim=-1)
            z1 = rms(h) * (1 + g1)
        q, kk, v = (u.reshape(s, b, n, heads, dh) for u in _linear(torch, p["qkv"], z1).split(w, dim=-1))
        att = torch.softmax(torch.einsum("sbnhd,sbmhd->sbhnm", q, kk) / math.sqrt(dh), dim=-1)
        h = h + a1 * _linear(torch, p["proj"], torch.einsum("sbhnm,sbmhd->sbnhd", att, v).reshape(s, b, n, w))
        z2 = rms(h) if variant == "plain" else rms(h) * (1 + g2)
        h = h + a2 * _linear(torch, p["ff2"], fn.gelu(_linear(torch, p["ff1"], z2)))
    return _linear(torch, p["out"], rms(h))


def _slope(log_r: np.ndarray, errors: np.ndarray) -> tuple[float, float]:
    """OLS slope of ``log error`` on ``log r`` over all (r, seed) pairs, with its standard error."""
    x = np.repeat(log_r, errors.shape[1])
    y = np.log(errors).reshape(-1)
    a = np.column_stack([x, np.ones_like(x)])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    resid = y - a @ coef
    dof = max(len(y) - 2, 1)
    se = math.sqrt(float(resid @ resid) / dof * float(np.linalg.inv(a.T @ a)[0, 0]))
    return float(coef[0]), se
