"""Growing spheres (Laugel et al., 2018): the one sampler behind the counterfactual search and BorderLIME.

Both searches look for the nearest point of another class around a centre by drawing
points uniformly in spherical shells ``lo <= ||z|| < hi`` of growing radius:

- :func:`sample_shell` draws one shell (uniform direction, radius with density
  ``proportional to r^(k-1)`` on ``[lo, hi)``);
- :func:`shrink_ball` halves an initial radius while the ball still holds a hit (the
  first phase of the original algorithm, used by BorderLIME);
- :func:`grow_rings` then tries rings ``[lo, lo + width)``, ``width`` growing by a
  factor each time, until a probe reports a hit, a radius or ring limit, or a
  deadline.

References
----------
.. [1] Laugel, T., Lesot, M.-J., Marsala, C., Renard, X., Detyniecki, M. "Inverse
   Classification for Comparison-based Interpretability in Machine Learning".
   IPMU 2018.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

__all__ = ["grow_rings", "sample_shell", "shrink_ball"]


def sample_shell(rng: np.random.Generator, n: int, k: int, lo: float, hi: float) -> np.ndarray:
    """``n`` points uniform in the shell ``lo <= ||z|| < hi`` of ``R^k``, shape ``(n, k)``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws ``n * k`` normals (the directions), then ``n`` uniforms (the radii).
    n, k : int
        Number of points and dimension.
    lo, hi : float
        Inner and outer radius.

    Returns
    -------
    numpy.ndarray of shape (n, k)

    Examples
    --------
    >>> import numpy as np
    >>> Z = sample_shell(np.random.default_rng(0), 1000, 3, 1.0, 2.0)
    >>> r = np.linalg.norm(Z, axis=1)
    >>> bool(r.min() >= 1.0 and r.max() < 2.0)
    True
    """
    directions = rng.standard_normal((n, k))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    radii = (lo**k + rng.random(n) * (hi**k - lo**k)) ** (1.0 / k)
    return directions * radii[:, None]


def shrink_ball(
    has_hit: Callable[[np.ndarray], bool],
    k: int,
    rng: np.random.Generator,
    *,
    n: int,
    radius: float,
    max_halvings: int,
    min_radius: float = 1e-6,
) -> float:
    """Halve ``radius`` while ``has_hit`` finds a hit among ``n`` points of the ball of that radius.

    Parameters
    ----------
    has_hit : callable
        ``(n, k)`` offsets from the centre -> whether any of them is a hit.
    k : int
        Dimension.
    rng : numpy.random.Generator
    n : int
        Points per ball.
    radius : float
        Starting radius.
    max_halvings : int
        At most this many balls are drawn.
    min_radius : float, default 1e-6
        Stop halving below this radius.

    Returns
    -------
    float
        The first radius whose ball showed no hit (or the last one tried).
    """
    r = radius
    for _ in range(max_halvings):
        if not has_hit(sample_shell(rng, n, k, 0.0, r)) or r < min_radius:
            break
        r /= 2
    return r


def grow_rings(
    probe: Callable[[np.ndarray], bool],
    k: int,
    rng: np.random.Generator,
    *,
    n: int,
    width: float,
    lo: float = 0.0,
    growth: float = 1.0,
    max_radius: float = math.inf,
    max_rings: int | None = None,
    deadline: float | None = None,
) -> tuple[bool, float, bool]:
    """Probe rings ``[lo, lo + width)`` of growing radius until ``probe`` reports a hit.

    Parameters
    ----------
    probe : callable
        ``(n, k)`` offsets from the centre -> True when the ring held a hit (the
        caller keeps what it found).
    k : int
        Dimension.
    rng : numpy.random.Generator
    n : int
        Points per ring.
    width : float
        Width of the first ring.
    lo : float, default 0.0
        Inner radius of the first ring.
    growth : float, default 1.0
        Factor applied to the width after each ring.
    max_radius : float, default inf
        No ring starts at or beyond this radius.
    max_rings : int, optional
        At most this many rings.
    deadline : float, optional
        ``time.perf_counter()`` value after which no further ring is drawn.

    Returns
    -------
    found : bool
    lo : float
        Inner radius of the ring that held the hit (else where the search stopped).
    timed_out : bool
        Whether the deadline stopped the search.
    """
    rings = 0
    while lo < max_radius and (max_rings is None or rings < max_rings):
        if deadline is not None and time.perf_counter() > deadline:
            return False, lo, True
        if probe(sample_shell(rng, n, k, lo, lo + width)):
            return True, lo, False
        lo += width
        width *= growth
        rings += 1
    return False, lo, False
