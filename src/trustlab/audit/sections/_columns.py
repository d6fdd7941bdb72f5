"""Public facts about the model's input columns: which look like identifiers, codes or weights.

A column that tells rows apart (an identifier), names a category with a number (a state
FIPS code, an industry code) or says how a row was sampled (a survey weight) is rarely a
feature a model should use: an identifier predicts nothing about new people, a code is
split as if it were a quantity (code 36 "between" 34 and 37, and a partial-dependence
curve over codes), and a weight describes the survey, not the person. The audit warns
about such columns and says how to declare or leave them out.

In private mode the warnings are decided from public facts only: the column's name, its
schema declaration and the schema's description; never from its values. Without privacy
an identifier is also recognised from its values (every value distinct).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.section import AuditContext

__all__ = ["category_codes", "group_labels", "integer_resolution", "name_tokens", "suspect_columns"]

_ID = {
    "id", "ids", "uid", "uuid", "guid", "identifier", "serial", "ssn", "rowid", "recid",
    "caseid", "personid", "pid", "hhid", "respid", "idx",
}  # fmt: skip
_CODE = {
    "state", "statefip", "stfips", "fips", "county", "countyfip", "zip", "zipcode", "postcode",
    "postal", "code", "codes", "naics", "sic", "isco", "soc", "occ", "occupation", "ind",
    "industry", "country", "msa", "cbsa", "puma", "geoid", "tract", "district", "province",
    "region", "municipality",
}  # fmt: skip
_WEIGHT = {
    "wght", "wgt", "wt", "wts", "weight", "weights", "perwt", "hhwt", "pwgt", "fnlwgt", "sampwt",
    "pweight", "finalwt", "wtfinl", "asecwt", "expwt",
}  # fmt: skip

KINDS = ("identifier", "code", "weight")


def group_labels(values: pd.Series) -> np.ndarray:
    """A sensitive column's values as text, missing values as ``"(missing)"`` (one group).

    Parameters
    ----------
    values : pandas.Series
        The column (any dtype).

    Returns
    -------
    numpy.ndarray of str
    """
    return values.astype(object).where(values.notna(), "(missing)").astype(str).to_numpy()


def name_tokens(name: Any) -> list[str]:
    """Lower-case word pieces of a column name (split at non-letters and camelCase).

    Parameters
    ----------
    name : object
        A column name (converted with ``str``).

    Returns
    -------
    list of str

    Examples
    --------
    >>> name_tokens("stateFIPS_code2")
    ['state', 'fips', 'code', '2']
    """
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", str(name))
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1 \2", text)
    return [t.lower() for t in re.findall(r"[A-Za-z]+|\d+", text)]


def _kind_from_name(name: Any, description: str) -> tuple[str, str] | None:
    tokens = set(name_tokens(name))
    words = set(name_tokens(description))
    if tokens & _ID or {"identifier"} & words:
        return (
            "identifier",
            f"its name{' or description' if words & {'identifier'} else ''} suggests an identifier",
        )
    if tokens & _WEIGHT or ({"weight", "weights"} & words and {"survey", "sampling", "sample"} & words):
        return "weight", "its name suggests a survey or sampling weight"
    if tokens & _CODE or {"code", "coded", "codes", "fips"} & words:
        src = "description" if not tokens & _CODE else "name"
        return "code", f"its {src} suggests a numeric code for a category"
    return None


def _advice(kind: str, col: str, private: bool) -> str:
    ignore = f"--ignore {col} (Audit(ignore=[{col!r}]))"
    if kind == "identifier":
        return f"an identifier tells rows apart and predicts nothing about new people; leave it out: {ignore}"
    if kind == "weight":
        return (
            "a survey or sampling weight describes how the row was sampled, not the person, and "
            f"the audit does not weight rows; leave it out: {ignore} (if it is a measurement, e.g. "
            "body weight, keep it)"
        )
    declare = f'declare it categorical in the schema ({{"{col}": {{"categories": [...]}}}})'
    where = (
        declare
        if private
        else f"store it as text (df[{col!r}] = df[{col!r}].astype(str)); with --private, {declare}"
    )
    return (
        "a number that names a category (e.g. a state FIPS code) is split by the model as a "
        "quantity (code 36 'between' 34 and 37) and its partial dependence runs over codes; "
        f"{where}; or leave it out: {ignore}"
    )


def suspect_columns(ctx: AuditContext) -> list[dict[str, str]]:
    """Model inputs that look like identifiers, numeric codes or weights, with how to fix them.

    Private mode reads only public facts (names, the schema's declarations and
    descriptions): a column declared categorical is never called a code. Without privacy
    the column's dtype decides what is numeric, and an integer or text column whose
    values are all distinct (20 rows or more) is called an identifier.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context (its features, schema and, without privacy, data).

    Returns
    -------
    list of dict
        ``{"column", "kind", "reason", "advice"}`` per suspect column, in feature order;
        ``kind`` is one of ``"identifier"``, ``"code"``, ``"weight"``.

    Examples
    --------
    >>> from trustlab.audit.sections._columns import _kind_from_name
    >>> _kind_from_name("state", "")[0], _kind_from_name("wght", "")[0], _kind_from_name("age", "")
    ('code', 'weight', None)
    """
    shared = getattr(ctx, "shared", None)  # an AuditContext caches it (four sections read it)
    found: list[dict[str, str]] = shared(_SUSPECT_KEY, lambda: _suspects(ctx)) if shared else _suspects(ctx)
    return [dict(s) for s in found]


_SUSPECT_KEY = "suspect_columns"


def _suspects(ctx: AuditContext) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    schema = ctx.schema
    for col in ctx.features:
        spec = schema.columns.get(col) if schema is not None else None
        description = spec.description if spec is not None else ""
        declared_cat = spec is not None and spec.categories is not None
        if ctx.private:
            numeric = not declared_cat  # declared with bounds, or undeclared (type unknown publicly)
        else:
            values = ctx.data[col]
            numeric = bool(pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values))
        found = _kind_from_name(col, description)
        if found is not None and found[0] in ("code", "weight") and not numeric:
            found = None  # a text column is categorical already; a text weight is no weight
        if found is None and not ctx.private and _all_distinct(ctx.data[col]):
            found = ("identifier", "every value is distinct")
        if found is not None:
            kind, reason = found
            if ctx.private and spec is None and kind == "code":
                reason += " (it is not declared in the schema, so whether it holds numbers is not public)"
            out.append(
                {
                    "column": str(col),
                    "kind": kind,
                    "reason": reason,
                    "advice": _advice(kind, str(col), ctx.private),
                }
            )
    return out


def _all_distinct(values: pd.Series) -> bool:
    """Raw mode only: integer-valued or text values, at least 20, all different."""
    v = values.dropna()
    if len(v) < 20:
        return False
    if pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v):
        x = v.to_numpy(dtype=float)
        if not (np.all(np.isfinite(x)) and np.all(x == np.round(x))):
            return False  # decided without hashing the values (a measurement column)
    head = v.iloc[:_HEAD]  # most columns repeat a value early: decided on the first rows
    return bool(head.nunique() == len(head) and (len(v) <= _HEAD or v.nunique() == len(v)))


_HEAD = 10_000


def integer_resolution(schema: Any, column: str) -> int | None:
    """Grid steps that put a DP quantile of an integer-valued column on the integers, or None.

    A column is integer-valued when the schema says so (``"integer": true``) and its
    public bounds are integers: then ``resolution = upper - lower`` makes the grid step
    1, so released quartiles and whiskers are whole numbers (a count on (0, 10) shows 1,
    not 1.0000038 from the default ``2**20`` grid). Public facts only.

    Parameters
    ----------
    schema : Schema or None
        The public schema.
    column : str
        The column's name.

    Returns
    -------
    int or None
        ``upper - lower``, or None when the column is not declared integer-valued with
        integer bounds (or the span is below 1).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> spec = SimpleNamespace(bounds=(0.0, 10.0), integer=True)
    >>> integer_resolution(SimpleNamespace(columns={"kids": spec}), "kids")
    10
    """
    spec = schema.columns.get(column) if schema is not None else None
    if spec is None or getattr(spec, "integer", None) is not True or spec.bounds is None:
        return None
    lower, upper = spec.bounds
    if not (float(lower).is_integer() and float(upper).is_integer()) or upper - lower < 1:
        return None
    return int(upper - lower)


def category_codes(values: Any, categories: list[Any]) -> np.ndarray:
    """Codes over the declared ``categories``, ``len(categories)`` for missing or other.

    The private sections' code histograms (Data's level counts, Privacy's group sizes, the
    prediction table's cells) count these.

    Examples
    --------
    >>> import pandas as pd
    >>> category_codes(pd.Series(["b", None, "a", "z"]), ["a", "b"]).tolist()
    [1, 2, 0, 2]
    """
    lookup = {v: i for i, v in enumerate(categories)}
    return values.astype(object).map(lookup).fillna(len(categories)).to_numpy(dtype=np.int64)
