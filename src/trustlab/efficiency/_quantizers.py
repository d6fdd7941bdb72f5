"""Tensor-level quantizers for quantization-aware training: QuEST, STE (abs-max) and LSQ.

Each quantizer maps a 2-d tensor ``(rows, d)`` (a weight matrix with its input dimension
last, or a batch of activations) to its quantized value on the forward pass and fixes the
gradient estimator on the backward pass, with the "detach trick": ``g + (q - g).detach()``
has value ``q`` and gradient ``dg/dx``.

References
----------
A. Panferov, J. Chen, S. Tabesh, R. L. Castro, M. Nikdan, D. Alistarh, "QuEST: Stable
Training of LLMs with 1-Bit Weights and Activations", ICML 2025.
S. K. Esser, J. L. McKinstry, D. Bablani, R. Appuswamy, D. S. Modha, "Learned Step Size
Quantization", ICLR 2020.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.vision.classifiers import require_torch

__all__ = [
    "gaussian_mse_scale",
    "hadamard_block",
    "hadamard_matrix",
    "lsq_quantize",
    "quest_quantize",
    "ste_quantize",
]

_TINY = 1e-8


@validate_params({"bits": [Interval(numbers.Integral, 1, 16, closed="both")]})
@functools.cache
def gaussian_mse_scale(bits: int) -> float:
    """The clipping scale alpha* minimising E[(xi - q_alpha(xi))^2] for xi ~ N(0, 1).

    ``q_alpha`` is the centred uniform grid of QuEST: ``2**bits`` levels
    ``+-(k + 1/2) * step``, ``step = 2 alpha / (2**bits - 1)``, values clipped to
    ``[-alpha, alpha]`` and rounded to the nearest level. The MSE is integrated exactly
    cell by cell (Gaussian moments) and minimised with a bounded scalar search; 1 bit gives
    ``sqrt(2 / pi)`` = 0.7979, 4 bits 2.5139 (the paper's released table).

    Parameters
    ----------
    bits : int >= 1
        Bit width.

    Returns
    -------
    float
        alpha* in units of the standard deviation.

    Examples
    --------
    >>> round(gaussian_mse_scale(4), 3)
    2.514
    """
    from scipy.optimize import minimize_scalar
    from scipy.stats import norm

    n = 2**bits

    def mse(alpha: float) -> float:
        step = 2 * alpha / (n - 1)
        levels = -alpha + step * np.arange(n)
        edges = np.concatenate([[-np.inf], (levels[:-1] + levels[1:]) / 2, [np.inf]])
        a, b = edges[:-1], edges[1:]
        # E[(xi - c)^2; a < xi < b] = (1 + c^2) P - 2 c (phi(a) - phi(b)) + (a phi(a) - b phi(b))
        pa, pb = norm.pdf(a), norm.pdf(b)
        apa = np.concatenate([[0.0], a[1:] * pa[1:]])
        bpb = np.concatenate([b[:-1] * pb[:-1], [0.0]])
        prob = norm.cdf(b) - norm.cdf(a)
        return float(np.sum((1 + levels**2) * prob - 2 * levels * (pa - pb) + (apa - bpb)))

    grid = np.linspace(0.05, 6.05, 121)
    best = grid[int(np.argmin([mse(a) for a in grid]))]
    res = minimize_scalar(mse, bounds=(best - 0.05, best + 0.05), method="bounded", options={"xatol": 1e-12})
    return float(res.x)


def hadamard_block(d: int, cap: int = 128) -> int:
    """Hadamard block for a matmul dimension ``d``: the largest power of two dividing it, at most ``cap``."""
    block = 1
    while block < cap and d % (2 * block) == 0:
        block *= 2
    return block


@functools.cache
def _hadamard_block_np(block: int) -> np.ndarray:
    from scipy.linalg import hadamard

    return (hadamard(block).astype(np.float64) / math.sqrt(block)).astype(np.float32)


@validate_params({"d": [Interval(numbers.Integral, 1, None, closed="left")]})
def hadamard_matrix(d: int) -> Any:
    """The orthonormal block-diagonal Sylvester-Hadamard matrix of size ``d`` (a dense torch tensor).

    Blocks are :func:`hadamard_block` wide (128 in the paper's code); a ``d`` with no even
    factor gets the identity (no transform). The quantizers apply it block by block
    (:func:`_blockwise`) rather than through this dense matrix.

    Parameters
    ----------
    d : int >= 1
        The matmul dimension.

    Returns
    -------
    torch.Tensor of shape (d, d)
        Orthonormal: ``H @ H.T`` is the identity.

    Examples
    --------
    >>> hadamard_matrix(4) * 2
    tensor([[ 1.,  1.,  1.,  1.],
            [ 1., -1.,  1., -1.],
            [ 1.,  1., -1., -1.],
            [ 1., -1., -1.,  1.]])
    """
    torch = require_torch()
    d = int(d)
    block = hadamard_block(d)
    return torch.block_diag(*([torch.from_numpy(_hadamard_block_np(block))] * (d // block)))


def _blockwise(x: Any, transpose: bool = False) -> Any:
    """``x H`` (or ``x H^T``) for the block-diagonal Hadamard ``H`` along the last dimension."""
    torch = require_torch()
    d = x.shape[-1]
    block = hadamard_block(d)
    if block == 1:
        return x
    hb = torch.from_numpy(_hadamard_block_np(block)).to(x.dtype)
    hb = hb.T if transpose else hb
    return (x.reshape(*x.shape[:-1], d // block, block) @ hb).reshape(x.shape)


def _centred_grid(x: Any, scale: Any, n_levels: int) -> Any:
    torch = require_torch()
    step = 2 * scale / (n_levels - 1)
    return torch.round(torch.clamp(x, -scale, scale) / step + 0.5) * step - step / 2


def quest_quantize(
    x: Any,
    bits: int,
    *,
    hadamard: bool = True,
    trust: float | None = None,
    outer_trust_scale: float | None = None,
) -> Any:
    """QuEST's projection of the rows of ``x`` with the trust gradient estimator.

    Forward: ``x_h = x H`` (Hadamard along the last dimension), ``q = proj_alpha*(x_h)``
    with ``alpha* = gaussian_mse_scale(bits) * RMS(row)`` on the centred grid, returned in
    the original domain as ``q H^T`` (``H`` is orthogonal, so ``q_x H^T (q_w H^T)^T =
    q_x q_w^T`` and a matmul of two projections equals the one in the Hadamard domain).
    Backward: ``dL/dx = (M * dL/dq) H^T`` with the trust mask ``M = 1{|q - x_h| <= T}``,
    ``T = trust * RMS`` (default ``alpha* / (2**bits - 1)``, half a grid step); entries
    beyond the clipping scale keep the gradient only within ``T / outer_trust_scale``
    (default 1.30 at 1 bit, the paper's s*, else 1).

    Parameters
    ----------
    x : torch.Tensor of shape (rows, d)
        Weights (input dimension last) or activations (one row per sample or patch).
    bits : int >= 1
        Bit width.
    hadamard : bool, default=True
        Apply the Hadamard transform (``False``: the paper's "no HT" ablation).
    trust : float, optional
        The trust radius in RMS units.
    outer_trust_scale : float, optional
        The factor ``s`` shrinking the trust region outside the clipping scale.

    Returns
    -------
    torch.Tensor
        The quantized values, same shape as ``x``, carrying the trust gradient.
    """
    torch = require_torch()
    n = 2**bits
    alpha = gaussian_mse_scale(bits)
    t = alpha / (n - 1) if trust is None else float(trust)
    s = (1.30 if bits == 1 else 1.0) if outer_trust_scale is None else float(outer_trust_scale)
    xh = _blockwise(x) if hadamard else x
    with torch.no_grad():
        rms = torch.sqrt(torch.mean(xh * xh, dim=-1, keepdim=True))
        scale = alpha * rms + _TINY
        q = _centred_grid(xh, scale, n)
        err = torch.abs(q - xh)
        radius = torch.where(torch.abs(xh) > scale, t * rms / s, t * rms)
        mask = (err <= radius).to(x.dtype)
    g = xh * mask
    out = g + (q - g).detach()
    return _blockwise(out, transpose=True) if hadamard else out


def ste_quantize(x: Any, bits: int) -> Any:
    """Abs-max uniform quantization of each row with the straight-through estimator.

    The classic QAT baseline (the paper's "STE" row): scale = max |x| of the row, the
    centred ``2**bits``-level grid on ``[-scale, scale]`` (nothing is clipped), identity
    gradient.

    Parameters
    ----------
    x : torch.Tensor of shape (rows, d)
        Values to quantize.
    bits : int >= 1
        Bit width.

    Returns
    -------
    torch.Tensor
        The quantized values with the identity gradient.
    """
    torch = require_torch()
    with torch.no_grad():
        scale = torch.amax(torch.abs(x), dim=-1, keepdim=True) + _TINY
        q = _centred_grid(x, scale, 2**bits)
    return x + (q - x).detach()


def lsq_quantize(x: Any, step: Any, bits: int, *, signed: bool) -> Any:
    """Learned step size quantization (LSQ): ``round(clip(x / s, -Qn, Qp)) * s``.

    Gradients: straight-through for ``x`` inside the range and zero outside; the step
    ``s`` gets LSQ's gradient scaled by ``1 / sqrt(numel(x) * Qp)``. Signed: ``Qn =
    2**(b-1)``, ``Qp = 2**(b-1) - 1``; unsigned: ``Qn = 0``, ``Qp = 2**b - 1``.

    Parameters
    ----------
    x : torch.Tensor
        Values to quantize.
    step : torch.Tensor (a scalar parameter)
        The learned step size.
    bits : int >= 2
        Bit width.
    signed : bool
        Signed (weights) or unsigned (non-negative activations) grid.

    Returns
    -------
    torch.Tensor
        The quantized values.
    """
    torch = require_torch()
    qn, qp = (2 ** (bits - 1), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    g = 1.0 / math.sqrt(x.numel() * max(qp, 1))
    s = step * g + (step - step * g).detach()  # value s, gradient scaled by g
    v = torch.clamp(x / s, -qn, qp)
    v = v + (torch.round(v) - v).detach()
    return v * s


def lsq_init(x: Any, bits: int, *, signed: bool) -> float:
    """LSQ's initial step ``2 mean|x| / sqrt(Qp)``."""
    qp = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
    return float(2 * x.detach().abs().mean() / math.sqrt(max(qp, 1))) + _TINY
