"""SparseGPT's row-wise OBS pruning of one Linear weight, and N:M semi-structured masks.

SparseGPT (Frantar & Alistarh, ICML 2023, Algorithm 1) prunes a weight ``W`` (rows: outputs,
columns: inputs) against the layer's reconstruction error ``||W X - W' X||^2`` (``X``: the
calibration inputs, one column a token). All rows share the Hessian ``H = 2 X X^T``
(dampened by 1 % of its mean diagonal), so a single Cholesky factor of ``H^-1`` serves
every row: the columns are visited left to right; when column ``j`` is frozen, the error
``(w_j - q_j) / [H^-1]_jj`` of its pruned entries is spread over the columns still to come
along row ``j`` of the upper Cholesky factor of ``H^-1`` (the OBS update restricted to
the remaining columns). Updates are applied lazily: within a block of 128 columns at
once, to the columns after the block in one matrix product. The mask is chosen
adaptively per block: the entries with the smallest OBS saliency ``w^2 / [H^-1]_jj^2``
over the block (unstructured), or per group of ``M`` consecutive columns (N:M), on the
weights as they are after the earlier updates.

References
----------
E. Frantar, D. Alistarh, "SparseGPT: Massive Language Models Can Be Accurately Pruned in
One-Shot", ICML 2023.
"""

from __future__ import annotations

import math
from typing import Any

from trustlab.errors import ParameterError
from trustlab.vision.classifiers import require_torch

__all__ = ["nm_keep_mask", "parse_pattern", "sparsegpt_prune"]


def parse_pattern(pattern: str, sparsity: float) -> tuple[int, int] | None:
    """``None`` for ``"unstructured"``, else ``(N, M)`` from ``"N:M"`` with ``sparsity == 1 - N/M``."""
    text = pattern.strip().lower()
    if text == "unstructured":
        return None
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise ParameterError(
            f"pattern must be 'unstructured' or 'N:M' with integers 0 < N < M (e.g. '2:4'); got {pattern!r}.",
            argument="pattern",
        )
    n, m = int(parts[0]), int(parts[1])
    if not 0 < n < m:
        raise ParameterError(
            f"pattern {pattern!r} needs 0 < N < M: N kept of every M consecutive inputs (e.g. '2:4').",
            argument="pattern",
        )
    if not math.isclose(sparsity, 1 - n / m, rel_tol=0, abs_tol=1e-9):
        raise ParameterError(
            f"sparsity={sparsity!r} does not match pattern {pattern!r}, which prunes 1 - N/M = {1 - n / m:g} "
            f"of every group: pass sparsity={1 - n / m:g}.",
            argument="sparsity",
        )
    return n, m


def nm_keep_mask(score: Any, n: int, m: int) -> Any:
    """True on the ``n`` largest entries of ``score`` in every group of ``m`` consecutive columns."""
    torch = require_torch()
    rows, cols = score.shape
    groups = score.reshape(rows, cols // m, m)
    idx = torch.topk(groups, n, dim=2).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(2, idx, True)
    return mask.reshape(rows, cols)


def _upper_inverse_cholesky(gram: Any, n_tokens: int, damp: float) -> tuple[Any, Any]:
    """The upper Cholesky factor of ``(2 X X^T / n + damp mean diag)^-1``, and the inputs never active."""
    torch = require_torch()
    h = gram.to(torch.float64) * (2.0 / max(n_tokens, 1))
    dead = torch.diagonal(h) == 0
    h[dead, dead] = 1.0
    h = h + damp * float(torch.diagonal(h).mean()) * torch.eye(h.shape[0], dtype=h.dtype)
    hinv = torch.cholesky_inverse(torch.linalg.cholesky(h))
    return torch.linalg.cholesky(hinv, upper=True), dead


def sparsegpt_prune(
    weight: Any,
    gram: Any,
    n_tokens: int,
    sparsity: float,
    nm: tuple[int, int] | None = None,
    *,
    block_size: int = 128,
    damp: float = 0.01,
) -> Any:
    """The SparseGPT-pruned copy of ``weight`` (float32 tensor, shape (out, in)).

    ``gram`` is ``X X^T`` (``in x in``) summed over ``n_tokens`` calibration tokens. With
    ``nm = (N, M)`` the block size is rounded down to a multiple of ``M`` (at least ``M``), so
    that no group straddles two blocks; unstructured, each block prunes
    ``floor(sparsity * rows * width)`` entries, so a layer whose width is a multiple of the
    block size has exactly its share pruned.
    """
    torch = require_torch()
    w = weight.detach().to(torch.float64).clone()
    cols = w.shape[1]
    u, dead = _upper_inverse_cholesky(gram, n_tokens, damp)
    w[:, dead] = 0.0
    bs = max(nm[1], block_size - block_size % nm[1]) if nm is not None else block_size
    for i1 in range(0, cols, bs):
        i2 = min(i1 + bs, cols)
        w1 = w[:, i1:i2].clone()
        u1 = u[i1:i2, i1:i2]
        d = torch.diagonal(u1)
        q1 = torch.zeros_like(w1)
        err1 = torch.zeros_like(w1)
        prune = torch.zeros_like(w1, dtype=torch.bool)
        if nm is None:
            k = math.floor(w1.numel() * sparsity)
            if k > 0:
                saliency = (w1**2 / d.reshape(1, -1) ** 2).reshape(-1)
                prune.view(-1)[torch.topk(saliency, k, largest=False).indices] = True
        for j in range(i2 - i1):
            if nm is not None and j % nm[1] == 0:
                sal = w1[:, j : j + nm[1]] ** 2 / d[j : j + nm[1]].reshape(1, -1) ** 2
                drop = torch.topk(sal, nm[1] - nm[0], dim=1, largest=False).indices
                prune[:, j : j + nm[1]].scatter_(1, drop, True)
            col = w1[:, j]
            q = torch.where(prune[:, j], torch.zeros_like(col), col)
            q1[:, j] = q
            e = (col - q) / d[j]
            w1[:, j:] -= e.reshape(-1, 1) @ u1[j, j:].reshape(1, -1)
            err1[:, j] = e
        w[:, i1:i2] = q1
        w[:, i2:] -= err1 @ u[i1:i2, i2:]
    return w.to(weight.dtype)
