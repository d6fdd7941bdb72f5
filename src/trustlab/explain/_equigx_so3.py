"""Real spherical harmonics, Wigner D matrices and Wigner 3j coupling for degrees 0-3 (EquiGX).

Written here (e3nn is not a dependency) for :mod:`trustlab.explain._equivariant_gnn`:

- :func:`spherical_harmonics` evaluates the real spherical harmonics of degree ``l <= 3`` of
  the direction of a vector in e3nn's ``component`` normalisation (``sum_m Y_lm(u)^2 = 2l + 1``
  on the unit sphere), with the degree-1 components in ``(x, y, z)`` order (``Y_1 = sqrt(3) u``);
- :func:`wigner_d` fits the real Wigner matrix ``D_l(R)`` of a rotation from
  ``Y_l(R u) = D_l(R) Y_l(u)`` at fixed sample directions (least squares, exact for these
  polynomials);
- :func:`wigner_3j` is the coupling tensor ``C[m1, m2, m3]`` of ``l1 x l2 -> l3``: the unit-norm
  solution of ``D_l1 (x) D_l2 (x) D_l3 C = C`` for every rotation (the null space, computed from
  three fixed random rotations), its sign fixed by its first entry above ``1e-9`` in absolute
  value being positive. For ``(1, 1, 0)`` it is ``delta / sqrt(3)``, e3nn's normalisation.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch

from trustlab._threads import one_thread

__all__ = ["MAX_DEGREE", "allowed_paths", "spherical_harmonics", "wigner_3j", "wigner_d"]

MAX_DEGREE = 3


def _harmonics(u: np.ndarray | torch.Tensor, degree: int) -> list:
    """Components of ``Y_degree`` of unit vectors ``u`` (``(..., 3)``), component normalisation.

    Written as homogeneous polynomials (``1`` as ``|u|^2``), so that a zero vector gets zeros.
    """
    x, y, z = u[..., 0], u[..., 1], u[..., 2]
    r2 = x**2 + y**2 + z**2
    if degree == 0:
        return [x * 0 + 1]
    if degree == 1:
        return [math.sqrt(3.0) * x, math.sqrt(3.0) * y, math.sqrt(3.0) * z]
    if degree == 2:
        s15 = math.sqrt(15.0)
        return [
            s15 * x * y,
            s15 * y * z,
            0.5 * math.sqrt(5.0) * (3 * z**2 - r2),
            s15 * x * z,
            0.5 * s15 * (x**2 - y**2),
        ]
    a, b, c = 0.5 * math.sqrt(17.5), math.sqrt(105.0), 0.5 * math.sqrt(10.5)
    return [
        a * y * (3 * x**2 - y**2),
        b * x * y * z,
        c * y * (5 * z**2 - r2),
        0.5 * math.sqrt(7.0) * (5 * z**3 - 3 * z * r2),
        c * x * (5 * z**2 - r2),
        0.5 * b * (x**2 - y**2) * z,
        a * x * (x**2 - 3 * y**2),
    ]


def spherical_harmonics(edge_vec: torch.Tensor, max_degree: int) -> tuple[torch.Tensor, ...]:
    """Real spherical harmonics of degrees ``0..max_degree`` of the directions of ``edge_vec``.

    Parameters
    ----------
    edge_vec : torch.Tensor of shape (E, 3)
        Vectors (a zero vector gets ``Y_0 = 1`` and ``Y_l = 0`` for ``l >= 1``, as e3nn's
        ``normalize=True``).
    max_degree : int
        Highest degree, at most 3.

    Returns
    -------
    tuple of torch.Tensor
        ``Y_l`` of shape ``(E, 1, 2l + 1)`` for ``l = 0..max_degree``.
    """
    norm = edge_vec.norm(dim=-1, keepdim=True)
    unit = torch.where(norm > 0, edge_vec / norm.clamp_min(1e-12), torch.zeros_like(edge_vec))
    out = [torch.ones_like(norm)[:, None, :]]
    for degree in range(1, max_degree + 1):
        out.append(torch.stack(_harmonics(unit, degree), dim=-1)[:, None, :])
    return tuple(out)


@cache
def _directions() -> np.ndarray:
    u = np.random.default_rng(12345).normal(size=(64, 3))
    return u / np.linalg.norm(u, axis=1, keepdims=True)


def wigner_d(degree: int, rotation: np.ndarray) -> np.ndarray:
    """Real Wigner matrix ``D`` with ``Y_degree(R u) = D Y_degree(u)`` (``(2l + 1, 2l + 1)``).

    Parameters
    ----------
    degree : int
        ``l`` in ``0..3``.
    rotation : numpy.ndarray of shape (3, 3)
        A rotation matrix.

    Returns
    -------
    numpy.ndarray
        ``D_l(R)`` (orthogonal).
    """
    u = _directions()
    before = np.stack(_harmonics(u, degree), axis=-1)
    after = np.stack(_harmonics(u @ np.asarray(rotation, dtype=float).T, degree), axis=-1)
    d_transposed, *_ = np.linalg.lstsq(before, after, rcond=None)
    return np.asarray(d_transposed.T)


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def allowed_paths(l1: int, l2: int, l3: int) -> bool:
    """Whether ``l1 x l2 -> l3`` is an O(3)-equivariant path between natural-parity irreps."""
    return abs(l1 - l2) <= l3 <= l1 + l2 and (l1 + l2 + l3) % 2 == 0


@cache
def _wigner_3j(l1: int, l2: int, l3: int) -> np.ndarray:
    rng = np.random.default_rng(2024)
    dims = (2 * l1 + 1, 2 * l2 + 1, 2 * l3 + 1)
    eye = np.eye(dims[0] * dims[1] * dims[2])
    blocks = []
    with one_thread():  # small matrices: BLAS threads only contend
        for _ in range(3):
            rot = _rotation(rng)
            big = np.kron(np.kron(wigner_d(l1, rot), wigner_d(l2, rot)), wigner_d(l3, rot))
            blocks.append(big - eye)
        _, sing, vt = np.linalg.svd(np.concatenate(blocks), full_matrices=False)
    null = vt[-1]
    if sing[-1] > 1e-8 or (len(sing) > 1 and sing[-2] < 1e-6):
        raise ValueError(f"no unique coupling for {l1} x {l2} -> {l3}")  # pragma: no cover
    first = null[np.abs(null) > 1e-9][0]
    null = null * np.sign(first) / np.linalg.norm(null)
    null[np.abs(null) < 1e-14] = 0.0
    return null.reshape(dims)


def wigner_3j(l1: int, l2: int, l3: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Unit-norm real coupling tensor ``C`` of ``l1 x l2 -> l3`` (``(2l1+1, 2l2+1, 2l3+1)``).

    Parameters
    ----------
    l1, l2, l3 : int
        Degrees, each in ``0..3``, with ``allowed_paths(l1, l2, l3)``.
    dtype : torch.dtype, default torch.float64
        Of the returned tensor.

    Returns
    -------
    torch.Tensor
        ``C`` with ``sum C^2 = 1`` and ``C[a, b, c] = sum D1[a, a'] D2[b, b'] D3[c, c'] C[a', b', c']``.
    """
    return torch.as_tensor(_wigner_3j(l1, l2, l3), dtype=dtype)
