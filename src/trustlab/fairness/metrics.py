"""Group fairness metrics computed from confusion counts, with bootstrap intervals.

The rates of a binary classifier by group (selection rate, true- and
false-positive rates, accuracy) depend on the data only through the counts of
(group, predicted label, true label). Working from those counts makes the same
code serve raw counts, differentially private (noisy) counts, and thousands of
bootstrap replicates at once (the arrays carry leading replicate axes).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError

__all__ = [
    "bootstrap_counts",
    "confusion_by_group",
    "fairness_differences",
    "rates_from_counts",
]

RATES = ("selection_rate", "true_positive_rate", "false_positive_rate", "accuracy")


def _binary(values: Any, name: str) -> np.ndarray:
    """``values`` as 0/1 integers; any other label raises (it would be counted in another cell)."""
    arr = check_numeric_array(values, name, ndim=1)
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        shown = sorted({float(v) for v in arr[bad][:1000]})[:5]
        raise DataError(
            f"{name} must hold 0 or 1 labels only; found {[int(v) if v.is_integer() else v for v in shown]}. "
            "Encode the positive outcome as 1 and the other as 0 first.",
            argument=name,
        )
    return arr.astype(np.int64)


def confusion_by_group(y_true: Any, y_pred: Any, *, sensitive_features: Any) -> tuple[list[Any], np.ndarray]:
    """Count (group, predicted, true) triples.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels, 0 or 1.
    sensitive_features : array-like of shape (n_samples,)
        The group of each row (no missing values).

    Returns
    -------
    groups : list
        The group labels, sorted.
    counts : numpy.ndarray of shape (n_groups, 2, 2)
        ``counts[g, p, t]`` is the number of rows of group ``g`` predicted ``p`` with label ``t``.

    Raises
    ------
    DataError
        A label other than 0 or 1 (naming ``y_true`` or ``y_pred``), lengths that differ,
        or a missing group.

    Examples
    --------
    >>> g, c = confusion_by_group([1, 0, 1], [1, 1, 0], sensitive_features=["a", "a", "b"])
    >>> g, c[0].tolist()
    (['a', 'b'], [[0, 0], [1, 1]])
    """
    y, p = (_binary(v, name) for v, name in ((y_true, "y_true"), (y_pred, "y_pred")))
    s = pd.Series(np.asarray(sensitive_features, dtype=object))
    if not (y.size == p.size == s.size):
        raise DataError(
            f"y_true, y_pred and sensitive_features must have the same length "
            f"({y.size}, {p.size}, {s.size}).",
            argument="sensitive_features",
        )
    if s.isna().any():
        raise DataError(
            "sensitive_features has missing values; give them an explicit level first.",
            argument="sensitive_features",
        )
    codes, groups = pd.factorize(s, sort=True)
    flat = np.bincount(codes * 4 + p * 2 + y, minlength=len(groups) * 4)
    return list(groups), flat.reshape(len(groups), 2, 2)


def rates_from_counts(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Selection rate, TPR, FPR, accuracy and size of each group from ``counts[..., g, p, t]``.

    Negative (noisy) counts are clamped to zero first; a rate with an empty
    denominator is NaN.

    Parameters
    ----------
    counts : array-like of shape (..., n_groups, 2, 2)
        ``counts[..., g, p, t]``: rows of group ``g`` predicted ``p`` with label ``t``
        (leading axes, e.g. bootstrap replicates, are carried through).

    Returns
    -------
    dict of str to numpy.ndarray of shape (..., n_groups)
        ``"count"``, ``"selection_rate"``, ``"true_positive_rate"``,
        ``"false_positive_rate"`` and ``"accuracy"``.

    Examples
    --------
    >>> c = np.array([[[3, 1], [0, 4]], [[2, 0], [2, 4]]])  # two groups
    >>> r = rates_from_counts(c)
    >>> r["selection_rate"].tolist(), r["true_positive_rate"].tolist()
    ([0.5, 0.75], [0.8, 1.0])
    """
    c = np.clip(np.asarray(counts, dtype=float), 0, None)
    tn, fn = c[..., 0, 0], c[..., 0, 1]
    fp, tp = c[..., 1, 0], c[..., 1, 1]
    n = tn + fn + fp + tp
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "count": n,
            "selection_rate": (tp + fp) / n,
            "true_positive_rate": tp / (tp + fn),
            "false_positive_rate": fp / (fp + tn),
            "accuracy": (tp + tn) / n,
        }


def fairness_differences(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Demographic-parity and equalized-odds differences from ``counts[..., g, p, t]``.

    Demographic-parity difference: max minus min selection rate over groups.
    Equalized-odds difference: the larger of the TPR and FPR ranges (as fairlearn).

    Parameters
    ----------
    counts : array-like of shape (..., n_groups, 2, 2)
        Confusion counts by group, as :func:`confusion_by_group` returns them.

    Returns
    -------
    dict of str to numpy.ndarray of shape (...)
        ``"demographic_parity_difference"`` and ``"equalized_odds_difference"``.

    Examples
    --------
    >>> c = np.array([[[3, 1], [0, 4]], [[2, 0], [2, 4]]])
    >>> d = fairness_differences(c)
    >>> float(d["demographic_parity_difference"]), float(d["equalized_odds_difference"])
    (0.25, 0.5)
    """
    r = rates_from_counts(counts)

    def spread(v: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.nanmax(v, axis=-1) - np.nanmin(v, axis=-1)

    tpr, fpr = spread(r["true_positive_rate"]), spread(r["false_positive_rate"])
    return {
        "demographic_parity_difference": spread(r["selection_rate"]),
        "equalized_odds_difference": np.maximum(tpr, fpr),
    }


@validate_params(
    {
        "n_boot": [Interval(numbers.Integral, 1, None, closed="left")],
        "noise_scale": [None, Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def bootstrap_counts(
    counts: np.ndarray,
    *,
    n_boot: int = 1000,
    noise_scale: float | None = None,
    random_state: Any = None,
) -> np.ndarray:
    """Bootstrap replicates of a count table.

    Resampling rows with replacement changes a table only through a multinomial
    draw of its cells, so the replicates are drawn as
    ``Multinomial(n, counts / n)``; this is the row bootstrap, computed in
    ``O(cells)`` per replicate.

    With ``noise_scale`` (for counts released with discrete Laplace noise of
    that scale) this is a parametric bootstrap of the noisy release: the clamped
    noisy table stands in for the truth and each replicate gets fresh simulated
    noise of the same scale. It reads only released numbers, so it is
    post-processing and costs no privacy; the seed drives only this simulation,
    never privacy noise. A table whose (clamped) total is zero gives all-zero
    replicates (plus the simulated noise) rather than an error: in private mode
    that total is a released value, and no exception may depend on it.

    Parameters
    ----------
    counts : array-like of shape (..., n_groups, 2, 2)
        A count table (true or released).
    n_boot : int, default=1000
        Number of replicates.
    noise_scale : float, optional
        Scale of the discrete Laplace noise the counts were released with.
    random_state : int, numpy.random.Generator or None
        Seed of the resampling (and of the simulated noise); never of privacy noise.

    Returns
    -------
    numpy.ndarray of shape (n_boot, *counts.shape)

    Examples
    --------
    >>> c = np.array([[[30, 10], [5, 40]], [[20, 5], [10, 35]]])
    >>> reps = bootstrap_counts(c, n_boot=200, random_state=0)
    >>> reps.shape, bool((reps.sum(axis=(1, 2, 3)) == c.sum()).all())
    ((200, 2, 2, 2), True)
    """
    n_boot = int(n_boot)
    rng = make_generator(random_state)
    c = np.clip(np.asarray(counts, dtype=float), 0, None)
    if not np.isfinite(c).all():
        raise DataError("counts must be finite.", argument="counts")
    total = round(c.sum())
    if total > 0:
        probs = (c / c.sum()).ravel()
        draws = rng.multinomial(total, probs, size=n_boot).reshape((n_boot, *c.shape)).astype(float)
    else:  # an empty (or all-zero released) table: no rows to resample
        draws = np.zeros((n_boot, *c.shape))
    if noise_scale:
        # Simulated (not privacy) noise: a discrete Laplace is a difference of geometrics.
        q = 1.0 - np.exp(-1.0 / noise_scale)
        draws += rng.geometric(q, draws.shape) - rng.geometric(q, draws.shape)
    return draws
