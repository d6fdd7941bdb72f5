"""Input checks shared by the fairness methods (labels, groups, scores, member probabilities)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError


def binary_labels(
    y: Any, name: str = "y_true", *, n: int | None = None, both_classes: bool = True
) -> np.ndarray:
    """Return ``y`` as an int array of 0/1, checking length and (optionally) that both classes occur."""
    arr = check_numeric_array(y, name, ndim=1)
    if n is not None and arr.size != n:
        raise DataError(
            f"{name} has {arr.size} entries but the scores have {n}; pass one label per row.", argument=name
        )
    if not np.isin(arr, (0.0, 1.0)).all():
        bad = np.unique(arr[~np.isin(arr, (0.0, 1.0))])[:5].tolist()
        raise DataError(
            f"{name} must hold only 0 and 1 (the positive class is 1); got values {bad}.", argument=name
        )
    out = arr.astype(np.int64)
    if both_classes and np.unique(out).size < 2:
        raise DataError(
            f"{name} holds a single class ({int(out[0])}); rates and calibration need both 0 and 1 — "
            "pass a sample with positives and negatives.",
            argument=name,
        )
    return out


def group_codes(
    sensitive_features: Any, n: int, name: str = "sensitive_features"
) -> tuple[np.ndarray, list[Any]]:
    """Factorize one group label per row; return ``(codes, sorted group labels)``."""
    if sensitive_features is None:
        raise DataError(f"{name} is required: pass one group label per row.", argument=name)
    if isinstance(sensitive_features, pd.DataFrame):
        if sensitive_features.shape[1] != 1:
            raise DataError(f"{name} must be one column (got {sensitive_features.shape[1]}).", argument=name)
        sensitive_features = sensitive_features.iloc[:, 0]
    arr = np.asarray(sensitive_features, dtype=object)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(
            f"{name} must be 1-dimensional (one label per row), got shape {arr.shape}.", argument=name
        )
    if arr.size != n:
        raise DataError(f"{name} has {arr.size} entries but there are {n} rows.", argument=name)
    s = pd.Series(arr)
    if s.isna().any():
        raise DataError(
            f"{name} has {int(s.isna().sum())} missing value(s); give them an explicit level first.",
            argument=name,
        )
    codes, labels = pd.factorize(s, sort=True)
    return codes.astype(np.int64), list(labels)


def member_probabilities(member_probs: Any, name: str = "member_probs") -> np.ndarray:
    """Return member probabilities of the positive class as an (M, n) float array in [0, 1].

    Accepts shape (M, n) (positive-class probabilities) or (M, n, 2) (both classes).
    """
    arr = check_numeric_array(member_probs, name, dtype=float)
    if arr.ndim == 3 and arr.shape[2] == 2:
        arr = arr[:, :, 1]
    if arr.ndim != 2:
        raise DataError(
            f"{name} must have shape (n_members, n_samples) or (n_members, n_samples, 2), got {arr.shape}.",
            argument=name,
        )
    if arr.shape[1] == 0:
        raise DataError(f"{name} has no samples.", argument=name)
    if arr.min() < 0 or arr.max() > 1:
        raise DataError(
            f"{name} must be probabilities in [0, 1]; got values in [{arr.min():g}, {arr.max():g}].",
            argument=name,
        )
    return arr


def member_weights(weights: Any, n_members: int, name: str = "weights") -> np.ndarray:
    """Return ensemble weights: ``None`` -> uniform; else M weights in [0, 1] summing to 1."""
    if weights is None:
        return np.full(n_members, 1.0 / n_members)
    w = check_numeric_array(weights, name, ndim=1)
    if w.size != n_members:
        raise DataError(f"{name} must have one entry per member ({n_members}), got {w.size}.", argument=name)
    if w.min() < 0 or w.max() > 1:
        raise DataError(
            f"{name} must lie in [0, 1] (a convex combination of members); got values in "
            f"[{w.min():g}, {w.max():g}]. Pass weights / weights.sum() of non-negative numbers.",
            argument=name,
        )
    if abs(w.sum() - 1.0) > 1e-9:
        raise DataError(
            f"{name} must sum to 1 (got {w.sum():.6g}); pass weights / weights.sum().", argument=name
        )
    return w


def scores_1d(scores: Any, name: str = "X") -> np.ndarray:
    """Return scores given as (n,) or (n, 1) as a finite 1-D float array."""
    arr = check_numeric_array(scores, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(
            f"{name} must be scores of shape (n_samples,) or (n_samples, 1) when no estimator is given; "
            f"got shape {arr.shape}. Pass estimator=... to post-process a model's features.",
            argument=name,
        )
    return arr
