"""The DPBoxplot mechanism of one box, on what it reads from the data (core of :mod:`.boxplot`).

Steps 1-6 (:func:`box_quantiles`: sample size, extremes, quartiles, whiskers) read
only a :class:`BoxSummary` (the sorted clipped values in process, or merged bucket
and grid counts from :mod:`trustlab.compute.quantiles`); step 7 (:func:`box_finish`)
adds the noise to the exact counts beyond the released whiskers. The public entry
points are :func:`trustlab.privacy.dp_boxplot_stats` and
:func:`trustlab.privacy.grouped_dp_boxplot`.

References
----------
Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025
(PMLR 267:51117-51139).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trustlab.errors import DataError
from trustlab.privacy._boxplot_results import BoxplotStats
from trustlab.privacy._boxplot_rules import (
    DEFAULT_N_WEIGHT,
    clamp_counts,
    count_scale,
    far,
    order,
)
from trustlab.privacy._durfee import scan
from trustlab.privacy._grid import DEFAULT_RESOLUTION
from trustlab.privacy._inputs import NEIGHBOURING
from trustlab.privacy._jointexp import jointexp_values
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace

MAX_BUCKETS = 10**6
"""Cap on the buckets of the boxplot's extreme scans (a public constant)."""


def beyond(arr: np.ndarray, whiskers: tuple[float, float]) -> tuple[int, int]:
    """Exact counts of the raw values below the lower and above the upper whisker."""
    return int(np.count_nonzero(arr < whiskers[0])), int(np.count_nonzero(arr > whiskers[1]))


def record(stats: BoxplotStats, accountant: Accountant) -> BoxplotStats:
    """``stats`` with its releases recorded in ``accountant`` (after every draw)."""
    return replace(stats, releases=tuple(accountant.record(r) for r in stats.releases))


@dataclass(frozen=True)
class BoxOptions:
    """The public tuning options of one boxplot (see :func:`dp_boxplot_stats`)."""

    quantile_weight: float = 7 / 8
    c: float = 20.0
    lam: float = 0.25
    base: float = 1.001
    n_min: int = 1000
    method: str = "dpboxplot"
    neighbouring: str = "add_remove"
    n_weight: float = DEFAULT_N_WEIGHT
    gap_rule: str = "fence"
    resolution: int = DEFAULT_RESOLUTION


@dataclass(frozen=True)
class BoxSummary:
    """All a DP boxplot reads from the data before its outlier counts.

    ``size`` is the number of present values and ``length`` that of the records
    (absent ones included: public under replace-one). ``upper`` and ``lower`` are
    what the extreme scans read (the sorted clipped values, or their counts by
    bucket: :class:`trustlab.compute.quantiles.BucketCounts`) and ``grid`` what
    JointExp reads (the sorted clipped values, or their grid counts:
    :class:`~trustlab.privacy._grid.GridCounts`).
    """

    size: int
    length: int
    upper: Any
    lower: Any
    grid: Any


@dataclass
class PendingBox:
    """A boxplot whose quantiles are released and whose outlier counts are still to draw."""

    epsilon: float
    method: str
    n_pub: float
    params: dict[str, Any]
    releases: list[Release]
    notes: list[str]
    five: tuple[float, float, float, float, float]
    whiskers: tuple[float, float]
    counted: tuple[bool, bool]
    eps_o: float
    scale: float
    bounds: tuple[float, float]
    description: str


def box_quantiles(
    data: BoxSummary,
    epsilon: float,
    bounds: tuple[float, float],
    n_given: float | None,
    opts: BoxOptions,
    description: str,
) -> PendingBox:
    """Steps 1-6 of DPBoxplot on what it reads from the data: ``n``, extremes, quartiles, whiskers.

    Every branch below depends on public inputs or on earlier releases only. The
    caller then counts the raw values beyond ``whiskers`` (in process, or in a second
    pass over a partitioned table) and hands them to :func:`box_finish`.
    """
    lower, upper = bounds
    neighbouring, method = opts.neighbouring, opts.method
    w, c, lam, base = float(opts.quantile_weight), float(opts.c), float(opts.lam), float(opts.base)
    n_min, resolution, n_weight = int(opts.n_min), int(opts.resolution), float(opts.n_weight)
    gap_rule = opts.gap_rule
    if neighbouring == "replace" and n_given is None and data.length == 0:
        raise DataError(
            "x is empty. Under neighbouring='replace' the sample size len(x) is public and must "
            "be at least 1; under 'add_remove' (or with a public n) an empty sample is allowed.",
            argument="x",
        )

    params = {"bounds": (lower, upper), "neighbouring": NEIGHBOURING[neighbouring]}
    releases: list[Release] = []
    notes = ["values outside the public bounds are clipped to them for the quantiles (always applied)"]
    eps = epsilon
    if n_given is not None:
        n_pub = n_given
        notes.append(f"n = {n_pub:g} given as public (or previously released)")
    elif neighbouring == "replace":
        n_pub = float(data.length)
        notes.append("n = len(x), public under replace-one neighbours")
    else:
        eps_n = n_weight * epsilon
        eps = epsilon - eps_n
        n_pub = float(max(1, int(add_discrete_laplace(data.size, 1.0 / eps_n))))
        releases.append(
            Release(
                int(n_pub),
                eps_n,
                0.0,
                "discrete Laplace",
                {**params, "sensitivity": 1, "scale": 1.0 / eps_n, "post-processing": "max(1, .)"},
                f"{description}: sample size",
            )
        )
        notes.append(f"n = {n_pub:g} released (discrete Laplace count, epsilon {eps_n:.4g})")

    eps_q = w * eps
    eps_o = (1 - w) * eps
    q_n = min(1.0 / (c * math.sqrt(n_pub)), 0.2)
    levels5 = np.array([q_n, 0.25, 0.5, 0.75, 1 - q_n])
    notes.append(f"budget: {eps_q:.4g} to quantiles, {eps_o:.4g} to the outlier counts (charged in full)")

    def extreme(level: float, e: float, upper_side: bool) -> float:
        # the scans draw their integer noise with this module's sampler (add_noise)
        value = scan(
            data.upper if upper_side else data.lower,
            level,
            e,
            lower if upper_side else -upper,
            base,
            neighbouring,
            n_pub,
            MAX_BUCKETS,
            mirrored=not upper_side,
            add_noise=add_discrete_laplace,
            anchor_name="bounds",
        )
        return value if upper_side else -value

    def joint(levels: np.ndarray, e: float) -> np.ndarray:
        return jointexp_values(data.grid, (lower, upper), levels, e, neighbouring, resolution=resolution)

    scan_params = {
        **params,
        "base": base,
        "grid": "bucket edges L + base**k - 1 (upper) / U - base**k + 1 (lower)",
    }
    if method == "dpboxplot" and n_pub >= n_min:
        qmax = extreme(1 - q_n, eps_q / 5, True)
        qmin = extreme(1 - q_n, eps_q / 5, False)
        q1, med, q3 = joint(levels5[1:4], 3 * eps_q / 5)
        releases += [
            Release(
                qmin,
                eps_q / 5,
                0.0,
                "unbounded quantile (Durfee)",
                scan_params,
                f"{description}: lower extreme ({q_n:.6g})",
            ),
            Release(
                qmax,
                eps_q / 5,
                0.0,
                "unbounded quantile (Durfee)",
                scan_params,
                f"{description}: upper extreme ({1 - q_n:.6g})",
            ),
            Release(
                (q1, med, q3),
                3 * eps_q / 5,
                0.0,
                "JointExp",
                {**params, "resolution": resolution},
                f"{description}: quartiles",
            ),
        ]
    else:  # five quantiles from one routine: a single release of eps_q
        if method in ("dpboxplot", "jointexp"):
            vals = list(joint(levels5, eps_q))
            mechanism = "JointExp"
        elif method == "expmech":
            vals = [joint(levels5[j : j + 1], eps_q / 5)[0] for j in range(5)]
            mechanism = "exponential mechanism per level"
        else:  # unbounded per level
            vals = [extreme(levels5[j], eps_q / 5, True) for j in range(5)]
            mechanism = "unbounded quantile per level"
        qmin, q1, med, q3, qmax = np.sort(vals)
        releases.append(Release(tuple(vals), eps_q, 0.0, mechanism, params, f"{description}: five quantiles"))

    # Step 5: order and clip (post-processing).
    qmin, q1, med, q3, qmax, crossed = order(
        float(qmin), float(q1), float(med), float(q3), float(qmax), lower, upper
    )
    if crossed:
        notes.append("estimated extremes crossed; set to the public bounds (the fences decide)")

    # Step 6: whiskers and noisy counts beyond them (of the raw values).
    iqr = q3 - q1
    f_lo, f_hi = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    tau = n_pub ** (-0.5 + lam)
    scale = count_scale(neighbouring, eps_o)
    if qmin > f_lo and far(qmin, f_lo, iqr, tau, gap_rule):
        whisker_lo, count_lo = min(qmin, q1), False
    else:
        whisker_lo = max(f_lo, lower)
        count_lo = True
    if qmax < f_hi and far(qmax, f_hi, iqr, tau, gap_rule):
        whisker_hi, count_hi = max(qmax, q3), False
    else:
        whisker_hi = min(f_hi, upper)
        count_hi = True
    return PendingBox(
        epsilon=epsilon,
        method=method,
        n_pub=n_pub,
        params=params,
        releases=releases,
        notes=notes,
        five=(qmin, q1, med, q3, qmax),
        whiskers=(float(whisker_lo), float(whisker_hi)),
        counted=(count_lo, count_hi),
        eps_o=eps_o,
        scale=scale,
        bounds=(lower, upper),
        description=description,
    )


def box_finish(p: PendingBox, count_lo: int, count_hi: int) -> BoxplotStats:
    """Step 7 of DPBoxplot: the noisy outlier counts (exact counts of the raw values beyond the whiskers)."""
    lower, upper = p.bounds
    qmin, q1, med, q3, qmax = p.five
    whisker_lo, whisker_hi = p.whiskers
    n_pub, scale = p.n_pub, p.scale
    releases = list(p.releases)
    noisy = [
        int(add_discrete_laplace(int(count), scale)) if counted else 0
        for count, counted in zip((count_lo, count_hi), p.counted, strict=True)
    ]
    share_lo, share_hi = (k / n_pub for k in clamp_counts(noisy[0], noisy[1], n_pub))
    releases.append(
        Release(
            (share_lo, share_hi),
            p.eps_o,
            0.0,
            "discrete Laplace",
            {
                **p.params,
                "sensitivity": 2 if p.params["neighbouring"] == NEIGHBOURING["replace"] else 1,
                "scale": scale,
                "grid": f"multiples of 1/n, n = {n_pub:g}",
                "post-processing": "counts clamped to [0, n] with sum <= n, divided by n",
            },
            f"{p.description}: shares beyond the whiskers",
        )
    )
    whisker_lo = min(max(whisker_lo, lower), q1)
    whisker_hi = max(min(whisker_hi, upper), q3)
    return BoxplotStats(
        whisker_lo=float(whisker_lo),
        q1=q1,
        median=med,
        q3=q3,
        whisker_hi=float(whisker_hi),
        share_lo=float(share_lo),
        share_hi=float(share_hi),
        n=n_pub,
        qmin=qmin,
        qmax=qmax,
        epsilon=p.epsilon,
        method=p.method,
        releases=tuple(releases),
        notes=tuple(p.notes),
    )
