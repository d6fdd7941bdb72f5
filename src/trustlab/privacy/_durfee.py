"""Durfee's above-threshold scan over geometric buckets (private module).

One implementation serves the unbounded quantile
(:func:`trustlab.privacy.quantiles.unbounded_quantile`), the private clipping bounds
(:func:`trustlab.privacy.bounds.dp_bounds`) and the extremes of the DP boxplot.

The mechanism that calls a scan passes the integer-noise adder it draws with
(``add_noise``, normally :func:`~trustlab.privacy.samplers.add_discrete_laplace`
as bound in the caller's module): the draw belongs to the public mechanism, which
is where tests intercept it to check the scale each release really uses.

References
----------
Durfee. "Unbounded Differentially Private Quantile and Maximum Estimation". NeurIPS 2023.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab.errors import ParameterError

__all__ = ["LOG_FLOAT_MAX", "scan", "scan_cap"]

LOG_FLOAT_MAX = math.log(np.finfo(float).max)

NoiseAdder = Callable[[Any, float], Any]


def scan_cap(anchor: float, base: float, name: str) -> int:
    """Buckets that fit before the edges ``anchor + base**k - 1`` overflow float64 (public).

    Raises :class:`~trustlab.errors.ParameterError` (naming ``name``) when the anchor
    leaves no room for a single bucket.
    """
    if math.log(base) > LOG_FLOAT_MAX - 1.0:
        raise ParameterError(
            f"base {base!r} is too large: the first bucket edge would overflow float64.", argument="base"
        )
    cap = math.floor((LOG_FLOAT_MAX - 1.0 - math.log1p(abs(anchor))) / math.log(base))
    if cap < 1:
        raise ParameterError(
            f"the anchor {anchor!r} (with base {base!r}) leaves no room for the bucket scan: its edges "
            "would overflow float64 at once. Rescale the data so the anchor is well below 1e300 in "
            "magnitude, or use a smaller base.",
            argument=name,
        )
    return int(cap)


def scan(
    z: np.ndarray,
    level: float,
    epsilon: float,
    anchor: float,
    base: float,
    neighbouring: str,
    n_public: float,
    max_buckets: int,
    mirrored: bool = False,
    *,
    add_noise: NoiseAdder,
    anchor_name: str | None = None,
) -> float:
    """The above-threshold scan upward from ``anchor`` on sorted ``z`` (on ``-z`` when ``mirrored``).

    Half of ``epsilon`` goes to the threshold noise (scale ``1 / e1``), half to the
    query noise (scale ``1 / e2``, or ``2 / e2`` under replace-one, where the
    cumulative counts are not monotone). Counts, the threshold and the noise are
    integers, so the above-threshold argument holds verbatim. Outputs are bucket
    edges ``expm1((k + 1) log(base)) + anchor`` of an integer ``k``: a public grid.
    A scan that never fires returns the edge of bucket ``max_buckets`` (the caller
    caps ``max_buckets`` with a public, data-independent rule). No copy of ``z``.

    With ``anchor_name`` (the unbounded quantile and the boxplot's extremes), the scan
    also stops where the bucket edges would overflow float64 (:func:`scan_cap`), so a
    scan that never fires returns the last finite edge, not ``inf``; a
    :class:`~trustlab.errors.ParameterError` naming ``anchor_name`` is raised, before
    any noise is drawn, when the anchor leaves no room for a single bucket.
    """
    if anchor_name is not None:
        max_buckets = min(max_buckets, scan_cap(anchor, base, anchor_name))
    e1 = e2 = epsilon / 2.0
    query_scale = (2.0 if neighbouring == "replace" else 1.0) / e2
    threshold = int(add_noise(math.ceil(level * n_public), 1.0 / e1))
    log_base = math.log(base)
    n = z.size
    k, batch = 0, 256
    while k < max_buckets:
        ks = np.arange(k, min(k + batch, max_buckets))
        edges = np.expm1((ks + 1) * log_base) + anchor
        if mirrored:  # count of -z below the edge = count of z above -edge
            counts = n - np.searchsorted(z, -edges, side="right")
        else:
            counts = np.searchsorted(z, edges, side="left")
        noisy = add_noise(counts, query_scale)
        hit = np.flatnonzero(noisy > threshold)
        if hit.size:
            return float(edges[hit[0]])
        k += ks.size
        batch = min(batch * 2, 8192)
    return float(np.expm1(max_buckets * log_base) + anchor)
