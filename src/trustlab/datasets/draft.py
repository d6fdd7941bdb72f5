"""A draft schema for a user's table: the starting point of ``trustlab schema DATA``.

A private audit needs public bounds and categories (:class:`~trustlab.datasets.Schema`).
:func:`draft_schema` writes the skeleton a data owner fills in: every column's name and
kind, with bounds and categories either left empty (``null``) for the owner to fill from
public knowledge (the default: no budget spent), or estimated from the data under a
stated privacy budget ``epsilon`` (and ``delta`` for the categories). Every entry read
from the data carries a ``review`` note saying where it came from and what to check.

What reads the data, and at what cost (unit of privacy: one row, add/remove):

* the column names and their kinds (numeric or categorical, integer or not) come from
  the table's columns and dtypes, without noise. Column names are the table's public
  layout; a dtype is read off the values (a CSV column is numeric when all its cells
  parse as numbers), so each kind is marked for review and is not covered by epsilon;
* with ``epsilon``: the number of rows is released once (:func:`~trustlab.privacy.dp_count`),
  each numeric column's bounds with :func:`~trustlab.privacy.dp_bounds` (Durfee's
  unbounded quantile scans, levels 1% and 99%, add/remove neighbouring), and each
  categorical column's categories with a thresholded DP histogram over the values that
  occur (Korolova et al. 2009; Wilson et al. 2020): every distinct value's count gets
  discrete Laplace noise of scale ``1/e`` and the values whose noisy count reaches a
  threshold ``tau`` are released, with ``delta`` bounding the chance that a value held by
  a single row appears. The budget is split equally over these releases (basic
  composition); the draft's ``privacy`` object records the total, and a private audit
  that uses the schema spends its own epsilon on top.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import DELTA, EPSILON, validate_params
from trustlab._validation import check_epsilon
from trustlab.errors import DataError, ParameterError

__all__ = ["category_threshold", "dp_categories", "draft_schema"]

MAX_CATEGORIES = 1000
"""Most categories a draft lists for one column (the largest noisy counts are kept)."""

DEFAULT_DELTA = 1e-6
"""Default total delta of the category discovery."""


def category_threshold(epsilon: float, delta: float) -> int:
    """Smallest integer ``tau`` at which a value held by one row is released with probability <= ``delta``.

    With noise ``Z`` from the discrete Laplace of scale ``1/epsilon``,
    ``P[1 + Z >= tau] = exp(-(tau - 1) epsilon) / (1 + exp(-epsilon))``.

    Parameters
    ----------
    epsilon : float
        Privacy parameter of the noisy category counts (> 0).
    delta : float
        Allowed probability, in (0, 1), of releasing a category held by one row.

    Returns
    -------
    int
        The release threshold ``tau`` (>= 1) on noisy counts.

    Examples
    --------
    >>> category_threshold(1.0, 1e-6)
    15
    """
    epsilon = check_epsilon(epsilon)
    if not (isinstance(delta, numbers.Real) and 0 < float(delta) < 1):
        raise ParameterError(f"delta must be a number in (0, 1), got {delta!r}.", argument="delta")
    need = math.log(1.0 / (float(delta) * (1.0 + math.exp(-epsilon)))) / epsilon
    return 1 + max(0, math.ceil(need - 1e-12))


def dp_categories(
    values: Any, epsilon: float, delta: float, *, max_categories: int = MAX_CATEGORIES
) -> tuple[list[Any], dict[str, Any]]:
    """The values of a column that occur often enough, released under ``(epsilon, delta)``-DP.

    Each distinct non-missing value's count (one row adds 1 to one count: L1 sensitivity
    1 under add/remove) gets discrete Laplace noise of scale ``1/epsilon`` (OpenDP's exact
    sampler); the values whose noisy count reaches :func:`category_threshold` are
    released, at most ``max_categories`` of them (the largest noisy counts), sorted by
    their text. Counts of values present in both neighbouring tables are
    ``epsilon``-DP; a value present in only one of them is released with probability at
    most ``delta``.

    Parameters
    ----------
    values : array-like
        The private column. Values are compared and released as text (``1``, ``1.0``
        and ``"1"`` are the category ``"1"``); a numeric pandas Series' categories are
        released as numbers.
    epsilon : float
        Budget of this release.
    delta : float
        Probability bound for releasing a value held by a single row, in ``(0, 1)``.
    max_categories : int
        Most values released.

    Returns
    -------
    (list, dict)
        The released categories and a description of the release (mechanism, epsilon,
        delta, noise scale, threshold).

    References
    ----------
    Korolova, Kenthapadi, Mishra, Ntoulas. "Releasing Search Queries and Clicks
    Privately". WWW 2009. Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo, Gipson.
    "Differentially Private SQL with Bounded User Contribution". PoPETs 2020.

    Examples
    --------
    >>> values = ["a"] * 500 + ["b"] * 300 + ["rare"]
    >>> cats, info = dp_categories(values, epsilon=1.0, delta=1e-6)
    >>> cats, info["threshold"]
    (['a', 'b'], 15)
    """
    from trustlab.privacy.samplers import add_discrete_laplace

    epsilon = check_epsilon(epsilon)
    tau = category_threshold(epsilon, delta)
    numeric = isinstance(values, pd.Series) and pd.api.types.is_numeric_dtype(values)
    series = pd.Series(np.asarray(values, dtype=object).ravel())
    series = series[series.notna()]
    keys = series.map(_category_key)
    counts = keys.value_counts(sort=False)
    noisy = add_discrete_laplace(counts.to_numpy(dtype=np.int64), 1.0 / epsilon)
    kept = [(int(c), k) for c, k in zip(noisy, counts.index, strict=True) if c >= tau]
    kept.sort(key=lambda t: -t[0])
    released = sorted((k for _, k in kept[:max_categories]), key=str)
    # a category is released as its text (numbers as numbers when the column's type is numeric):
    # which of 1, 1.0 and "1" the rows hold must not show
    cats = [_json_scalar(float(k)) if numeric else k for k in released]
    info = {
        "mechanism": "thresholded histogram with discrete Laplace noise (Korolova et al. 2009)",
        "epsilon": epsilon,
        "delta": float(delta),
        "noise_scale": 1.0 / epsilon,
        "threshold": tau,
    }
    return cats, info


def _category_key(v: Any) -> str:
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _json_scalar(v: Any) -> Any:
    """A category as JSON writes it: text stays text, numbers become int or float."""
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        x = float(v)
        return int(x) if x.is_integer() and abs(x) < 2**53 else x
    return str(v)


def _nice(x: float, up: bool) -> float:
    """``x`` rounded outward to three significant digits (post-processing of a release)."""
    if x == 0 or not math.isfinite(x):
        return x
    step = 10.0 ** (math.floor(math.log10(abs(x))) - 2)
    y = (math.ceil(x / step) if up else math.floor(x / step)) * step  # 100..1000 steps: 3 digits
    return float(f"{y:.3g}")


def _named_columns(frame: pd.DataFrame, names: Iterable[Any], argument: str) -> list[Any]:
    """``names`` as a list (one string is one name), refused when it names unknown columns."""
    listed = [names] if isinstance(names, str) else list(names)
    unknown = [c for c in listed if c not in frame.columns]
    if unknown:
        raise ParameterError(
            f"{argument} names unknown column(s) {unknown}; the data has: "
            f"{', '.join(map(str, frame.columns[:30]))}.",
            argument=argument,
        )
    return listed


def _kinds(frame: pd.DataFrame, categorical: Iterable[Any]) -> dict[Any, str]:
    """``numeric``, ``integer``, ``boolean`` or ``categorical`` for each column, from its dtype."""
    forced = set(categorical)
    kinds: dict[Any, str] = {}
    for c in frame.columns:
        col = frame[c]
        if c in forced:
            kinds[c] = "categorical"
        elif pd.api.types.is_bool_dtype(col):
            kinds[c] = "boolean"
        elif pd.api.types.is_integer_dtype(col):
            kinds[c] = "integer"
        elif pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_complex_dtype(col):
            kinds[c] = "numeric"
        else:
            kinds[c] = "categorical"
    return kinds


@validate_params({"epsilon": [None, EPSILON], "delta": [DELTA], "source": [str]})
def draft_schema(
    frame: pd.DataFrame,
    *,
    epsilon: float | None = None,
    delta: float = DEFAULT_DELTA,
    categorical: Iterable[Any] = (),
    text: Iterable[Any] = (),
    source: str = "the data",
) -> dict[str, Any]:
    """A draft schema (as a JSON-ready dict) for ``frame``, for a person to review and complete.

    Parameters
    ----------
    frame : pandas.DataFrame
        The table (column names must be unique).
    epsilon : float, optional
        Without it (the default) nothing is estimated: numeric columns get
        ``"bounds": null`` and categorical ones ``"categories": null``, to be filled from
        public knowledge. With it, bounds and categories are estimated under
        ``(epsilon, delta)``-DP (add/remove one row), the budget split equally over the
        row count, every numeric column and every categorical column.
    delta : float, default 1e-6
        Total delta of the category discovery (split equally over the categorical
        columns); unused without ``epsilon`` or categorical columns.
    categorical : iterable of column names
        Columns to treat as categorical whatever their dtype (e.g. a 0/1 target, a
        numeric code).
    text : iterable of column names
        Columns the owner declares free text (notes, descriptions): drafted as
        ``"text": true``, never a model feature; nothing is read or estimated from them, so
        they cost no budget. Not a column also named in ``categorical``.
    source : str
        The table's name, quoted in the draft's ``source``.

    Returns
    -------
    dict
        ``{"source": ..., "columns": {name: entry}}`` and, with ``epsilon``, a
        ``privacy`` object (``epsilon``, ``delta``, the mechanisms). Each entry has
        ``bounds`` (a pair or null) and ``integer``, or ``categories`` (a list or null),
        and a ``review`` note. :meth:`Schema.from_dict` reads the draft once every null
        is filled in (or its entry deleted).

    Raises
    ------
    DataError
        If ``frame`` is not a DataFrame with columns, or has duplicated column names.
    ParameterError
        For a bad ``epsilon``/``delta``, ``categorical`` or ``text`` naming unknown columns,
        or a column named in both.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"age": [31, 45, 27], "sex": ["f", "m", "f"]})
    >>> d = draft_schema(df)
    >>> d["columns"]["age"]["bounds"], d["columns"]["sex"]["categories"]
    (None, None)
    """
    if not isinstance(frame, pd.DataFrame) or frame.shape[1] == 0:
        raise DataError("data must be a table with at least one column.", argument="data")
    if frame.columns.duplicated().any():
        dup = sorted(map(str, frame.columns[frame.columns.duplicated()]))
        raise DataError(f"data has duplicated column names {dup}.", argument="data")
    forced = _named_columns(frame, categorical, "categorical")
    texts = _named_columns(frame, text, "text")
    both = [c for c in texts if c in forced]
    if both:
        raise ParameterError(
            f"column(s) {both} are named in both categorical and text; a column is one kind: "
            "remove each from one of the two lists.",
            argument="text",
        )
    if epsilon is not None:
        epsilon, delta = float(epsilon), float(delta)
        if delta == 0:  # a post-check that keeps the hint
            raise ParameterError(
                "delta must be > 0: discovering categories from the data needs a delta.", argument="delta"
            )
    kinds = _kinds(frame, forced)
    kinds.update({c: "text" for c in texts})
    n_numeric = sum(k in ("numeric", "integer") for k in kinds.values())
    n_categorical = sum(k == "categorical" for k in kinds.values())
    n_releases = (n_numeric + 1 if n_numeric else 0) + n_categorical
    kind_note = "kind read from the column's type in the file (not private: check it)"
    columns: dict[str, Any] = {}
    privacy: dict[str, Any] | None = None
    if epsilon is None:
        for c, kind in kinds.items():
            columns[str(c)] = _empty_entry(kind, kind_note)
    else:
        from trustlab.privacy import dp_bounds, dp_count

        share = epsilon / max(n_releases, 1)
        cat_delta = delta / max(n_categorical, 1)
        n_rows = None
        mechanisms: list[str] = []
        if n_numeric:
            n_rows = max(float(dp_count(len(frame), share, description="rows").value), 1.0)
            mechanisms.append(f"row count: dp_count, epsilon={share:.6g}")
        for c, kind in kinds.items():
            col = frame[c]
            if kind in ("numeric", "integer"):
                x = col.to_numpy(dtype=np.float64, na_value=np.nan)
                rel = dp_bounds(x, share, neighbouring="add_remove", n=n_rows, description=f"bounds of {c}")
                lo, hi = (float(v) for v in rel.value)
                lo, hi = _nice(lo, False), _nice(hi, True)
                if kind == "integer":
                    lo, hi = math.floor(lo), math.ceil(hi)
                columns[str(c)] = {
                    "bounds": [lo, hi],
                    "integer": kind == "integer",
                    "review": (
                        f"bounds estimated from the data: dp_bounds (Durfee's quantile scans from 0, "
                        f"levels 1% and 99%, add/remove), epsilon={share:.6g}, rounded outward; about 2% "
                        f"of the rows lie outside and will be clipped: widen to the column's public "
                        f"limits if you know them. {kind_note}."
                    ),
                }
            elif kind == "categorical":
                cats, info = dp_categories(col, share, cat_delta)
                entry: dict[str, Any] = {"categories": cats or None}
                entry["review"] = (
                    f"categories found in the data by a DP thresholded histogram, epsilon={share:.6g}, "
                    f"delta={cat_delta:.3g}: values held by fewer than about {info['threshold']} rows "
                    "are missing; add every public category (the audit counts undeclared values as "
                    f"missing). {kind_note}."
                )
                if not cats:
                    entry["review"] = "no category was frequent enough to be released; " + entry["review"]
                columns[str(c)] = entry
            else:
                columns[str(c)] = _empty_entry(kind, kind_note)
        mechanisms.append(
            f"numeric bounds: dp_bounds (add/remove, levels 1%/99%), epsilon={share:.6g} per column"
        )
        mechanisms.append(
            f"categories: thresholded discrete-Laplace histogram, epsilon={share:.6g} and "
            f"delta={cat_delta:.3g} per column"
        )
        privacy = {
            "epsilon": epsilon,
            "delta": delta if n_categorical else 0.0,
            "neighbouring": "add/remove one row",
            "composition": f"basic: {n_releases} releases of epsilon {share:.6g} each",
            "mechanisms": mechanisms,
        }
    out: dict[str, Any] = {
        "source": (
            f"DRAFT drafted by `trustlab schema` from {source}: review every entry with a 'review' "
            "note, fill every null from public knowledge (or delete the entry), then edit this line"
        ),
        "columns": columns,
    }
    if privacy is not None:
        out["privacy"] = privacy
    return out


def _empty_entry(kind: str, kind_note: str) -> dict[str, Any]:
    if kind == "text":
        return {
            "text": True,
            "review": (
                "declared free text (text=[...], --text): never a model feature; nothing was read "
                "from its cells. Delete the entry if the column is not free text."
            ),
        }
    if kind == "boolean":
        return {
            "categories": [False, True],
            "review": f"a boolean column: its two categories follow from the type. {kind_note}.",
        }
    if kind in ("numeric", "integer"):
        return {
            "bounds": None,
            "integer": kind == "integer",
            "review": (
                "fill in [lower, upper] from public knowledge (documentation, the variable's "
                f"definition), not from the rows; or estimate them with --epsilon. {kind_note}."
            ),
        }
    return {
        "categories": None,
        "review": (
            "fill in the list of the column's possible values from public knowledge (the code "
            f"book), not from the rows; or estimate them with --epsilon. {kind_note}."
        ),
    }
