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
import numbers
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import (
    check_bounds,
    check_choice,
    check_epsilon,
    check_fraction,
    check_positive,
    check_positive_int,
)
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.quantiles import (
    DEFAULT_RESOLUTION,
    MAX_RESOLUTION,
    NEIGHBOURING,
    _check_base,
    _jointexp_values,
    _unbounded_sorted,
    check_neighbouring,
)
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace

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

METHODS = ("dpboxplot", "jointexp", "expmech", "unbounded")

DEFAULT_N_WEIGHT = 1 / 8
"""Share of ``epsilon`` that :func:`dp_boxplot_stats` spends on a discrete-Laplace count
of the sample when ``neighbouring="add_remove"`` and no public ``n`` is given."""

DEFAULT_COUNT_WEIGHT = 1 / 8
"""Share of ``epsilon`` that :func:`grouped_dp_boxplot` spends on the group sizes when
no public ``counts`` are given."""

OTHER_LABEL = "(missing or other)"
"""The public group of :func:`grouped_dp_boxplot` that collects missing labels and labels
outside the declared categories."""

_MAX_PUBLIC_N = 2**53
_UNSET: Any = object()
_NO_SEED = (
    "random_state is not accepted: DP boxplots are never seeded. Every random choice (the "
    "quantile selection, the extreme scan, the noisy counts) comes from the secure samplers, "
    "because a seeded draw would be part of the mechanism and could give the data back. Drop "
    "the random_state argument."
)
# Readability threshold of grouped_dp_boxplot: JointExp's rank error per quartile is about
# 2 * 1.5 / (0.525 * eps) ~ 5.7 / eps ranks; a group needs n / 8 (half the gap between two
# quartiles) above that for its box to mean something, i.e. n >= ~46 / eps.
_MIN_GROUP_RANKS = 50.0


@dataclass(frozen=True)
class BoxplotStats:
    """The numbers a (DP) boxplot draws, with the privacy they cost.

    Attributes
    ----------
    whisker_lo, q1, median, q3, whisker_hi : float
        The five drawn numbers, ordered and inside the public bounds.
    share_lo, share_hi : float
        Share of points below the lower / above the upper whisker: a noisy integer
        count divided by ``n`` (a multiple of ``1 / n`` in ``[0, 1]``), or 0 when the
        whisker sits at the estimated extreme and no share is released.
    n : float
        The sample size the boxplot used: public (given, or ``len(x)`` under
        ``"replace"``) or a DP release (see the notes); never the exact size of a
        sample whose size is private.
    qmin, qmax : float
        The estimated extremes (levels ``q_n`` and ``1 - q_n``), post-processed.
    epsilon : float
        Epsilon charged for the whole boxplot.
    method : str
        Which construction produced it.
    releases : tuple of Release
        The underlying releases, for the ledger; their epsilons sum to ``epsilon``.
    notes : tuple of str
        Plain-language caveats (clipping, budget split, where ``n`` came from).
    """

    whisker_lo: float
    q1: float
    median: float
    q3: float
    whisker_hi: float
    share_lo: float
    share_hi: float
    n: float
    qmin: float
    qmax: float
    epsilon: float
    method: str
    releases: tuple[Release, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def count_lo(self) -> int:
        """Displayed number of points below the lower whisker: ``round(n * share_lo)``."""
        return max(0, round(self.n * self.share_lo))

    @property
    def count_hi(self) -> int:
        """Displayed number of points above the upper whisker: ``round(n * share_hi)``."""
        return max(0, round(self.n * self.share_hi))

    @property
    def five(self) -> np.ndarray:
        """``[whisker_lo, q1, median, q3, whisker_hi]`` as an array."""
        return np.array([self.whisker_lo, self.q1, self.median, self.q3, self.whisker_hi])

    def to_dict(self) -> dict[str, Any]:
        """Plain-type summary (no releases)."""
        return {
            "whisker_lo": float(self.whisker_lo),
            "q1": float(self.q1),
            "median": float(self.median),
            "q3": float(self.q3),
            "whisker_hi": float(self.whisker_hi),
            "share_lo": float(self.share_lo),
            "share_hi": float(self.share_hi),
            "count_lo": self.count_lo,
            "count_hi": self.count_hi,
            "n": float(self.n),
            "epsilon": float(self.epsilon),
            "method": self.method,
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------------------
# Input checks


def _reject_seed(random_state: Any) -> None:
    if random_state is not _UNSET:
        raise ParameterError(_NO_SEED, argument="random_state")


def _check_values(x: Any, name: str = "x") -> tuple[np.ndarray, int]:
    """The present values of ``x`` (NaN = an absent record; +-inf kept, later clipped) and ``len(x)``.

    Only public facts raise (the type and shape of ``x``); what the values are never does.
    """
    if isinstance(x, str | bytes) or x is None or isinstance(x, Mapping):
        raise DataError(f"{name} must be a 1-d array of numbers, got {type(x).__name__}.", argument=name)
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise DataError(
            f"{name} must be a 1-d array of numbers; convert or drop non-numeric values first.",
            argument=name,
        ) from None
    if arr.ndim != 1:
        raise DataError(
            f"{name} must be 1-dimensional, got shape {arr.shape}; pass one column (e.g. df[col]).",
            argument=name,
        )
    missing = np.isnan(arr)
    return (arr[~missing] if missing.any() else arr), int(arr.size)


def _check_n(n: Any) -> float | None:
    if n is None:
        return None
    if (
        isinstance(n, bool)
        or not isinstance(n, numbers.Real)
        or not (math.isfinite(float(n)) and 1 <= float(n) <= _MAX_PUBLIC_N)
    ):
        raise ParameterError(
            f"n must be a public or previously released sample size between 1 and 2**53, got {n!r}.",
            argument="n",
        )
    return float(n)


def _check_resolution(resolution: Any) -> int:
    if (
        isinstance(resolution, bool)
        or not isinstance(resolution, numbers.Integral)
        or not 1 <= int(resolution) <= MAX_RESOLUTION
    ):
        raise ParameterError(
            "resolution must be an integer between 1 and 2**40 (grid steps across the public "
            f"bounds for the quartiles), got {resolution!r}; the default is 2**20.",
            argument="resolution",
        )
    return int(resolution)


_OPTIONS = ("quantile_weight", "c", "lam", "base", "n_min", "method", "gap_rule", "resolution")


def _check_options(**opts: Any) -> dict[str, Any]:
    """Check the mechanism's tuning options (shared by the single and grouped boxplots)."""
    for key in opts:
        if key not in _OPTIONS:
            raise ParameterError(
                f"unexpected argument {key!r}; the boxplot's options are {', '.join(_OPTIONS)}.",
                argument=key,
            )
    out = dict(opts)
    if "quantile_weight" in opts:
        out["quantile_weight"] = check_fraction(opts["quantile_weight"], "quantile_weight")
    if "c" in opts:
        out["c"] = check_positive(opts["c"], "c")
    if "lam" in opts:
        lam = opts["lam"]
        if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not (0 <= float(lam) <= 0.5):
            raise ParameterError(f"lam must be a number in [0, 0.5], got {lam!r}.", argument="lam")
        out["lam"] = float(lam)
    if "base" in opts:
        out["base"] = _check_base(opts["base"])
    if "n_min" in opts:
        out["n_min"] = check_positive_int(opts["n_min"], "n_min")
    if "method" in opts:
        check_choice(opts["method"], "method", METHODS)
    if "gap_rule" in opts:
        check_choice(opts["gap_rule"], "gap_rule", ("fence", "iqr"))
    if "resolution" in opts:
        out["resolution"] = _check_resolution(opts["resolution"])
    return out


def _check_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ParameterError(f"{name} must be a string, got {value!r}.", argument=name)
    return value


# --------------------------------------------------------------------------------------
# The mechanism


def _nonprivate(x: np.ndarray, lower: float, upper: float) -> BoxplotStats:
    z = np.clip(x, lower, upper)
    q1, med, q3 = np.percentile(z, [25, 50, 75])
    iqr = q3 - q1
    lo = max(q1 - 1.5 * iqr, float(z.min()))
    hi = min(q3 + 1.5 * iqr, float(z.max()))
    n = x.size
    return BoxplotStats(
        whisker_lo=float(lo),
        q1=float(q1),
        median=float(med),
        q3=float(q3),
        whisker_hi=float(hi),
        share_lo=float(np.count_nonzero(x < lo) / n),
        share_hi=float(np.count_nonzero(x > hi) / n),
        n=float(n),
        qmin=float(z.min()),
        qmax=float(z.max()),
        epsilon=math.inf,
        method="non-private",
        notes=("not private: exact quartiles, fences clipped to the sample range",),
    )


def _far(extreme: float, fence: float, iqr: float, tau: float, gap_rule: str) -> bool:
    """Whether the extreme lies inside the fence by more than the relative gap ``tau``."""
    scale = abs(fence) if gap_rule == "fence" else abs(iqr)
    if scale == 0:
        return extreme != fence
    return abs(extreme - fence) / scale > tau


def _order(
    qmin: float, q1: float, med: float, q3: float, qmax: float, lower: float, upper: float
) -> tuple[float, float, float, float, float, bool]:
    """Post-process the five raw estimates into ``lower <= qmin <= q1 <= med <= q3 <= qmax <= upper``.

    As in the reference code, the extremes are clipped to the bounds and the
    quartiles (sorted) are clipped into ``[qmin, qmax]``: an extreme estimated inside
    the box pulls the quartile in. Crossed extremes (``qmax <= qmin``) carry no usable
    information and become the public bounds (the reference reruns JointExp with
    fresh budget instead). Returns the five numbers and whether the extremes crossed.
    """
    qmin, qmax = min(max(qmin, lower), upper), min(max(qmax, lower), upper)
    crossed = qmax <= qmin
    if crossed:
        qmin, qmax = lower, upper
    q1, med, q3 = (min(max(v, qmin), qmax) for v in sorted((q1, med, q3)))
    return qmin, q1, med, q3, qmax, crossed


def _clamp_counts(lo: int, hi: int, n: float) -> tuple[int, int]:
    """Post-process two noisy counts of disjoint sets into ``0 <= lo, hi`` with ``lo + hi <= floor(n)``."""
    cap = math.floor(n)
    lo, hi = min(max(lo, 0), cap), min(max(hi, 0), cap)
    if lo + hi > cap:
        lo = round(lo * cap / (lo + hi))
        hi = cap - lo
    return lo, hi


def _count_scale(neighbouring: str, eps_o: float) -> float:
    """Discrete-Laplace scale of each outlier count, for ``eps_o`` on the pair of counts.

    The two counts are of disjoint sets (below the lower whisker, above the upper
    one): adding or removing a record changes the pair by at most 1 in L1, replacing
    one by at most 2.
    """
    return (2.0 if neighbouring == "replace" else 1.0) / eps_o


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
    random_state: Any = _UNSET,
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
    >>> s.share_hi * 5000 == s.count_hi   # shares are noisy counts over the public n
    True
    """
    _reject_seed(random_state)
    epsilon = check_epsilon(epsilon, allow_inf=True)
    lower, upper = check_bounds(bounds)
    opts = _check_options(
        quantile_weight=quantile_weight,
        c=c,
        lam=lam,
        base=base,
        n_min=n_min,
        method=method,
        gap_rule=gap_rule,
        resolution=resolution,
    )
    w, c, lam, base, n_min, resolution = (
        opts["quantile_weight"],
        opts["c"],
        opts["lam"],
        opts["base"],
        opts["n_min"],
        opts["resolution"],
    )
    neighbouring = check_neighbouring(neighbouring)
    n_given = _check_n(n)
    n_weight = check_fraction(n_weight, "n_weight")
    description = _check_str(description, "description")
    arr, length = _check_values(x)
    if math.isinf(epsilon):
        if arr.size == 0:
            raise DataError("x has no values (empty or all NaN): nothing to draw.", argument="x")
        return _nonprivate(arr, lower, upper)
    if neighbouring == "replace" and n_given is None and length == 0:
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
        n_pub = float(length)
        notes.append("n = len(x), public under replace-one neighbours")
    else:
        eps_n = n_weight * epsilon
        eps = epsilon - eps_n
        n_pub = float(max(1, int(add_discrete_laplace(arr.size, 1.0 / eps_n))))
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
    z = np.clip(arr, lower, upper)
    z.sort()

    eps_q = w * eps
    eps_o = (1 - w) * eps
    q_n = min(1.0 / (c * math.sqrt(n_pub)), 0.2)
    levels5 = np.array([q_n, 0.25, 0.5, 0.75, 1 - q_n])
    notes.append(f"budget: {eps_q:.4g} to quantiles, {eps_o:.4g} to the outlier counts (charged in full)")

    def extreme(level: float, e: float, upper_side: bool) -> float:
        if upper_side:
            return _unbounded_sorted(
                z, level, e, lower, base, neighbouring, n_pub, 10**6, mirrored=False, anchor_name="bounds"
            )
        return -_unbounded_sorted(
            z, level, e, -upper, base, neighbouring, n_pub, 10**6, mirrored=True, anchor_name="bounds"
        )

    def joint(levels: np.ndarray, e: float) -> np.ndarray:
        return _jointexp_values(z, (lower, upper), levels, e, neighbouring, resolution=resolution)

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
    qmin, q1, med, q3, qmax, crossed = _order(
        float(qmin), float(q1), float(med), float(q3), float(qmax), lower, upper
    )
    if crossed:
        notes.append("estimated extremes crossed; set to the public bounds (the fences decide)")

    # Step 6: whiskers and noisy counts beyond them (of the raw values).
    iqr = q3 - q1
    f_lo, f_hi = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    tau = n_pub ** (-0.5 + lam)
    scale = _count_scale(neighbouring, eps_o)
    if qmin > f_lo and _far(qmin, f_lo, iqr, tau, gap_rule):
        whisker_lo, count_lo = min(qmin, q1), None
    else:
        whisker_lo = max(f_lo, lower)
        count_lo = int(np.count_nonzero(arr < whisker_lo))
    if qmax < f_hi and _far(qmax, f_hi, iqr, tau, gap_rule):
        whisker_hi, count_hi = max(qmax, q3), None
    else:
        whisker_hi = min(f_hi, upper)
        count_hi = int(np.count_nonzero(arr > whisker_hi))
    noisy = [
        0 if count is None else int(add_discrete_laplace(count, scale)) for count in (count_lo, count_hi)
    ]
    share_lo, share_hi = (k / n_pub for k in _clamp_counts(noisy[0], noisy[1], n_pub))
    releases.append(
        Release(
            (share_lo, share_hi),
            eps_o,
            0.0,
            "discrete Laplace",
            {
                **params,
                "sensitivity": 2 if neighbouring == "replace" else 1,
                "scale": scale,
                "grid": f"multiples of 1/n, n = {n_pub:g}",
                "post-processing": "counts clamped to [0, n] with sum <= n, divided by n",
            },
            f"{description}: shares beyond the whiskers",
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
        epsilon=epsilon,
        method=method,
        releases=tuple(releases),
        notes=tuple(notes),
    )


# --------------------------------------------------------------------------------------
# Grouped boxplots


@dataclass(frozen=True, eq=False)
class GroupedBoxplots(Mapping[Any, BoxplotStats]):
    """DP boxplots of one column by a public grouping: a mapping label -> :class:`BoxplotStats`.

    The mapping holds the groups that were drawn; every public group is listed in
    ``categories`` with its public or released size in ``sizes``, and those too small
    to draw are in ``too_small``. Nothing here is an exact private count.

    Attributes
    ----------
    boxes : mapping
        Label to :class:`BoxplotStats`, for the groups drawn, in category order.
    categories : tuple
        Every public group, in order (``other_label`` last when used).
    sizes : mapping
        Label to group size: the released discrete-Laplace count (``sizes_public``
        False) or the public count the caller passed (True).
    sizes_public : bool
        Whether ``sizes`` were given as public rather than released here.
    too_small : tuple
        Groups whose (public or released) size is below ``min_group_size``: no box.
    min_group_size : int
        The threshold used.
    epsilon : float
        Epsilon of the whole figure under ``neighbouring``.
    neighbouring : str
        The relation the guarantee is stated for.
    releases : tuple of Release
        The group sizes (when released) and the boxes (parallel composition);
        their epsilons sum to ``epsilon``.
    notes : tuple of str
        Plain-language caveats.
    """

    boxes: Mapping[Any, BoxplotStats]
    categories: tuple[Any, ...]
    sizes: Mapping[Any, float]
    sizes_public: bool
    too_small: tuple[Any, ...]
    min_group_size: int
    epsilon: float
    neighbouring: str
    releases: tuple[Release, ...] = ()
    notes: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> BoxplotStats:
        return self.boxes[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.boxes)

    def __len__(self) -> int:
        return len(self.boxes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-type summary: every group's size, and the boxes drawn."""
        return {
            "categories": [str(c) for c in self.categories],
            "sizes": {str(k): float(v) for k, v in self.sizes.items()},
            "sizes_public": self.sizes_public,
            "too_small": [str(c) for c in self.too_small],
            "min_group_size": self.min_group_size,
            "epsilon": float(self.epsilon),
            "neighbouring": self.neighbouring,
            "boxes": {str(k): v.to_dict() for k, v in self.boxes.items()},
            "notes": list(self.notes),
        }


_GROUPED_FORBIDDEN = {
    "n": "the size of each group comes from counts= or is released",
    "n_weight": "the group sizes are released once for all groups (count_weight=)",
}


def _check_categories(categories: Any, other_label: Any) -> list[Any]:
    if categories is None:
        raise ParameterError(
            "categories is required: pass the public list of groups (e.g. from the data's "
            "schema). Reading the groups off the data would reveal which ones occur.",
            argument="categories",
        )
    if isinstance(categories, str | bytes) or not hasattr(categories, "__iter__"):
        raise ParameterError(
            f"categories must be a sequence of labels, got {categories!r}.", argument="categories"
        )
    cats = list(categories)
    if not cats:
        raise ParameterError("categories is empty; pass the public list of groups.", argument="categories")
    for cat in cats:
        if not isinstance(cat, Hashable) or cat is None or (isinstance(cat, float) and math.isnan(cat)):
            raise ParameterError(
                f"categories must be hashable, non-missing labels; got {cat!r}.", argument="categories"
            )
    if len(set(cats)) != len(cats):
        raise ParameterError("categories contains duplicates; list each group once.", argument="categories")
    if other_label is not None:
        if not isinstance(other_label, Hashable) or other_label in cats:
            raise ParameterError(
                f"other_label must be a hashable label that is not among the categories, got {other_label!r} "
                "(or None to leave such records out).",
                argument="other_label",
            )
    return cats


def _group_codes(labels: Any, cats: list[Any], size: int) -> np.ndarray:
    """Code ``0 .. len(cats) - 1`` of each record, ``len(cats)`` for missing or unknown labels."""
    if isinstance(labels, str | bytes) or labels is None or not hasattr(labels, "__len__"):
        raise DataError("groups must be a 1-d array of labels, one per value of x.", argument="groups")
    values = np.asarray(labels, dtype=object)
    if values.ndim != 1 or values.shape[0] != size:
        raise DataError(
            f"groups must have one label per value: got shape {values.shape} for {size} values.",
            argument="groups",
        )
    try:
        codes = np.asarray(pd.Index(cats, dtype=object).get_indexer(values), dtype=np.int64)
    except TypeError:
        raise DataError("groups contains unhashable labels (e.g. lists).", argument="groups") from None
    codes[codes < 0] = len(cats)
    return codes


def _check_counts(counts: Any, labels: list[Any]) -> list[float]:
    if not isinstance(counts, Mapping):
        raise ParameterError(
            "counts must be a mapping of each group to its public (or previously released) size.",
            argument="counts",
        )
    out = []
    for cat in labels:
        if cat not in counts:
            raise ParameterError(
                f"counts has no size for group {cat!r}; give one for every group (including the "
                "other_label group, or pass other_label=None).",
                argument="counts",
            )
        v = counts[cat]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (0 <= float(v) <= _MAX_PUBLIC_N):
            raise ParameterError(
                f"counts[{cat!r}] must be a number in [0, 2**53], got {v!r}.", argument="counts"
            )
        out.append(float(v))
    return out


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
    random_state: Any = _UNSET,
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
    _reject_seed(random_state)
    for key, why in _GROUPED_FORBIDDEN.items():
        if key in kwargs:
            raise ParameterError(f"{key} is not accepted by grouped_dp_boxplot: {why}.", argument=key)
    kwargs = _check_options(**kwargs)
    epsilon = check_epsilon(epsilon, allow_inf=True)
    lower, upper = check_bounds(bounds)
    neighbouring = check_neighbouring(neighbouring)
    count_weight = check_fraction(count_weight, "count_weight")
    description = _check_str(description, "description")
    cats = _check_categories(categories, other_label)
    labels = [*cats, other_label] if other_label is not None else list(cats)
    public = None if counts is None else _check_counts(counts, labels)
    if min_group_size is not None:
        min_group_size = check_positive_int(min_group_size, "min_group_size")
    _check_values(x)  # type and shape (public facts)
    full = np.asarray(x, dtype=float)
    present = ~np.isnan(full)  # a NaN value is an absent record, whatever its label
    codes = _group_codes(groups, cats, full.size)[present]
    arr = full[present]

    exact = np.bincount(codes, minlength=len(cats) + 1)[: len(labels)]
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
        min_group_size = 1 if math.isinf(eps_box) else max(10, math.ceil(_MIN_GROUP_RANKS / eps_box))
    if other_label is None:
        notes.append("records with a missing or undeclared group label are left out")
    else:
        notes.append(f"records with a missing or undeclared group label form the group {other_label!r}")

    boxes: dict[Any, BoxplotStats] = {}
    too_small: list[Any] = []
    for i, cat in enumerate(labels):
        if sizes[i] < min_group_size:
            too_small.append(cat)
            continue
        values = arr[codes == i]
        if math.isinf(eps_box):
            boxes[cat] = dp_boxplot_stats(values, math.inf, (lower, upper), **kwargs)
        else:
            boxes[cat] = dp_boxplot_stats(
                values,
                eps_box,
                (lower, upper),
                neighbouring="add_remove",
                n=sizes[i],
                description=f"{description} [{cat}]",
                **kwargs,
            )
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


def boxplot_distance(a: BoxplotStats, b: BoxplotStats) -> dict[str, float]:
    """Distances between two boxplots: location, scale, skewness and tails.

    ``location = |median_a - median_b|``, ``scale = |IQR_a - IQR_b|``,
    ``skewness`` is the L1 distance of the two whisker-to-box lengths and
    ``tails`` the L1 distance of the two outlier shares (the paper's metrics).

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.
    """
    for name, s in (("a", a), ("b", b)):
        if not isinstance(s, BoxplotStats):
            raise ParameterError(f"{name} must be a BoxplotStats, got {type(s).__name__}.", argument=name)
    return {
        "location": abs(a.median - b.median),
        "scale": abs((a.q3 - a.q1) - (b.q3 - b.q1)),
        "skewness": abs((a.q1 - a.whisker_lo) - (b.q1 - b.whisker_lo))
        + abs((a.whisker_hi - a.q3) - (b.whisker_hi - b.q3)),
        "tails": abs(a.share_lo - b.share_lo) + abs(a.share_hi - b.share_hi),
    }
