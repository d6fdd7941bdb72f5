"""ALPS: ADMM on the layer-wise reconstruction objective, then PCG on the kept weights.

ALPS (Meng, Behdin, Wang, Mazumder, NeurIPS 2024) prunes a Linear weight ``W`` (rows:
outputs, columns: inputs) against ``||X W^T - X W'^T||^2`` under ``||W'||_0 <= k`` (or an N:M
pattern). With ``H = X^T X`` dampened by 1 % of its mean diagonal and rescaled to a unit
diagonal (``H_n = D^-1 H D^-1``, ``D = diag(H)^{1/2}``; the weights become ``B = (W D)^T``),
the problem splits as ``min ||B - B_0||^2_{H_n} + I(D_s)`` with ``B = D_s`` and ADMM alternates

- ``B = (H_n + rho I)^-1 (H_n B_0 - V + rho D_s)`` (one eigendecomposition of ``H_n`` serves
  every ``rho``),
- ``D_s = proj(B + V / rho)`` (keep the ``k`` largest magnitudes of the layer, or ``N`` of each
  group of ``M`` consecutive inputs of a row),
- ``V = V + rho (B - D_s)``,

with the ``rho`` schedule of the authors' released code (the paper, Section 3.2: start small,
raise ``rho`` every few iterations by a rate that grows with the support change; its exact rule
is in the paper's Appendix B.1): every 3 iterations ``rho`` grows by 1.3, 1.2 or 1.1 when the
support changed by more than 10 %, more than 0.5 % or at all (of ``k``); while it has never
grown, a ``rho`` too large to move the support is divided by 5 (and the iterate restarted);
the iteration stops when the support stops changing (after 30 iterations, a change below
0.03 % of ``k``), or after 300. The support is that of the projected ADMM iterate ``B``; the
kept weights are then refined by conjugate gradients on ``H_n`` restricted to the support
(10 iterations; the unit diagonal of ``H_n`` is the paper's diagonal preconditioner
``M = Diag(H)``, Algorithm 2). The rescaling is the authors' code's: the paper writes the
iteration in ``W`` itself, where the projection would rank ``|W_ij|`` rather than
``|W_ij| H_jj^{1/2}``.

References
----------
X. Meng, K. Behdin, H. Wang, R. Mazumder, "ALPS: Improved Optimization for Highly Sparse
One-Shot Pruning for Large Language Models", NeurIPS 2024.
"""

from __future__ import annotations

from typing import Any

from trustlab.vision.classifiers import require_torch

__all__ = ["alps_prune"]


def _project(b: Any, keep: int, nm: tuple[int, int] | None) -> Any:
    """``b`` (inputs x outputs) with all but the ``keep`` largest magnitudes (or N of each M) zeroed."""
    torch = require_torch()
    if nm is not None:
        n, m = nm
        groups = b.T.reshape(-1, m)  # rows of W, M consecutive inputs per group
        drop = torch.topk(groups.abs(), m - n, dim=1, largest=False).indices
        return groups.scatter(1, drop, 0.0).reshape(b.shape[1], b.shape[0]).T
    flat = b.reshape(-1)
    out = torch.zeros_like(flat)
    idx = torch.topk(flat.abs(), keep).indices
    out[idx] = flat[idx]
    return out.reshape(b.shape)


def _masked_cg(h: Any, rhs: Any, mask: Any, x0: Any, n_iter: int, rtol: float) -> Any:
    """Conjugate gradients for ``h x = rhs`` column by column, ``x`` kept zero off ``mask``."""
    torch = require_torch()
    x = x0 * mask
    r = (rhs - h @ x) * mask
    p = r.clone()
    rs = (r * r).sum(0)
    stop = rtol * torch.linalg.vector_norm(rhs * mask, dim=0)
    for _ in range(n_iter):
        if bool((rs.sqrt() <= stop).all()):
            break
        hp = (h @ p) * mask
        denom = (p * hp).sum(0)
        alpha = rs / torch.where(denom == 0, torch.ones_like(denom), denom)
        x = x + alpha * p
        r = r - alpha * hp
        rs_new = (r * r).sum(0)
        beta = rs_new / torch.where(rs == 0, torch.ones_like(rs), rs)
        p = r + beta * p
        rs = rs_new
    return x


def alps_prune(
    weight: Any,
    gram: Any,
    sparsity: float,
    nm: tuple[int, int] | None = None,
    *,
    rho: float = 0.1,
    max_iter: int = 300,
    update_iter: int = 3,
    switch_iter: int = 30,
    cg_iter: int = 10,
    damp: float = 0.01,
) -> Any:
    """The ALPS-pruned copy of ``weight`` (shape (out, in)); ``gram`` is ``X^T X`` (in x in).

    Defaults are the authors' (initial ``rho`` 0.1, at most 300 ADMM iterations, ``rho``
    updated every 3, the early stop checked from iteration 30, 10 CG iterations, 1 %
    dampening). Unstructured, exactly ``round((1 - sparsity) * out * in)`` weights are kept
    (one budget per layer, as the authors' code).
    """
    torch = require_torch()
    w = weight.detach().to(torch.float64)
    h = gram.detach().to(torch.float64).clone()
    h = h + damp * float(torch.diagonal(h).mean()) * torch.eye(h.shape[0], dtype=h.dtype)
    norm = torch.diagonal(h).sqrt() + 1e-8
    h = h / norm.reshape(1, -1) / norm.reshape(-1, 1)
    b0 = (w * norm).T.contiguous()  # inputs x outputs
    target = h @ b0
    evals, evecs = torch.linalg.eigh(h)

    def solve(r: float) -> Any:
        return (evecs / (evals + r)) @ evecs.T

    keep = round((1.0 - sparsity) * b0.numel())
    n_changes_ref = keep if nm is None else b0.numel() * nm[0] / nm[1]
    d_s = _project(b0, keep, nm)
    d_init = d_s.clone()
    v = torch.zeros_like(b0)
    b = b0.clone()
    inv = solve(rho)
    grown = False
    old_zero = d_s == 0
    for it in range(max_iter):
        b = inv @ (target - v + rho * d_s)
        d_s = _project(b + v / rho, keep, nm)
        v = v + rho * (b - d_s)
        if (it + 1) % update_iter:
            continue
        zero = d_s == 0
        change = float((zero != old_zero).sum()) / n_changes_ref
        if change > 0.1:
            grown, rho = True, rho * 1.3
        elif change > 0.005:
            grown, rho = True, rho * 1.2
        elif change > 0:
            if grown:
                rho *= 1.1
            else:  # rho too large from the start: shrink it and restart
                rho /= 5
                d_s, v = d_init.clone(), torch.zeros_like(b0)
        elif grown:
            break
        else:
            rho /= 5
        old_zero = zero
        rho = min(rho, 1e6)
        inv = solve(rho)
        if it >= switch_iter and change < 0.0003:
            break
    b = _project(b, keep, nm)
    b = _masked_cg(h, target, (b != 0).to(b.dtype), b, cg_iter, 1e-4)
    return (b.T / norm).to(weight.dtype)
