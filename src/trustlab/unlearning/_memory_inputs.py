"""Input checks of the kNN memory: embedding the rows and checking the labels."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, DataTypeError
from trustlab.unlearning._memory_records import as_array


def embed(self: Any, X: Any, *, reset: bool) -> np.ndarray:
    """Embed ``X`` with the memory's encoder, check it, L2-normalise it for cosine."""
    if self.encoder is None:
        if sparse.issparse(X):
            raise DataTypeError(
                "sparse input is not supported: pass a dense array (X.toarray()) or an encoder.",
                argument="X",
            )
        if np.iscomplexobj(as_array(X, "X")):
            raise DataError("Complex data not supported; pass real numbers.", argument="X")
        if as_array(X, "X").ndim == 1:
            raise DataError(
                "X must be 2-dimensional (n_rows, n_features). Reshape your data with "
                "X.reshape(-1, 1) for one feature or X.reshape(1, -1) for one row.",
                argument="X",
            )
        arr = check_numeric_array(X, "X", ndim=2)
        if reset:
            self.n_features_in_ = arr.shape[1]
        elif arr.shape[1] != self.n_features_in_:
            raise DataError(
                f"X has {arr.shape[1]} features, but KNNMemory is expecting {self.n_features_in_} "
                "features as input.",
                argument="X",
            )
    else:
        try:
            out = self.encoder(X)
        except Exception as exc:  # the user's encoder failing on the user's X
            raise DataError(f"encoder failed on X: {type(exc).__name__}: {exc}", argument="X") from exc
        arr = check_numeric_array(out, "X (its embedding by encoder)", ndim=2)
    if arr.shape[1] == 0:
        raise DataError(
            f"X has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.", argument="X"
        )
    if not reset and arr.shape[1] != self.dim_:
        raise DataError(
            f"X embeds to dimension {arr.shape[1]}, but the memory holds dimension {self.dim_}; "
            "use the encoder the memory was built with.",
            argument="X",
        )
    emb = arr.astype(np.float32)
    if not np.all(np.isfinite(emb)):
        raise DataError("X's embedding overflows float32; rescale it.", argument="X")
    if self.metric == "cosine":
        norms = np.linalg.norm(emb.astype(np.float64), axis=1)
        emb = (emb / np.where(norms > 0, norms, 1.0)[:, None]).astype(np.float32)
    return np.ascontiguousarray(emb)


def check_labels(y: Any, n: int) -> np.ndarray:
    """``y`` as a 1-D array of ``n`` class labels."""
    if y is None:
        raise DataError(
            "KNNMemory requires y to be passed, but the target y is None: give one label per row of X.",
            argument="y",
        )
    if isinstance(y, str | bytes):
        raise DataError("y must be an array of class labels, one per row of X.", argument="y")
    arr = as_array(y, "y")
    if np.iscomplexobj(arr):
        raise DataError("Complex data not supported; y must hold class labels.", argument="y")
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is raveled.",
            DataConversionWarning,
            stacklevel=3,
        )
        arr = arr.ravel()
    if arr.ndim != 1 or arr.shape[0] != n:
        raise DataError(
            f"y must be 1-D with {n} labels (one per row of X), got shape {arr.shape}.", argument="y"
        )
    try:
        kind = type_of_target(arr)
    except (ValueError, TypeError):
        kind = "unknown"
    if kind not in ("binary", "multiclass"):
        raise DataError(
            f"Unknown label type: y must hold class labels (got a {kind!r} target); a kNN memory classifies.",
            argument="y",
        )
    return arr
