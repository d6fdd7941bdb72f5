"""Synthetic 3D point graphs with planted ground truth for EquiGX (catalog row 001-18).

``make_shape_graphs``: the class is the shape of a planted four-point motif (the label depends
on known nodes); ``make_distance_graphs``: the class is the length of the only short pair (the
label depends on a known distance). Generative processes in ``docs/data-card.md`` and in the
docstrings.
"""

from __future__ import annotations

import numpy as np

__all__ = ["make_distance_graphs", "make_shape_graphs", "random_rotation"]


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random 3D rotation matrix (QR of a Gaussian matrix, sign-fixed, det +1)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


_TETRAHEDRON = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float) / np.sqrt(8.0)
_SQUARE = np.array([[0.5, 0.5, 0], [0.5, -0.5, 0], [-0.5, -0.5, 0], [-0.5, 0.5, 0]], dtype=float)


def make_shape_graphs(
    n_graphs: int,
    *,
    n_noise: int = 12,
    half_width: float = 2.0,
    min_noise_distance: float = 1.25,
    random_state: int = 0,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, list[np.ndarray]]:
    """3D point graphs whose class is the shape of a planted four-point motif (EquiGX's "Shapes").

    Generative process (``docs/data-card.md``): the label ``y`` is 0 or 1 with probability 1/2;
    the motif is a regular tetrahedron (``y = 0``) or a square (``y = 1``), both with edge length
    1, randomly rotated and shifted by ``U[-0.5, 0.5]^3``; then ``n_noise`` points are drawn
    uniformly in ``[-half_width, half_width]^3``, each rejected while it lies closer than
    ``min_noise_distance`` to any point placed before. All nodes carry the same attribute (a
    single 1), so only the geometry tells the classes apart; the motif's four nodes are the
    ground truth.

    Parameters
    ----------
    n_graphs : int
        Number of graphs.
    n_noise : int, default=12
        Noise points per graph (each graph has ``4 + n_noise`` nodes).
    half_width : float, default=2.0
        Noise points are uniform in ``[-half_width, half_width]^3``.
    min_noise_distance : float, default=1.25
        Smallest distance of a noise point to any point placed before it.
    random_state : int, default=0
        Seeds the draw.

    Returns
    -------
    graphs : list of (pos (n, 3), node_attr (n, 1))
        The node coordinates (in random order) and the constant attribute.
    labels : ndarray of int
        0 for a tetrahedron, 1 for a square.
    truth : list of boolean ndarray
        The motif nodes of each graph.

    Examples
    --------
    >>> graphs, labels, truth = make_shape_graphs(2, random_state=0)
    >>> graphs[0][0].shape, int(truth[0].sum())
    ((16, 3), 4)
    """
    rng = np.random.default_rng(random_state)
    graphs, labels, truth = [], [], []
    for _ in range(n_graphs):
        y = int(rng.integers(2))
        motif = (_TETRAHEDRON if y == 0 else _SQUARE) @ random_rotation(rng).T + rng.uniform(-0.5, 0.5, 3)
        points = np.empty((4 + n_noise, 3))
        points[:4] = motif
        _scatter_noise(rng, points, 4, half_width, min_noise_distance)
        order = rng.permutation(len(points))
        pos = points[order]
        graphs.append((pos, np.ones((len(pos), 1))))
        labels.append(y)
        truth.append(order < 4)
    return graphs, np.asarray(labels, dtype=np.int64), truth


def _scatter_noise(
    rng: np.random.Generator, points: np.ndarray, start: int, half_width: float, min_distance: float
) -> None:
    """Fill ``points[start:]`` with uniform points at least ``min_distance`` from every earlier one."""
    k = start
    while k < len(points):
        p = rng.uniform(-half_width, half_width, 3)
        if np.min(np.sum((points[:k] - p) ** 2, axis=1)) >= min_distance**2:
            points[k] = p
            k += 1


def make_distance_graphs(
    n_graphs: int,
    *,
    n_noise: int = 14,
    half_width: float = 2.0,
    short: tuple[float, float] = (0.6, 0.75),
    long: tuple[float, float] = (0.85, 1.0),
    min_noise_distance: float = 1.2,
    random_state: int = 0,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, list[np.ndarray]]:
    """3D point graphs whose class is the length of one planted pair (a distance task).

    Generative process: the label ``y`` is 0 or 1 with probability 1/2; a pair of points is
    planted at distance ``U(short)`` (``y = 0``) or ``U(long)`` (``y = 1``), its midpoint uniform
    in ``[-0.5, 0.5]^3`` and its direction uniform on the sphere; then ``n_noise`` points are
    drawn uniformly in ``[-half_width, half_width]^3``, each redrawn while closer than
    ``min_noise_distance`` to any point placed before. With the defaults the pair is the only
    pair closer than 1.2, and only its length carries the label; every node has the same
    attribute (a single 1). The pair's two nodes are the ground truth.

    Parameters
    ----------
    n_graphs : int
        Number of graphs.
    n_noise : int, default=14
        Noise points per graph (each graph has ``2 + n_noise`` nodes).
    half_width : float, default=2.0
        Noise points are uniform in ``[-half_width, half_width]^3``.
    short, long : (float, float), default (0.6, 0.75) and (0.85, 1.0)
        Ranges of the pair's length for class 0 and class 1.
    min_noise_distance : float, default=1.2
        Smallest distance of a noise point to any point placed before it.
    random_state : int, default=0
        Seeds the draw.

    Returns
    -------
    graphs : list of (pos (n, 3), node_attr (n, 1))
        The node coordinates (in random order) and the constant attribute.
    labels : ndarray of int
        0 for a short pair, 1 for a long one.
    truth : list of boolean ndarray
        The pair's two nodes in each graph.

    Examples
    --------
    >>> graphs, labels, truth = make_distance_graphs(2, random_state=0)
    >>> graphs[0][0].shape, int(truth[0].sum())
    ((16, 3), 2)
    """
    rng = np.random.default_rng(random_state)
    graphs, labels, truth = [], [], []
    for _ in range(n_graphs):
        y = int(rng.integers(2))
        length = rng.uniform(*(short if y == 0 else long))
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        mid = rng.uniform(-0.5, 0.5, 3)
        points = np.empty((2 + n_noise, 3))
        points[0], points[1] = mid - 0.5 * length * direction, mid + 0.5 * length * direction
        _scatter_noise(rng, points, 2, half_width, min_noise_distance)
        order = rng.permutation(len(points))
        pos = points[order]
        graphs.append((pos, np.ones((len(pos), 1))))
        labels.append(y)
        truth.append(order < 2)
    return graphs, np.asarray(labels, dtype=np.int64), truth
