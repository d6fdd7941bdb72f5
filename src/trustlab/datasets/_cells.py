"""Reading single cells of any type without raising (private module).

The private audit must not raise, branch or change a column's type because of one
row's value, and pandas' own converters raise on some cells (``10**400``,
``Decimal("sNaN")``, objects whose ``__str__`` or ``__hash__`` fails). The helpers
here turn every cell they cannot read into a missing value instead; a cell's
result depends on that cell alone (never on the other cells of its column), so
partitions of a table read alike however they are cut.
"""

from __future__ import annotations

import decimal
import numbers
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MAX_CELL_CHARS", "bound_cells", "cell_text", "hashable", "is_missing", "safe_key", "to_float"]

MAX_CELL_CHARS = 4096
"""Longest text cell the private audit reads (characters); a longer one reads as missing.

A public constant: whatever a cell holds, the work done on it is bounded.
"""


def is_missing(v: Any) -> bool:
    """Whether pandas reads the cell as missing; False when it cannot tell (never raises)."""
    try:
        return bool(pd.isna(v))
    except Exception:  # e.g. decimal.InvalidOperation on Decimal("sNaN"), arrays
        return False


def hashable(v: Any) -> bool:
    """Whether the cell can be a dict key and is not missing (never raises)."""
    try:
        hash(v)
    except Exception:  # TypeError (lists), decimal's signalling NaN, a broken __hash__
        return False
    return not is_missing(v)


def cell_text(v: Any) -> str:
    """``str(v)``, or the type's name when ``str`` fails (never raises)."""
    try:
        text = str(v)
    except Exception:
        return f"<{type(v).__name__}>"
    return text if isinstance(text, str) else f"<{type(v).__name__}>"


def safe_key(v: Any) -> Any:
    """The cell itself when it hashes safely, else its text (missing cells stay missing)."""
    if is_missing(v):
        return None
    try:
        hash(v)
    except Exception:
        return cell_text(v)
    return v


def _number(v: Any) -> float | None:
    """A non-text cell as a float (NaN when it is no real number); None for text, to parse."""
    if isinstance(v, str | bytes | bytearray):
        return None
    if isinstance(v, numbers.Real | decimal.Decimal) and not isinstance(v, np.timedelta64 | np.datetime64):
        try:
            return float(v)
        except Exception:  # 10**400 (OverflowError), Decimal("sNaN") (ValueError)
            return np.nan
    return np.nan  # complex, dates, containers, objects: not numbers here


def _parse_text(texts: list[Any]) -> np.ndarray:
    try:
        out = pd.to_numeric(pd.Series(texts, dtype=object), errors="coerce")
        return np.asarray(out.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
    except Exception:  # e.g. a digit string beyond every integer type: one at a time
        if len(texts) == 1:
            return np.full(1, np.nan)
        return np.concatenate([_parse_text([t]) for t in texts])


def to_float(values: pd.Series) -> np.ndarray:
    """Each cell as a float64, NaN where it does not read as a real number (never raises).

    Numeric and boolean columns convert as a whole. In other columns a real number
    (``int``, ``float``, ``bool``, ``Decimal``, ``Fraction``, NumPy scalars) is
    ``float(v)``, text (and bytes) is read by ``pandas.to_numeric(errors="coerce")``
    (``"40"`` is 40.0), and everything else (complex numbers, dates, containers, and
    numbers ``float`` cannot hold: ``10**400``, ``Decimal("sNaN")``) is NaN. Each
    result depends on its own cell only.

    Parameters
    ----------
    values : pandas.Series
        A column of any dtype.

    Returns
    -------
    numpy.ndarray of float64

    Examples
    --------
    >>> import decimal
    >>> to_float(pd.Series([40, "7", 10**400, decimal.Decimal("sNaN"), 1j], dtype=object)).tolist()
    [40.0, 7.0, nan, nan, nan]
    """
    dtype = values.dtype
    if pd.api.types.is_bool_dtype(dtype) or (
        pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype)
    ):
        try:
            return np.asarray(values.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
        except Exception:  # e.g. an Arrow decimal beyond float range: cell by cell below
            pass
    cells = values.astype(object).to_numpy()
    kind = np.fromiter((_KIND.get(type(v), 2) for v in cells), dtype=np.int8, count=len(cells))
    out = np.full(len(cells), np.nan)
    plain = np.flatnonzero(kind == 0)  # Python and NumPy floats, ints, bools: fast, cell by cell alike
    if plain.size:
        try:
            out[plain] = np.asarray(cells[plain].tolist(), dtype=np.float64)
        except Exception:  # an int beyond float range
            out[plain] = [_number(v) for v in cells[plain]]
    text = np.flatnonzero(kind == 1)
    if text.size:
        out[text] = _parse_text(cells[text].tolist())
    other = np.flatnonzero(kind == 2)
    for i in other:
        x = _number(cells[i])
        out[i] = _parse_text([cells[i]])[0] if x is None else x
    return out


_KIND: dict[type, int] = {
    **{t: 0 for t in (float, int, bool, np.float64, np.float32, np.int64, np.int32, np.bool_)},
    **{t: 1 for t in (str, bytes)},
    type(None): 3,
}


def _is_long(v: Any) -> bool:
    return isinstance(v, str | bytes | bytearray) and len(v) > MAX_CELL_CHARS


def bound_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text (or bytes) cell longer than :data:`MAX_CELL_CHARS` made missing.

    Every column keeps its dtype (a categorical column loses the over-long categories);
    numeric and boolean columns are returned as they are.

    Examples
    --------
    >>> out = bound_cells(pd.DataFrame({"t": ["a", "b" * 5000], "x": [1, 2]}))
    >>> out["t"].isna().tolist(), out["x"].tolist()
    ([False, True], [1, 2])
    """
    out = frame.copy()
    for j in range(frame.shape[1]):
        col = frame.iloc[:, j]
        dtype = col.dtype
        if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
            continue
        if isinstance(dtype, pd.CategoricalDtype):
            cats = col.cat.categories
            out.isetitem(j, col.cat.remove_categories(cats[[_is_long(c) for c in cats]]).array)
        elif not pd.api.types.is_object_dtype(dtype) and pd.api.types.is_string_dtype(dtype):
            out.isetitem(j, col.where(~(col.str.len() > MAX_CELL_CHARS).fillna(False).astype(bool)).array)
        else:
            out.isetitem(j, col.astype(object).map(lambda v: None if _is_long(v) else v).array)
    return out
