"""Input checks of certified unlearning: the supported model, the training rows, the forget set."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError
from trustlab.unlearning._certified_logistic import LogisticShape

SUPPORTED = (
    "a fitted scikit-learn LogisticRegression (binary or multinomial) with an L2 penalty or none "
    "(l1_ratio 0, no class_weight), or a torch.nn.Module returning logits"
)


def check_model(model: Any) -> Any:
    """The model, if it is the supported kind; ModelError saying what is supported otherwise."""
    from sklearn.linear_model import LogisticRegression

    if not isinstance(model, LogisticRegression):
        raise ModelError(
            f"model must be {SUPPORTED}; got {type(model).__name__}. Other models: retrain, or use a "
            "kNN memory (trustlab.unlearning.memory.KNNMemory), whose removal is exact.",
            argument="model",
        )
    if not hasattr(model, "coef_"):
        raise ModelError("model is not fitted; fit it on (X, y) first.", argument="model")
    penalty = getattr(model, "penalty", "l2")
    l1_ratio = getattr(model, "l1_ratio", 0.0)
    if penalty in ("l1", "elasticnet") or (l1_ratio not in (None, 0, 0.0)):
        raise ModelError(f"model must be {SUPPORTED}; this one has an L1 term.", argument="model")
    if getattr(model, "class_weight", None) is not None:
        raise ModelError(f"model must be {SUPPORTED}; this one has class_weight set.", argument="model")
    return model


def model_shape(model: Any) -> LogisticShape:
    """Parameter layout of a fitted LogisticRegression."""
    n_out, d = np.asarray(model.coef_).shape
    return LogisticShape(n_features=d, n_out=n_out, fit_intercept=bool(model.fit_intercept))


def check_rows(model: Any, X: Any, y: Any, name: str = "X") -> tuple[np.ndarray, np.ndarray]:
    """``X`` as a finite float matrix with the model's columns, ``y`` as class indices."""
    Xa = check_numeric_array(X, name, ndim=2)
    if Xa.shape[1] != model.coef_.shape[1]:
        raise DataError(
            f"{name} has {Xa.shape[1]} columns but the model was fitted on {model.coef_.shape[1]}.",
            argument=name,
        )
    yname = "y" if name == "X" else f"y of {name}"
    try:
        ya = np.asarray(y)
    except (TypeError, ValueError):
        raise DataError(f"{yname} must be a 1-D array of labels.", argument=yname) from None
    if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
        raise DataError(f"{yname} must be 1-D with one label per row of {name}.", argument=yname)
    classes = model.classes_
    try:
        pos = np.searchsorted(classes, ya)
        ok = (pos < classes.size) & (classes[np.minimum(pos, classes.size - 1)] == ya)
    except TypeError:
        ok = np.zeros(ya.shape[0], dtype=bool)
        pos = np.zeros(ya.shape[0], dtype=np.int64)
    if not np.all(ok):
        raise DataError(
            f"{yname} holds labels the model does not know (classes_ {classes.tolist()}).", argument=yname
        )
    return Xa, np.asarray(pos, dtype=np.int64)


def forget_mask(forget: Any, n: int) -> np.ndarray:
    """Boolean mask of the rows to forget (indices or a mask); not empty and not every row."""
    if forget is None or isinstance(forget, str | bytes):
        raise DataError(
            "forget must be row indices or a boolean mask of the rows to forget.", argument="forget"
        )
    try:
        arr = np.asarray(forget)
    except (TypeError, ValueError):
        raise DataError(
            "forget must be a 1-D array of row indices or a boolean mask.", argument="forget"
        ) from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise DataError("forget must be 1-D.", argument="forget")
    if arr.dtype == np.bool_:
        if arr.size != n:
            raise DataError(f"a boolean forget mask must have {n} entries (one per row).", argument="forget")
        mask = arr.copy()
    else:
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise DataError("forget must hold integer row indices (or be a boolean mask).", argument="forget")
        if arr.size and (arr.min() < 0 or arr.max() >= n):
            raise DataError(f"forget indices must lie in [0, {n}).", argument="forget")
        mask = np.zeros(n, dtype=bool)
        mask[arr.astype(np.int64)] = True
    if not mask.any():
        raise DataError("the forget set is empty: name at least one row to unlearn.", argument="forget")
    if mask.all():
        raise DataError(
            "forget names every row: nothing is left to fine-tune on; retrain instead.", argument="forget"
        )
    return mask


def l2_per_row(model: Any, n: int) -> float:
    """scikit-learn's ``C sum(loss) + ||w||^2 / 2`` as a mean loss: ``||w||^2 / (2 C n)``."""
    penalty = getattr(model, "penalty", "l2")
    if penalty is None or penalty == "none" or not math.isfinite(float(model.C)):
        return 0.0
    return 1.0 / (float(model.C) * n)
