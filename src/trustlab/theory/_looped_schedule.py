"""A sequence-to-sequence target whose per-step map must change with the step (001-13).

Xu & Sato (ICML 2025, Lemma 4.1 / Theorem 4.2) credit the timestep encoding with letting a
weight-tied block apply a *different* map at each loop. :func:`commutator_target` is a
continuous, permutation-equivariant map built so that this matters: four phases of equal length
(rotate the token offsets by ``+pi/2``, push them out with ``tanh``, rotate back, pull them in)
whose time-averaged vector field is zero. A block that repeats one map ``r`` times follows an
autonomous flow, whose first-order (averaged) field here is the identity; a block told the loop
index can play the four phases in turn.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError

__all__ = ["commutator_target"]


def _rotate(z: np.ndarray, angle: float) -> np.ndarray:
    """Rotate each token's offset from the token mean (the mean is a fixed point of ``J u``)."""
    m = z.mean(axis=1, keepdims=True)
    c, s = math.cos(angle), math.sin(angle)
    return m + (z - m) @ np.array([[c, -s], [s, c]]).T


def token_array(x: Any) -> np.ndarray:
    """``x`` as a float ``(batch, N, 2)`` array of token positions, or a DataError naming ``x``."""
    z = np.array(x, dtype=float)
    if z.ndim != 3 or z.shape[2] != 2:
        raise DataError(f"x must have shape (batch, N, 2), got {z.shape}.", argument="x")
    return z


def rk4(
    field: Callable[[float, np.ndarray], np.ndarray], z: np.ndarray, duration: float, n_steps: int
) -> np.ndarray:
    """``n_steps`` classical Runge-Kutta steps of ``dz/dt = field(t, z)`` over ``[0, duration]``."""
    h = duration / n_steps
    for k in range(n_steps):
        t = k * h
        k1 = field(t, z)
        k2 = field(t + h / 2, z + h / 2 * k1)
        k3 = field(t + h / 2, z + h / 2 * k2)
        k4 = field(t + h, z + h * k3)
        z = z + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return z


def _push(z: np.ndarray, gain: float, duration: float, n_steps: int) -> np.ndarray:
    """RK4 for ``dx_i/dt = gain * tanh(3 u_i)``, ``u_i = x_i - mean_j x_j``, over ``duration``."""
    return rk4(lambda _t, v: gain * np.tanh(3 * (v - v.mean(axis=1, keepdims=True))), z, duration, n_steps)


@validate_params(
    {
        "x": ["array-like"],
        "gain": [Interval(numbers.Real, 0, None, closed="left")],
        "n_steps": [Interval(numbers.Integral, 1, None, closed="left")],
    }
)
def commutator_target(x: np.ndarray, *, gain: float = 4.0, n_steps: int = 16) -> np.ndarray:
    """The time-1 map of a four-phase token ODE whose time-averaged field is zero.

    Over ``t in [0, 1]`` in quarters, with ``u_i = x_i - mean_j x_j`` and ``J`` the quarter
    rotation: ``dx_i/dt = 2 pi J u_i``, then ``gain tanh(3 u_i)``, then ``-2 pi J u_i``, then
    ``-gain tanh(3 u_i)``. The map is the group commutator ``E^{-1} R^{-1} E R`` of a rotation
    ``R`` by ``pi/2`` and a nonlinear push ``E``: the identity if they commuted. The rotations are
    exact, the pushes integrated by ``n_steps`` RK4 steps each.

    Parameters
    ----------
    x : numpy.ndarray
        ``(batch, N, 2)``.
    gain : float, default 4
        Strength of the push (displacement up to ``gain / 4`` per token and phase).
    n_steps : int, default 16
        RK4 steps per push phase.

    Returns
    -------
    numpy.ndarray
        ``(batch, N, 2)``.

    References
    ----------
    K. Xu and I. Sato, "On Expressive Power of Looped Transformers: Theoretical Analysis and
    Enhancement via Timestep Encoding", ICML 2025 (Lemma 4.1, Theorem 4.2: a per-loop scale lets
    the tied block change its map with the loop index).

    Examples
    --------
    >>> from trustlab.theory.looped_transformers import commutator_target
    >>> commutator_target(np.random.default_rng(0).uniform(0, 1, (5, 3, 2))).shape
    (5, 3, 2)
    """
    z = _push(_rotate(token_array(x), math.pi / 2), gain, 0.25, n_steps)
    return _push(_rotate(z, -math.pi / 2), -gain, 0.25, n_steps)
