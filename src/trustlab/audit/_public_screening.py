"""The column screening a private audit can do, and what a report says about the screening.

Every rule of :mod:`trustlab.audit.screening` reads the rows; in private mode whether a
column is left out of the model would then depend on the private data, and trustlab
has no differentially private version of them. A private audit screens the column
*names* only (public facts): :func:`screen_names`. :func:`screening_meta` is the
report's statement of what was screened, on which rows (``meta["screening"]``, shown in
the Data section and in the summary's "not in this report" line when the rows were not
screened).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from trustlab.audit.screening import MAX_ROWS, ColumnFlag, Screening, decide_flags

__all__ = ["screen_declared_text", "screen_names", "screening_meta"]


_COPY_NAME = re.compile(r"^(?P<base>.+)\.(?P<n>[0-9]+)$")


def screen_names(
    features: Sequence[Any],
    *,
    target: Any,
    sensitive: Sequence[Any],
    use_sensitive: bool = False,
    keep: Sequence[Any] = (),
) -> Screening:
    """Private mode: flag the features whose *name* copies the target's or a sensitive column's.

    pandas reads a header that names a column twice as ``NAME`` and ``NAME.1``; a feature
    called ``NAME.N`` for the target or a sensitive column ``NAME`` is taken for a copy of
    it. Only the column names are read (public facts), so the flags and the features the
    model keeps are the same on any neighbouring table.

    Parameters
    ----------
    features : sequence
        The model's candidate features.
    target : str
        The target column's name.
    sensitive : sequence
        The sensitive columns.
    use_sensitive : bool
        Whether the model may use the sensitive columns (a copy of one is then kept).
    keep : sequence
        Columns to keep as features whatever their name (still flagged).

    Returns
    -------
    Screening

    Examples
    --------
    >>> s = screen_names(["age", "whi.1", "race.1"], target="whi", sensitive=["race"])
    >>> s.features, s.dropped
    (['age'], ['whi.1', 'race.1'])
    """
    flags = []
    for col in features:
        m = _COPY_NAME.match(str(col))
        if m is None:
            continue
        base = m.group("base")
        why = f"its name is {base!r} with the suffix '.{m.group('n')}', as pandas names a repeated header"
        if base == str(target):
            flags.append(ColumnFlag(str(col), "target_copy", why, str(target)))
        elif base in {str(s) for s in sensitive}:
            flags.append(ColumnFlag(str(col), "sensitive_copy", why, base))
    return decide_flags(flags, features, keep, use_sensitive)


def screen_declared_text(
    screen: Callable[[list[Any]], Screening],
    features: Sequence[Any],
    schema: Any,
    *,
    keep: Sequence[Any] = (),
    use_sensitive: bool = False,
) -> Screening:
    """Leave the schema's text columns (``"text": true``) out of the model; screen the other features.

    A declared text column is flagged ``declared_text`` (a public fact: the schema) and left
    out of the features unless ``keep`` names it; ``screen`` (the rows' screening in raw
    mode, :func:`screen_names` in private mode) sees only the other features, so a declared
    text column is never flagged twice.

    Parameters
    ----------
    screen : callable
        ``screen(features) -> Screening`` on the features that are not declared text.
    features : sequence
        The model's candidate features.
    schema : Schema or None
        The public schema.
    keep : sequence
        Columns to keep as features (still flagged).
    use_sensitive : bool
        Passed to :func:`~trustlab.audit.screening.decide_flags`.

    Returns
    -------
    Screening
        The declared text flags first, then ``screen``'s; the kept features in their order.

    Examples
    --------
    >>> from trustlab.datasets import Schema
    >>> s = Schema.from_dict({"columns": {"note": {"text": True}}})
    >>> out = screen_declared_text(lambda f: Screening(list(f)), ["age", "note"], s)
    >>> out.features, out.dropped
    (['age'], ['note'])
    """
    text = [str(c) for c in features if schema is not None and schema.kind(str(c)) == "text"]
    flags = [ColumnFlag(c, "declared_text", f"'text': true in the schema, {schema.source}") for c in text]
    found = screen([c for c in features if str(c) not in text])
    declared = decide_flags(flags, features, keep, use_sensitive)
    kept = {str(c) for c in found.features} | {f.column for f in declared.flags if not f.dropped}
    return Screening([c for c in features if str(c) in kept], declared.flags + found.flags)


def screening_meta(*, private: bool, rows: int | None = None, sample: bool = False) -> dict[str, Any]:
    """What the report says about the column screening: whether it ran, on which rows.

    Parameters
    ----------
    private : bool
        Private mode: only the names were screened (:func:`screen_names`).
    rows : int, optional
        Rows the screening read (raw mode).
    sample : bool
        Whether those rows are a distributed run's training sample.

    Returns
    -------
    dict
        ``ran`` (whether the rows were screened), ``rows`` and ``note`` (a sentence).

    Examples
    --------
    >>> screening_meta(private=True)["ran"]
    False
    """
    if private:
        note = (
            "The screening of the rows (copies of the target or of a sensitive column, a feature that "
            "predicts the target alone, row and entity identifiers, panels) did not run: it reads the "
            "rows, and whether a column is left out would then depend on the private data (trustlab "
            "has no differentially private version of it). Only the column names were screened (a "
            "name such as 'y.1' copies 'y'). Review the columns, or run the audit without --private "
            "where the data may be seen, and leave out what it flags with --ignore."
        )
        return {"ran": False, "rows": None, "note": note}
    where = (
        f"on the training sample the model was fitted on ({rows:,} rows, a hash sample): a panel whose "
        "entities appear once each in the sample is taken for a row id or goes unnoticed"
        if sample
        else f"on the {rows:,} labelled rows (the leakage scores on a seeded sample of at most {MAX_ROWS:,})"
    )
    return {
        "ran": True,
        "rows": rows,
        "note": f"Columns screened for leakage, copies, identifiers and free text {where}.",
    }
