"""Building the weak-strong fair k-median coreset (:func:`weak_strong_coreset`).

Private to :mod:`trustlab.fairness.coresets`, which re-exports :class:`Coreset` and
:func:`weak_strong_coreset`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.fairness._coreset_oracle import WeakStrongOracle


@dataclass(frozen=True)
class Coreset:
    """A weighted subset of the points standing in for all of them.

    Attributes
    ----------
    indices : numpy.ndarray
        Point indices in the coreset.
    weights : numpy.ndarray
        Their weights (sum about n).
    groups : numpy.ndarray or None
        Their group labels (None without groups).
    n_strong : int
        Strong-oracle pair queries spent building it.
    n_point : int
        Points revealed (strong point queries).
    n_weak : int
        Weak-oracle pair queries spent building it.
    rough_centers : numpy.ndarray
        Indices of the D^z-sampled rough centres.
    n_rounds : int
        Heavy-hitter rounds run.

    See Also
    --------
    weak_strong_coreset : builds it.
    """

    indices: np.ndarray
    weights: np.ndarray
    groups: np.ndarray | None
    n_strong: int
    n_point: int
    n_weak: int
    rough_centers: np.ndarray
    n_rounds: int


def _robust_distances(oracle: WeakStrongOracle, c: int, m: int) -> np.ndarray:
    """Estimate d(x, c) for all x as the median of weak distances to m strong-confirmed proxies of c."""
    everyone = np.arange(oracle.n)
    wc = oracle.weak(c, everyone)
    shortlist = np.argsort(wc, kind="stable")[: min(oracle.n, 3 * m)]
    exact = oracle.strong(c, shortlist)
    proxies = shortlist[np.argsort(exact, kind="stable")[:m]]
    est = np.median(np.stack([oracle.weak(int(b), everyone) for b in proxies]), axis=0)
    est[c] = 0.0
    return est


@validate_params(
    {
        "k": [Interval(numbers.Integral, 1, None, closed="left")],
        "eps": [Interval(numbers.Real, 0, 1, closed="neither")],
        "z": [Interval(numbers.Integral, 1, 3, closed="both")],
        "sample_size": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "heavy_min": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "n_proxies": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def weak_strong_coreset(
    oracle: WeakStrongOracle,
    k: int,
    *,
    eps: float = 0.2,
    z: int = 1,
    groups: Any = None,
    sample_size: int | None = None,
    heavy_min: int | None = None,
    n_proxies: int | None = None,
    random_state: Any = None,
) -> Coreset:
    """Build a coreset for (fair) k-median / (k, z)-clustering from weak and few strong queries.

    1. Robust weak distance to an anchor ``c``: shortlist the ``3m`` points nearest to
       ``c`` under the weak oracle, confirm them with ``3m`` strong queries, keep the
       ``m = ceil(6 ln n)`` nearest as proxies; ``d_hat(x, c)`` = median of the weak
       distances from ``x`` to the proxies (each uncorrupted one is within the proxy
       radius of ``d(x, c)``, and a majority is uncorrupted with high probability).
    2. ``2k`` rough centres by D^z sampling on ``d_hat`` (k-means++ style); every point
       goes to its nearest rough centre; ``Delta_a`` = mean cost of cluster ``a``.
    3. Rings ``d(x, a) in [2^j Delta_a, 2^(j+1) Delta_a)``, ``j`` from
       ``-ceil(log2(1/eps))`` (closer: the inner ring) to ``ceil(log2 n)``; a cell is
       (cluster, ring, group).
    4. Rounds (at most ``ceil(log2 n) + 1``): draw ``s`` points uniformly from the
       remaining set ``R``; one strong query per sample fixes its exact ring; a cell
       with ``>= h`` samples is heavy. Every point of ``R`` whose weakly estimated
       cell is heavy is peeled off ``R``; the samples drawn from that stratum join
       the coreset with weight ``|stratum| / #samples`` (so weights sum exactly to the
       peeled count, per group too). When ``|R| <= s`` the rest joins with weight 1 (revealed by point
       queries). If the round limit is hit first, a last uniform sample of ``R``
       stands for it.

    Parameters
    ----------
    oracle : WeakStrongOracle
        The oracles (its counters keep running; the coreset reports this call's spend).
    k : int >= 1
        Number of centres.
    eps : float in (0, 1), default 0.2
        Target relative error.
    z : int in {1, 2, 3}, default 1
        Cost exponent (1: k-median, 2: k-means).
    groups : array-like of shape (n_points,), optional
        Group (colour) of each point; cells are split by group so that per-group
        weights are kept.
    sample_size : int, optional
        ``s``; default ``ceil(k log2(n) / eps^2)`` (capped at ``n``).
    heavy_min : int, optional
        ``h``; default ``ceil(2 log2 n)``.
    n_proxies : int, optional
        ``m``; default ``ceil(6 ln n)``.
    random_state : int, numpy.random.Generator or None
        Seed of the sampling.

    Returns
    -------
    Coreset

    References
    ----------
    V. Braverman, P. Dharangutte, S. H.-C. Jiang, H.-A. Nguyen, C. Wang, Y. Zhang, S. Zhou,
    "Relative Error Fair Clustering in the Weak-Strong Oracle Model", ICML 2025
    (steps 1-4 reconstructed from its outline; see docs/fairness/fair-kmedian-coresets.md).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(c, 0.3, (300, 2)) for c in ((0, 0), (4, 0), (0, 4))])
    >>> o = WeakStrongOracle(X, random_state=0)
    >>> cs = weak_strong_coreset(o, 3, eps=0.3, random_state=0)
    >>> bool(abs(cs.weights.sum() / 900 - 1) < 0.3), cs.n_strong < 900 * 3
    (True, True)
    """
    if not isinstance(oracle, WeakStrongOracle):
        raise ParameterError("oracle must be a WeakStrongOracle.", argument="oracle")
    n = oracle.n
    rng = make_generator(random_state)
    if groups is None:
        gcode = np.zeros(n, dtype=np.int64)
        glabels = None
    else:
        arr = np.asarray(groups, dtype=object)
        if arr.ndim != 1 or arr.size != n:
            raise DataError(
                f"groups must have one label per point ({n}), got shape {arr.shape}.", argument="groups"
            )
        import pandas as pd

        s = pd.Series(arr)
        if s.isna().any():
            raise DataError(
                "groups has missing values; give them an explicit level first.", argument="groups"
            )
        codes, uniq = pd.factorize(s, sort=True)
        gcode, glabels = codes.astype(np.int64), np.asarray(uniq, dtype=object)
    if k > n:
        raise ParameterError(f"k={k} exceeds the number of points ({n}); pass k <= n.", argument="k")
    log_n = max(1.0, math.log2(n))
    s_size = min(n, int(sample_size) if sample_size is not None else math.ceil(k * log_n / eps**2))
    h = int(heavy_min) if heavy_min is not None else math.ceil(2 * log_n)
    m = int(n_proxies) if n_proxies is not None else math.ceil(6 * math.log(max(n, 2)))
    start = (oracle.n_strong, oracle.n_point, oracle.n_weak)

    # 2. rough centres by D^z sampling on robust weak distances
    n_rough = min(n, 2 * k)
    centers = [int(rng.integers(n))]
    est = [_robust_distances(oracle, centers[0], m)]
    nearest = est[0].copy()
    while len(centers) < n_rough:
        p = nearest**z
        total = p.sum()
        nxt = int(rng.integers(n)) if total <= 0 else int(rng.choice(n, p=p / total))
        if nxt in centers:
            if total <= 0:
                break
            continue
        centers.append(nxt)
        est.append(_robust_distances(oracle, nxt, m))
        nearest = np.minimum(nearest, est[-1])
    d_hat = np.stack(est)  # (n_rough, n)
    assign = np.argmin(d_hat, axis=0)
    d_own = d_hat[assign, np.arange(n)]
    delta = np.array(
        [
            max(float(np.mean(d_own[assign == a] ** z)) ** (1 / z), 1e-12) if np.any(assign == a) else 1.0
            for a in range(len(centers))
        ]
    )
    # 3. rings on the weak estimates; exact rings for sampled points
    j_lo, j_hi = -math.ceil(math.log2(1 / eps)), math.ceil(log_n)

    def ring(d: np.ndarray, a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            j = np.floor(np.log2(np.maximum(d, 1e-300) / delta[a]))
        return np.clip(j, j_lo - 1, j_hi).astype(np.int64) - (j_lo - 1)

    n_rings = j_hi - j_lo + 2
    n_groups = int(gcode.max()) + 1

    def cell(a: np.ndarray, r: np.ndarray, g: np.ndarray) -> np.ndarray:
        return (a * n_rings + r) * n_groups + g

    weak_cell = cell(assign, ring(d_own, assign), gcode)
    # 4. heavy-hitter rounds with peeling
    remaining = np.arange(n)
    idx_parts, w_parts = [], []
    rounds = 0
    for _ in range(math.ceil(log_n) + 1):
        if remaining.size <= s_size:
            break
        rounds += 1
        sample = rng.choice(remaining, size=s_size, replace=False)
        exact = np.array([oracle.strong(int(centers[assign[x]]), [int(x)])[0] for x in sample])
        sample_cell = cell(assign[sample], ring(exact, assign[sample]), gcode[sample])
        cells, counts = np.unique(sample_cell, return_counts=True)
        heavy = cells[counts >= h]
        # weights: each peeled stratum (points of R whose weak cell is heavy) is represented by
        # the samples drawn from it, weight |stratum| / #samples (exact per-cell counts)
        sample_weak = weak_cell[sample]
        keep = np.isin(sample_weak, heavy)
        strata, n_in_sample = np.unique(sample_weak[keep], return_counts=True)
        in_r = weak_cell[remaining]
        size = np.array([np.count_nonzero(in_r == c) for c in strata])
        lookup = dict(zip(strata.tolist(), (size / n_in_sample).tolist(), strict=True))
        idx_parts.append(sample[keep])
        w_parts.append(np.array([lookup[c] for c in sample_weak[keep].tolist()]))
        remaining = remaining[~np.isin(in_r, strata)]
    if remaining.size <= s_size:
        oracle.reveal(remaining)
        idx_parts.append(remaining)
        w_parts.append(np.ones(remaining.size))
    else:  # round limit hit: a last uniform sample stands for the rest
        sample = rng.choice(remaining, size=s_size, replace=False)
        oracle.reveal(sample)
        idx_parts.append(sample)
        w_parts.append(np.full(s_size, remaining.size / s_size))
    indices = np.concatenate(idx_parts).astype(np.int64)
    weights = np.concatenate(w_parts)
    # merge repeated indices (a point can be sampled in two rounds only if not peeled)
    kept, inv = np.unique(indices, return_inverse=True)
    merged = np.bincount(inv, weights=weights)
    return Coreset(
        indices=kept,
        weights=merged,
        groups=None if glabels is None else glabels[gcode[kept]],
        n_strong=oracle.n_strong - start[0],
        n_point=oracle.n_point - start[1],
        n_weak=oracle.n_weak - start[2],
        rough_centers=np.asarray(centers, dtype=np.int64),
        n_rounds=rounds,
    )
