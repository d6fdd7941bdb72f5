"""Input checks and post-processing rules of the DP boxplots (private module).

Only public facts raise here (types, shapes, public parameters); the rules that
turn raw estimates into a drawn box (:func:`order`, :func:`clamp_counts`) are
post-processing of released values.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import EPSILON, Interval, Options, check_params
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._boxplot_results import BoxplotStats
from trustlab.privacy._grid import MAX_RESOLUTION
from trustlab.privacy._inputs import BASE, MAX_PUBLIC_N, NEIGHBOURING_OPTION
from trustlab.privacy.accounting import Accountant

__all__ = [
    "BOXPLOT_OPTIONS",
    "DEFAULT_COUNT_WEIGHT",
    "DEFAULT_N_WEIGHT",
    "EPSILON_OR_INF",
    "METHODS",
    "MIN_GROUP_RANKS",
    "OTHER_LABEL",
    "UNSET",
    "check_categories",
    "check_counts",
    "check_n",
    "check_options",
    "check_str",
    "check_values",
    "clamp_counts",
    "count_scale",
    "far",
    "group_codes",
    "nonprivate",
    "order",
    "reject_seed",
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

UNSET: Any = object()
"""Default of ``random_state``: lets a boxplot tell "not passed" from ``None``."""
_NO_SEED = (
    "random_state is not accepted: DP boxplots are never seeded. Every random choice (the "
    "quantile selection, the extreme scan, the noisy counts) comes from the secure samplers, "
    "because a seeded draw would be part of the mechanism and could give the data back. Drop "
    "the random_state argument."
)
# Readability threshold of grouped_dp_boxplot: JointExp's rank error per quartile is about
# 2 * 1.5 / (0.525 * eps) ~ 5.7 / eps ranks; a group needs n / 8 (half the gap between two
# quartiles) above that for its box to mean something, i.e. n >= ~46 / eps.
MIN_GROUP_RANKS = 50.0


def reject_seed(random_state: Any) -> None:
    if random_state is not UNSET:
        raise ParameterError(_NO_SEED, argument="random_state")


def check_values(x: Any, name: str = "x") -> tuple[np.ndarray, int]:
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


def check_n(n: Any) -> float | None:
    if n is None:
        return None
    if (
        isinstance(n, bool)
        or not isinstance(n, numbers.Real)
        or not (math.isfinite(float(n)) and 1 <= float(n) <= MAX_PUBLIC_N)
    ):
        raise ParameterError(
            f"n must be a public or previously released sample size between 1 and 2**53, got {n!r}.",
            argument="n",
        )
    return float(n)


BOXPLOT_OPTIONS: dict[str, list[Any]] = {
    "quantile_weight": [Interval(numbers.Real, 0, 1, closed="neither")],
    "c": [Interval(numbers.Real, 0, None, closed="neither")],
    "lam": [Interval(numbers.Real, 0, 0.5, closed="both")],
    "base": [BASE],
    "n_min": [Interval(numbers.Integral, 1, None, closed="left")],
    "method": [Options(METHODS)],
    "gap_rule": [Options({"fence", "iqr"})],
    "resolution": [Interval(numbers.Integral, 1, MAX_RESOLUTION, closed="both")],
}
"""The tuning options of the boxplot mechanism (shared by the single and grouped boxplots)."""

EPSILON_OR_INF = [EPSILON, Options({math.inf})]
"""A boxplot's ``epsilon``: a privacy budget, or ``math.inf`` for the non-private boxplot."""


SINGLE_PARAMETERS: dict[str, list[Any]] = {
    "epsilon": EPSILON_OR_INF,
    **BOXPLOT_OPTIONS,
    "neighbouring": [NEIGHBOURING_OPTION],
    "n_weight": [Interval(numbers.Real, 0, 1, closed="neither")],
    "description": [str],
    "accountant": [None, Accountant],
}
"""The declared parameters of :func:`~trustlab.privacy.boxplot.dp_boxplot_stats`."""

GROUPED_PARAMETERS: dict[str, list[Any]] = {
    "epsilon": EPSILON_OR_INF,
    "neighbouring": [NEIGHBOURING_OPTION],
    "count_weight": [Interval(numbers.Real, 0, 1, closed="neither")],
    "min_group_size": [None, Interval(numbers.Integral, 1, None, closed="left")],
    "description": [str],
    "accountant": [None, Accountant],
}
"""The declared parameters of :func:`~trustlab.privacy.boxplot.grouped_dp_boxplot` (its
``**kwargs`` are checked against :data:`BOXPLOT_OPTIONS` by :func:`check_options`)."""


def check_options(**opts: Any) -> dict[str, Any]:
    """Check the tuning options passed on by :func:`grouped_dp_boxplot` (``**kwargs``)."""
    for key in opts:
        if key not in BOXPLOT_OPTIONS:
            raise ParameterError(
                f"unexpected argument {key!r}; the boxplot's options are {', '.join(BOXPLOT_OPTIONS)}.",
                argument=key,
            )
    check_params(opts, BOXPLOT_OPTIONS, "grouped_dp_boxplot")
    return dict(opts)


def check_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise ParameterError(f"{name} must be a string, got {value!r}.", argument=name)
    return value


def nonprivate(x: np.ndarray, lower: float, upper: float) -> BoxplotStats:
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


def far(extreme: float, fence: float, iqr: float, tau: float, gap_rule: str) -> bool:
    """Whether the extreme lies inside the fence by more than the relative gap ``tau``."""
    scale = abs(fence) if gap_rule == "fence" else abs(iqr)
    if scale == 0:
        return extreme != fence
    return abs(extreme - fence) / scale > tau


def order(
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


def clamp_counts(lo: int, hi: int, n: float) -> tuple[int, int]:
    """Post-process two noisy counts of disjoint sets into ``0 <= lo, hi`` with ``lo + hi <= floor(n)``."""
    cap = math.floor(n)
    lo, hi = min(max(lo, 0), cap), min(max(hi, 0), cap)
    if lo + hi > cap:
        lo = round(lo * cap / (lo + hi))
        hi = cap - lo
    return lo, hi


def count_scale(neighbouring: str, eps_o: float) -> float:
    """Discrete-Laplace scale of each outlier count, for ``eps_o`` on the pair of counts.

    The two counts are of disjoint sets (below the lower whisker, above the upper
    one): adding or removing a record changes the pair by at most 1 in L1, replacing
    one by at most 2.
    """
    return (2.0 if neighbouring == "replace" else 1.0) / eps_o


def check_categories(categories: Any, other_label: Any) -> list[Any]:
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


def group_codes(labels: Any, cats: list[Any], size: int) -> np.ndarray:
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


def check_counts(counts: Any, labels: list[Any]) -> list[float]:
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
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (0 <= float(v) <= MAX_PUBLIC_N):
            raise ParameterError(
                f"counts[{cat!r}] must be a number in [0, 2**53], got {v!r}.", argument="counts"
            )
        out.append(float(v))
    return out
