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
    "add_grid_noise",
    "block_of_coordinates",
    "clipped_rows",
    "grid_units",
    "init_params",
    "per_example_grads",
    "secure_generator",
    "split_clipped_rows",
    "split_clipped_sum",
    "train",
]


def secure_generator() -> torch.Generator:
    """A CPU torch generator seeded from ``os.urandom`` (never from a user seed)."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1))
    return gen


def grid_units(rows: torch.Tensor, grid: float) -> np.ndarray:
    """The exact sum over rows of each clipped per-example gradient rounded to the grid (int64 units).

    Rounding happens row by row (a function of that row alone), and the sum is of
    integers, so it carries no floating-point error: adding a row moves it by that
    row's rounded gradient, of l2 norm at most ``clip_norm + sqrt(P) grid / 2``.
    """
    units = torch.round(rows.to(torch.float64) / grid).to(torch.int64)
    return np.asarray(units.sum(dim=0).numpy(), dtype=np.int64)


def add_grid_noise(units: np.ndarray, scale: float) -> np.ndarray:
    """Integer ``units`` plus OpenDP's exact discrete Gaussian of scale ``scale`` (grid units)."""
    from trustlab.privacy.samplers import add_discrete_gaussian

    return add_discrete_gaussian(units, scale)


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


def clipped_rows(
    model: str, params: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor, clip_norm: float
) -> list[torch.Tensor]:
    """Per-example gradients of the cross-entropy loss, each clipped to l2 norm ``clip_norm``.

    One tensor per parameter, of shape ``(rows, *parameter shape)``; a row whose gradient
    is not finite contributes zeros (an absent row: no branch, no error).
    """
    f = _factors(model, params, X, y)
    norms = torch.sqrt(_sq_norms(model, f, X))
    finite = torch.isfinite(norms)
    c = torch.where(finite, torch.clamp(clip_norm / torch.clamp(norms, min=1e-30), max=1.0), 0.0)
    out = []
    for g in per_example_grads(model, params, X, y):
        shape = (-1, *[1] * (g.dim() - 1))
        out.append(torch.where(finite.reshape(shape), c.reshape(shape) * g, torch.zeros_like(g)))
    return out


def clipped_sum(
    model: str, params: list[torch.Tensor], X: torch.Tensor, y: torch.Tensor, clip_norm: float
) -> list[torch.Tensor]:
    """Sum over rows of the per-example gradients, each clipped to l2 norm ``clip_norm``."""
    return [g.sum(dim=0) for g in clipped_rows(model, params, X, y, clip_norm)]


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


def split_clipped_rows(
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
    returned row by row. A row whose gradient is not finite counts as an absent row (as
    in :func:`clipped_rows`).
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
    return [c.reshape(-1, *[1] * (g.dim() - 1)) * g for g in masked]


def split_clipped_sum(*args: Any) -> list[torch.Tensor]:
    """Sum over rows of :func:`split_clipped_rows` (same arguments)."""
    return [g.sum(dim=0) for g in split_clipped_rows(*args)]


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
    grid: float = 2.0**-20,
) -> list[np.ndarray]:
    """Run DP-SGD (or noisy SignSGD) and return the final parameters as NumPy arrays.

    Every step draws its noise whether or not the batch is empty: the structure of the
    run never depends on the data. ``num_blocks >= 1`` selects model splitting
    (:func:`split_clipped_rows`); ``0`` clips whole per-example gradients. DP-SGD's
    noisy sums are exact multiples of the public ``grid`` (:func:`grid_units`,
    :func:`add_grid_noise`): the weights are a function of them alone, so their low bits
    say nothing more (the float noise ``s + Z`` of Opacus leaks through its rounding).
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
                rows = split_clipped_rows(model, params, Xb, yb, clip_norm, blocks, num_blocks, gen)
            else:
                rows = clipped_rows(model, params, Xb, yb, clip_norm)
            # exact: integer sums + discrete Gaussian on the grid (one draw for all parameters);
            # the update is post-processing of the grid values
            units = np.concatenate([grid_units(r, grid).ravel() for r in rows])
            noisy = add_grid_noise(units, std / grid).astype(np.float64) * grid
            start = 0
            for p in params:
                size = int(p.numel())
                step = torch.as_tensor(noisy[start : start + size].reshape(tuple(p.shape)), dtype=dtype)
                p.sub_(step, alpha=learning_rate / divisor)
                start += size
    return [p.detach().numpy().copy() for p in params]
