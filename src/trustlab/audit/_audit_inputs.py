"""Input checks of the Audit: column names, raw column values, and private-mode model frames."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.section import Section
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError, ParameterError

__all__ = [
    "MAX_ABS_VALUE",
    "check_sections",
    "check_values",
    "column_argument",
    "column_name",
    "column_names",
    "model_frame",
]

MAX_ABS_VALUE = 3.4e38
"""Largest magnitude of a number in a raw (non-private) audit: scikit-learn's tree models
compare ``float32`` values (``|x| <= 3.4e38``), and sums of squares stay finite below it.
Private audits clip undeclared columns to it instead of raising (a fact about the rows)."""


def column_name(value: Any, argument: str) -> Any:
    """A column name as the user may pass it: text or an integer (pandas' default labels)."""
    if isinstance(value, str) or (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
        return value
    shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:57]}..."
    raise ParameterError(
        f"{argument} must name a column (a string, or an int for unnamed columns); got "
        f"{type(value).__name__} {shown}.",
        argument=argument,
    )


def column_names(value: Any, argument: str) -> list[Any]:
    """Column names from one name or a list of names; a string is one name, never its characters."""
    if value is None:
        return []
    if isinstance(value, str | numbers.Integral) and not isinstance(value, bool):
        return [value]
    if isinstance(value, pd.Index | pd.Series | np.ndarray):
        value = list(np.ravel(np.asarray(value, dtype=object)))
    if not isinstance(value, list | tuple):
        raise ParameterError(
            f"{argument} must be a column name or a list of column names; got {type(value).__name__}.",
            argument=argument,
        )
    names = [column_name(v, argument) for v in value]
    repeated = sorted({str(v) for v in names if names.count(v) > 1})
    if repeated:
        raise ParameterError(
            f"{argument} names the column(s) {repeated} more than once; list each column once.",
            argument=argument,
        )
    return names


def column_argument(name: Any) -> str:
    """A column's name as an error's ``argument``: never empty (an unnamed column is shown quoted)."""
    text = str(name)
    return text if text.strip() else repr(text)


def check_sections(sections: Any) -> None:
    if sections is None:
        return
    if not isinstance(sections, list | tuple) or not all(isinstance(s, Section) for s in sections):
        raise ParameterError(
            "sections must be None (the registered defaults) or a list of Section objects; got "
            f"{type(sections).__name__}.",
            argument="sections",
        )


def check_values(data: pd.DataFrame, columns: Sequence[Any]) -> None:
    """Raw mode only: refuse column types and values no model or summary can use, naming the column.

    Private mode never calls this (one row may turn a column into text or complex numbers:
    whether the audit raises must not tell): there the schema and :func:`model_frame`
    make every column usable.
    """
    for c in columns:
        col = data[c]
        dtype = col.dtype
        fix = "or leave it out (--ignore / Audit(ignore=...))."
        if pd.api.types.is_complex_dtype(dtype):
            raise DataError(
                f"column {c!r} holds complex numbers; trustlab audits real-valued tables: keep the "
                f"real part or the magnitude, {fix}",
                argument=column_argument(c),
            )
        if (
            isinstance(dtype, pd.IntervalDtype | pd.PeriodDtype)
            or pd.api.types.is_datetime64_any_dtype(dtype)
            or pd.api.types.is_timedelta64_dtype(dtype)
        ):
            raise DataError(
                f"column {c!r} has dtype {dtype}; convert it to numbers (e.g. the year, or days "
                f"since a date) or to text, {fix}",
                argument=column_argument(c),
            )
        if pd.api.types.is_bool_dtype(dtype):
            continue
        if pd.api.types.is_numeric_dtype(dtype):
            x = col.to_numpy(dtype=np.float64, na_value=np.nan)
            n_inf = int(np.isinf(x).sum())
            if n_inf:
                raise DataError(
                    f"column {c!r} holds {n_inf} infinite value(s); replace them by missing values "
                    f"(empty cells), {fix}",
                    argument=column_argument(c),
                )
            biggest = float(np.nanmax(np.abs(x))) if np.isfinite(x).any() else 0.0
            if biggest > MAX_ABS_VALUE:
                raise DataError(
                    f"column {c!r} holds values beyond +-{MAX_ABS_VALUE:g} (largest magnitude "
                    f"{biggest:.3g}); tree models compare float32 numbers: rescale the column "
                    f"(other units), {fix}",
                    argument=column_argument(c),
                )
            continue
        values = col.cat.categories if isinstance(dtype, pd.CategoricalDtype) else col.dropna()
        for v in values:
            if isinstance(v, complex | np.complexfloating):
                raise DataError(
                    f"column {c!r} holds complex numbers; trustlab audits real-valued tables: keep "
                    f"the real part or the magnitude, {fix}",
                    argument=column_argument(c),
                )
            if not isinstance(v, str | bytes | numbers.Number | np.bool_):
                raise DataError(
                    f"column {c!r} holds {type(v).__name__} values; each cell must be text, a number "
                    f"or a boolean: convert the column, {fix}",
                    argument=column_argument(c),
                )


def model_frame(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Model input in private mode: declared columns as conformed; the others made type-stable.

    Undeclared real-valued columns become float64 with infinities as missing and
    magnitudes clipped to :data:`MAX_ABS_VALUE`; any other undeclared column (text,
    mixed, complex, dates) becomes text (missing kept), so that one odd value cannot
    make an encoder fail on mixed types.
    """
    out = frame.copy()
    for c in frame.columns:
        if c in schema:
            continue
        col = frame[c]
        if (
            pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_complex_dtype(col)
        ) or pd.api.types.is_bool_dtype(col):
            x = col.to_numpy(dtype=np.float64, na_value=np.nan)
            out[c] = np.clip(np.where(np.isfinite(x), x, np.nan), -MAX_ABS_VALUE, MAX_ABS_VALUE)
        else:
            obj = col.astype(object)
            out[c] = obj.where(obj.isna(), obj.astype(str))
    return out
