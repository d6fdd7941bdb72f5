"""Inputs of the linear-transformation model: client rows, public sketches, privacy (private module)."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import DataConversionWarning

from trustlab._param_validation import DELTA, EPSILON, Interval, Options, validate_params
from trustlab._validation import (
    check_delta,
    check_epsilon,
    check_numeric_array,
    make_generator,
)
from trustlab.errors import DataError, ParameterError

__all__ = [
    "CONSTRAINTS",
    "KINDS",
    "MECHANISMS",
    "NEIGHBOURING",
    "NOISE",
    "check_n_features",
    "check_sketch",
    "clip_rows",
    "honest",
    "joint",
    "make_sketch",
    "matrix",
    "privacy",
    "reject_complex",
    "solve",
]

KINDS = ("osnap", "dense")
MECHANISMS = ("gaussian", "laplace")
NEIGHBOURING = ("replace", "add_remove")
NOISE = ("aggregated", "per_client")


_COUNT = Interval(numbers.Integral, 1, None, closed="left")

CONSTRAINTS: dict[str, list[Any]] = {
    "epsilon": [EPSILON, Options({math.inf})],
    "delta": [DELTA],
    "row_bound": [Interval(numbers.Real, 0, None, closed="neither")],
    "mechanism": [Options(MECHANISMS)],
    "honest_fraction": [Interval(numbers.Real, 0, 1, closed="right")],
    "neighbouring": [Options(NEIGHBOURING)],
    "noise": [Options(NOISE)],
    "n_servers": [Interval(numbers.Integral, 2, None, closed="left")],
    "random_state": ["random_state"],
}
"""The LTM functions' shared scalar constraints (``epsilon = math.inf``: the non-private answer)."""


def honest(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0.0 < float(value) <= 1.0):
        raise ParameterError(
            f"honest_fraction must be a number in (0, 1] (the share of each sketch row's "
            f"contributors assumed to add their noise), got {value!r}.",
            argument="honest_fraction",
        )
    return float(value)


def privacy(epsilon: Any, delta: Any, mechanism: str) -> tuple[float, float]:
    eps = check_epsilon(epsilon, allow_inf=True)
    dlt = check_delta(delta)
    if mechanism == "gaussian" and math.isfinite(eps) and dlt == 0.0:
        raise ParameterError(
            "delta must be > 0 for the Gaussian mechanism (e.g. 1e-5, well below 1/n); "
            "use mechanism='laplace' for pure epsilon-DP.",
            argument="delta",
        )
    return eps, dlt


def reject_complex(A: Any, name: str) -> None:
    """Raise scikit-learn's "Complex data not supported" (a DataError) for complex input."""
    try:
        kind = np.asarray(A).dtype.kind
    except (TypeError, ValueError):
        return  # not an array at all: the numeric reader says so
    if kind == "c" or (kind == "O" and any(isinstance(v, complex) for v in np.asarray(A).flat)):
        raise DataError(f"Complex data not supported: {name} must hold real numbers.", argument=name)


def matrix(A: Any, name: str, *, private: bool = False) -> np.ndarray:
    """A 2-d float array; for private data a row with NaN or +-inf becomes a zero row.

    Shape and type are public and checked; the values of private rows are not: a
    client whose row is not finite contributes nothing (as a zero row), so no
    exception depends on them. Public inputs (evaluation data, new rows to
    predict) still raise on non-finite values. Messages follow scikit-learn's
    wording where its estimator checks look for it ("Reshape your data",
    "Complex data not supported", "0 feature(s)").
    """
    if sp.issparse(A):
        raise DataError(
            f"{name} is a sparse matrix; sparse input is not supported, pass {name}.toarray().",
            argument=name,
        )
    reject_complex(A, name)
    shape = np.shape(A) if isinstance(A, np.ndarray | list | tuple) or hasattr(A, "shape") else None
    if shape is not None and len(shape) == 1:
        raise DataError(
            f"{name} must be 2-dimensional, got shape {tuple(shape)}. Reshape your data with "
            f"{name}.reshape(-1, 1) for one feature or {name}.reshape(1, -1) for one row.",
            argument=name,
        )
    arr = check_numeric_array(A, name, ndim=2, allow_nan=private)
    if arr.shape[1] == 0:
        raise DataError(
            f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required; pass an "
            "(n_clients, n_features) array.",
            argument=name,
        )
    if private:
        arr = np.where(np.isfinite(arr).all(axis=1)[:, None], arr, 0.0)
    return arr


def check_n_features(arr: np.ndarray, n_features: int, estimator: str, name: str = "X") -> None:
    """Raise the scikit-learn-worded error when ``arr`` has not ``n_features`` columns."""
    if arr.shape[1] != n_features:
        raise DataError(
            f"{name} has {arr.shape[1]} features, but {estimator} is expecting {n_features} features "
            "as input (the number of columns fit saw).",
            argument=name,
        )


def check_sketch(S: Any, n: int) -> sp.csr_matrix:
    if isinstance(S, str | bytes) or S is None:
        raise ParameterError(
            f"S must be a sparse matrix or 2-D array of shape (m, {n}); build one with make_sketch(m, {n}).",
            argument="S",
        )
    try:
        mat = sp.csr_matrix(S, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ParameterError(
            f"S must be a numeric matrix; converting it failed ({exc}).", argument="S"
        ) from None
    if mat.shape[1] != n or mat.shape[0] < 1:
        raise ParameterError(
            f"S must have shape (m, n_clients) = (m, {n}), got {mat.shape}; "
            "the sketch has one column per client (row of A).",
            argument="S",
        )
    if not np.all(np.isfinite(mat.data)):
        raise ParameterError("S contains NaN or infinite entries.", argument="S")
    mat.eliminate_zeros()
    mat.sort_indices()
    return mat


def clip_rows(A: np.ndarray, bound: float) -> np.ndarray:
    """Each row scaled to L2 norm at most ``bound``, without overflow for rows near 1e308.

    A row ``a`` is written ``s * u`` with ``s = max |a_j|`` (so ``1 <= ||u|| <= sqrt(d)``) and
    returned as ``u * min(s, bound / ||u||)``: the norm is never formed in a range where it
    overflows (``||(0, 0, 1e308)||`` would be inf and clip the row to zero).
    """
    scale = np.max(np.abs(A), axis=1) if A.shape[1] else np.zeros(A.shape[0])
    scale = np.where(scale > 0, scale, 1.0)
    unit = A / scale[:, None]
    norms = np.maximum(np.linalg.norm(unit, axis=1), np.finfo(float).tiny)
    return unit * np.minimum(scale, bound / norms)[:, None]


@validate_params(
    {"m": [_COUNT], "n": [_COUNT], "kind": [Options(KINDS)], "s": [_COUNT], "random_state": ["random_state"]}
)
def make_sketch(m: int, n: int, kind: str = "osnap", s: int = 2, random_state: Any = None) -> sp.csc_matrix:
    """Draw a public sketch matrix ``S`` (``m x n``) with unit-norm columns.

    Parameters
    ----------
    m : int
        Sketch rows (the paper's target dimension).
    n : int
        Columns, one per client.
    kind : {"osnap", "dense"}, default "osnap"
        ``"osnap"``: sparse JL / OSNAP, ``s`` non-zeros per column at distinct
        uniformly chosen rows, values ``+-1/sqrt(s)`` (``s=1`` is CountSketch).
        ``"dense"``: every entry ``+-1/sqrt(m)``.
    s : int, default 2
        Non-zeros per column for ``"osnap"`` (``1 <= s <= m``).
    random_state : None, int or numpy Generator
        Seeds the (public, non-private) sketch.

    Returns
    -------
    scipy.sparse.csc_matrix

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025. Nelson, Nguyen. "OSNAP: Faster
    numerical linear algebra algorithms via sparser subspace embeddings". FOCS 2013.

    Examples
    --------
    >>> S = make_sketch(8, 5, s=2, random_state=0)
    >>> S.shape, S.getnnz(axis=0).tolist()
    ((8, 5), [2, 2, 2, 2, 2])
    >>> bool(np.allclose(np.sqrt(S.multiply(S).sum(axis=0)), 1.0))
    True
    """
    m, n, s = int(m), int(n), int(s)
    rng = make_generator(random_state)
    if kind == "dense":
        signs = rng.choice(np.array([-1.0, 1.0]), size=(m, n)) / math.sqrt(m)
        return sp.csc_matrix(signs)
    if s > m:
        raise ParameterError(
            f"s must be <= m (non-zeros per column fit in {m} rows), got s={s}.", argument="s"
        )
    rows = rng.integers(0, m, size=(n, s))
    # Redraw the later of any repeated rows until every column has s distinct rows.
    while True:
        srt = np.sort(rows, axis=1)
        dup = (srt[:, 1:] == srt[:, :-1]).any(axis=1) if s > 1 else np.zeros(n, bool)
        if not dup.any():
            break
        rows[dup] = rng.integers(0, m, size=(int(dup.sum()), s))
    vals = rng.choice(np.array([-1.0, 1.0]), size=(n, s)) / math.sqrt(s)
    cols = np.repeat(np.arange(n), s)
    return sp.csc_matrix((vals.ravel(), (rows.ravel(), cols)), shape=(m, n))


def joint(X: Any, y: Any, *, private: bool = False, estimator: str = "this estimator") -> np.ndarray:
    """``[X | y]`` as one float array; for private data a row with NaN or +-inf becomes a zero row.

    A column vector ``y`` of shape ``(n, 1)`` is accepted with scikit-learn's
    :class:`~sklearn.exceptions.DataConversionWarning`.
    """
    if y is None:
        raise DataError(f"{estimator} requires y to be passed, but the target y is None.", argument="y")
    X = matrix(X, "X", private=private)
    if isinstance(y, list | tuple) or hasattr(y, "__array__"):
        try:
            y = np.asarray(y)
        except (TypeError, ValueError):
            pass  # the numeric reader below names the problem
    if isinstance(y, np.ndarray) and y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; y.ravel() is used.",
            DataConversionWarning,
            stacklevel=3,
        )
        y = y.ravel()
    reject_complex(y, "y")
    yv = check_numeric_array(y, "y", ndim=1, allow_nan=private)
    if yv.shape[0] != X.shape[0]:
        raise DataError(f"y has {yv.shape[0]} values but X has {X.shape[0]} rows.", argument="y")
    Z = np.column_stack([X, yv])
    return np.where(np.isfinite(Z).all(axis=1)[:, None], Z, 0.0) if private else Z


def solve(M: np.ndarray, v: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(M, v)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(M, v, rcond=None)[0]
