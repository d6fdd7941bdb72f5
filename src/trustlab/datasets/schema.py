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

from trustlab.datasets._cells import MAX_CELL_CHARS, cell_text, hashable, is_missing, to_float
from trustlab.datasets._schema_checks import (
    ACTIONABLE,
    MAX_SCHEMA_BYTES,
    column_fields,
    privacy_spent,
    reject_constant,
    rows,
)
from trustlab.errors import DataError

__all__ = ["ACTIONABLE", "ColumnSpec", "Schema"]


@dataclass(frozen=True)
class ColumnSpec:
    """Public facts about one column: numeric (``bounds``), categorical (``categories``) or ``text``.

    Built by :meth:`Schema.from_dict`, which checks every field; the constructor itself
    checks nothing.

    Attributes
    ----------
    name : str
        The column's name.
    bounds : (float, float) or None
        Public ``(lower, upper)`` of a numeric column; None for a categorical one.
    categories : tuple or None
        The public category set of a categorical column, in declared order; None for a
        numeric or text one.
    text : bool
        A free-text column (``"text": true``): kept as strings, never a model feature; the
        audit's Explain section reads it for hypotheses about the target (raw mode).
    description : str
        Free text about the column ("" when none).
    actionable : str or None
        How a person may change the column (one of :data:`ACTIONABLE`); the audit's
        recourse check uses it (None: the check's default).
    integer : bool or None
        Numeric columns only: the column holds whole numbers, so DP quantiles may use
        an integer grid (None: not declared).
    review : str
        A note for the person who checks the schema (a draft from
        :func:`trustlab.datasets.draft_schema` marks every entry it estimated from the
        data); it changes nothing in the audit.

    Examples
    --------
    >>> ColumnSpec("age", bounds=(18.0, 99.0)).kind
    'numeric'
    >>> ColumnSpec("sex", categories=("f", "m")).kind
    'categorical'
    >>> ColumnSpec("note", text=True).kind
    'text'
    """

    name: str
    bounds: tuple[float, float] | None = None
    categories: tuple[Any, ...] | None = None
    description: str = ""
    actionable: str | None = None
    integer: bool | None = None
    review: str = ""
    text: bool = False

    @property
    def kind(self) -> str:
        """``"text"`` for a text column, ``"numeric"`` when it has ``bounds``, else ``"categorical"``."""
        if self.text:
            return "text"
        return "numeric" if self.bounds is not None else "categorical"


@dataclass(frozen=True)
class Schema:
    """A mapping from column name to its public :class:`ColumnSpec`.

    Build one with :meth:`from_dict` or :meth:`from_json`, which check every entry.

    Attributes
    ----------
    columns : Mapping of str to ColumnSpec
        Each declared column's public facts, keyed by column name (empty by default).
    source : str
        Where the schema came from, shown in the report (default ``"declared by the
        user"``; :meth:`from_json` writes ``"declared in FILE"``).
    epsilon_spent, delta_spent : float
        The privacy budget spent to draft the schema from the data (zero when it was
        declared from public knowledge); a private audit that uses it spends this on
        top of its own ``epsilon`` (basic composition).
    rows : int or None
        A public estimate of the table's row count (from the study design or
        documentation, never counted from the private rows), or None. Used only where a
        step size needs a scale: the private model's DP-SGD divisor.

    Examples
    --------
    >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99]},
    ...                                   "sex": {"categories": ["f", "m"]}}})
    >>> s.bounds("age"), s.categories("sex"), s.bounds("income")
    ((18.0, 99.0), ('f', 'm'), None)
    """

    columns: Mapping[str, ColumnSpec] = field(default_factory=dict)
    source: str = "declared by the user"
    epsilon_spent: float = 0.0
    delta_spent: float = 0.0
    rows: int | None = None

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def bounds(self, name: str) -> tuple[float, float] | None:
        """The public bounds of a numeric column, or None when none were declared.

        Parameters
        ----------
        name : str
            The column name.

        Returns
        -------
        (float, float) or None
            The declared ``(lower, upper)``; None when the column is undeclared or
            categorical.

        Examples
        --------
        >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99]}}})
        >>> s.bounds("age"), s.bounds("income")
        ((18.0, 99.0), None)
        """
        spec = self.columns.get(name)
        return spec.bounds if spec is not None else None

    def categories(self, name: str) -> tuple[Any, ...] | None:
        """The public category set of a categorical column, or None when none was declared.

        Parameters
        ----------
        name : str
            The column name.

        Returns
        -------
        tuple or None
            The declared categories in declared order; None when the column is
            undeclared or numeric.

        Examples
        --------
        >>> s = Schema.from_dict({"columns": {"sex": {"categories": ["f", "m"]}}})
        >>> s.categories("sex"), s.categories("age")
        (('f', 'm'), None)
        """
        spec = self.columns.get(name)
        return spec.categories if spec is not None else None

    def kind(self, name: str) -> str | None:
        """The declared kind of a column: ``"numeric"``, ``"categorical"``, ``"text"``, or None.

        Parameters
        ----------
        name : str
            The column name.

        Returns
        -------
        str or None
            :attr:`ColumnSpec.kind` of the column; None when it is undeclared.

        Examples
        --------
        >>> s = Schema.from_dict({"columns": {"note": {"text": True}}})
        >>> s.kind("note"), s.kind("age")
        ('text', None)
        """
        spec = self.columns.get(name)
        return spec.kind if spec is not None else None

    def actionable(self, name: str) -> str | None:
        """How a person may change the column (one of :data:`ACTIONABLE`), or None if undeclared.

        Parameters
        ----------
        name : str
            The column name.

        Returns
        -------
        str or None
            The column's declared ``actionable``; None when the column or its
            ``actionable`` entry is undeclared.

        Examples
        --------
        >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99], "actionable": "increase"},
        ...                                   "sex": {"categories": ["f", "m"]}}})
        >>> s.actionable("age"), s.actionable("sex")
        ('increase', None)
        """
        spec = self.columns.get(name)
        return spec.actionable if spec is not None else None

    def conform(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Cast every declared column to its declared kind; leave the others as they are.

        A column with ``bounds`` becomes ``float64`` clipped to the bounds; a value that
        does not read as a number (``"unknown"``) becomes missing. A column with
        ``categories`` becomes a pandas ``category`` column over exactly the declared
        categories, in declared order; a value that is not one of them (compared as
        itself, then as text, so ``1``, ``1.0`` and ``"1"`` all match a declared ``1``)
        becomes missing. A ``text`` column becomes an ``object`` column of strings; a cell
        that is not a string, or longer than
        :data:`~trustlab.datasets._cells.MAX_CELL_CHARS` characters, becomes missing. The
        result's dtypes depend on the schema alone, never on the values: the private
        audit's structure comes from here.

        Parameters
        ----------
        frame : pandas.DataFrame
            The table; it is not modified.

        Returns
        -------
        pandas.DataFrame
            A copy of ``frame`` with every declared column cast as described above.

        Examples
        --------
        >>> import pandas as pd
        >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99]},
        ...                                   "sex": {"categories": ["f", "m"]}}})
        >>> df = pd.DataFrame({"age": [20, "unknown", 150], "sex": ["f", "x", None], "z": [1, 2, 3]})
        >>> out = s.conform(df)
        >>> out["age"].tolist(), out["sex"].tolist(), [str(t) for t in out.dtypes]
        ([20.0, nan, 99.0], ['f', nan, nan], ['float64', 'category', 'int64'])
        >>> t = Schema.from_dict({"columns": {"note": {"text": True}}})
        >>> t.conform(pd.DataFrame({"note": ["late again", 3, None]}))["note"].tolist()
        ['late again', nan, nan]
        """
        out = frame.copy()
        for name in frame.columns:
            spec = self.columns.get(name)
            if spec is None:
                continue
            col = frame[name]
            if spec.text:
                obj = col.astype(object)
                ok = obj.map(lambda v: isinstance(v, str) and len(v) <= MAX_CELL_CHARS).astype(bool)
                out[name] = pd.Series(obj.where(ok, np.nan), index=col.index, dtype=object)
            elif spec.bounds is not None:
                out[name] = np.clip(to_float(col), *spec.bounds)
            else:
                cats = list(spec.categories or ())
                lookup: dict[Any, Any] = {}
                for c in cats:
                    lookup.setdefault(str(c), c)
                exact = {c: c for c in cats}
                obj = col.astype(object)
                missing = obj.map(is_missing).astype(bool)
                value = obj.map(lambda v, e=exact, t=lookup: _category(v, e, t))
                out[name] = pd.Categorical(value.where(~missing), categories=cats)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, source: str = "declared by the user") -> Schema:
        """Build a schema from ``{"columns": {name: {"bounds": [lo, hi]} | {"categories": [...]}}}``.

        Each column gives exactly one of ``bounds`` (two finite numbers, ``lo < hi``, within
        ``+-1e270``), ``categories`` (a non-empty list of distinct strings, numbers or
        booleans) or ``"text": true`` (free text: never a model feature), and optionally
        ``description`` (text), ``actionable`` (one of :data:`ACTIONABLE`; not with
        ``text``), ``integer`` (a boolean, with ``bounds``) and ``review`` (text).
        A top-level ``privacy`` object (``{"epsilon": e, "delta": d}``) records the budget
        a draft spent reading the data (:func:`trustlab.datasets.draft_schema`), a
        top-level ``source`` (text) overrides the ``source`` argument, and a top-level
        ``rows`` (a positive integer) is a public estimate of the row count.

        Parameters
        ----------
        raw : Mapping
            The schema, e.g. parsed from JSON.
        source : str, default "declared by the user"
            Where the schema came from, shown in the report (when ``raw`` has no
            ``source`` of its own).

        Returns
        -------
        Schema
            The checked schema; bounds are floats, categories tuples.

        Raises
        ------
        DataError
            With ``argument="schema"``, naming the column and what to write instead.

        Examples
        --------
        >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99], "integer": True}}})
        >>> spec = s.columns["age"]
        >>> spec.kind, spec.bounds, spec.integer
        ('numeric', (18.0, 99.0), True)
        >>> Schema.from_dict({"columns": {"note": {"text": True}}}).columns["note"].kind
        'text'
        """
        cols = raw.get("columns") if isinstance(raw, Mapping) else None
        if not isinstance(cols, Mapping):
            raise DataError(
                'schema must be a JSON object with a "columns" object, e.g. '
                '{"columns": {"age": {"bounds": [0, 120]}, "sex": {"categories": ["f", "m"]}}}.',
                argument="schema",
            )
        specs: dict[str, ColumnSpec] = {}
        for name, spec in cols.items():
            specs[name] = ColumnSpec(name, **column_fields(name, spec))
        src = raw.get("source", source)
        if not isinstance(src, str):
            raise DataError(f'schema "source" must be text, got {type(src).__name__}.', argument="schema")
        epsilon, delta = privacy_spent(raw.get("privacy"))
        return cls(specs, source=src, epsilon_spent=epsilon, delta_spent=delta, rows=rows(raw.get("rows")))

    @classmethod
    def from_json(cls, path: str | Path) -> Schema:
        """Read a schema from a UTF-8 JSON file (see :meth:`from_dict` for the format).

        A byte-order mark is accepted; files over 16 MiB are refused.

        Parameters
        ----------
        path : str or Path
            The JSON file.

        Returns
        -------
        Schema
            The checked schema, with ``source`` ``"declared in FILE"`` unless the file
            gives its own ``source``.

        Raises
        ------
        DataError
            If the file is missing, a folder, too large, unreadable, not UTF-8, not JSON
            or not a schema (``argument="schema"``).

        Examples
        --------
        >>> import json, tempfile
        >>> from pathlib import Path
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = Path(tmp) / "schema.json"
        ...     _ = path.write_text(json.dumps({"columns": {"sex": {"categories": ["f", "m"]}}}))
        ...     s = Schema.from_json(path)
        >>> s.categories("sex"), s.source
        (('f', 'm'), 'declared in schema.json')
        """
        p = Path(path)
        if not p.exists():
            raise DataError(f"schema file {str(p)!r} does not exist; check the path.", argument="schema")
        if p.is_dir():
            raise DataError(
                f"schema path {str(p)!r} is a folder; give a JSON file (draft one with "
                "`trustlab schema DATA --out schema.json`).",
                argument="schema",
            )
        try:
            if p.stat().st_size > MAX_SCHEMA_BYTES:
                raise DataError(
                    f"schema file {p.name!r} is larger than {MAX_SCHEMA_BYTES // 2**20} MiB; "
                    "a schema lists columns, not data.",
                    argument="schema",
                )
            text = p.read_bytes().decode("utf-8-sig")
            raw = json.loads(text, parse_constant=reject_constant)
        except UnicodeDecodeError:
            raise DataError(
                f"schema file {p.name!r} is not UTF-8 text; save it as UTF-8 JSON.", argument="schema"
            ) from None
        except json.JSONDecodeError as exc:
            raise DataError(
                f"schema file {p.name!r} is not valid JSON ({exc.msg} at line {exc.lineno}, "
                f"column {exc.colno}).",
                argument="schema",
            ) from None
        except RecursionError:
            raise DataError(f"schema file {p.name!r} is nested too deeply.", argument="schema") from None
        except OSError as exc:
            raise DataError(
                f"schema file {p.name!r} could not be read ({exc.strerror or type(exc).__name__}).",
                argument="schema",
            ) from None
        return cls.from_dict(raw, source=f"declared in {p.name}")

    def to_dict(self) -> dict[str, Any]:
        """The schema as JSON-ready types, in the format :meth:`from_dict` reads.

        Returns
        -------
        dict
            ``{"source": ..., "columns": {name: entry}}``, plus ``"privacy"`` when the
            schema records a budget spent drafting it; optional fields appear only when
            set. For a schema ``s`` built by :meth:`from_dict`,
            ``Schema.from_dict(s.to_dict())`` equals ``s``.

        Examples
        --------
        >>> s = Schema.from_dict({"columns": {"age": {"bounds": [18, 99]},
        ...                                   "sex": {"categories": ["f", "m"]}}})
        >>> s.to_dict()["columns"]
        {'age': {'bounds': [18.0, 99.0]}, 'sex': {'categories': ['f', 'm']}}
        >>> Schema.from_dict(s.to_dict()) == s
        True
        >>> Schema.from_dict({"columns": {"note": {"text": True}}}).to_dict()["columns"]
        {'note': {'text': True}}
        """
        out: dict[str, Any] = {}
        for name, spec in self.columns.items():
            entry: dict[str, Any]
            if spec.text:
                entry = {"text": True}
            elif spec.bounds is not None:
                entry = {"bounds": list(spec.bounds)}
            else:
                entry = {"categories": list(spec.categories or ())}
            if spec.integer is not None:
                entry["integer"] = spec.integer
            if spec.description:
                entry["description"] = spec.description
            if spec.actionable is not None:
                entry["actionable"] = spec.actionable
            if spec.review:
                entry["review"] = spec.review
            out[name] = entry
        result: dict[str, Any] = {"source": self.source, "columns": out}
        if self.epsilon_spent or self.delta_spent:
            result["privacy"] = {"epsilon": self.epsilon_spent, "delta": self.delta_spent}
        if self.rows is not None:
            result["rows"] = self.rows
        return result


def _category(v: Any, exact: dict[Any, Any], text: dict[str, Any]) -> Any:
    """The declared category a cell names (as itself, then as text), or None (never raises)."""
    if is_missing(v):
        return None
    if hashable(v):
        try:
            hit = exact.get(v)
        except Exception:  # a broken __eq__
            hit = None
        if hit is not None:
            return hit
    return text.get(cell_text(v))
