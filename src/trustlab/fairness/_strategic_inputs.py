"""Input checks shared by the feature-market functions and the market-aware classifier."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError


def _check_population(
    X: Any, coef: Any, intercept: Any, budgets: Any
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    X = check_numeric_array(X, "X", ndim=2)
    if X.shape[1] == 0:
        raise DataError("X has no columns; pass one column per feature.", argument="X")
    w = check_numeric_array(coef, "coef", ndim=1)
    if w.size != X.shape[1]:
        raise DataError(
            f"coef has {w.size} entries but X has {X.shape[1]} columns; pass one weight per feature.",
            argument="coef",
        )
    b = check_numeric_array(np.atleast_1d(intercept), "intercept", ndim=1)
    if b.size != 1:
        raise DataError("intercept must be one number.", argument="intercept")
    B = _budgets(budgets, X.shape[0])
    return X, w, float(b[0]), B


def _budgets(budgets: Any, n: int) -> np.ndarray:
    B = check_numeric_array(budgets, "budgets", ndim=1)
    if B.size != n:
        raise DataError(
            f"budgets has {B.size} entries but X has {n} rows; pass one per user.", argument="budgets"
        )
    if (B < 0).any():
        raise DataError("budgets must be >= 0 (what each user can pay to be accepted).", argument="budgets")
    return B


def _per_feature(value: Any, name: str, d: int, *, positive: bool) -> np.ndarray:
    if np.ndim(value) == 0:
        value = np.full(d, value, dtype=float) if isinstance(value, numbers.Real) else [value]
    arr = check_numeric_array(value, name, ndim=1)
    if arr.size != d:
        raise DataError(
            f"{name} has {arr.size} entries but there are {d} features; pass one per feature.", argument=name
        )
    if (arr < 0).any() or (positive and not (arr > 0).any()):
        need = "> 0 for at least one feature and >= 0 for all" if positive else ">= 0"
        raise DataError(f"{name} must be {need}; got {arr.tolist()[:5]}.", argument=name)
    return arr
