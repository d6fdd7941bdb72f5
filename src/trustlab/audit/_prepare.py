"""The Audit's table preparation: argument and column checks, the target's labels, the schema.

:func:`prepare` is the first step of every run (in process, on Dask and private on
Dask): it checks the arguments and the table and, in private mode, conforms the table to
the public schema. In private mode only public facts raise (the arguments, the column
names, the schema); facts about the rows (how many, which values, missing or not) never do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_binary_target, check_columns, check_epsilon, check_frame
from trustlab.audit._audit_inputs import check_values, column_argument, column_name, column_names
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError

__all__ = ["MIN_ROWS", "Prepared", "prepare"]

MIN_ROWS = 20
"""Fewest rows a raw (non-private) audit accepts."""


@dataclass
class Prepared:
    """A validated table and what the run needs from it."""

    raw: pd.DataFrame  # the user's rows (ignored columns dropped), index reset: the split hashes these
    data: pd.DataFrame  # what the sections read: conformed to the schema in private mode
    sensitive: list[str]
    features: list[str]
    schema: Schema
    y: np.ndarray  # 0/1 (0 where unlabelled)
    labelled: np.ndarray  # bool: the row's target is one of the two labels
    positive: Any
    negative: Any


def prepare(
    data: Any,
    target: Any,
    sensitive: Any,
    *,
    private: bool,
    epsilon: float | None,
    schema: Schema | None,
    use_sensitive: bool,
    positive: Any,
    ignore: Sequence[str],
) -> Prepared:
    """Check the arguments and the table; conform it to the schema in private mode.

    Parameters
    ----------
    data : pandas.DataFrame
        The table.
    target : str
        The binary outcome column.
    sensitive : str or sequence of str
        The sensitive column(s).
    private, epsilon, schema, use_sensitive, positive, ignore
        The :class:`~trustlab.audit.Audit`'s parameters of the same names.

    Returns
    -------
    Prepared

    Raises
    ------
    DataError
        Unknown or clashing columns, no feature left, and (raw mode only) an unusable
        table: an entirely missing column or a target without two outcomes.
    """
    target = column_name(target, "target")
    sens = column_names(sensitive, "sensitive")
    ignored = column_names(ignore, "ignore")
    data = check_frame(data, min_rows=0 if private else MIN_ROWS)
    check_columns(data, ignored, "ignore")
    check_columns(data, [target], "target")
    check_columns(data, sens, "sensitive")
    if not sens:
        raise DataError("name at least one sensitive column.", argument="sensitive")
    if target in sens:
        raise DataError(
            f"the target {target!r} cannot also be a sensitive column; name it once.",
            argument="sensitive",
        )
    if target in ignored or set(sens) & set(ignored):
        raise DataError(
            "ignore must not name the target or a sensitive column; the audit needs them.",
            argument="ignore",
        )
    raw = data.drop(columns=ignored).reset_index(drop=True)
    features = [c for c in raw.columns if c != target and (use_sensitive or c not in sens)]
    if not features:
        raise DataError(
            "no feature columns are left for the model (every column is the target, sensitive or "
            "ignored); keep at least one other column.",
            argument="ignore" if ignored else "data",
        )
    schema = schema or Schema()
    if not private:
        check_values(raw, list(raw.columns))
        if raw[target].isna().all():
            raise DataError(
                f"target {target!r} is entirely missing: every row needs its outcome; name another "
                "--target (a binary outcome column with values).",
                argument="target",
            )
        empty = [c for c in raw.columns if raw[c].isna().all()]
        if empty:
            raise DataError(
                f"column(s) {[str(c) for c in empty]} are entirely missing; leave them out with "
                f"--ignore {','.join(map(str, empty))} (Audit(ignore=[...])).",
                argument=column_argument(empty[0]),
            )
        _check_group_count(raw, sens)
        y, negative, pos = check_binary_target(raw[target], f"target {target!r}", positive)
        if len(np.unique(y)) < 2:
            raise DataError(f"target {target!r} has a single value.", argument="target")
        return Prepared(raw, raw, sens, features, schema, y, np.ones(len(raw), bool), pos, negative)
    assert epsilon is not None  # Audit._validate_params
    check_epsilon(epsilon)
    undeclared = [c for c in [target, *sens] if schema.categories(c) is None]
    if undeclared:
        raise DataError(
            f"private mode needs the public categories of {undeclared} in the schema "
            "(--schema FILE); trustlab never reads them off the private data. Draft a schema "
            "with `trustlab schema DATA --out schema.json` (datasets.draft_schema), fill it in "
            "and pass it with --schema (docs/schema.md).",
            argument="schema",
        )
    cats = list(schema.categories(target) or ())
    if len(cats) != 2:
        raise DataError(
            f"the schema must declare exactly two categories for the target {target!r}, got {cats}.",
            argument="schema",
        )
    pos = cats[1]
    if positive is not None:
        matches = [c for c in cats if c == positive or str(c) == str(positive)]
        if not matches:
            raise DataError(
                f"positive label {positive!r} is not one of the target's declared categories {cats}.",
                argument="positive",
            )
        pos = matches[0]
    negative = next(c for c in cats if c != pos)
    conformed = schema.conform(raw)
    labels = conformed[target].astype(object)
    labelled = labels.notna().to_numpy()
    y = (labels == pos).to_numpy().astype(np.int64)
    return Prepared(raw, conformed, sens, features, schema, y, labelled, pos, negative)


MAX_GROUPS = 50
"""Most groups a sensitive column may have: beyond, every per-group figure is too small to judge and
the report grows with the groups (a continuous or id-like column is not a grouping)."""


def _check_group_count(raw: pd.DataFrame, sens: list[Any]) -> None:
    """Refuse a sensitive column with more than :data:`MAX_GROUPS` distinct values (raw mode)."""
    for c in sens:
        n = int(raw[c].nunique(dropna=True))
        if n > MAX_GROUPS:
            raise DataError(
                f"sensitive column {str(c)!r} has {n:,} distinct values, more than {MAX_GROUPS} groups: "
                "fairness is judged per group, so bin it into a few groups first (e.g. age bands) "
                "or name another sensitive column.",
                argument="sensitive",
            )
