"""Input checks shared by the explain modules (beyond :mod:`trustlab._validation`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_array
from trustlab.errors import DataError

__all__ = ["check_instance"]


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
    row = check_array(x, name, ndim=1)
    if row.shape[0] != n_features:
        raise DataError(
            f"{name} must have {n_features} values (one per feature), got {row.shape[0]}.", argument=name
        )
    return row
