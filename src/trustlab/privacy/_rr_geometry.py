"""The privacy geometry of binary randomized response under LabelDP (private module)."""

from __future__ import annotations

import math
import numbers
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import expit

from trustlab._param_validation import DELTA, EPSILON, Interval, validate_params
from trustlab.privacy._opendp import opendp

__all__ = [
    "rr_hockey_stick",
    "rr_is_feasible",
    "rr_vertices",
]


@validate_params(
    {"epsilon": [EPSILON], "delta": [DELTA], "tol": [Interval(numbers.Real, 0, None, closed="left")]}
)
def rr_is_feasible(p0: Any, p1: Any, epsilon: float, delta: float = 0.0, *, tol: float = 1e-12) -> Any:
    """Whether randomized response with keep probabilities ``(p0, p1)`` is ``(epsilon, delta)``-LabelDP.

    The four per-output constraints are ``p1 <= e^eps (1 - p0) + delta``,
    ``p0 <= e^eps (1 - p1) + delta``, ``1 - p0 <= e^eps p1 + delta`` and
    ``1 - p1 <= e^eps p0 + delta``.

    Parameters
    ----------
    p0, p1 : float or array-like
        ``P(y~=0 | y=0)`` and ``P(y~=1 | y=1)``.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, default 0
        In ``[0, 1)``.
    tol : float, default 1e-12
        Slack allowed for floating-point rounding.

    Returns
    -------
    bool or numpy.ndarray of bool

    References
    ----------
    Ce Zhang, Yixin Han, Yafei Wang, Xiaodong Yan, Linglong Kong, Ting Li, Bei Jiang.
    "Differentially Private Analysis for Binary Response Models: Optimality,
    Estimation, and Inference". ICML 2025.

    Examples
    --------
    >>> bool(rr_is_feasible(0.731, 0.731, 1.0)), bool(rr_is_feasible(0.8, 0.8, 1.0))
    (True, False)
    """
    epsilon, delta = float(epsilon), float(delta)
    a = np.asarray(p0, dtype=float)
    b = np.asarray(p1, dtype=float)
    e = math.exp(epsilon)
    ok = (
        (b <= e * (1 - a) + delta + tol)
        & (a <= e * (1 - b) + delta + tol)
        & (1 - a <= e * b + delta + tol)
        & (1 - b <= e * a + delta + tol)
        & (a >= -tol)
        & (a <= 1 + tol)
        & (b >= -tol)
        & (b <= 1 + tol)
    )
    return ok if ok.ndim else bool(ok)


@validate_params({"epsilon": [EPSILON]})
def rr_hockey_stick(p0: Any, p1: Any, epsilon: float) -> Any:
    """Exact hockey-stick divergence of randomized response between the two label values.

    Returns ``max over y, y' of sum_o max(0, P(o | y) - e^eps P(o | y'))``: the
    smallest ``delta`` for which the mechanism is ``(epsilon, delta)``-LabelDP. It is
    0 exactly when the largest log-ratio of output probabilities is at most ``epsilon``.

    Parameters
    ----------
    p0, p1 : float or array-like
        Keep probabilities ``P(y~=0 | y=0)`` and ``P(y~=1 | y=1)``, in ``[0, 1]``
        (arrays broadcast).
    epsilon : float
        Privacy parameter, finite and > 0.

    Returns
    -------
    numpy.ndarray of float
        The divergence (the smallest feasible ``delta``), in ``[0, 1]``, in the
        broadcast shape of ``p0`` and ``p1`` (0-d for scalars).

    References
    ----------
    Ce Zhang, Yixin Han, Yafei Wang, Xiaodong Yan, Linglong Kong, Ting Li, Bei Jiang.
    "Differentially Private Analysis for Binary Response Models: Optimality,
    Estimation, and Inference". ICML 2025.

    Examples
    --------
    >>> float(rr_hockey_stick(1.0, 0.01, 1.0))
    0.01
    """
    e = math.exp(float(epsilon))
    a = np.asarray(p0, dtype=float)
    b = np.asarray(p1, dtype=float)
    given1 = (1 - b, b)  # P(y~=0 | y=1), P(y~=1 | y=1)
    given0 = (a, 1 - a)
    fwd = sum(np.maximum(0.0, u - e * v) for u, v in zip(given1, given0, strict=True))
    bwd = sum(np.maximum(0.0, v - e * u) for u, v in zip(given1, given0, strict=True))
    return np.maximum(fwd, bwd)


@lru_cache(maxsize=64)
def _symmetric_keep(epsilon: float, delta: float) -> float:
    """Keep probability of the symmetric vertex, rounded so it never exceeds the budget."""
    p = (math.exp(epsilon) + delta) / (1.0 + math.exp(epsilon)) if delta > 0 else float(expit(epsilon))
    if delta == 0.0:
        # OpenDP's privacy map for randomized response rounds conservatively; step the
        # keep probability down by ulps until OpenDP certifies epsilon.
        dp = opendp()
        while p > 0.5 and dp.m.make_randomized_response_bool(p).map(1) > epsilon:
            p = float(np.nextafter(p, 0.5))
    else:
        p = float(np.nextafter(np.nextafter(p, 0.5), 0.5))
    return p


@validate_params({"epsilon": [EPSILON], "delta": [DELTA]})
def rr_vertices(epsilon: float, delta: float = 0.0) -> np.ndarray:
    """The informative vertices ``(p0, p1)`` of the ``(epsilon, delta)``-LabelDP polygon.

    The Fisher information of randomized-response labels is convex in ``(p0, p1)``,
    so its maximum over the feasible polygon sits at a vertex. Row 0 is the symmetric
    vertex ``p0 = p1 = (e^eps + delta) / (1 + e^eps)`` (Warner's RR when
    ``delta = 0``); for ``delta > 0`` rows 1 and 2 are the one-sided vertices
    ``(1, delta)`` (zeros kept, a one is shown as one only with probability ``delta``)
    and ``(delta, 1)``. Their label-swapped mirrors carry the same information and
    are left out. Probabilities are rounded toward more privacy by a few ulps.

    Parameters
    ----------
    epsilon : float
        > 0.
    delta : float, default 0
        In ``[0, 1)``.

    Returns
    -------
    numpy.ndarray of shape (1, 2) or (3, 2)

    References
    ----------
    Zhang et al. "Differentially Private Analysis for Binary Response Models:
    Optimality, Estimation, and Inference". ICML 2025.

    Examples
    --------
    >>> rr_vertices(1.0).round(4)
    array([[0.7311, 0.7311]])
    >>> rr_vertices(1.0, 0.01).round(4)
    array([[0.7337, 0.7337],
           [1.    , 0.01  ],
           [0.01  , 1.    ]])
    """
    epsilon, delta = float(epsilon), float(delta)
    s = _symmetric_keep(epsilon, delta)
    if delta == 0.0:
        return np.array([[s, s]])
    return np.array([[s, s], [1.0, delta], [delta, 1.0]])
