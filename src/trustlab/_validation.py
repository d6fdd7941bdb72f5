"""Shared input checks: one place that validates arrays, frames, privacy parameters and seeds.

Each check raises a :class:`~trustlab.errors.TrustlabError` subclass whose message
names the argument and the fix, so that no user sees a bare traceback from deep
inside NumPy.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab.errors import DataError, DataTypeError, ParameterError

__all__ = [
    "MAX_EPSILON",
    "MIN_EPSILON",
    "check_binary_target",
    "check_bounds",
    "check_choice",
    "check_columns",
    "check_delta",
    "check_epsilon",
    "check_fraction",
    "check_frame",
    "check_numeric_array",
    "check_positive",
    "check_positive_int",
    "make_generator",
]


MIN_EPSILON = 1e-12
"""Smallest epsilon trustlab accepts: below it the noise of any useful query exceeds 64-bit range."""
MAX_EPSILON = 1e6
"""Largest finite epsilon trustlab accepts: above it a release is a non-private answer in disguise."""


def check_epsilon(epsilon: Any, name: str = "epsilon", *, allow_inf: bool = False) -> float:
    """Return ``epsilon`` as a float after checking ``MIN_EPSILON <= epsilon <= MAX_EPSILON``.

    ``allow_inf`` also accepts ``math.inf`` where a function documents it as "no privacy".

    Examples
    --------
    >>> check_epsilon(1)
    1.0
    >>> check_epsilon(5e-324)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: epsilon must be at least 1e-12 ...
    """
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ParameterError(
            f"{name} must be a positive number, got {type(epsilon).__name__} {epsilon!r}.",
            argument=name,
        )
    value = float(epsilon)
    if math.isinf(value) and value > 0 and allow_inf:
        return value
    if math.isnan(value) or value <= 0 or math.isinf(value):
        raise ParameterError(
            f"{name} must be a finite number > 0 (the privacy budget), got {epsilon!r}; pass e.g. 1.0.",
            argument=name,
        )
    if value < MIN_EPSILON:
        raise ParameterError(
            f"{name} must be at least {MIN_EPSILON:g} (a smaller budget makes every release pure noise), "
            f"got {epsilon!r}.",
            argument=name,
        )
    if value > MAX_EPSILON:
        raise ParameterError(
            f"{name} must be at most {MAX_EPSILON:g} (a larger one protects nothing), got {epsilon!r}"
            + ("; pass math.inf for the non-private answer." if allow_inf else "."),
            argument=name,
        )
    return value


def check_delta(delta: Any, name: str = "delta") -> float:
    """Return ``delta`` as a float after checking ``0 <= delta < 1``."""
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise ParameterError(
            f"{name} must be a number in [0, 1), got {type(delta).__name__} {delta!r}.",
            argument=name,
        )
    value = float(delta)
    if not (0.0 <= value < 1.0):
        raise ParameterError(
            f"{name} must lie in [0, 1) (typically much smaller than 1/n), got {delta!r}.",
            argument=name,
        )
    return value


def check_fraction(value: Any, name: str, *, low: float = 0.0, high: float = 1.0) -> float:
    """Return ``value`` as a float after checking ``low < value < high``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (low < float(value) < high):
        raise ParameterError(
            f"{name} must be a number strictly between {low} and {high}, got {value!r}.",
            argument=name,
        )
    return float(value)


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float after checking it is a finite real number > 0 (>= 0 with ``allow_zero``).

    Booleans are rejected: ``True`` is not a scale or a tolerance.

    Examples
    --------
    >>> check_positive(2, "sigma")
    2.0
    >>> check_positive(0, "alpha", allow_zero=True)
    0.0
    >>> check_positive(0, "sigma")
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: sigma must be a finite number > 0, got 0.
    """
    bound = ">= 0" if allow_zero else "> 0"
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(float(value))
        or (float(value) < 0 if allow_zero else float(value) <= 0)
    ):
        raise ParameterError(f"{name} must be a finite number {bound}, got {value!r}.", argument=name)
    return float(value)


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """Return the entry of ``choices`` equal to ``value``, or raise naming the options.

    Unhashable values (lists, arrays) never match, so an array passed by mistake
    gets this message rather than NumPy's "truth value is ambiguous".

    Examples
    --------
    >>> check_choice("dense", "kind", ("osnap", "dense"))
    'dense'
    >>> check_choice("sparse", "kind", ("osnap", "dense"))
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: kind must be one of 'osnap', 'dense'; got 'sparse'.
    """
    options = tuple(choices)
    if isinstance(value, Hashable):
        for option in options:
            if option == value:
                return option
    raise ParameterError(
        f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}.", argument=name
    )


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as an int after checking it is an integer ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}.", argument=name)
    return int(value)


def check_bounds(bounds: Any, name: str = "bounds") -> tuple[float, float]:
    """Return public ``(lower, upper)`` bounds after checking they are finite and ordered."""
    try:
        lower, upper = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ParameterError(
            f"{name} must be a pair (lower, upper) of numbers, got {bounds!r}.", argument=name
        ) from None
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ParameterError(f"{name} must be finite, got {bounds!r}.", argument=name)
    if lower >= upper:
        raise ParameterError(
            f"{name} must satisfy lower < upper, got lower={lower}, upper={upper}.",
            argument=name,
        )
    return lower, upper


def make_generator(random_state: Any, name: str = "random_state") -> np.random.Generator:
    """Turn ``None``, an int or a Generator into a :class:`numpy.random.Generator`.

    The same integer always gives the same stream.
    """
    if random_state is None or (
        isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)
    ):
        if random_state is not None and random_state < 0:
            raise ParameterError(f"{name} must be a non-negative integer, got {random_state}.", argument=name)
        return np.random.default_rng(None if random_state is None else int(random_state))
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    raise ParameterError(
        f"{name} must be None, a non-negative int or a numpy Generator, got {type(random_state).__name__}.",
        argument=name,
    )


def check_numeric_array(
    x: Any,
    name: str = "X",
    *,
    ndim: int | None = None,
    allow_nan: bool = False,
    min_rows: int = 1,
    dtype: Any = float,
) -> np.ndarray:
    """Return ``x`` as a NumPy array after checking shape, emptiness and finiteness."""
    if isinstance(x, str | bytes) or x is None:
        raise DataError(f"{name} must be array-like of numbers, got {type(x).__name__}.", argument=name)
    try:
        arr = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as exc:
        error = DataTypeError if isinstance(exc, TypeError) else DataError
        raise error(
            f"{name} must be array-like of numbers; converting it failed ({exc}).",
            argument=name,
        ) from None
    if ndim is not None and arr.ndim != ndim:
        raise DataError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}.", argument=name)
    n_rows = arr.shape[0] if arr.ndim else 0
    if n_rows < min_rows:
        raise DataError(f"{name} must have at least {min_rows} row(s), got {n_rows}.", argument=name)
    if not allow_nan and np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
        raise DataError(
            f"{name} contains NaN or infinite values; drop or impute them first.",
            argument=name,
        )
    return arr


def check_token_ids(value: Any, name: str, *, vocab: int | None = None) -> np.ndarray:
    """Integer token ids as an ``(n, length)`` int64 array (one sequence may be given 1-D).

    Parameters
    ----------
    value : array-like of int
        Token ids, ``(n, length)`` or ``(length,)``; none empty.
    name : str
        The argument's name, for errors.
    vocab : int, optional
        The model's vocabulary size: every id must lie in ``[0, vocab)``.

    Returns
    -------
    numpy.ndarray of int64, shape (n, length)

    Raises
    ------
    DataError
        When ``value`` is not a non-empty 1-D or 2-D integer array, or holds ids outside the
        vocabulary (a tokenizer that does not match the model).

    Examples
    --------
    >>> check_token_ids([3, 1, 2], "ids", vocab=4).shape
    (1, 3)
    """
    arr = np.asarray(value)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise DataError(
            f"{name} must be integer token ids of shape (n, length) or (length,), none empty; got shape "
            f"{arr.shape} of {arr.dtype}.",
            argument=name,
        )
    if vocab is not None and (arr.min() < 0 or arr.max() >= vocab):
        raise DataError(
            f"{name} hold ids outside the model's vocabulary [0, {vocab}): the tokenizer does not match "
            "the model; encode with the tokenizer saved beside it.",
            argument=name,
        )
    return arr.astype(np.int64)


def context_length(model: Any) -> int | None:
    """A ``transformers`` model's context length, or None when its config states none.

    Read from ``max_position_embeddings`` or, for GPT-2, ``n_positions``.

    Parameters
    ----------
    model : object
        Anything with a ``config`` (a ``transformers`` model).

    Returns
    -------
    int or None

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> context_length(SimpleNamespace(config=SimpleNamespace(n_positions=64)))
    64
    """
    cfg = getattr(model, "config", None)
    value = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    return None if value is None else int(value)


def check_frame(data: Any, name: str = "data", *, min_rows: int = 1) -> pd.DataFrame:
    """Check ``data`` is a non-empty pandas DataFrame with unique string-able column names."""
    if not isinstance(data, pd.DataFrame):
        raise DataError(
            f"{name} must be a pandas DataFrame, got {type(data).__name__}; "
            "wrap arrays with pandas.DataFrame(...).",
            argument=name,
        )
    if data.shape[1] == 0:
        raise DataError(f"{name} has no columns.", argument=name)
    if len(data) < min_rows:
        raise DataError(f"{name} has {len(data)} row(s); at least {min_rows} are needed.", argument=name)
    if data.columns.duplicated().any():
        dup = sorted(map(str, data.columns[data.columns.duplicated()]))
        raise DataError(f"{name} has duplicated column names {dup}.", argument=name)
    return data


def check_columns(data: pd.DataFrame, columns: str | Iterable[str] | None, name: str) -> list[str]:
    """Check every named column exists in ``data``; return them as a list."""
    if columns is None:
        return []
    cols = [columns] if isinstance(columns, str) else list(columns)
    missing = [c for c in cols if c not in data.columns]
    if missing:
        available = ", ".join(map(str, data.columns[:30]))
        raise DataError(f"{name}: unknown column(s) {missing}; the data has: {available}.", argument=name)
    return cols


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds (messages print ``1.0``, not ``np.float64(1.0)``)."""
    return value.item() if isinstance(value, np.generic) else value


_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


def _same_label(label: Any, given: Any) -> bool:
    """Whether the user's ``given`` positive label (often text from the command line) names ``label``.

    Text matches a label that prints the same, a number equal to it (``"1"`` names ``1.0``),
    or for a boolean label its name (``"true"``, ``"False"``).
    """
    label = _plain(label)
    if label is given or (not isinstance(given, str) and label == given and type(label) is not str):
        return True
    text = str(given).strip()
    if str(label) == text:
        return True
    if isinstance(label, bool):
        return text.lower() in (_TRUE if label else _FALSE)
    if isinstance(label, int | float) and not isinstance(given, bool):
        try:
            return float(text) == float(label)
        except ValueError:
            return False
    return False


def check_binary_target(
    y: pd.Series, name: str = "target", positive: Any = None
) -> tuple[np.ndarray, Any, Any]:
    """Encode a binary target as 0/1.

    Returns ``(y01, negative_label, positive_label)``. Without ``positive`` the
    positive label is chosen as: ``1``/``True``/``"yes"``/``"true"``/``"1"`` when
    present, else the larger of the two sorted labels.
    """
    if y.isna().any():
        raise DataError(
            f"{name} has {int(y.isna().sum())} missing value(s); drop those rows first.",
            argument=name,
        )
    labels = pd.unique(y)
    if len(labels) != 2:
        shown = [_plain(v) for v in labels[:10]]
        raise DataError(
            f"{name} must be binary (exactly two distinct values), got {len(labels)}: {shown}; "
            "pick a binary outcome column or recode it.",
            argument=name,
        )
    ordered: Sequence[Any] = sorted(labels, key=lambda v: str(v))
    if positive is None:
        preferred = {"1", "true", "yes", "y", "positive", "pos"}
        hits = [v for v in ordered if str(v).strip().lower() in preferred]
        positive = hits[0] if len(hits) == 1 else ordered[1]
    elif positive not in set(labels) or isinstance(positive, str):
        matches = [v for v in labels if _same_label(v, positive)]
        if len(matches) != 1:
            raise DataError(
                f"positive label {_plain(positive)!r} is not a value of {name} "
                f"({[_plain(v) for v in ordered]}).",
                argument="positive",
            )
        positive = matches[0]
    negative = next(v for v in ordered if v != positive)
    return (y.to_numpy() == positive).astype(np.int64), negative, positive
