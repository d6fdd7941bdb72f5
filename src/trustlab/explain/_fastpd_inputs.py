"""FastPD's inputs: DataFrames with the model's columns, and string categories as the model codes them."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array, check_positive_int
from trustlab.errors import DataError, ParameterError
from trustlab.explain._trees import TreeEnsemble

__all__ = [
    "background_codes",
    "category_codes",
    "curve_grid",
    "finite_input",
    "frame_codes",
    "model_frame",
    "string_columns",
    "subset_indices",
]


def model_frame(X: Any, ens: TreeEnsemble, name: str) -> pd.DataFrame:
    """``X`` as a DataFrame with the model's columns, in the model's order."""
    if not isinstance(X, pd.DataFrame):
        if ens.feature_names is not None:
            raise DataError(
                f"{name} must be a pandas DataFrame: the model was fitted on a DataFrame with "
                f"categorical columns of strings ({string_columns(ens)}); pass rows with its "
                f"columns {list(ens.feature_names)[:20]}.",
                argument=name,
            )
        X = pd.DataFrame(np.asarray(X, dtype=object))
    if X.ndim != 2 or len(X) == 0:
        raise DataError(f"{name} must be a non-empty 2-D table, got shape {X.shape}.", argument=name)
    if ens.feature_names is None:
        if X.shape[1] != ens.n_features:
            raise DataError(
                f"{name} has {X.shape[1]} columns; the model has {ens.n_features} features.",
                argument=name,
            )
        return X
    cols = list(X.columns.map(str))
    expected = list(ens.feature_names)
    if cols == expected:
        return X
    missing = [c for c in expected if c not in cols]
    if missing:
        raise DataError(
            f"{name} lacks the model's feature(s) {missing[:10]}; pass a DataFrame with the "
            f"columns the model was fitted on.",
            argument=name,
        )
    return X.set_axis(cols, axis=1)[expected]


def string_columns(ens: TreeEnsemble) -> list[str]:
    names = ens.feature_names
    return [names[f] if names is not None else str(f) for f in sorted(ens.categories)][:10]


def category_codes(col: pd.Series, values: np.ndarray, feature: str, name: str) -> np.ndarray:
    """Codes of a column of category values, as the model's ``OrdinalEncoder`` makes them.

    The position of each value among the model's known ``values`` (exact match, as
    scikit-learn's hash-table lookup); NaN for a missing value (NaN, None, pd.NA)
    and for a value unseen in training, both of which the model sends down each
    split's missing-value side.
    """
    dtype = col.dtype
    inner = dtype.categories.dtype if isinstance(dtype, pd.CategoricalDtype) else dtype
    if pd.api.types.is_numeric_dtype(inner) or pd.api.types.is_bool_dtype(inner):
        raise DataError(
            f"{name} column {feature!r} has dtype {dtype}, but the model's categories for it are "
            f"strings (e.g. {values[:3].tolist()}); pass the category values, not numbers or codes.",
            argument=name,
        )
    obj = np.array(col, dtype=object)  # a copy: the user's column is not touched
    missing = pd.isna(obj)
    obj[missing] = None
    codes = pd.Index(values, dtype=object).get_indexer(obj)
    out = codes.astype(np.float64)
    out[codes < 0] = np.nan
    return out


def frame_codes(frame: pd.DataFrame, ens: TreeEnsemble, name: str) -> np.ndarray:
    """Float matrix of a DataFrame: category codes for string columns, numbers elsewhere."""
    out = np.empty(frame.shape, dtype=np.float64)
    for f in range(frame.shape[1]):
        col = frame.iloc[:, f]
        label = str(frame.columns[f])
        values = ens.categories.get(f)
        if values is not None:
            out[:, f] = category_codes(col, values, label, name)
            continue
        try:
            out[:, f] = np.asarray(col, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(
                f"{name} column {label!r} must be numeric (the model treats it as a number), "
                f"got dtype {col.dtype}.",
                argument=name,
            ) from None
    return out


def background_codes(
    X: Any, ens: TreeEnsemble, name: str
) -> tuple[np.ndarray, pd.DataFrame | None, list[Any] | None]:
    """Background rows as the trees read them: ``(codes, frame, names)``.

    ``codes`` is the float matrix (string categories as the model's codes); ``frame`` the
    rows as given when the model was fitted on string categories (else None); ``names``
    the column names of a DataFrame (else None). Raises DataError for rows the model
    cannot take (infinite values, a wrong number or order of columns).
    """
    frame: pd.DataFrame | None = None
    names: list[Any] | None
    if ens.categories:
        # string categories: the trees take each such column as its category code
        frame = model_frame(X, ens, name)
        names = list(frame.columns.map(str))
        Xb = frame_codes(frame, ens, name)
    else:
        names = list(X.columns.map(str)) if isinstance(X, pd.DataFrame) else None
        Xb = check_numeric_array(X, name, ndim=2, allow_nan=True)
    if np.isinf(Xb).any():
        raise DataError(
            f"{name} contains infinite values; replace them (NaN is allowed and "
            "follows each split's missing-value direction).",
            argument=name,
        )
    if Xb.shape[1] != ens.n_features:
        raise DataError(
            f"{name} has {Xb.shape[1]} columns but the model was trained on "
            f"{ens.n_features} features; pass rows with the model's features.",
            argument=name,
        )
    if (
        names is not None
        and ens.feature_names is not None
        and list(ens.feature_names) != names
        and not all(n.startswith("Column_") for n in ens.feature_names)
    ):
        if sorted(ens.feature_names) == sorted(names):
            raise DataError(
                f"{name} columns are in a different order than the model's "
                f"features {list(ens.feature_names)}; reorder them.",
                argument=name,
            )
    return Xb, frame, names


def finite_input(arr: np.ndarray, ens: TreeEnsemble, name: str, *, nan_ok: bool, model: str) -> np.ndarray:
    """``arr`` cast to the model's input dtype, after rejecting inf, out-of-range and (maybe) NaN."""
    if np.isinf(arr).any():
        raise DataError(
            f"{name} contains infinite values; replace them (NaN follows each split's "
            "missing-value direction where the model accepts missing values).",
            argument=name,
        )
    top = float(np.finfo(ens.input_dtype).max)
    with np.errstate(invalid="ignore"):
        too_large = np.abs(arr) > top
    if too_large.any():
        raise DataError(
            f"{name} has values beyond {top:.3g}, the largest the model's "
            f"{np.dtype(ens.input_dtype).name} inputs hold; rescale the feature.",
            argument=name,
        )
    if not nan_ok and np.isnan(arr).any():
        raise DataError(
            f"{name} contains NaN but {model} does not take missing values "
            "(or routes them unlike its trees say); impute them first.",
            argument=name,
        )
    return np.asarray(arr, dtype=ens.input_dtype).astype(np.float64)


def subset_indices(subset: Any, names: list[Any]) -> tuple[int, ...]:
    """A subset of features (indices or names, or one of them) as sorted indices into ``names``."""
    items = [subset] if isinstance(subset, numbers.Integral | str) else list(subset)
    n_features = len(names)
    idx = []
    for item in items:
        if isinstance(item, str):
            if item not in names:
                raise ParameterError(
                    f"unknown feature {item!r} in a subset; features are {names[:20]}.",
                    argument="subsets",
                )
            idx.append(names.index(item))
        elif isinstance(item, numbers.Integral) and not isinstance(item, bool):
            if not 0 <= int(item) < n_features:
                raise ParameterError(
                    f"feature index {item} is out of range; the model has "
                    f"{n_features} features (0..{n_features - 1}).",
                    argument="subsets",
                )
            idx.append(int(item))
        else:
            raise ParameterError(
                f"a subset must hold feature indices or names, got {item!r}.",
                argument="subsets",
            )
    if len(set(idx)) != len(idx):
        raise ParameterError(f"subset {tuple(items)} repeats a feature.", argument="subsets")
    return tuple(sorted(idx))


def curve_grid(
    k: int, grid: Any, grid_resolution: int, col: np.ndarray, ens: TreeEnsemble, feature: str
) -> tuple[np.ndarray, np.ndarray]:
    """The grid of feature ``k``'s PD curve and its column of model inputs (see ``FastPD.pd_curve``).

    ``col`` is the feature's background column (codes for string categories, NaN where
    missing). Without a ``grid``: the ``grid_resolution`` most frequent values of a
    categorical feature, in value order; else the unique values when there are at most
    ``grid_resolution``, else evenly spaced points between the 5th and 95th percentiles.
    """
    values = ens.categories.get(k)
    if grid is None:
        check_positive_int(grid_resolution, "grid_resolution", minimum=2)
        uniq, counts = np.unique(col[~np.isnan(col)], return_counts=True)
        if len(uniq) == 0:
            unseen = "missing or unseen" if values is not None else "missing"
            raise DataError(f"feature {k} is {unseen} in every background row; pass a grid.", argument="grid")
        if values is not None or k in ens.categorical:
            # categories, not a range: the most frequent ones, in value order
            codes = np.sort(uniq[np.argsort(-counts, kind="stable")[:grid_resolution]])
            if values is not None:  # string categories: the grid holds the user's values
                return values[codes.astype(np.int64)], codes
            grid = codes
        elif len(uniq) <= grid_resolution:
            grid = uniq
        else:
            present = col[~np.isnan(col)]
            lo, hi = np.percentile(present, [5, 95])
            grid = np.linspace(lo, hi, grid_resolution) if hi > lo else uniq
    elif values is not None:
        grid = np.asarray(grid, dtype=object)
        if grid.ndim != 1 or len(grid) == 0:
            raise DataError(
                f"grid must be a non-empty 1-D sequence of categories, got shape {grid.shape}.",
                argument="grid",
            )
        return grid, category_codes(pd.Series(list(grid)), values, feature, "grid")
    grid = check_numeric_array(grid, "grid", ndim=1)
    return grid, grid
