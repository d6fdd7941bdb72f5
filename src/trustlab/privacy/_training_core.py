"""The DP-SGD training loop in torch (private module; imports torch, reached only from ``fit``).

Per-example gradients of the two models are written out by hand (a logistic
regression and a one-hidden-layer ReLU network, both with the binary cross-entropy
loss); for the hidden layer the per-example gradient is the outer product
``delta_i x_i^T``, whose norm is ``||delta_i|| ||x_i||``, so clipping never
materialises the per-example weight gradients (the "ghost clipping" identity of
Goodfellow 2015 / Li et al. 2022). ``tests/privacy/test_training.py`` checks them
against ``torch.func.vmap(torch.func.grad(...))``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

__all__ = [
    "block_of_coordinates",
    "gaussian_noise",
    "init_params",
    "per_example_grads",
    "secure_generator",
    "split_clipped_sum",
    "train",
]


def secure_generator() -> torch.Generator:
    """A CPU torch generator seeded from ``os.urandom`` (never from a user seed)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1))
    return gen


def gaussian_noise(
    shape: tuple[int, ...], std: float, gen: torch.Generator, dtype: torch.dtype
) -> torch.Tensor:
    """Gaussian noise of standard deviation ``std`` (float noise, as Opacus draws it)."""
    return torch.randn(shape, generator=gen, dtype=dtype) * std


def init_params(
    model: str, d: int, hidden: int, rng: np.random.Generator, dtype: torch.dtype
) -> list[torch.Tensor]:
    """Initial parameters: zeros for the logistic model; He-uniform hidden layer for the MLP.

    The initialisation is independent of the data, so ``rng`` may be seeded.
    """
    if model == "logistic":
        return [torch.zeros(d, dtype=dtype), torch.zeros((), dtype=dtype)]
    bound1 = float(np.sqrt(6.0 / max(d, 1)))
    bound2 = float(np.sqrt(1.0 / hidden))
    w1 = torch.as_tensor(rng.uniform(-bound1, bound1, (hidden, d)), dtype=dtype)
    w2 = torch.as_tensor(rng.uniform(-bound2, bound2, hidden), dtype=dtype)
    return [w1, torch.zeros(hidden, dtype=dtype), w2, torch.zeros((), dtype=dtype)]


def logits(model: str, params: list[torch.Tensor], X: torch.Tensor) -> torch.Tensor:
    """The model's logit for every row of ``X``."""
    if model == "logistic":
        return X @ params[0] + params[1]
    w1, b1, w2, b2 = params
    return torch.relu(X @ w1.T + b1) @ w2 + b2


def _factors(
    model: str, params: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Per-example pieces from which every per-example gradient is an outer product or a copy."""
    if model == "logistic":
        r = torch.sigmoid(X @ params[0] + params[1]) - y
        return {"r": r}
    w1, b1, w2, b2 = params
    h = torch.relu(X @ w1.T + b1)
    r = torch.sigmoid(h @ w2 + b2) - y
    dh = r[:, None] * w2[None, :] * (h > 0).to(X.dtype)
    return {"r": r, "h": h, "dh": dh}


def _sq_norms(model: str, f: dict[str, torch.Tensor], X: torch.Tensor) -> torch.Tensor:
    xx = (X * X).sum(dim=1)
    r2 = f["r"] * f["r"]
    if model == "logistic":
        return r2 * (xx + 1.0)
    dh2 = (f["dh"] * f["dh"]).sum(dim=1)
    return dh2 * xx + dh2 + r2 * (f["h"] * f["h"]).sum(dim=1) + r2


def per_example_grads(
    model: str, params: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor
) -> list[torch.Tensor]:
    """Materialised per-example gradients of the cross-entropy loss (one tensor per parameter)."""
    f = _factors(model, params, X, y)
    r = f["r"]
    if model == "logistic":
        return [r[:, None] * X, r]
    dh = f["dh"]
    return [dh[:, :, None] * X[:, None, :], dh, r[:, None] * f["h"], r]


def clipped_sum(
    model: str, params: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor, clip_norm: float
) -> list[torch.Tensor]:
    """Sum over rows of the per-example gradients, each clipped to l2 norm ``clip_norm``."""
    f = _factors(model, params, X, y)
    norms = torch.sqrt(_sq_norms(model, f, X))
    # a non-finite per-example gradient counts as an absent row (factor 0, no branch, no error)
    finite = torch.isfinite(norms)
    f = {
        k: torch.where(finite.reshape(-1, *[1] * (v.dim() - 1)), v, torch.zeros_like(v)) for k, v in f.items()
    }
    c = torch.where(finite, torch.clamp(clip_norm / torch.clamp(norms, min=1e-30), max=1.0), 0.0)
    cr = c * f["r"]
    if model == "logistic":
        return [cr @ X, cr.sum()]
    cdh = c[:, None] * f["dh"]
    return [cdh.T @ X, cdh.sum(dim=0), cr @ f["h"], cr.sum()]


def block_of_coordinates(params: list[torch.Tensor], num_blocks: int) -> list[torch.Tensor]:
    """The public partition of the parameters into ``num_blocks`` disjoint blocks.

    Coordinate ``i`` of the parameters flattened and concatenated in order belongs to
    block ``i mod num_blocks`` (a fixed, data-independent partition: every block holds
    ``floor`` or ``ceil`` of ``P / num_blocks`` coordinates).
    """
    out, start = [], 0
    for p in params:
        size = int(p.numel())
        out.append((torch.arange(start, start + size) % num_blocks).reshape(p.shape))
        start += size
    return out


def split_clipped_sum(
    model: str,
    params: list[torch.Tensor],
    X: torch.Tensor,
    y: torch.Tensor,
    clip_norm: float,
    blocks: list[torch.Tensor],
    num_blocks: int,
    gen: torch.Generator,
) -> list[torch.Tensor]:
    """Model splitting: each row updates one secret, uniformly drawn block, clipped to ``clip_norm``.

    Row ``i`` draws ``b_i`` uniformly from ``{0, .., num_blocks - 1}`` (from the
    ``os.urandom``-seeded generator); its gradient is restricted to the coordinates of
    block ``b_i``, that restriction is clipped to l2 norm ``clip_norm``, and the rows are
    summed. A row whose gradient is not finite counts as an absent row (as in
    :func:`clipped_sum`).
    """
    grads = per_example_grads(model, params, X, y)
    m = int(X.shape[0])
    finite = torch.ones(m, dtype=torch.bool)
    for g in grads:
        finite &= torch.isfinite(g.reshape(m, -1)).all(dim=1)
    chosen = torch.randint(num_blocks, (m,), generator=gen)
    masked = []
    for g, blk in zip(grads, blocks, strict=True):
        keep = (blk.reshape(1, *blk.shape) == chosen.reshape(-1, *[1] * blk.dim())) & finite.reshape(
            -1, *[1] * blk.dim()
        )
        masked.append(torch.where(keep, g, torch.zeros_like(g)))
    norms = torch.sqrt(torch.stack([(g * g).reshape(m, -1).sum(dim=1) for g in masked]).sum(dim=0))
    c = torch.clamp(clip_norm / torch.clamp(norms, min=1e-30), max=1.0)
    return [(c.reshape(-1, *[1] * (g.dim() - 1)) * g).sum(dim=0) for g in masked]


def batches(
    schedule: Any, n: int, steps: int, sample_rate: float, gen: torch.Generator
) -> Iterator[torch.Tensor]:
    """Row indices of every step: Poisson at ``sample_rate`` (``schedule=None``) or a balanced schedule."""
    if schedule is None:
        for _ in range(steps):
            # float64 uniforms: P(u < q) = ceil(q 2^53) / 2^53, within 2^-53 of the accounted rate
            yield torch.nonzero(torch.rand(n, generator=gen, dtype=torch.float64) < sample_rate).flatten()
        return
    rows, cols = schedule
    order = np.argsort(cols, kind="stable")
    counts = np.bincount(cols, minlength=steps)
    starts = np.concatenate([[0], np.cumsum(counts)])
    rows = rows[order]
    for t in range(steps):
        yield torch.as_tensor(rows[starts[t] : starts[t + 1]], dtype=torch.long)


def train(
    X: np.ndarray,
    y: np.ndarray,
    *,
    model: str,
    params: list[torch.Tensor],
    clip_norm: float,
    noise_multiplier: float,
    learning_rate: float,
    steps: int,
    sample_rate: float,
    divisor: float,
    optimizer: str,
    schedule: Any,
    num_blocks: int = 0,
) -> list[np.ndarray]:
    """Run DP-SGD (or noisy SignSGD) and return the final parameters as NumPy arrays.

    Every step draws its noise whether or not the batch is empty: the structure of the
    run never depends on the data. ``num_blocks >= 1`` selects model splitting
    (:func:`split_clipped_sum`); ``0`` clips whole per-example gradients.
    """
    dtype = params[0].dtype
    Xt = torch.as_tensor(X, dtype=dtype)
    yt = torch.as_tensor(y, dtype=dtype)
    gen = secure_generator()
    n = int(Xt.shape[0])
    std = float(noise_multiplier) * float(clip_norm)
    sign_opt: Any = None
    if optimizer == "signsgd":
        from trustlab.privacy._signsgd_optim import NoisySignSGD

        leaves = [torch.nn.Parameter(p) for p in params]
        sign_opt = NoisySignSGD(
            leaves,
            lr=learning_rate,
            clip_norm=clip_norm,
            noise_multiplier=noise_multiplier,
            sample_rate=sample_rate,
            num_workers=1,
            nonfinite="zero",
        )
        params = list(leaves)
    blocks = block_of_coordinates(params, num_blocks) if num_blocks else []
    with torch.no_grad():
        for idx in batches(schedule, n, steps, sample_rate, gen):
            Xb, yb = Xt[idx], yt[idx]
            if sign_opt is not None:
                grads = per_example_grads(model, [p.data for p in params], Xb, yb)
                sign_opt.step(grads, workers=torch.zeros(int(Xb.shape[0]), dtype=torch.long))
                continue
            if num_blocks:
                sums = split_clipped_sum(model, params, Xb, yb, clip_norm, blocks, num_blocks, gen)
            else:
                sums = clipped_sum(model, params, Xb, yb, clip_norm)
            for p, s in zip(params, sums, strict=True):
                noisy = s + gaussian_noise(tuple(p.shape), std, gen, dtype)
                p.sub_(noisy, alpha=learning_rate / divisor)
    return [p.detach().numpy().copy() for p in params]
