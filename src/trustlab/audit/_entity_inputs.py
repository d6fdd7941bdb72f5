"""Checks of the Audit's ``group`` and ``keep`` arguments and of a user model against the public columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab.datasets.schema import Schema
from trustlab.errors import DataError, ModelError

__all__ = ["MIN_HELD_OUT", "check_group", "check_held_out", "check_keep", "probe_model"]

MIN_HELD_OUT = 10
"""Fewest held-out rows a raw audit accepts: below it intervals degenerate (zero width)."""


def check_group(columns: Sequence[Any], group: Any, target: Any, sensitive: Sequence[Any]) -> None:
    """Refuse a ``group`` that is not a column, or is the target or a sensitive column.

    Raises
    ------
    DataError
        ``argument="group"``, naming the fix.
    """
    if group is None:
        return
    if group not in list(columns):
        raise DataError(
            f"group {group!r} is an unknown column; name the column that identifies an entity "
            "(e.g. a person id), or leave --group out.",
            argument="group",
        )
    if group == target:
        raise DataError(f"group {group!r} is the target; name the entity id column.", argument="group")
    if group in list(sensitive):
        raise DataError(
            f"group {group!r} is a sensitive column; the entity id must be another column.", argument="group"
        )


def check_keep(columns: Sequence[Any], keep: Sequence[Any]) -> None:
    """Refuse a ``keep`` that names an unknown column.

    Raises
    ------
    DataError
        ``argument="keep"``.
    """
    unknown = [str(k) for k in keep if k not in list(columns)]
    if unknown:
        raise DataError(
            f"keep names unknown column(s) {unknown}; name feature columns the screening left out.",
            argument="keep",
        )


def check_held_out(n_held_out: int, test_size: float, grouped: bool) -> None:
    """Refuse a raw audit whose split leaves fewer than :data:`MIN_HELD_OUT` held-out rows.

    Raises
    ------
    DataError
        ``argument="test_size"``.
    """
    if n_held_out < MIN_HELD_OUT:
        raise DataError(
            f"the held-out split left {n_held_out} held-out rows; the audit needs at least "
            f"{MIN_HELD_OUT} (fewer give intervals of zero width, not certainty): raise --test-size "
            f"(now {test_size:g})" + (" or use a group with more entities" if grouped else "") + ".",
            argument="test_size",
        )


def _probe_frame(features: Sequence[Any], schema: Schema) -> pd.DataFrame | None:
    """Two rows of public values of the declared features (None when one is not declared)."""
    cols: dict[Any, Any] = {}
    for c in features:
        cats = schema.categories(c)
        bounds = schema.bounds(c)
        if cats:
            cols[c] = pd.Categorical([cats[0], cats[-1]], categories=list(cats))
        elif bounds is not None:
            lo, hi = bounds
            cols[c] = np.array([lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3], dtype=float)
        else:
            return None
    return pd.DataFrame(cols)


def probe_model(model: Any, features: Sequence[Any], schema: Schema) -> None:
    """Refuse a user model that cannot score the audit's columns, from public facts alone.

    Private mode must not fail on a fact about the rows, but the feature names and the
    schema are public: a model fitted on other columns (``feature_names_in_``), on
    another number of columns (``n_features_in_``), or whose ``predict_proba`` fails on
    two rows of declared values (when every feature is declared) is refused here,
    rather than replaced by a constant 0.5 whose failures would read as the user's.

    Raises
    ------
    ModelError
        ``argument="model"``, with the reason.
    """
    names = getattr(model, "feature_names_in_", None)
    feats = [str(f) for f in features]
    if names is not None:
        names = [str(n) for n in names]
        missing = [n for n in names if n not in feats]
        extra = [f for f in feats if f not in names]
        if missing or extra:
            raise ModelError(
                f"the model was fitted on columns {names} but the audit gives it {feats} (missing "
                f"{missing}, unexpected {extra}); pass the columns it was trained on, --ignore the "
                "others (--use-sensitive if it uses a sensitive column).",
                argument="model",
            )
    n_in = getattr(model, "n_features_in_", None)
    if names is None and isinstance(n_in, int | np.integer) and n_in != len(feats):
        raise ModelError(
            f"the model expects {int(n_in)} columns but the audit gives it {len(feats)} ({feats}); "
            "--ignore the columns it was not trained on.",
            argument="model",
        )
    frame = _probe_frame(features, schema)
    if frame is None:
        return
    try:
        proba = np.asarray(model.predict_proba(frame), dtype=float)
    except Exception as exc:
        raise ModelError(
            f"the model's predict_proba fails on the declared columns {feats} "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}).",
            argument="model",
        ) from None
    if proba.shape != (2, 2):
        raise ModelError(f"predict_proba must return shape (n, 2), got {proba.shape}.", argument="model")
