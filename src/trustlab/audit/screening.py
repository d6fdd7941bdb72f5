"""Column screening before the model is fitted: target leakage, copies of sensitive columns, identifiers.

A table seen for the first time often holds columns that make an audit confidently
wrong: a copy of the target (a header naming it twice, a recoded outcome), a value
recorded after the outcome that predicts it almost perfectly, a copy of a sensitive
column (``race.1``) that lets a model "leave race out" while using it, a row id, or
the id of an entity observed several times (a panel: each person in several years).
:func:`screen_columns` finds them from the rows and leaves them out of the default
model unless the user keeps them (``Audit(keep=[...])``, ``--keep``); the audit states
each finding in the Data section and in the report's summary.

The rules (all stated in the report):

- **target copy**: the feature's values and the target's two labels are in one-to-one
  correspondence on every labelled row (equal up to relabelling);
- **predicts the target alone**: the feature alone ranks the rows with a cross-fitted
  ROC AUC of at least :data:`LEAK_AUC` (two halves: a level's positive share is learnt
  on one half and scored on the other, so a value seen once, such as an id, scores 0.5);
  numbers are also ranked as they are (missing values lowest);
- **sensitive copy**: the feature and a sensitive column are equal up to relabelling
  (missing counted as a value of its own);
- **row id**: whole numbers or text, a different value on every row (at least
  :data:`MIN_ID_ROWS` rows);
- **entity id**: whole numbers or text with at least :data:`MIN_ENTITIES` values and a
  median of two or more rows per value, that together with a column of at most
  :data:`MAX_PERIODS` values (a period such as the year) is unique on at least 99% of
  the rows, or whose name says it is an id. Rows of one entity are alike: a row-by-row
  split puts the same entities in training and held-out rows, and the held-out figures
  then overstate how the model does on new entities. Pass the column as the audit's
  ``group`` to split by entity (:func:`trustlab.audit.split.group_split`);
- **free text**: a text column (not numbers, not booleans) with more than
  :data:`MAX_TEXT_LEVELS` distinct values that is neither of the above: free text, or a
  category with too many levels. One-hot encoding thousands of levels makes the fit slow
  (a 1,000-level column on 2,000 rows: 140 s for the logistic model instead of a few) and
  a value seen once predicts nothing about new rows. Group its values into fewer
  categories first, or keep it.

**Private mode** (:func:`trustlab.audit._public_screening.screen_names`): every rule above
reads the rows, and whether a column is flagged (and so left out of the model) would
then depend on the private data; trustlab has no differentially private version of
them. So a private audit screens the column *names* only, which are public: a feature
named as pandas names a repeated header (``whi.1``, ``race.2``) is taken for a copy of
the target or sensitive column it names and left out. The report states that the
screening of the rows did not run (:func:`~trustlab.audit._public_screening.screening_meta`)
and how to get it: run the raw audit where the data may be seen.

**Distributed runs** (``trustlab audit --dask``, raw mode): the rules run on the
training sample the client fits the model on (a hash sample of at most ``--sample-rows``
rows), and the report says so: a panel whose entities appear once each in the sample
is taken for a row id (left out all the same) or goes unnoticed.

References
----------
Kaufman, Rosset, Perlich, Stitelman. "Leakage in data mining: formulation, detection,
and avoidance." ACM TKDD 6(4), 2012.
Roberts et al. "Cross-validation strategies for data with temporal, spatial,
hierarchical, or phylogenetic structure." Ecography 40(8), 2017.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "KINDS",
    "LEAK_AUC",
    "MAX_PERIODS",
    "MAX_TEXT_LEVELS",
    "MIN_ENTITIES",
    "MIN_ID_ROWS",
    "ColumnFlag",
    "Screening",
    "decide_flags",
    "free_text_flags",
    "identifier_flags",
    "leakage_flags",
    "screen_columns",
]

LEAK_AUC = 0.99
"""A feature whose cross-fitted single-feature ROC AUC reaches this is flagged as leakage."""
MIN_ID_ROWS = 20
"""Fewest rows on which a column with a different value on every row is called a row id."""
MIN_ENTITIES = 20
"""Fewest distinct values of an entity id."""
MAX_PERIODS = 50
"""Most distinct values of the period column that makes an entity id unique."""
MAX_TEXT_LEVELS = 200
"""A text feature with more distinct values than this is screened out as free text."""
MAX_ROWS = 100_000
"""Leakage scores read at most this many rows (a seeded sample: raw mode only)."""
_LEVELS = 50  # a column with at most this many values is also scored level by level
_ID_NAME = re.compile(r"(^|[_\W])(id|nr|key|pid|hhid|person|household|subject|patient)($|[_\W])|id$", re.I)

KINDS = {
    "target_copy": "equals the target up to relabelling",
    "predicts_target": "predicts the target almost perfectly on its own",
    "sensitive_copy": "equals a sensitive column up to relabelling",
    "row_id": "is a row identifier (a different value on every row)",
    "entity_id": "identifies an entity observed on several rows (a panel)",
    "free_text": f"holds free text or too many categories (more than {MAX_TEXT_LEVELS} distinct text values)",
    "declared_text": (
        "is declared as text in the schema, so it is no model feature (a raw audit's Explain section "
        "reads it for hypotheses about the target)"
    ),
}
"""What each kind of flag means, in words."""


@dataclass(frozen=True)
class ColumnFlag:
    """One finding about a column.

    Parameters
    ----------
    column : str
        The column.
    kind : str
        One of :data:`KINDS`.
    detail : str
        The figures behind it, in words.
    related : str, optional
        The target or sensitive column it copies, or the period column of a panel.
    dropped : bool
        Whether it was left out of the model.

    Examples
    --------
    >>> ColumnFlag("whi.1", "target_copy", "2 values", related="whi").to_dict()["kind"]
    'target_copy'
    """

    column: str
    kind: str
    detail: str
    related: str | None = None
    dropped: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The flag as JSON-able fields.

        Returns
        -------
        dict
            ``column``, ``kind``, ``meaning`` (from :data:`KINDS`), ``detail``, ``related``
            and ``dropped``.
        """
        return {
            "column": self.column,
            "kind": self.kind,
            "meaning": KINDS[self.kind],
            "detail": self.detail,
            "related": self.related,
            "dropped": self.dropped,
        }


@dataclass(frozen=True)
class Screening:
    """What :func:`screen_columns` found: the flags, and the features the model keeps.

    Attributes
    ----------
    features : list
        The feature columns the model keeps.
    flags : list of ColumnFlag
        Every finding, dropped or not.

    Examples
    --------
    >>> s = Screening(["age"], [ColumnFlag("id", "row_id", "500 values", dropped=True)])
    >>> s.dropped, s.panel
    (['id'], None)
    """

    features: list[Any]
    flags: list[ColumnFlag] = field(default_factory=list)

    @property
    def dropped(self) -> list[str]:
        """The columns left out of the model."""
        return [f.column for f in self.flags if f.dropped]

    @property
    def panel(self) -> ColumnFlag | None:
        """The first entity id found (a panel structure), or None."""
        return next((f for f in self.flags if f.kind == "entity_id"), None)


def _codes(values: pd.Series) -> np.ndarray:
    """Integer codes of a column's values, missing as a code of its own."""
    codes, _ = pd.factorize(values.astype(object), use_na_sentinel=True)
    return np.where(codes < 0, codes.max(initial=-1) + 1, codes)


def _same_up_to_relabelling(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two code arrays are in one-to-one correspondence."""
    na, nb = len(np.unique(a)), len(np.unique(b))
    if na != nb:
        return False
    pairs = len(np.unique(a.astype(np.int64) * (int(b.max(initial=0)) + 1) + b))
    return pairs == na


def _auc(score: np.ndarray, y: np.ndarray) -> float:
    """ROC AUC of ``score`` for 0/1 labels ``y`` (ties count one half), NaN without both labels."""
    pos = int(y.sum())
    neg = len(y) - pos
    if pos == 0 or neg == 0:
        return float("nan")
    ranks = pd.Series(score).rank(method="average").to_numpy()
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def _crossfit_levels(values: pd.Series, y: np.ndarray, half: np.ndarray) -> np.ndarray:
    """Each row's level's positive share, learnt on the other half (the overall share for unseen levels)."""
    codes = _codes(values)
    k = int(codes.max(initial=0)) + 1
    out = np.empty(len(y))
    for side in (False, True):
        learn = half != side
        n = np.bincount(codes[learn], minlength=k).astype(float)
        pos = np.bincount(codes[learn], weights=y[learn], minlength=k)
        base = y[learn].mean() if learn.any() else 0.5
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(n > 0, pos / np.maximum(n, 1), base)
        out[~learn] = share[codes[~learn]]
    return out


def _is_number(values: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values))


def leakage_flags(
    frame: pd.DataFrame,
    y: np.ndarray,
    features: Sequence[Any],
    sensitive: Sequence[Any],
    *,
    target: Any = "target",
    seed: int = 0,
) -> list[ColumnFlag]:
    """Features that copy the target or a sensitive column, or predict the target alone.

    Parameters
    ----------
    frame : pandas.DataFrame
        The labelled rows (raw values).
    y : numpy.ndarray
        The target as 0/1, one per row of ``frame``.
    features : sequence
        The candidate feature columns.
    sensitive : sequence
        The sensitive columns.
    target : str
        The target's name (for the messages).
    seed : int
        Seed of the row sample (at most :data:`MAX_ROWS` rows) and of the two halves.

    Returns
    -------
    list of ColumnFlag
        Kinds ``target_copy``, ``predicts_target`` and ``sensitive_copy`` (not yet dropped).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 200)
    >>> df = pd.DataFrame({"x": rng.normal(size=200), "copy": np.where(y == 1, "yes", "no")})
    >>> [(f.column, f.kind) for f in leakage_flags(df, y, ["x", "copy"], [], target="y")]
    [('copy', 'target_copy')]
    """
    y = np.asarray(y, dtype=np.int64)
    rng = np.random.default_rng(seed)
    rows = np.arange(len(frame))
    if len(rows) > MAX_ROWS:
        rows = np.sort(rng.choice(rows, MAX_ROWS, replace=False))
    sub = frame.iloc[rows]
    ys = y[rows]
    half = rng.random(len(rows)) < 0.5
    sens_codes = {s: _codes(sub[s]) for s in sensitive}
    flags: list[ColumnFlag] = []
    for col in features:
        values = sub[col]
        codes = _codes(values)
        if values.notna().all() and _same_up_to_relabelling(codes, ys):
            flags.append(
                ColumnFlag(str(col), "target_copy", "its 2 values match the target's 2 labels", str(target))
            )
            continue
        copy = next((s for s, c in sens_codes.items() if _same_up_to_relabelling(codes, c)), None)
        if copy is not None:
            flags.append(
                ColumnFlag(
                    str(col), "sensitive_copy", f"its values match those of {copy!r} one to one", str(copy)
                )
            )
            continue
        aucs = []
        if _is_number(values):
            num = values.to_numpy(dtype=float, na_value=np.nan)
            low = np.nanmin(num) - 1.0 if np.isfinite(num).any() else 0.0
            a = _auc(np.where(np.isnan(num), low, num), ys)
            aucs.append(max(a, 1.0 - a))
        if not _is_number(values) or values.nunique(dropna=False) <= _LEVELS:
            aucs.append(_auc(_crossfit_levels(values, ys, half), ys))
        best = max((a for a in aucs if np.isfinite(a)), default=float("nan"))
        if np.isfinite(best) and best >= LEAK_AUC:
            flags.append(
                ColumnFlag(
                    str(col),
                    "predicts_target",
                    f"on its own it ranks the rows with ROC AUC {best:.3f} (cross-fitted; at least "
                    f"{LEAK_AUC} is flagged): a value recorded with or after the outcome?",
                    str(target),
                )
            )
    return flags


def _whole(values: pd.Series) -> bool:
    """Whether a column holds whole numbers or text (what ids are made of), not measurements."""
    if pd.api.types.is_bool_dtype(values):
        return False
    if _is_number(values):
        num = values.dropna().to_numpy(dtype=float)
        # beyond 2**53 every float is a whole number: those are measurements, not ids
        small = np.all(np.abs(num) < 2.0**53) if num.size else False
        return bool(num.size and small and np.all(num == np.round(num)))
    return True


def identifier_flags(
    frame: pd.DataFrame, features: Sequence[Any], others: Sequence[Any] = ()
) -> list[ColumnFlag]:
    """Features that identify a row, or an entity observed on several rows (a panel).

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows.
    features : sequence
        The candidate feature columns.
    others : sequence
        Further columns that may be the panel's period (e.g. sensitive columns).

    Returns
    -------
    list of ColumnFlag
        Kinds ``row_id`` and ``entity_id`` (not yet dropped).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"person": [p for p in range(30) for _ in range(3)],
    ...                    "year": [2000, 2001, 2002] * 30, "x": range(90)})
    >>> [(f.column, f.kind, f.related) for f in identifier_flags(df, ["person", "year", "x"])]
    [('person', 'entity_id', 'year'), ('x', 'row_id', None)]
    """
    n = len(frame)
    flags: list[ColumnFlag] = []
    counts = {c: frame[c].nunique(dropna=True) for c in [*features, *others]}
    periods = [c for c in [*features, *others] if 2 <= counts[c] <= MAX_PERIODS]
    for col in features:
        values = frame[col]
        k = counts[col]
        if n < MIN_ID_ROWS or not _whole(values) or values.isna().any():
            continue
        if k == n:
            flags.append(ColumnFlag(str(col), "row_id", f"a different value on each of the {n:,} rows"))
            continue
        per = values.value_counts().to_numpy()
        if k < MIN_ENTITIES or np.median(per) < 2:
            continue
        codes = _codes(values).astype(np.int64)
        period = None
        for p in periods:
            if p == col:
                continue
            pc = _codes(frame[p]).astype(np.int64)
            if len(np.unique(codes * (int(pc.max()) + 1) + pc)) >= 0.99 * n:
                period = p
                break
        if period is None and not _ID_NAME.search(str(col)):
            continue
        detail = f"{k:,} values with a median of {np.median(per):g} rows each"
        detail += f", unique per row together with {period!r}" if period is not None else ""
        flags.append(ColumnFlag(str(col), "entity_id", detail, None if period is None else str(period)))
    return flags


def screen_columns(
    frame: pd.DataFrame,
    y: np.ndarray,
    *,
    target: Any,
    sensitive: Sequence[Any],
    features: Sequence[Any],
    use_sensitive: bool = False,
    keep: Sequence[Any] = (),
    seed: int = 0,
) -> Screening:
    """Flag leaky, copied and identifier columns and leave them out of the features unless kept.

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows (labelled rows are read for leakage).
    y : numpy.ndarray
        The target as 0/1.
    target : str
        The target column's name.
    sensitive : sequence
        The sensitive columns.
    features : sequence
        The model's candidate features.
    use_sensitive : bool
        Whether the model may use the sensitive columns (a copy of one is then kept).
    keep : sequence
        Columns to keep as features whatever is found (still flagged).
    seed : int
        Seed of the leakage scores' row sample (a public choice).

    Returns
    -------
    Screening
        The kept features (in order) and every flag (``dropped`` set): leakage and
        copies first, then identifiers, then free text (one flag per column).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> y = np.array([0, 1] * 50)
    >>> df = pd.DataFrame({"x": np.arange(100) % 7, "y2": y, "sex": ["f", "m"] * 50})
    >>> s = screen_columns(df, y, target="y", sensitive=["sex"], features=["x", "y2"])
    >>> s.features, s.dropped
    (['x'], ['y2'])
    """
    flags = leakage_flags(frame, y, features, sensitive, target=target, seed=seed)
    seen = {f.column for f in flags}
    rest = [c for c in features if str(c) not in seen]
    flags += identifier_flags(frame, rest, others=[c for c in frame.columns if c not in rest and c != target])
    seen = {f.column for f in flags}
    flags += free_text_flags(frame, [c for c in rest if str(c) not in seen])
    return decide_flags(flags, features, keep, use_sensitive)


def free_text_flags(frame: pd.DataFrame, features: Sequence[Any]) -> list[ColumnFlag]:
    """Text features with more than :data:`MAX_TEXT_LEVELS` distinct values (free text).

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows.
    features : sequence
        The candidate feature columns.

    Returns
    -------
    list of ColumnFlag
        Kind ``free_text`` (not yet dropped).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"note": [f"text {i % 300}" for i in range(900)], "n": range(900)})
    >>> [(f.column, f.kind) for f in free_text_flags(df, ["note", "n"])]
    [('note', 'free_text')]
    """
    flags = []
    for col in features:
        values = frame[col]
        if _is_number(values) or pd.api.types.is_bool_dtype(values):
            continue
        k = values.nunique(dropna=True)
        if k > MAX_TEXT_LEVELS:
            rows = values.notna().sum()
            flags.append(ColumnFlag(str(col), "free_text", f"{k:,} distinct values on {rows:,} rows"))
    return flags


def decide_flags(
    flags: Sequence[ColumnFlag], features: Sequence[Any], keep: Sequence[Any], use_sensitive: bool
) -> Screening:
    """Set ``dropped`` on each flag (kept columns and allowed sensitive copies stay); filter the features.

    Parameters
    ----------
    flags : sequence of ColumnFlag
        The findings.
    features : sequence
        The candidate feature columns.
    keep : sequence
        Columns the user keeps although flagged (``Audit(keep=...)``).
    use_sensitive : bool
        Whether copies of a sensitive column may stay (the model may use sensitive columns).

    Returns
    -------
    Screening
        New flags with ``dropped`` set, and the features without the dropped columns.

    Examples
    --------
    >>> flags = [ColumnFlag("id", "row_id", "500 values"), ColumnFlag("sex2", "sensitive_copy", "2 values")]
    >>> s = decide_flags(flags, ["age", "id", "sex2"], keep=[], use_sensitive=True)
    >>> s.features, s.dropped
    (['age', 'sex2'], ['id'])
    """
    kept = {str(k) for k in keep}
    out = []
    for f in flags:
        drop = f.column not in kept and not (f.kind == "sensitive_copy" and use_sensitive)
        out.append(ColumnFlag(f.column, f.kind, f.detail, f.related, drop))
    dropped = {f.column for f in out if f.dropped}
    return Screening([c for c in features if str(c) not in dropped], out)
