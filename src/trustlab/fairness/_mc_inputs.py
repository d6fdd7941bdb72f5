"""Input checks and the violation kernels shared by the multicalibration metrics and boosts.

Private to :mod:`trustlab.fairness.multicalibration`.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval
from trustlab.errors import DataError
from trustlab.fairness._inputs import binary_labels, scores_1d

_LEVELS = Interval(numbers.Integral, 1, None, closed="left")


def _group_matrix(groups: Any, n: int, name: str) -> tuple[np.ndarray, list[Any]]:
    """Return an (n, k) 0/1 float matrix and the group names.

    Accepts an (n, k) 0/1 matrix or DataFrame (overlapping groups; column names kept)
    or one label per row (one-hot encoded, sorted labels).
    """
    if groups is None:
        raise DataError(
            f"{name} is required: an (n_samples, n_groups) 0/1 matrix or one label per row.", argument=name
        )
    if isinstance(groups, pd.Series):
        groups = groups.to_numpy()
    if isinstance(groups, pd.DataFrame):
        names: list[Any] = list(groups.columns)
        if groups.isna().to_numpy().any():
            bad = [str(c) for c in groups.columns[groups.isna().any()]]
            raise DataError(
                f"{name} has missing values in column(s) {bad}; impute them (e.g. with the proxy "
                "model's prediction) or drop those rows first.",
                argument=name,
            )
        arr = groups.to_numpy()
    else:
        arr = np.asarray(groups)
        names = []
    if arr.ndim == 1:
        s = pd.Series(arr)
        if s.isna().any():
            raise DataError(
                f"{name} has {int(s.isna().sum())} missing value(s); impute them or drop those rows first.",
                argument=name,
            )
        codes, labels = pd.factorize(s, sort=True)
        mat = np.zeros((arr.size, len(labels)))
        mat[np.arange(arr.size), codes] = 1.0
        arr, names = mat, list(labels)
    if arr.ndim != 2:
        raise DataError(f"{name} must be 1- or 2-dimensional, got shape {arr.shape}.", argument=name)
    try:
        mat = arr.astype(float)
    except (TypeError, ValueError):
        raise DataError(f"{name} must hold 0/1 indicators (got non-numeric values).", argument=name) from None
    if np.isnan(mat).any():
        raise DataError(
            f"{name} has {int(np.isnan(mat).sum())} missing value(s); impute them (e.g. with the proxy "
            "model's prediction) or drop those rows first.",
            argument=name,
        )
    if not np.isin(mat, (0.0, 1.0)).all():
        raise DataError(
            f"{name} must hold 0/1 membership indicators; threshold soft proxies (e.g. p >= 0.5) first.",
            argument=name,
        )
    if mat.shape[0] != n:
        raise DataError(f"{name} has {mat.shape[0]} rows but there are {n} predictions.", argument=name)
    if mat.shape[1] == 0:
        raise DataError(f"{name} has no groups (columns).", argument=name)
    if not names:
        names = list(range(mat.shape[1]))
    return mat, names


def _probs(y_prob: Any, name: str = "y_prob") -> np.ndarray:
    f = scores_1d(y_prob, name)
    if f.size == 0:
        raise DataError(f"{name} is empty.", argument=name)
    if f.min() < 0 or f.max() > 1:
        raise DataError(
            f"{name} must be probabilities in [0, 1]; got [{f.min():g}, {f.max():g}].", argument=name
        )
    return f


def _prepare(
    y_true: Any, y_prob: Any, groups: Any, name: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    f = _probs(y_prob)
    y = binary_labels(y_true, "y_true", n=f.size, both_classes=False).astype(float)
    g, names = _group_matrix(groups, f.size, name)
    return y, f, g, names


def _ma(y: np.ndarray, f: np.ndarray, g: np.ndarray) -> np.ndarray:
    return np.abs(g.T @ (f - y)) / y.size


def _levels(f: np.ndarray, n_levels: int) -> np.ndarray:
    """Grid codes ``round(f * m)`` in ``0..m``."""
    return np.rint(f * n_levels).astype(np.int64)


def _mc(y: np.ndarray, f: np.ndarray, g: np.ndarray, n_levels: int, p: int) -> np.ndarray:
    code = _levels(f, n_levels)
    v = np.arange(n_levels + 1) / n_levels
    out = np.empty(g.shape[1])
    for j in range(g.shape[1]):
        w = g[:, j]
        cnt = np.bincount(code, weights=w, minlength=n_levels + 1)
        sy = np.bincount(code, weights=w * y, minlength=n_levels + 1)
        # sum_v P(f_m = v, g = 1) |v - E[Y | f_m = v, g = 1]|^p = sum_v |cnt v - sy|^p / cnt^(p-1) / n
        diff = np.abs(cnt * v - sy)
        with np.errstate(invalid="ignore", divide="ignore"):
            term = diff if p == 1 else np.where(cnt > 0, diff**2 / cnt, 0.0)
        out[j] = term.sum() / y.size
    return out
