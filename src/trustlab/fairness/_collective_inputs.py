"""Input checks and small helpers of the collective-action module."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError


def _categorical(
    X: Any, y: Any, cardinalities: Any, n_classes: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Check integer-coded ``X`` and labels ``y``; return them, the cardinalities and the class count."""
    Xa = check_numeric_array(X, "X", ndim=2)
    if Xa.shape[1] == 0:
        raise DataError("X has no columns; pass one integer-coded column per feature.", argument="X")
    if not np.all(Xa == np.round(Xa)) or (Xa < 0).any():
        raise DataError("X must hold integer category codes >= 0 (encode categories first).", argument="X")
    ya = check_numeric_array(y, "y", ndim=1)
    if ya.size != Xa.shape[0]:
        raise DataError(f"y has {ya.size} entries but X has {Xa.shape[0]} rows.", argument="y")
    if not np.all(ya == np.round(ya)) or (ya < 0).any():
        raise DataError("y must hold integer labels >= 0.", argument="y")
    Xi, yi = Xa.astype(np.int64), ya.astype(np.int64)
    if cardinalities is None:
        card = Xi.max(axis=0) + 1
    else:
        card = check_numeric_array(cardinalities, "cardinalities", ndim=1).astype(np.int64)
        if card.size != Xi.shape[1] or (card < 1).any():
            raise DataError(
                f"cardinalities must give one count >= 1 per column of X ({Xi.shape[1]}).",
                argument="cardinalities",
            )
        if (Xi >= card).any():
            raise DataError("X holds a code >= its column's cardinality.", argument="X")
    if float(np.prod(card.astype(float))) > 2**40:
        raise DataError("X has too many category combinations (> 2**40); merge rare levels.", argument="X")
    k = int(yi.max()) + 1 if n_classes is None else int(n_classes)
    if (yi >= k).any():
        raise DataError(f"y holds a label >= n_classes ({k}).", argument="y")
    return Xi, yi, card, k


def _signal(signal: Any, d: int, card: np.ndarray | None) -> dict[int, int]:
    """Check the signal ``{column: code}`` against the column count (and cardinalities if given)."""
    if not isinstance(signal, dict) or not signal:
        raise ParameterError(
            "signal must be a non-empty dict {column index: category code} (the features g sets).",
            argument="signal",
        )
    out = {}
    for j, v in signal.items():
        if isinstance(j, bool) or not isinstance(j, numbers.Integral) or not 0 <= int(j) < d:
            raise ParameterError(f"signal names column {j!r}; columns are 0..{d - 1}.", argument="signal")
        top = None if card is None else int(card[int(j)])
        if (
            isinstance(v, bool)
            or not isinstance(v, numbers.Integral)
            or int(v) < 0
            or (top is not None and int(v) >= top)
        ):
            codes = "integers >= 0" if top is None else f"0..{top - 1}"
            raise ParameterError(f"signal sets column {j} to {v!r}; codes are {codes}.", argument="signal")
        out[int(j)] = int(v)
    return out


def _estimate_labels(table_est: np.ndarray, target: int) -> np.ndarray:
    """``y_hat(cell) = argmax_{y != y*} P_est(cell, y)``."""
    t = table_est.copy()
    t[:, target] = -np.inf
    return np.argmax(t, axis=1)
