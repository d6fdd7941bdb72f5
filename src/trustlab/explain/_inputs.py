"""Input checks shared by the explain modules (beyond :mod:`trustlab._validation`)."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError

__all__ = ["MAX_MAGNITUDE", "as_list", "check_instance", "check_magnitude"]

# Largest |value| the explain methods take in data: squares and sums of up to 1e8
# squares of such values stay finite (1e200 * 1e8 < 1.8e308), so scales, distances
# and least-squares fits never overflow. Larger values are a unit problem: rescale.
MAX_MAGNITUDE = 1e100


def as_list(value: Any, name: str) -> list[Any]:
    """A single name (a string, never split into characters) or an iterable of them, as a list.

    Parameters
    ----------
    value : str, int or iterable
    name : str
        The argument the user passed, for the message.

    Returns
    -------
    list
    """
    if isinstance(value, str | numbers.Integral) and not isinstance(value, bool):
        return [value]
    if isinstance(value, Mapping | bytes | pd.DataFrame) or not isinstance(value, Iterable):
        raise ParameterError(
            f"{name} must be a feature name or a list of them, got {type(value).__name__}.", argument=name
        )
    return list(value)


def check_magnitude(arr: np.ndarray, name: str, *, limit: float = MAX_MAGNITUDE) -> np.ndarray:
    """``arr`` unchanged when every finite entry has ``|value| <= limit``, else a :class:`DataError`.

    Parameters
    ----------
    arr : numpy.ndarray
        Numbers (NaN and inf are left to the caller's own checks).
    name : str
        The argument the user passed, for the message.
    limit : float, default :data:`MAX_MAGNITUDE`

    Returns
    -------
    numpy.ndarray
    """
    with np.errstate(invalid="ignore"):
        big = np.isfinite(arr) & (np.abs(arr) > limit)
    if np.any(big):
        value = float(np.asarray(arr)[big].flat[0])
        raise DataError(
            f"{name} holds {value:.3g}, beyond {limit:.0e} in magnitude; rescale it (e.g. other units) "
            "so that distances and squares stay finite.",
            argument=name,
        )
    return arr


def check_instance(
    x: Any, n_features: int, names: Sequence[str] | None = None, *, exact: bool = False, name: str = "x"
) -> np.ndarray:
    """One instance as a finite 1-D float array of ``n_features`` values.

    ``x`` may be array-like, a Series (put in the order of ``names`` when given; with
    ``exact``, labels not in ``names`` are an error too) or a one-row DataFrame.
    """
    if isinstance(x, pd.DataFrame):
        if len(x) != 1:
            raise DataError(f"{name} must be one row, got a DataFrame with {len(x)} rows.", argument=name)
        x = x.iloc[0]
    if isinstance(x, pd.Series) and names is not None:
        idx = [str(i) for i in x.index]
        missing = [n for n in names if n not in idx]
        extra = [i for i in idx if i not in names] if exact else []
        if missing or extra:
            raise DataError(
                f"{name} does not match the features {list(names)[:10]}: missing {missing[:5]}, "
                f"unknown {extra[:5]}.",
                argument=name,
            )
        x = x.set_axis(idx)[list(names)]
    row = check_magnitude(check_numeric_array(x, name, ndim=1), name)
    if row.shape[0] != n_features:
        raise DataError(
            f"{name} must have {n_features} values (one per feature), got {row.shape[0]}.", argument=name
        )
    return row
