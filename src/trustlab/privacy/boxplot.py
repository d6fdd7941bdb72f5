"""Differentially private boxplots (DPBoxplot) and the naive five-quantile baselines.

A boxplot under pure ``epsilon``-DP: quartiles by JointExp, extremes by the
unbounded quantile method, whiskers by the 1.5 IQR rule and noisy counts of the
points beyond each whisker, as Ramsay and Diaz-Rodriguez construct it. The mechanism of one box is
:mod:`._boxplot_core`, the grouped figure :mod:`._boxplot_grouped`; drawing
lives in :mod:`trustlab.privacy.boxplot_plot`.

Every float a boxplot releases lies on a public grid: the quartiles on the
quantile grid of :mod:`trustlab.privacy.quantiles` (``lower + k * step``), the
extremes on the unbounded method's bucket edges, the whiskers are arithmetic on
those, and the outlier shares are integer noisy counts divided by the public (or
released) sample size ``n``, i.e. multiples of ``1 / n``. Nothing is seeded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from trustlab._param_validation import validate_params
from trustlab._validation import check_bounds
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._boxplot_core import (
    MAX_BUCKETS as MAX_BUCKETS,  # re-exported: importable here before the split
)
from trustlab.privacy._boxplot_core import (
    BoxOptions,
    BoxSummary,
    beyond,
    box_finish,
    box_quantiles,
    record,
)
from trustlab.privacy._boxplot_grouped import FigurePlan, draw_boxes, grouped_boxplots
from trustlab.privacy._boxplot_results import BoxplotStats, GroupedBoxplots, boxplot_distance
from trustlab.privacy._boxplot_rules import (
    DEFAULT_COUNT_WEIGHT,
    DEFAULT_N_WEIGHT,
    GROUPED_PARAMETERS,
    METHODS,
    OTHER_LABEL,
    SINGLE_PARAMETERS,
    UNSET,
    check_categories,
    check_counts,
    check_n,
    check_options,
    check_values,
    group_codes,
    nonprivate,
    reject_seed,
)
from trustlab.privacy._grid import DEFAULT_RESOLUTION
from trustlab.privacy.release import Release

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
    stats = box_finish(pending, *beyond(arr, pending.whiskers))
    return stats if accountant is None else record(stats, accountant)


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
            lambda whiskers: {i: beyond(values[i], w) for i, w in whiskers.items()},
            BoxOptions(**kwargs),
            (lower, upper),
            description,
        )

    plan = FigurePlan(
        labels,
        public,
        epsilon,
        (lower, upper),
        neighbouring,
        count_weight,
        min_group_size,
        other_label,
        description,
    )
    res = grouped_boxplots(exact, plan, boxes)
    return (
        res
        if accountant is None
        else replace(res, releases=tuple(accountant.record(r) for r in res.releases))
    )
