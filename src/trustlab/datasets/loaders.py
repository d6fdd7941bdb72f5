"""Loaders for the user's own tables (CSV and Parquet)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from trustlab._param_validation import validate_params
from trustlab.errors import DataError

__all__ = ["load_table"]

_CSV = {".csv", ".txt", ".tsv", ".gz", ".bz2", ".zip"}
_PARQUET = {".parquet", ".pq"}


@validate_params({"path": [str, os.PathLike], "allow_empty": ["boolean"]})
def load_table(path: str | Path, *, allow_empty: bool = False) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.tsv``, optionally compressed) or Parquet file into a DataFrame.

    Text columns become pandas ``category`` columns, so that models and group
    metrics treat them alike whatever the file format.

    Parameters
    ----------
    path : str or Path
        The file.
    allow_empty : bool, default False
        Return a table with a header and no rows instead of raising. Private uses set
        it: whether the table has rows is a fact about the rows, which must not decide
        whether the command fails.

    Returns
    -------
    pandas.DataFrame
        The table, text columns as ``category``. A first column named ``Unnamed: 0``
        that is unique and increasing (an index written out by pandas or R) is dropped.

    Raises
    ------
    DataError
        If the file does not exist, is a folder, has an unknown extension, cannot be
        parsed, or has no rows (unless ``allow_empty``); ``argument="data"``.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = Path(tmp) / "people.csv"
    ...     pd.DataFrame({"age": [30, 41], "sex": ["f", "m"]}).to_csv(path, index=False)
    ...     df = load_table(path)
    >>> df.shape, [str(t) for t in df.dtypes]
    ((2, 2), ['int64', 'category'])
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"data file {str(p)!r} does not exist; check the path.", argument="data")
    if p.is_dir():
        raise DataError(f"data path {str(p)!r} is a folder; give a CSV or Parquet file.", argument="data")
    suffix = p.suffix.lower()
    try:
        if suffix in _PARQUET:
            df = pd.read_parquet(p)
        elif suffix in _CSV:
            sep = "\t" if ".tsv" in [s.lower() for s in p.suffixes] else ","
            df = pd.read_csv(p, sep=sep)
        else:
            raise DataError(
                f"data file {p.name!r} has an unknown extension {suffix!r}; use .csv, .tsv or .parquet.",
                argument="data",
            )
    except pd.errors.EmptyDataError:
        raise DataError(f"data file {p.name!r} is empty.", argument="data") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"data file {p.name!r} could not be read ({exc}).", argument="data") from None
    if df.shape[0] == 0 and not allow_empty:
        raise DataError(f"data file {p.name!r} has a header but no rows.", argument="data")
    unnamed = [c for c in df.columns if str(c).startswith("Unnamed: 0")]
    if unnamed and df[unnamed[0]].is_monotonic_increasing and df[unnamed[0]].is_unique:
        df = df.drop(columns=unnamed[:1])  # a written-out pandas/R index column
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]):
            df[col] = df[col].astype("category")
    return df
