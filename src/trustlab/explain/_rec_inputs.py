"""Input checks of the recourse modules: the linear model, the action set, the individuals."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain._linear import coef_intercept
from trustlab.explain.recourse_actions import ActionSet

__all__ = ["check_action_set", "check_points", "check_score_range", "linear_model_params", "rows"]


def linear_model_params(model: Any, intercept: Any = None) -> tuple[np.ndarray, float]:
    """Return ``(w, b)`` of a binary linear classifier, or of ``coef`` and ``intercept``.

    Accepts a fitted scikit-learn-style linear classifier (``coef_`` of shape
    ``(1, d)`` or ``(d,)`` and ``intercept_``, read by
    :func:`~trustlab.explain._linear.coef_intercept`), or a coefficient vector together
    with an explicit ``intercept``.

    Parameters
    ----------
    model : fitted linear classifier or array-like of shape (d,)
    intercept : float, optional
        Needed (and only allowed) when ``model`` is a coefficient vector.

    Returns
    -------
    w : numpy.ndarray of shape (d,)
    b : float
    """
    if hasattr(model, "coef_") and not isinstance(model, np.ndarray | list | tuple):
        if intercept is not None:
            raise ParameterError(
                "pass intercept only with a coefficient vector; a fitted model carries its own.",
                argument="intercept",
            )
        lin = coef_intercept(model)
        classes = getattr(model, "classes_", None)
        if lin is None or (classes is not None and len(classes) != 2):
            raise ModelError(
                f"model must be a binary linear classifier; {type(model).__name__} has "
                f"coef_ of shape {np.shape(np.asarray(getattr(model, 'coef_', None), dtype=object))}.",
                argument="model",
            )
        coef, intercept = lin
    elif isinstance(model, np.ndarray | list | tuple):
        if intercept is None:
            raise ParameterError(
                "with a coefficient vector, pass the intercept too: fit(coef, intercept).",
                argument="intercept",
            )
        coef = check_numeric_array(model, "coef", ndim=1)
    elif type(model).__name__ == "Pipeline":
        raise ModelError(
            "model is a Pipeline; pass its final linear step and an action set on the "
            "features it sees (model[-1]), or use trustlab.explain.recourse_audit.linearize "
            "to express it in the raw columns.",
            argument="model",
        )
    else:
        raise ModelError(
            f"model must be a fitted linear classifier with coef_ and intercept_ (e.g. "
            f"LogisticRegression, LinearSVC) or a coefficient vector; got {type(model).__name__}. "
            "Confined regions are defined for linear classifiers only.",
            argument="model",
        )
    if isinstance(intercept, bool) or not isinstance(intercept, numbers.Real) or not math.isfinite(intercept):
        raise ParameterError(f"intercept must be a finite number, got {intercept!r}.", argument="intercept")
    if not np.all(np.isfinite(coef)):
        raise ModelError("the model's coefficients contain NaN or inf.", argument="model")
    return coef.astype(float), float(intercept)


def check_score_range(w: np.ndarray, b: float, A: ActionSet) -> float:
    """The largest ``|score|`` the model reaches over the action set's ranges, if it is below 1e300.

    Parameters
    ----------
    w : numpy.ndarray of shape (d,)
    b : float
    A : ActionSet

    Returns
    -------
    float
        ``|b| + sum_j |w_j| max(|lb_j|, |ub_j|)``; a :class:`ModelError` when it overflows
        (the scores, and the solvers' constants, would not be finite numbers).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        top = float(abs(b) + np.sum(np.abs(w) * np.maximum(np.abs(A.lb), np.abs(A.ub))))
    if not top <= 1e300:
        raise ModelError(
            "the model's scores over the action set's ranges exceed 1e300 (coefficients "
            f"up to {float(np.abs(w).max()):.3g}, intercept {b:.3g}); rescale the model or the features.",
            argument="model",
        )
    return top


def check_action_set(action_set: Any, d: int | None = None) -> ActionSet:
    """``action_set`` when it is an :class:`ActionSet` (of ``d`` features when given), else a clear error."""
    if not isinstance(action_set, ActionSet):
        raise ParameterError(
            "action_set must be an ActionSet (e.g. ActionSet.from_data(X)), got "
            f"{type(action_set).__name__}.",
            argument="action_set",
        )
    if d is not None and len(action_set) != d:
        raise DataError(
            f"the action set has {len(action_set)} features but the model has {d} coefficients.",
            argument="action_set",
        )
    return action_set


def rows(X: Any, names: Sequence[str], name: str, *, allow_nan: bool = False) -> np.ndarray:
    """``X`` (rows, one row, or a DataFrame holding the named columns) as an ``(n, len(names))`` array."""
    if isinstance(X, pd.DataFrame):
        missing = [n for n in names if n not in X.columns]
        if missing:
            raise DataError(f"{name}: unknown column(s) {missing} missing from the data.", argument=name)
        X = X[list(names)]
    arr = check_numeric_array(X, name, allow_nan=allow_nan)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != len(names):
        raise DataError(
            f"{name} must have shape (n, {len(names)}) (one column per feature), got {arr.shape}.",
            argument=name,
        )
    return arr


def check_points(X: Any, A: ActionSet, name: str = "X") -> np.ndarray:
    arr = rows(X, A.names, name)
    tol = 1e-9 * (1 + np.abs(A.ub - A.lb))
    out = (arr < A.lb - tol) | (arr > A.ub + tol)
    if out.any():
        j = int(np.flatnonzero(out.any(axis=0))[0])
        raise DataError(
            f"{name}: values of feature {A.names[j]!r} lie outside the action set's range "
            f"[{A.lb[j]:g}, {A.ub[j]:g}]; widen it (bounds=...) or drop those rows.",
            argument=name,
        )
    return arr
