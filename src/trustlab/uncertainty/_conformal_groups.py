"""Group weights for conformal coverage: checked weight matrices and indicator columns.

Private to :mod:`trustlab.uncertainty.conformal`, which re-exports :func:`group_indicators`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import validate_params
from trustlab._validation import check_columns, check_frame, check_numeric_array
from trustlab.errors import DataError

_WEIGHT_TOL = 1e-9


def _weights(groups: Any, n: int, name: str = "groups") -> tuple[np.ndarray, list[str]]:
    if groups is None:
        return np.zeros((n, 0)), []
    if isinstance(groups, pd.Series) or (
        isinstance(groups, np.ndarray | list | tuple) and np.ndim(groups) == 1
    ):
        labels = pd.Series(np.asarray(groups) if not isinstance(groups, pd.Series) else groups.to_numpy())
        if len(labels) != n:
            raise DataError(f"{name} has {len(labels)} rows, expected {n}.", argument=name)
        if labels.isna().any():
            raise DataError(f"{name} has missing labels; fill or drop them.", argument=name)
        prefix = f"{groups.name}=" if isinstance(groups, pd.Series) and groups.name is not None else ""
        values = sorted(pd.unique(labels), key=str)
        w = np.column_stack([(labels == v).to_numpy(float) for v in values])
        return w, [f"{prefix}{v}" for v in values]
    if isinstance(groups, pd.DataFrame):
        names = [str(c) for c in groups.columns]
        try:
            w = groups.to_numpy(dtype=float)
        except (TypeError, ValueError):
            raise DataError(
                f"{name} must hold numeric weights in [0, 1]; for categorical columns build indicators with "
                "trustlab.uncertainty.group_indicators(frame, columns).",
                argument=name,
            ) from None
    else:
        w = check_numeric_array(groups, name, ndim=2)
        names = [f"g{j}" for j in range(w.shape[1])]
    if w.shape[0] != n:
        raise DataError(f"{name} has {w.shape[0]} rows, expected {n}.", argument=name)
    if not np.all(np.isfinite(w)):
        raise DataError(f"{name} has NaN or inf weights.", argument=name)
    if (w < -_WEIGHT_TOL).any() or (w > 1 + _WEIGHT_TOL).any():
        j = int(np.argmax((w < -_WEIGHT_TOL).any(axis=0) | (w > 1 + _WEIGHT_TOL).any(axis=0)))
        raise DataError(
            f"{name}: group {names[j]!r} has weights outside [0, 1] "
            f"([{w[:, j].min():.4g}, {w[:, j].max():.4g}]); "
            "weights are membership probabilities: rescale or clip them to [0, 1].",
            argument=name,
        )
    return np.clip(w, 0.0, 1.0), names


@validate_params({"intersections": ["boolean"]})
def group_indicators(
    data: pd.DataFrame, columns: str | Iterable[str], *, intersections: bool = False
) -> pd.DataFrame:
    """0/1 indicator columns ``"col=value"`` for each value of each named column.

    Groups from different columns overlap (a row is in one group per column); with
    ``intersections=True`` the groups of every combination of values are added
    (``"sex=female & race=yes"``). Feed the result to :func:`group_coverage`, or use it
    inside a ``group_features`` callable of :class:`KandinskyConformal`.

    Parameters
    ----------
    data : pandas.DataFrame
        The rows.
    columns : str or list of str
        Categorical (or discrete) columns.
    intersections : bool, default=False
        Also add one group per observed combination of values (with two or more columns).

    Returns
    -------
    pandas.DataFrame
        Float 0/1 columns, same index as ``data``.

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction", ICML 2025
    (overlapping groups).

    Examples
    --------
    >>> frame = pd.DataFrame({"sex": ["f", "m", "f"], "race": ["a", "a", "b"]})
    >>> list(group_indicators(frame, ["sex", "race"]).columns)
    ['sex=f', 'sex=m', 'race=a', 'race=b']
    """
    frame = check_frame(data, "data")
    cols = check_columns(frame, columns, "columns")
    if not cols:
        raise DataError("columns must name at least one column.", argument="columns")
    out: dict[str, np.ndarray] = {}
    for col in cols:
        values = frame[col]
        if values.isna().any():
            raise DataError(
                f"column {col!r} has missing values; fill them (e.g. 'missing') first.", argument="columns"
            )
        for v in sorted(pd.unique(values), key=str):
            out[f"{col}={v}"] = (values == v).to_numpy(float)
    if intersections and len(cols) > 1:
        keys = frame[cols].apply(lambda r: " & ".join(f"{c}={r[c]}" for c in cols), axis=1)
        for k in sorted(pd.unique(keys)):
            out[k] = (keys == k).to_numpy(float)
    return pd.DataFrame(out, index=frame.index)


def _as_group_frame(groups: Any, n: int, name: str) -> pd.DataFrame:
    """Weights frame from a weights frame/array or a frame/Series of categorical columns."""
    if groups is None:
        return pd.DataFrame(index=range(n))
    if isinstance(groups, pd.Series):
        groups = groups.to_frame(name=groups.name if groups.name is not None else "group")
    if isinstance(groups, pd.DataFrame):
        if len(groups) != n:
            raise DataError(f"{name} has {len(groups)} rows, expected {n}.", argument=name)
        numeric = all(
            pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in groups.dtypes
        )
        if numeric and groups.size and float(groups.min().min()) >= 0 and float(groups.max().max()) <= 1:
            w, names = _weights(groups, n, name)
            return pd.DataFrame(w, columns=names)
        frame = groups.reset_index(drop=True).astype(str)
        return group_indicators(frame, list(frame.columns), intersections=frame.shape[1] > 1)
    w, names = _weights(groups, n, name)
    return pd.DataFrame(w, columns=names)
