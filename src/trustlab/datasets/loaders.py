"""Loaders for the user's own tables (CSV and Parquet)."""

from __future__ import annotations

import lzma
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pandas as pd

from trustlab._param_validation import validate_params
from trustlab.datasets._cells import bound_cells
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError

__all__ = ["check_parquet_schemas", "load_table", "parquet_files"]

_CSV = {".csv", ".txt", ".tsv", ".gz", ".bz2", ".zip"}
_PARQUET = {".parquet", ".pq"}


@validate_params(
    {"path": [str, os.PathLike], "allow_empty": ["boolean"], "private": ["boolean"], "schema": [None, Schema]}
)
def load_table(
    path: str | Path, *, allow_empty: bool = False, private: bool = False, schema: Schema | None = None
) -> pd.DataFrame:
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
    private : bool, default False
        Private mode: the table's structure comes from the header and ``schema`` alone,
        never from the values (see Returns), and a text cell longer than
        :data:`~trustlab.datasets._cells.MAX_CELL_CHARS` characters reads as missing.
    schema : Schema, optional
        Private mode: the public schema that decides whether ``Unnamed: 0`` is kept.

    Returns
    -------
    pandas.DataFrame
        The table, text columns as ``category``. A first column named ``Unnamed: 0``
        (an index written out by pandas or R) is dropped when its values are unique and
        increasing; in private mode it is dropped when ``schema`` does not declare it,
        whatever its values.

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
    sep = ","
    try:
        if suffix in _PARQUET:
            _check_flat_parquet(p)
            df = pd.read_parquet(p)
        elif suffix in _CSV:
            sep = "\t" if ".tsv" in [s.lower() for s in p.suffixes] else ","
            _refuse_duplicate_header(p, sep)
            df = pd.read_csv(p, sep=sep)
        else:
            raise DataError(
                f"data file {p.name!r} has an unknown extension {suffix!r}; use .csv, .tsv or .parquet.",
                argument="data",
            )
    except pd.errors.EmptyDataError:
        raise DataError(f"data file {p.name!r} is empty.", argument="data") from None
    except (EOFError, zlib.error, zipfile.BadZipFile, lzma.LZMAError) as exc:
        raise DataError(
            f"data file {p.name!r} is truncated or damaged ({type(exc).__name__}: "
            f"{exc or 'the compressed data ends early'}); copy or download it again.",
            argument="data",
        ) from None
    except UnicodeDecodeError as exc:
        raise DataError(
            f"data file {p.name!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); if it is "
            "Latin-1 or Windows-1252, re-save it as UTF-8 (e.g. iconv -f latin1 -t utf-8 IN > OUT).",
            argument="data",
        ) from None
    except (pd.errors.ParserError, OSError, ValueError) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"data file {p.name!r} could not be read ({exc}).", argument="data") from None
    if df.shape[1] == 1:
        other = next((c for c in (";", "\t", "|", ",") if c != sep and c in str(df.columns[0])), None)
        if other is not None:
            shown = {"\t": "tab"}.get(other, other)
            raise DataError(
                f"data file {p.name!r} reads as one column {str(df.columns[0])[:60]!r}: it looks "
                f"{shown!r}-separated, and trustlab reads comma-separated .csv and tab-separated .tsv "
                f"files; re-save it with commas (pandas: read_csv(path, sep={other!r}).to_csv(new, "
                "index=False)).",
                argument="data",
            )
    if df.shape[0] == 0 and not allow_empty:
        raise DataError(f"data file {p.name!r} has a header but no rows.", argument="data")
    unnamed = [c for c in df.columns if str(c).startswith("Unnamed: 0")]
    if private:  # header and schema alone decide: never the values
        if unnamed and (schema is None or unnamed[0] not in schema):
            df = df.drop(columns=unnamed[:1])
        df = bound_cells(df)
    elif unnamed and df[unnamed[0]].is_monotonic_increasing and df[unnamed[0]].is_unique:
        df = df.drop(columns=unnamed[:1])  # a written-out pandas/R index column
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]):
            df[col] = df[col].astype("category")
    return df


def _check_flat_parquet(path: Path) -> None:
    """Refuse a Parquet file with a list, struct or map column (the audit reads flat columns)."""
    import pyarrow.parquet as pq
    import pyarrow.types as pat

    try:
        schema = pq.read_schema(path)
    except Exception:
        return  # pandas' read says what is wrong with the file
    nested = [f.name for f in schema if pat.is_nested(f.type)]
    if nested:
        raise DataError(
            f"data file {path.name!r} has column(s) {nested[:5]} of nested type (list, struct or map); "
            "the audit reads flat columns: flatten them into one column per value, or drop them from "
            "the file.",
            argument="data",
        )


def _refuse_duplicate_header(path: Path, sep: str) -> None:
    """Refuse a CSV whose header names a column twice (pandas would rename the second ``NAME.1``).

    The header is read as raw text (compression inferred from the name), never through
    pandas' column naming, which renames repeats silently: a target named twice would
    become a feature called ``NAME.1`` that predicts the target perfectly.
    """
    try:
        header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        return  # reported by the main read
    names = [str(v).strip() for v in header.iloc[0].tolist()] if len(header) else []
    repeated = sorted({n for n in names if n and names.count(n) > 1})
    if repeated:
        raise DataError(
            f"data file {path.name!r} names column(s) {repeated} more than once in its header; pandas "
            "would rename the repeats (e.g. NAME.1) and a copy of the target or of a sensitive column "
            "would become a feature. Rename or remove the repeated columns.",
            argument="data",
        )


_PARQUET_FIX = (
    "rewrite the file(s) with the same columns and types as the others (e.g. "
    "pyarrow.parquet.write_table with one schema), or move them out of the dataset folder"
)


def parquet_files(path: str | Path) -> list[Path]:
    """The Parquet files of a dataset: one file, or every ``*.parquet`` / ``*.pq`` under a folder.

    Parameters
    ----------
    path : str or Path
        A Parquet file or a folder of them (searched recursively, e.g. a Hive-partitioned
        dataset), sorted by path so that the rows' order is reproducible.

    Returns
    -------
    list of Path

    Raises
    ------
    DataError
        The path does not exist, names no Parquet file, or is a folder that also holds
        files of another kind (named: --dask would skip them silently).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     pd.DataFrame({"x": [1]}).to_parquet(Path(tmp) / "a.parquet")
    ...     [p.name for p in parquet_files(tmp)]
    ['a.parquet']
    """
    p = Path(path)
    if not p.exists():
        raise DataError(f"data path {str(p)!r} does not exist; check the path.", argument="data")
    found = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file() and not _hidden(f, p))
    others = [f for f in found if f.suffix.lower() not in _PARQUET]
    files = [f for f in found if f.suffix.lower() in _PARQUET]
    if files and others:
        shown = ", ".join(str(f.relative_to(p)) for f in others[:5]) + (", ..." if len(others) > 5 else "")
        raise DataError(
            f"data folder {str(p)!r} holds {len(others)} file(s) that are not Parquet ({shown}) beside "
            f"{len(files)} Parquet file(s); --dask reads the folder's Parquet files only: move the other "
            "files out (or convert a table with pandas.DataFrame.to_parquet) so that none is skipped.",
            argument="data",
        )
    if not files:
        raise DataError(
            f"data path {str(p)!r} holds no Parquet file (.parquet or .pq); --dask reads Parquet "
            "only: convert the table (pandas.DataFrame.to_parquet).",
            argument="data",
        )
    return files


def _hidden(f: Path, root: Path) -> bool:
    """Bookkeeping files of dataset writers (``_SUCCESS``, ``_metadata``, ``.crc``): not data."""
    return any(part.startswith((".", "_")) for part in f.relative_to(root).parts)


def check_parquet_schemas(
    files: list[Path], required: tuple[str, ...] = (), *, private: bool = False
) -> tuple[Any, int]:
    """Read every file's schema (metadata only) and check that they agree.

    Parameters
    ----------
    files : list of Path
        The dataset's files.
    required : tuple of str
        Columns every file must hold (e.g. the target and the sensitive columns).
    private : bool, default False
        Private mode: only the column names must agree. A file's column types are a
        fact about its rows (one missing value makes pandas write an integer column as
        double), so they decide nothing: each file is read and coerced to the types the
        public schema gives (:func:`read_parquet_private`).

    Returns
    -------
    schema : pyarrow.Schema
        The common schema.
    rows : int
        Total rows (from the files' footers).

    Raises
    ------
    DataError
        A file cannot be read as Parquet, lacks a required column, or has columns or
        types that differ from the first file's; the message names the file and the fix.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import pyarrow as pa
    >>> import pyarrow.parquet as pq
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     for i in range(2):
    ...         pq.write_table(pa.table({"x": [1.0, 2.0], "y": [0, 1]}), Path(tmp) / f"p{i}.parquet")
    ...     schema, rows = check_parquet_schemas(sorted(Path(tmp).glob("*.parquet")), ("y",))
    >>> schema.names, rows
    (['x', 'y'], 4)
    """
    import pyarrow.parquet as pq

    ref = None
    rows = 0
    for f in files:
        try:
            meta = pq.ParquetFile(f).metadata
            schema = meta.schema.to_arrow_schema()
        except Exception as exc:
            raise DataError(
                f"Parquet file {str(f)!r} could not be read ({type(exc).__name__}: {exc}); "
                "replace it or remove it from the dataset.",
                argument="data",
            ) from None
        rows += meta.num_rows
        missing = [c for c in required if c not in schema.names]
        if missing:
            raise DataError(
                f"Parquet file {str(f)!r} has no column(s) {missing} (e.g. the target); every file "
                f"needs them: {_PARQUET_FIX}.",
                argument="data",
            )
        if ref is None:
            ref = (f, schema)
            continue
        first, want = ref
        if schema.names != want.names:
            extra = sorted(set(schema.names) - set(want.names))
            lack = sorted(set(want.names) - set(schema.names))
            raise DataError(
                f"Parquet file {str(f)!r} has different columns from {str(first)!r} (extra "
                f"{extra}, missing {lack}, or another order); {_PARQUET_FIX}.",
                argument="data",
            )
        for name in [] if private else want.names:
            a, b = want.field(name).type, schema.field(name).type
            if a != b:
                raise DataError(
                    f"Parquet file {str(f)!r} stores column {name!r} as {b} but {str(first)!r} as "
                    f"{a}; {_PARQUET_FIX}.",
                    argument="data",
                )
    assert ref is not None
    return ref[1], rows
