"""Public metadata about a table: column kinds, public bounds and category sets.

Differentially private releases need bounds and category sets that do not come
from the private data. A :class:`Schema` is where the data owner declares them
(from domain knowledge or documentation). trustlab never fills one in from the
private data on the user's behalf.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_bounds
from trustlab.errors import DataError

__all__ = ["ACTIONABLE", "ColumnSpec", "Schema"]

#: How a person may change a column, for recourse checks: ``"any"`` direction,
#: ``"increase"`` only, ``"decrease"`` only, or ``"no"`` (immutable: a code, a past
#: event, a fact about the place rather than the person).
ACTIONABLE = ("any", "increase", "decrease", "no")


@dataclass(frozen=True)
class ColumnSpec:
    """Public facts about one column: numeric with ``bounds``, or categorical with ``categories``.

    ``actionable`` (optional, one of :data:`ACTIONABLE`) says how a person may change the
    column; the audit's recourse check uses it (None: the check's default).
    """

    name: str
    bounds: tuple[float, float] | None = None
    categories: tuple[Any, ...] | None = None
    description: str = ""
    actionable: str | None = None

    @property
    def kind(self) -> str:
        return "numeric" if self.bounds is not None else "categorical"


@dataclass(frozen=True)
class Schema:
    """A mapping from column name to its public :class:`ColumnSpec`.

    Examples
    --------
    >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99]},
    ...                                   "sex": {"categories": ["f", "m"]}}})
    >>> s.bounds("age"), s.categories("sex"), s.bounds("income")
    ((18.0, 99.0), ('f', 'm'), None)
    """

    columns: Mapping[str, ColumnSpec] = field(default_factory=dict)
    source: str = "declared by the user"

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def bounds(self, name: str) -> tuple[float, float] | None:
        """The public bounds of a numeric column, or None when none were declared."""
        spec = self.columns.get(name)
        return spec.bounds if spec is not None else None

    def categories(self, name: str) -> tuple[Any, ...] | None:
        """The public category set of a categorical column, or None when none was declared."""
        spec = self.columns.get(name)
        return spec.categories if spec is not None else None

    def actionable(self, name: str) -> str | None:
        """How a person may change the column (one of :data:`ACTIONABLE`), or None if undeclared."""
        spec = self.columns.get(name)
        return spec.actionable if spec is not None else None

    def conform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Cast every declared column to its declared kind; leave the others as they are.

        A column with ``bounds`` becomes ``float64`` clipped to the bounds; a value that
        does not read as a number (``"unknown"``) becomes missing. A column with
        ``categories`` becomes a pandas ``category`` column over exactly the declared
        categories, in declared order; a value that is not one of them (compared as
        itself, then as text, so ``1``, ``1.0`` and ``"1"`` all match a declared ``1``)
        becomes missing. The result's dtypes depend on the schema alone, never on the
        values: the private audit's structure comes from here.

        Examples
        --------
        >>> import pandas as pd
        >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99]},
        ...                                   "sex": {"categories": ["f", "m"]}}})
        >>> df = pd.DataFrame({"age": [20, "unknown", 150], "sex": ["f", "x", None], "z": [1, 2, 3]})
        >>> out = s.conform(df)
        >>> out["age"].tolist(), out["sex"].tolist(), [str(t) for t in out.dtypes]
        ([20.0, nan, 99.0], ['f', nan, nan], ['float64', 'category', 'int64'])
        """
        out = frame.copy()
        for name in frame.columns:
            spec = self.columns.get(name)
            if spec is None:
                continue
            col = frame[name]
            if spec.bounds is not None:
                values = col.astype(float) if pd.api.types.is_bool_dtype(col) else col.astype(object)
                num = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                out[name] = np.clip(num, *spec.bounds)
            else:
                cats = list(spec.categories or ())
                lookup: dict[Any, Any] = {}
                for c in cats:
                    lookup.setdefault(str(c), c)
                exact = {c: c for c in cats}
                obj = col.astype(object)
                hit = obj.map(lambda v, e=exact: e.get(v) if _hashable(v) else None)
                text = obj.map(lambda v, t=lookup: t.get(str(v)) if not _missing(v) else None)
                value = hit.where(hit.notna(), text)
                out[name] = pd.Categorical(value.where(obj.notna()), categories=cats)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str = "declared by the user") -> Schema:
        """Build a schema from ``{"columns": {name: {"bounds": [lo, hi]} | {"categories": [...]}}}``."""
        cols = raw.get("columns") if isinstance(raw, Mapping) else None
        if not isinstance(cols, Mapping):
            raise DataError(
                'schema must be a mapping with a "columns" object, e.g. '
                '{"columns": {"age": {"bounds": [0, 120]}, "sex": {"categories": ["f", "m"]}}}.',
                argument="schema",
            )
        specs: dict[str, ColumnSpec] = {}
        for name, spec in cols.items():
            if not isinstance(spec, Mapping) or ("bounds" in spec) == ("categories" in spec):
                raise DataError(
                    f"schema column {name!r} must give exactly one of 'bounds' or 'categories'.",
                    argument="schema",
                )
            actionable = spec.get("actionable")
            if actionable is not None and actionable not in ACTIONABLE:
                raise DataError(
                    f"schema 'actionable' of {name!r} must be one of {list(ACTIONABLE)}, got {actionable!r}.",
                    argument="schema",
                )
            description = str(spec.get("description", ""))
            if "bounds" in spec:
                specs[name] = ColumnSpec(
                    name,
                    bounds=check_bounds(spec["bounds"], f"schema bounds of {name!r}"),
                    description=description,
                    actionable=actionable,
                )
            else:
                cats = spec["categories"]
                if not isinstance(cats, list | tuple) or not cats:
                    raise DataError(
                        f"schema categories of {name!r} must be a non-empty list.",
                        argument="schema",
                    )
                specs[name] = ColumnSpec(
                    name, categories=tuple(cats), description=description, actionable=actionable
                )
        return cls(specs, source=str(raw.get("source", source)))

    @classmethod
    def from_json(cls, path: str | Path) -> Schema:
        """Read a schema from a JSON file (see :meth:`from_dict` for the format)."""
        p = Path(path)
        try:
            raw = json.loads(p.read_text())
        except FileNotFoundError:
            raise DataError(f"schema file {p} does not exist.", argument="schema") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"schema file {p} is not valid JSON ({exc}).", argument="schema") from None
        return cls.from_dict(raw, source=f"declared in {p.name}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, spec in self.columns.items():
            entry: dict[str, Any] = (
                {"bounds": list(spec.bounds)}
                if spec.bounds is not None
                else {"categories": list(spec.categories or ())}
            )
            if spec.description:
                entry["description"] = spec.description
            if spec.actionable is not None:
                entry["actionable"] = spec.actionable
            out[name] = entry
        return {"source": self.source, "columns": out}


def _missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return not _missing(v)
