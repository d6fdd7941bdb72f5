"""Checks of a schema's entries (private module of :mod:`trustlab.datasets.schema`).

Every problem raises a :class:`~trustlab.errors.DataError` with ``argument="schema"`` that
names the column and what to write instead.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from trustlab.errors import DataError

__all__ = ["ACTIONABLE", "MAX_SCHEMA_BYTES", "column_fields", "privacy_spent", "reject_constant", "rows"]

#: How a person may change a column, for recourse checks: ``"any"`` direction,
#: ``"increase"`` only, ``"decrease"`` only, or ``"no"`` (immutable: a code, a past
#: event, a fact about the place rather than the person).
ACTIONABLE = ("any", "increase", "decrease", "no")

MAX_SCHEMA_BYTES = 16 * 2**20
_MAX_ABS_BOUND = 1e270  # trustlab.privacy.bounds.MAX_ABS_BOUND (not imported: keeps this module light)
_KEYS = {"bounds", "categories", "text", "description", "actionable", "integer", "review"}


def reject_constant(name: str) -> Any:
    raise DataError(
        f"schema holds {name}, which JSON does not allow; write a finite number.", argument="schema"
    )


def column_fields(name: Any, spec: Any) -> dict[str, Any]:
    """One column's entry of a schema, checked: the keyword arguments of its ``ColumnSpec``.

    Exactly one of ``bounds``, ``categories`` or ``"text": true``; every problem names the
    column.
    """
    where = f"schema column {name!r}"
    if not isinstance(spec, Mapping):
        raise DataError(
            f'{where} must be an object such as {{"bounds": [0, 120]}}, {{"categories": ["f", "m"]}} '
            f'or {{"text": true}}, got {type(spec).__name__}.',
            argument="schema",
        )
    unknown = sorted(map(str, set(spec) - _KEYS))
    if unknown:
        raise DataError(f"{where} has unknown key(s) {unknown}; allowed: {sorted(_KEYS)}.", argument="schema")
    if sum(key in spec for key in ("bounds", "categories", "text")) != 1:
        raise DataError(
            f"{where} must give exactly one of 'bounds' (numeric), 'categories' (categorical) or "
            "'text': true (free text).",
            argument="schema",
        )
    if "text" in spec:
        return _text_fields(spec, where)
    actionable = spec.get("actionable")
    if actionable is not None and (not isinstance(actionable, str) or actionable not in ACTIONABLE):
        raise DataError(
            f"schema 'actionable' of {name!r} must be one of {list(ACTIONABLE)}, got {actionable!r}.",
            argument="schema",
        )
    fields: dict[str, Any] = {"actionable": actionable, **_texts(spec, where)}
    integer = spec.get("integer")
    if integer is not None and (not isinstance(integer, bool) or "bounds" not in spec):
        raise DataError(
            f"{where}: 'integer' must be true or false, and only with 'bounds'.", argument="schema"
        )
    if "bounds" in spec:
        return fields | {"bounds": _bounds(spec["bounds"], where), "integer": integer}
    return fields | {"categories": _categories(spec["categories"], where)}


def _texts(spec: Mapping[str, Any], where: str) -> dict[str, str]:
    out = {}
    for key in ("description", "review"):
        value = spec.get(key, "")
        if not isinstance(value, str):
            raise DataError(f"{where}: {key!r} must be text, got {type(value).__name__}.", argument="schema")
        out[key] = value
    return out


def _text_fields(spec: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A free-text column: ``"text": true``, optionally with ``description`` and ``review``."""
    if spec["text"] is not True:
        raise DataError(
            f"{where}: 'text' must be true (a free-text column), got {spec['text']!r}; for a numeric or "
            "categorical column write 'bounds' or 'categories' instead.",
            argument="schema",
        )
    for key in ("actionable", "integer"):
        if key in spec:
            raise DataError(
                f"{where}: {key!r} does not apply to a text column (no model feature is made from it); "
                f"delete {key!r}, or declare the column with 'bounds' or 'categories'.",
                argument="schema",
            )
    return {"text": True, **_texts(spec, where)}


def _bounds(value: Any, where: str) -> tuple[float, float]:
    if value is None:
        raise DataError(
            f"{where}: 'bounds' is not filled in; write [lower, upper] from public knowledge "
            "(or estimate them with `trustlab schema DATA --epsilon E`), or delete the entry.",
            argument="schema",
        )
    ok = (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(b, numbers.Real) and not isinstance(b, bool) for b in value)
    )
    if not ok:
        raise DataError(
            f"{where}: 'bounds' must be [lower, upper], two numbers; got {value!r}.", argument="schema"
        )
    lower, upper = float(value[0]), float(value[1])
    if not (math.isfinite(lower) and math.isfinite(upper)) or max(abs(lower), abs(upper)) > _MAX_ABS_BOUND:
        raise DataError(
            f"{where}: 'bounds' must be finite and within +-{_MAX_ABS_BOUND:g}; got {value!r}; "
            "rescale the column.",
            argument="schema",
        )
    if not lower < upper or not (upper - lower) / 2**40 >= np.finfo(float).tiny:
        raise DataError(
            f"{where}: 'bounds' need lower < upper (and not vanishingly close); got {value!r}.",
            argument="schema",
        )
    return lower, upper


def _categories(value: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise DataError(
            f"{where}: 'categories' must be a non-empty list of the column's public values "
            f'(e.g. ["f", "m"]); got {value!r}. Fill it in from public knowledge, or delete the entry.',
            argument="schema",
        )
    seen_text: dict[str, Any] = {}
    for c in value:
        if isinstance(c, float) and not math.isfinite(c):
            raise DataError(f"{where}: categories must be finite; got {c!r}.", argument="schema")
        if not isinstance(c, str | bool | numbers.Real) or isinstance(c, complex):
            raise DataError(
                f"{where}: each category must be a string, number or boolean; got {c!r}. Missing "
                "values need no category (the audit counts them separately).",
                argument="schema",
            )
        clash = seen_text.get(str(c))
        if clash is None:
            clash = next((o for o in seen_text.values() if o == c), None)
        if clash is not None or str(c) in seen_text:
            raise DataError(
                f"{where}: categories {clash!r} and {c!r} are the same value; list each once.",
                argument="schema",
            )
        seen_text[str(c)] = c
    return tuple(value)


def privacy_spent(value: Any) -> tuple[float, float]:
    """``(epsilon, delta)`` a draft spent, from the schema's ``privacy`` object (zeros if none)."""
    if value is None:
        return 0.0, 0.0
    if not isinstance(value, Mapping):
        raise DataError('schema "privacy" must be an object {"epsilon": e, "delta": d}.', argument="schema")
    out = []
    for key in ("epsilon", "delta"):
        v = value.get(key, 0.0)
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (0 <= float(v) < math.inf):
            raise DataError(
                f'schema "privacy" {key!r} must be a finite number >= 0; got {v!r}.', argument="schema"
            )
        out.append(float(v))
    return out[0], out[1]


def rows(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= int(value) <= 10**15:
        raise DataError(
            f'schema "rows" must be a positive whole number (a public estimate of the row count), '
            f"got {value!r}; remove it if no public estimate exists.",
            argument="schema",
        )
    return int(value)
