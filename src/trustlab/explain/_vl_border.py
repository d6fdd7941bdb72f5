"""BorderLIME's prover-side search: the nearest opposite-label point by growing spheres."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ModelError
from trustlab.explain._lime_core import check_predict_fn, model_column
from trustlab.explain._spheres import grow_rings, shrink_ball
from trustlab.explain._vl_commitment import int_vector
from trustlab.explain._vl_fixed_point import quantize

__all__ = ["find_border_point"]


_COUNT = Interval(numbers.Integral, 1, None, closed="left")


@validate_params(
    {
        "s": [_COUNT],
        "label": [Interval(numbers.Integral, 0, None, closed="left")],
        "rng": [np.random.Generator],
        "radius": [Interval(numbers.Real, 0, None, closed="neither")],
        "n_layer": [_COUNT],
        "max_layers": [_COUNT],
    }
)
def find_border_point(
    predict_fn: Callable[[np.ndarray], Any],
    x_q: np.ndarray,
    s: int,
    *,
    label: int = 1,
    rng: np.random.Generator,
    radius: float = 5.0,
    n_layer: int = 1000,
    max_layers: int = 200,
) -> np.ndarray:
    """Growing spheres (BorderLIME's search, prover side): the nearest opposite-label point to ``x``.

    Halve ``radius`` while the ball around ``x`` holds opposite-label points (``n_layer``
    uniform draws per layer), then grow rings of width ``r / 2`` until one appears
    (:mod:`trustlab.explain._spheres`, shared with the counterfactual search); the
    closest is refined by bisection on the segment to ``x`` and returned at fixed point
    (moved outwards on the grid until its quantised value keeps the other label).

    Parameters
    ----------
    predict_fn : callable
        The model: ``(m, d)`` rows -> ``(m,)`` scores or ``(m, n_classes)`` probabilities;
        its class is ``output >= 0.5`` of column ``label``.
    x_q : array-like of int
        The instance at the fixed-point scale ``s``.
    s : int
        Fixed-point scale ``2^f``.
    label : int, default 1
        Output column for 2-D outputs.
    rng : numpy.random.Generator
        Drives the search (the prover derives it from the public seed).
    radius : float, default 5.0
        Starting radius.
    n_layer : int, default 1000
        Points per ball or ring.
    max_layers : int, default 200
        At most this many halvings, then this many rings.

    Returns
    -------
    numpy.ndarray of int64
        The border point ``x_b`` at scale ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.verifiable import find_border_point
    >>> f = lambda Z: (Z[:, 0] > 1.0).astype(float)
    >>> xb = find_border_point(f, np.array([0, 0]), 256, rng=np.random.default_rng(0))
    >>> bool(f(xb[None, :] / 256)[0] == 1.0 and 1.0 < xb[0] / 256 < 1.1)
    True
    """
    predict_fn = check_predict_fn(predict_fn)
    label, s, n_layer, max_layers, radius = int(label), int(s), int(n_layer), int(max_layers), float(radius)
    x = int_vector(x_q, "x_q").astype(float) / s
    if x.size == 0:
        raise DataError("x_q must hold at least one feature.", argument="x_q")
    d = x.size

    def cls(Z: np.ndarray) -> np.ndarray:
        return model_column(predict_fn(np.atleast_2d(Z)), len(np.atleast_2d(Z)), label) >= 0.5

    c0 = bool(cls(x)[0])
    found: list[np.ndarray] = []

    def has_other(offsets: np.ndarray) -> bool:
        return bool(np.any(cls(x + offsets) != c0))

    def ring(offsets: np.ndarray) -> bool:
        pts = x + offsets
        opp = pts[cls(pts) != c0]
        if len(opp):
            found.append(opp[np.argmin(np.linalg.norm(opp - x, axis=1))])
        return bool(len(opp))

    r = shrink_ball(has_other, d, rng, n=n_layer, radius=radius, max_halvings=max_layers)
    hit, lo, _ = grow_rings(ring, d, rng, n=n_layer, width=r / 2, lo=r, max_rings=max_layers)
    if not hit:
        raise ModelError(
            f"BorderLIME found no point with the other label within radius {lo:.3g} of x; "
            "use border=False for this query.",
            argument="predict_fn",
        )
    point = found[0]
    inner, outer = 0.0, 1.0  # bisection on x + t (point - x)
    for _ in range(30):
        mid = (inner + outer) / 2
        if bool(cls(x + mid * (point - x))[0]) != c0:
            outer = mid
        else:
            inner = mid
    step = (point - x) / max(float(np.linalg.norm(point - x)), 1e-12)
    for k in range(4 * s):
        bq = quantize(x + outer * (point - x) + k * step / s, s)
        if bool(cls(bq.astype(float) / s)[0]) != c0:
            return bq
    raise ModelError(
        "BorderLIME could not place x_b on the fixed-point grid.", argument="predict_fn"
    )  # pragma: no cover
