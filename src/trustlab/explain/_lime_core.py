"""The LIME core shared by :mod:`~trustlab.explain.lime` and :mod:`~trustlab.explain.verifiable`.

The model's output column, the kernel width, the weighted Ridge and Lasso surrogates and
the top-k order: written once, used by the float LIME and the fixed-point ExpProof LIME.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab.errors import ModelError, ParameterError
from trustlab.explain._inputs import MAX_MAGNITUDE

__all__ = [
    "check_label",
    "check_predict_fn",
    "default_kernel_width",
    "model_column",
    "topk_order",
    "weighted_lasso",
    "weighted_ridge",
]


def default_kernel_width(d: int) -> float:
    """``lime``'s default kernel width ``0.75 * sqrt(d)`` for ``d`` features."""
    return 0.75 * math.sqrt(d)


def topk_order(coef: np.ndarray) -> np.ndarray:
    """Feature indices by decreasing ``|coef|``, ties broken by the lower index."""
    return np.lexsort((np.arange(coef.size), -np.abs(coef)))


def weighted_ridge(X: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """Minimise ``sum_i w_i (y_i - b - x_i beta)^2 + alpha ||beta||^2`` (scikit-learn's Ridge)."""
    sw = w.sum()
    xm = w @ X / sw
    ym = float(w @ y / sw)
    Xc = X - xm
    A = Xc.T @ (Xc * w[:, None]) + alpha * np.eye(X.shape[1])
    beta = np.linalg.solve(A, Xc.T @ (w * (y - ym)))
    return beta, ym - float(xm @ beta)


def weighted_lasso(
    X: np.ndarray, y: np.ndarray, w: np.ndarray | None, alpha: float, seed: int | None = None
) -> tuple[np.ndarray, float]:
    """Lasso with an intercept, solved tightly (``w=None``: unweighted, as ExpProof's prover)."""
    from sklearn.linear_model import Lasso

    model = Lasso(alpha=alpha, fit_intercept=True, tol=1e-10, max_iter=100_000, random_state=seed)
    model.fit(X, y, sample_weight=w)
    return np.asarray(model.coef_, dtype=float), float(model.intercept_)


def check_predict_fn(predict_fn: Any) -> Callable[[np.ndarray], Any]:
    if not callable(predict_fn):
        raise ModelError(
            f"predict_fn must be callable (e.g. model.predict_proba), got {type(predict_fn).__name__}.",
            argument="predict_fn",
        )
    return predict_fn


def check_label(label: Any) -> int:
    if isinstance(label, bool) or not isinstance(label, numbers.Integral) or label < 0:
        raise ParameterError(
            f"label must be a non-negative int column index, got {label!r}.", argument="label"
        )
    return int(label)


def model_column(out: Any, n: int, label: int) -> np.ndarray:
    """Turn the model's output on ``n`` rows into one float column (probabilities: column ``label``)."""
    try:
        arr = np.asarray(out, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(
            "predict_fn must return numbers (probabilities or scores).", argument="predict_fn"
        ) from None
    if arr.ndim == 2 and arr.shape[0] == n:
        if not 0 <= label < arr.shape[1]:
            raise ParameterError(
                f"label={label} is out of range: predict_fn returns {arr.shape[1]} column(s).",
                argument="label",
            )
        arr = arr[:, label]
    elif not (arr.ndim == 1 and arr.shape[0] == n):
        raise ModelError(
            f"predict_fn must return shape ({n},) or ({n}, n_classes) for {n} rows, got {arr.shape}.",
            argument="predict_fn",
        )
    if not np.all(np.isfinite(arr)):
        raise ModelError("predict_fn returned NaN or infinite values.", argument="predict_fn")
    if np.any(np.abs(arr) > MAX_MAGNITUDE):
        raise ModelError(
            f"predict_fn returned values beyond {MAX_MAGNITUDE:.0e} in magnitude; explain a probability "
            "or a score of sensible size.",
            argument="predict_fn",
        )
    return arr
