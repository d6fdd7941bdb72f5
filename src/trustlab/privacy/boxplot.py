"""Differentially private boxplots (DPBoxplot) and the naive five-quantile baselines.

A boxplot under pure ``epsilon``-DP: quartiles by JointExp, extremes by the
unbounded quantile method, whiskers by the 1.5 IQR rule and noisy counts of the
points beyond each whisker, as Ramsay and Diaz-Rodriguez construct it. Drawing
lives in :mod:`trustlab.privacy.boxplot_plot`.

Every float a boxplot releases lies on a public grid: the quartiles on the
quantile grid of :mod:`trustlab.privacy.quantiles` (``lower + k * step``), the
extremes on the unbounded method's bucket edges, the whiskers are arithmetic on
those, and the outlier shares are integer noisy counts divided by the public (or
released) sample size ``n``, i.e. multiples of ``1 / n``. Nothing is seeded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trustlab._param_validation import validate_params
from trustlab._validation import check_bounds
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._boxplot_results import BoxplotStats, GroupedBoxplots, boxplot_distance
from trustlab.privacy._boxplot_rules import (
    DEFAULT_COUNT_WEIGHT,
    DEFAULT_N_WEIGHT,
    GROUPED_PARAMETERS,
    METHODS,
    MIN_GROUP_RANKS,
    OTHER_LABEL,
    SINGLE_PARAMETERS,
    UNSET,
    check_categories,
    check_counts,
    check_n,
    check_options,
    check_values,
    clamp_counts,
    count_scale,
    far,
    group_codes,
    nonprivate,
    order,
    reject_seed,
)
from trustlab.privacy._durfee import unbounded_sorted
from trustlab.privacy._grid import DEFAULT_RESOLUTION
from trustlab.privacy._inputs import NEIGHBOURING
from trustlab.privacy._jointexp import jointexp_values
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace

MAX_BUCKETS = 10**6
"""Cap on the buckets of the boxplot's extreme scans (a public constant)."""

__all__ = [
    "DEFAULT_COUNT_WEIGHT",
    "DEFAULT_N_WEIGHT",
    "METHODS",
    "OTHER_LABEL",
    "BoxplotStats",
    "GroupedBoxplots",
    "boxplot_distance",
    "dp_boxplot_stats",
    "grouped_dp_boxplot",
]


@validate_params(SINGLE_PARAMETERS)
def dp_boxplot_stats(
    x: Any,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    quantile_weight: float = 7 / 8,
    c: float = 20.0,
    lam: float = 0.25,
    base: float = 1.001,
    n_min: int = 1000,
    method: str = "dpboxplot",
    neighbouring: str = "add_remove",
    n: float | None = None,
    n_weight: float = DEFAULT_N_WEIGHT,
    gap_rule: str = "fence",
    resolution: int = DEFAULT_RESOLUTION,
    description: str = "boxplot",
    random_state: Any = UNSET,
    accountant: Any = None,
) -> BoxplotStats:
    """Compute the five numbers and outlier shares of a boxplot under pure ``epsilon``-DP.

    Parameters
    ----------
    x : array-like of shape (n,)
        The sensitive sample. NaN counts as an absent record and ``+-inf`` is clipped
        to the bounds (the values never raise); it may be empty under
        ``"add_remove"`` or with a public ``n``.
    epsilon : float
        Total budget of the boxplot. ``math.inf`` gives the non-private boxplot.
    bounds : (float, float)
        Public bounds ``(L, U)``; values outside are clipped to them for the
        quantiles and extremes (always). The outlier counts use the raw values, as the
        reference code does, so points beyond a bound still count as beyond a whisker
        that sits at the bound.
    quantile_weight : float, default 7/8
        Share ``w`` of ``epsilon`` for quantiles; ``1 - w`` goes to the outlier counts.
    c : float, default 20
        Extreme level ``q_n = 1 / (c sqrt(n))``.
    lam : float, default 0.25
        Gap tolerance ``tau = n^(-1/2 + lam)`` in the whisker rule.
    base : float, default 1.001
        Bucket base of the unbounded quantile method.
    n_min : int, default 1000
        Below this (public or released) size, all five levels come from JointExp.
    method : {"dpboxplot", "jointexp", "expmech", "unbounded"}
        ``"dpboxplot"`` is the paper's construction. The others are the naive
        baselines that take all five levels (``q_n, .25, .5, .75, 1 - q_n``) from
        one routine: JointExp with ``w epsilon``; the exponential mechanism per level
        with ``w epsilon / 5`` each; the unbounded method per level with
        ``w epsilon / 5`` each. Steps 5-7 (ordering, whiskers, counts) are shared.
    neighbouring : {"add_remove", "replace"}, default "add_remove"
        The relation the guarantee is stated for. ``"add_remove"`` (add or remove one
        record; the paper's and the reference code's setting, and the unit of the
        audit's ledger) treats the sample size as private: pass a public ``n`` or let
        the boxplot release one (see ``n_weight``). ``"replace"`` (swap one record)
        treats ``len(x)`` as public.
    n : float, optional
        A public or previously released sample size (at most ``2**53``). Under
        ``"add_remove"`` without it, a discrete-Laplace count of ``x`` is released
        first with ``n_weight * epsilon``. Under ``"replace"`` it defaults to
        ``len(x)``.
    n_weight : float, default 1/8
        Share of ``epsilon`` for that count (used only under ``"add_remove"`` when
        ``n`` is not given); the rest is split as the paper does.
    gap_rule : {"fence", "iqr"}, default "fence"
        Denominator of the whisker gap test: ``|fence|`` as in the paper, or the
        IQR (shift-invariant).
    resolution : int, default 2**20
        Grid steps across the bounds for the JointExp quartiles (see
        :func:`~trustlab.privacy.dp_quantiles`).
    description : str, default "boxplot"
        Prefix of the releases' descriptions, for the ledger.
    random_state : not accepted
        Raises :class:`~trustlab.errors.ParameterError`: a DP boxplot is never seeded
        (all its randomness comes from the secure samplers).
    accountant : Accountant, optional
        Budget to charge: the whole ``epsilon`` is checked against it before any
        noise is drawn, and each release is recorded after (not with ``epsilon=inf``).

    Returns
    -------
    BoxplotStats

    Notes
    -----
    Budget (``eps`` after the optional count of ``n``): ``w eps / 5`` to each
    extreme, ``3 w eps / 5`` to the quartiles and ``(1 - w) eps`` to the pair of
    outlier counts, charged in full on every branch (whether a count is released is
    decided from earlier releases, so the budget is reserved whatever the decision).
    The two counts are of disjoint sets, so under ``"add_remove"`` each gets
    discrete Laplace noise of scale ``1 / ((1 - w) eps)`` (L1 sensitivity 1; the
    reference code charges each side ``(1 - w) eps / 2`` and so adds twice that
    noise); under ``"replace"`` the scale is ``2 / ((1 - w) eps)`` (sensitivity 2).
    Each share is the noisy count clamped to ``[0, n]`` (the pair rescaled to sum to at
    most ``n``) and divided by ``n``: a multiple of ``1 / n`` in ``[0, 1]``.

    An extreme estimated inside the box pulls the quartile in, as in the reference
    code; crossed extremes (``qmax <= qmin``) become the bounds and the fence rule
    decides (the reference reruns JointExp with fresh budget, spending up to 1.4
    times its budget). The extreme scan uses
    two-sided discrete Laplace noise (the reference: one-sided exponential noise).
    ``docs/privacy/dp-boxplot.md`` measures each divergence.

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025
    (PMLR 267:51117-51139).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal(5000)
    >>> s = dp_boxplot_stats(x, epsilon=1.0, bounds=(-50, 50), n=5000)
    >>> bool(s.whisker_lo <= s.q1 <= s.median <= s.q3 <= s.whisker_hi), s.epsilon
    (True, 1.0)
    >>> bool(np.isclose(s.share_hi * 5000, s.count_hi))   # shares: noisy counts / public n
    True
    """
    reject_seed(random_state)
    epsilon = float(epsilon)
    lower, upper = check_bounds(bounds)
    n_given = check_n(n)
    arr, length = check_values(x)
    if math.isinf(epsilon):
        if accountant is not None:
            raise ParameterError(
                "epsilon=inf draws the non-private boxplot, which no privacy budget can pay for; "
                "pass a finite epsilon or leave accountant out.",
                argument="accountant",
            )
        if arr.size == 0:
            raise DataError("x has no values (empty or all NaN): nothing to draw.", argument="x")
        return nonprivate(arr, lower, upper)
    if accountant is not None:  # the plan: pure epsilon, checked before any noise is drawn
        accountant.check(Release(None, epsilon, description=description))
    z = np.clip(arr, lower, upper)
    z.sort()
    pending = box_quantiles(
        BoxSummary(int(arr.size), length, z, z, z),
        epsilon,
        (lower, upper),
        n_given,
        BoxOptions(
            quantile_weight, c, lam, base, n_min, method, neighbouring, n_weight, gap_rule, resolution
        ),
        description,
    )
    stats = box_finish(pending, *_beyond(arr, pending.whiskers))
    return stats if accountant is None else record(stats, accountant)


def _beyond(arr: np.ndarray, whiskers: tuple[float, float]) -> tuple[int, int]:
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
        value = unbounded_sorted(
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

    scan = {**params, "base": base, "grid": "bucket edges L + base**k - 1 (upper) / U - base**k + 1 (lower)"}
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
                scan,
                f"{description}: lower extreme ({q_n:.6g})",
            ),
            Release(
                qmax,
                eps_q / 5,
                0.0,
                "unbounded quantile (Durfee)",
                scan,
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


_GROUPED_FORBIDDEN = {
    "n": "the size of each group comes from counts= or is released",
    "n_weight": "the group sizes are released once for all groups (count_weight=)",
}


@validate_params(GROUPED_PARAMETERS)
def grouped_dp_boxplot(
    x: Any,
    groups: Any,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    categories: Any = None,
    neighbouring: str = "add_remove",
    counts: Mapping[Any, float] | None = None,
    count_weight: float = DEFAULT_COUNT_WEIGHT,
    min_group_size: int | None = None,
    other_label: Any = OTHER_LABEL,
    description: str = "boxplot",
    random_state: Any = UNSET,
    accountant: Any = None,
    **kwargs: Any,
) -> GroupedBoxplots:
    """DP boxplots of ``x`` by a public grouping, the whole figure under pure ``epsilon``-DP.

    Group sizes are private (one record changes them), so they are either public
    inputs (``counts``) or released here with discrete Laplace noise; every group's
    boxplot uses its public or released size as ``n``. Which groups appear, their
    order and which are too small depend only on public inputs and released counts.

    Parameters
    ----------
    x : array-like of shape (n,)
        Values; NaN is an absent record, ``+-inf`` is clipped; may be empty.
    groups : array-like of shape (n,)
        Group label of each value. Labels that are missing (None, NaN) or not among
        ``categories`` go to the public group ``other_label`` (or are left out when
        ``other_label`` is None); they never raise.
    epsilon : float
        Budget of the whole figure under ``neighbouring`` (``math.inf``: not private).
    bounds : (float, float)
        Public bounds of the values.
    categories : sequence
        The public list of groups (required: reading them off the data would reveal
        which groups occur).
    neighbouring : {"add_remove", "replace"}, default "add_remove"
        Under ``"add_remove"`` a record touches one group: the sizes cost
        ``count_weight * epsilon`` (sensitivity 1) and every box the rest (parallel
        composition). Under ``"replace"`` a record may move between two groups: the
        sizes have L1 sensitivity 2 and every box gets half of the rest. Each box is
        computed under add/remove with its group's size as the public ``n``.
    counts : mapping, optional
        Public (or previously released) size of every group, published as given.
        Without it the sizes are released here; never pass exact private sizes.
    count_weight : float, default 1/8
        Share of ``epsilon`` for releasing the group sizes (when ``counts`` is None).
    min_group_size : int, optional
        Groups whose public or released size is below this get no box and are listed
        in ``too_small`` (a readability rule, not a privacy one). Default
        ``max(10, ceil(50 / eps_box))`` with ``eps_box`` each box's budget: JointExp's
        rank error per quartile is about ``5.7 / eps_box``, which must stay below an
        eighth of the group for the box to mean something.
    other_label : hashable or None, default "(missing or other)"
        The public group collecting missing and undeclared labels; None leaves those
        records out (a per-record filter).
    description : str, default "boxplot"
        Prefix of the releases' descriptions.
    random_state : not accepted
        Raises :class:`~trustlab.errors.ParameterError`: never seeded.
    accountant : Accountant, optional
        Budget to charge: the whole ``epsilon`` is checked against it before any
        noise is drawn, and each release is recorded after (not with ``epsilon=inf``).
    **kwargs
        Passed to :func:`dp_boxplot_stats` (``quantile_weight``, ``c``, ``lam``,
        ``base``, ``n_min``, ``method``, ``gap_rule``, ``resolution``).

    Returns
    -------
    GroupedBoxplots
        A mapping of the drawn groups to their :class:`BoxplotStats`, with the
        sizes, the groups too small to draw, the releases and notes.

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(0, 1, 3000), rng.normal(4, 1, 3000), rng.normal(0, 1, 5)])
    >>> g = np.array(["a"] * 3000 + ["b"] * 3000 + ["c"] * 5)
    >>> res = grouped_dp_boxplot(x, g, 1.0, (-20, 20), categories=["a", "b", "c"])
    >>> list(res), res.too_small, res.categories[-1]
    (['a', 'b'], ('c', '(missing or other)'), '(missing or other)')
    >>> bool(res["b"].median > res["a"].median + 3), sum(r.epsilon for r in res.releases)
    (True, 1.0)
    """
    reject_seed(random_state)
    for key, why in _GROUPED_FORBIDDEN.items():
        if key in kwargs:
            raise ParameterError(f"{key} is not accepted by grouped_dp_boxplot: {why}.", argument=key)
    kwargs = check_options(**kwargs)
    epsilon, count_weight = float(epsilon), float(count_weight)
    lower, upper = check_bounds(bounds)
    cats = check_categories(categories, other_label)
    labels = [*cats, other_label] if other_label is not None else list(cats)
    public = None if counts is None else check_counts(counts, labels)
    if min_group_size is not None:
        min_group_size = int(min_group_size)
    check_values(x)  # type and shape (public facts)
    if accountant is not None:
        if math.isinf(epsilon):
            raise ParameterError(
                "epsilon=inf draws non-private boxplots, which no privacy budget can pay for; "
                "pass a finite epsilon or leave accountant out.",
                argument="accountant",
            )
        accountant.check(Release(None, epsilon, description=description))
    full = np.asarray(x, dtype=float)
    present = ~np.isnan(full)  # a NaN value is an absent record, whatever its label
    codes = group_codes(groups, cats, full.size)[present]
    arr = full[present]
    exact = np.bincount(codes, minlength=len(cats) + 1)[: len(labels)]

    def boxes(todo: list[tuple[int, Any, float, float]]) -> dict[Any, BoxplotStats]:
        values = {i: arr[codes == i] for i, *_ in todo}
        if math.isinf(epsilon):
            return {
                cat: dp_boxplot_stats(values[i], math.inf, (lower, upper), **kwargs) for i, cat, *_ in todo
            }
        sorted_ = {i: np.sort(np.clip(v, lower, upper)) for i, v in values.items()}
        return draw_boxes(
            todo,
            {i: BoxSummary(v.size, v.size, v, v, v) for i, v in sorted_.items()},
            lambda whiskers: {i: _beyond(values[i], w) for i, w in whiskers.items()},
            BoxOptions(**kwargs),
            (lower, upper),
            description,
        )

    res = grouped_boxplots(
        exact,
        labels,
        public,
        epsilon,
        (lower, upper),
        neighbouring,
        count_weight,
        min_group_size,
        other_label,
        description,
        boxes,
    )
    return (
        res
        if accountant is None
        else replace(res, releases=tuple(accountant.record(r) for r in res.releases))
    )


BoxesFn = Callable[[list[tuple[int, Any, float, float]]], dict[Any, BoxplotStats]]


def grouped_boxplots(
    exact: np.ndarray,
    labels: list[Any],
    public: list[float] | None,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: str,
    count_weight: float,
    min_group_size: int | None,
    other_label: Any,
    description: str,
    boxes_fn: BoxesFn,
) -> GroupedBoxplots:
    """The grouped figure from exact group sizes and a box drawer (core of :func:`grouped_dp_boxplot`).

    ``exact`` holds the exact number of present values of each group in ``labels``;
    ``boxes_fn`` draws the boxes ``[(group index, label, epsilon of the box, public or
    released size), ...]`` (in process from the rows; from merged counts with a
    second pass for the outlier counts in :mod:`trustlab.compute.quantiles`). The
    releases are returned unrecorded: the caller records them in its accountant.
    """
    steps = grouped_figure(
        exact,
        labels,
        public,
        epsilon,
        bounds,
        neighbouring,
        count_weight,
        min_group_size,
        other_label,
        description,
    )
    todo = next(steps)
    try:
        steps.send(boxes_fn(todo))
    except StopIteration as done:
        return done.value
    raise AssertionError("grouped_figure yields once")  # pragma: no cover


def grouped_figure(
    exact: np.ndarray,
    labels: list[Any],
    public: list[float] | None,
    epsilon: float,
    bounds: tuple[float, float],
    neighbouring: str,
    count_weight: float,
    min_group_size: int | None,
    other_label: Any,
    description: str,
) -> Generator[list[tuple[int, Any, float, float]], dict[Any, BoxplotStats], GroupedBoxplots]:
    """:func:`grouped_boxplots` as a generator: releases the sizes, yields the boxes to draw, takes them back.

    Several figures can so share one pass over the data for their outlier counts
    (:func:`trustlab.compute.quantiles.grouped_dp_boxplots_on`).
    """
    lower, upper = bounds
    releases: list[Release] = []
    notes: list[str] = []
    if math.isinf(epsilon):
        sizes = [float(v) for v in exact]
        eps_rest = eps_box = math.inf
        notes.append("not private: exact group sizes and boxplots")
    else:
        sens = 2 if neighbouring == "replace" else 1
        if public is None:
            eps_c = count_weight * epsilon
            noisy = add_discrete_laplace(exact.astype(np.int64), sens / eps_c)
            sizes = [float(max(0, int(v))) for v in noisy]
            releases.append(
                Release(
                    tuple(int(s) for s in sizes),
                    eps_c,
                    0.0,
                    "discrete Laplace",
                    {
                        "groups": tuple(str(c) for c in labels),
                        "sensitivity": sens,
                        "scale": sens / eps_c,
                        "neighbouring": NEIGHBOURING[neighbouring],
                        "post-processing": "max(0, .)",
                    },
                    f"{description}: group sizes",
                )
            )
            notes.append(f"group sizes: discrete Laplace counts (epsilon {eps_c:.4g}), not the exact sizes")
        else:
            sizes = public
            eps_c = 0.0
            notes.append("group sizes: given as public (counts=) and published as given")
        eps_rest = epsilon - eps_c
        eps_box = eps_rest if neighbouring == "add_remove" else eps_rest / 2
        if neighbouring == "replace":
            notes.append(
                "replace-one neighbours: a record moving between groups touches two boxes, so "
                f"each box gets half of {eps_rest:.4g}"
            )
    if min_group_size is None:
        min_group_size = 1 if math.isinf(eps_box) else max(10, math.ceil(MIN_GROUP_RANKS / eps_box))
    if other_label is None:
        notes.append("records with a missing or undeclared group label are left out")
    else:
        notes.append(f"records with a missing or undeclared group label form the group {other_label!r}")

    too_small: list[Any] = []
    todo: list[tuple[int, Any, float, float]] = []
    for i, cat in enumerate(labels):
        if sizes[i] < min_group_size:
            too_small.append(cat)
        else:
            todo.append((i, cat, eps_box, sizes[i]))
    boxes = yield todo
    if too_small:
        notes.append(
            f"{len(too_small)} group(s) below min_group_size={min_group_size} by their "
            f"{'public' if public is not None else 'released'} size: not drawn"
        )
    if not math.isinf(epsilon):
        releases.append(
            Release(
                {str(k): tuple(float(v) for v in s.five) for k, s in boxes.items()},
                eps_rest,
                0.0,
                "DPBoxplot per group (parallel composition)",
                {
                    "epsilon_per_box": eps_box,
                    "neighbouring": NEIGHBOURING[neighbouring],
                    "groups drawn": tuple(str(k) for k in boxes),
                    "bounds": (lower, upper),
                },
                f"{description}: one boxplot per group",
            )
        )
    return GroupedBoxplots(
        boxes=boxes,
        categories=tuple(labels),
        sizes=dict(zip(labels, sizes, strict=True)),
        sizes_public=public is not None or math.isinf(epsilon),
        too_small=tuple(too_small),
        min_group_size=min_group_size,
        epsilon=epsilon,
        neighbouring=neighbouring,
        releases=tuple(releases),
        notes=tuple(notes),
    )


def draw_boxes(
    todo: list[tuple[int, Any, float, float]],
    data: Mapping[int, BoxSummary],
    count_beyond: Callable[[dict[int, tuple[float, float]]], Any],
    opts: BoxOptions,
    bounds: tuple[float, float],
    description: str,
) -> dict[Any, BoxplotStats]:
    """The boxes of a grouped figure: their quantiles, one count beyond all whiskers, the noise.

    Each box ``(group index, label, epsilon, size)`` is a DPBoxplot under add/remove
    with its group's public or released size as ``n``. ``count_beyond`` maps
    ``{group index: (whisker_lo, whisker_hi)}`` to the exact counts below / above them
    (indexable by group index): in process from the rows, or one second pass over a
    partitioned table.
    """
    pending = pending_boxes(todo, data, opts, bounds, description)
    beyond = count_beyond({i: p.whiskers for i, (_, p) in pending.items()}) if pending else {}
    return finish_boxes(pending, beyond)


def pending_boxes(
    todo: list[tuple[int, Any, float, float]],
    data: Mapping[int, BoxSummary],
    opts: BoxOptions,
    bounds: tuple[float, float],
    description: str,
) -> dict[int, tuple[Any, PendingBox]]:
    """Steps 1-6 of every box of a grouped figure (add/remove, the group's size as ``n``)."""
    opts = replace(opts, neighbouring="add_remove")
    return {
        i: (cat, box_quantiles(data[i], eps_box, bounds, check_n(size), opts, f"{description} [{cat}]"))
        for i, cat, eps_box, size in todo
    }


def finish_boxes(pending: dict[int, tuple[Any, PendingBox]], beyond: Any) -> dict[Any, BoxplotStats]:
    """Step 7 of every pending box, with the exact counts ``beyond[group index] = (below, above)``."""
    return {cat: box_finish(p, int(beyond[i][0]), int(beyond[i][1])) for i, (cat, p) in pending.items()}
