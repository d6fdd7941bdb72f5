"""Input readers shared by the privacy mechanisms (private module).

Two kinds of input, two rules:

- **Public parameters** (``epsilon``, bounds, levels, anchors, the neighbouring
  relation, a public ``n``) are checked strictly: a bad one raises a
  :class:`~trustlab.errors.ParameterError` naming the argument.
- **Private values** are read leniently by :func:`read_private_sample`: only their
  type and shape (public facts) are checked. Their values never raise, because an
  exception that depends on the private data is itself a release.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, Options
from trustlab._validation import check_choice
from trustlab.errors import DataError, ParameterError

__all__ = [
    "BASE",
    "MAX_BUCKETS",
    "MAX_PUBLIC_N",
    "NEIGHBOURING",
    "NEIGHBOURING_OPTION",
    "check_anchor",
    "check_base",
    "check_levels",
    "check_neighbouring",
    "check_public_n",
    "read_private_sample",
]

NEIGHBOURING = {"replace": "replace one record", "add_remove": "add/remove one record"}
"""The neighbouring relations of the record-level mechanisms, with their ledger wording."""

NEIGHBOURING_OPTION = Options(NEIGHBOURING)
"""The ``neighbouring`` constraint of the record-level mechanisms (trustlab._param_validation)."""

BASE = Interval(numbers.Real, 1, None, closed="neither")
"""The growth factor of geometric buckets: a finite number > 1 (e.g. 1.001)."""

MAX_BUCKETS = Interval(numbers.Integral, 1, 10**8, closed="both")
"""How many geometric buckets a scan may visit."""

MAX_PUBLIC_N = 2**53
"""Largest public sample size the quantile mechanisms accept (exact in float64)."""


def check_neighbouring(neighbouring: Any) -> str:
    """Return ``neighbouring`` after checking it is ``"replace"`` or ``"add_remove"``.

    Parameters
    ----------
    neighbouring : str
        The neighbouring relation.

    Returns
    -------
    str

    Examples
    --------
    >>> check_neighbouring("add_remove")
    'add_remove'
    """
    return str(check_choice(neighbouring, "neighbouring", NEIGHBOURING))


def read_private_sample(x: Any, name: str = "x") -> np.ndarray:
    """A 1-d float array of the private values; public facts (shape, type) only are checked.

    May be empty and may hold NaN (an absent record) or +-inf (clipped later):
    those are facts about the private data and raise nothing. Entries that are not
    numbers at all (e.g. a stray string in an object array) are read as NaN.
    """
    if isinstance(x, str | bytes) or x is None:
        raise DataError(f"{name} must be a 1-d array of numbers, got {type(x).__name__}.", argument=name)
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raw = np.asarray(x, dtype=object)
        if raw.ndim != 1:
            raise DataError(f"{name} must be 1-dimensional, got shape {raw.shape}.", argument=name) from None
        arr = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-dimensional, got shape {arr.shape}.", argument=name)
    return arr


def check_levels(q: Any) -> np.ndarray:
    """Quantile levels as a 1-d float array, strictly increasing inside ``(0, 1)``."""
    try:
        levels = np.atleast_1d(np.asarray(q, dtype=float))
    except (TypeError, ValueError):
        raise ParameterError(f"q must be numbers in (0, 1), got {q!r}.", argument="q") from None
    if levels.ndim != 1 or levels.size == 0:
        raise ParameterError("q must be one level or a 1-d list of levels.", argument="q")
    if not np.all((levels > 0) & (levels < 1)):
        raise ParameterError(f"q must lie strictly between 0 and 1, got {q!r}.", argument="q")
    if np.any(np.diff(levels) <= 0):
        raise ParameterError(f"q must be strictly increasing, got {q!r}.", argument="q")
    return levels


def check_anchor(value: Any, name: str, *, max_abs: float = math.inf) -> float:
    """A public anchor: a finite real number of magnitude at most ``max_abs``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(float(value))
        or abs(float(value)) > max_abs
    ):
        within = "" if math.isinf(max_abs) else f" within +-{max_abs:g}"
        raise ParameterError(
            f"{name} must be a finite number{within} (a public value that does not come from the "
            f"data), got {value!r}.",
            argument=name,
        )
    return float(value)


def check_base(base: Any) -> float:
    """The growth factor of the geometric buckets: a finite number > 1."""
    if (
        isinstance(base, bool)
        or not isinstance(base, numbers.Real)
        or not (math.isfinite(float(base)) and float(base) > 1.0)
        or math.log(float(base)) <= 0.0
    ):
        raise ParameterError(f"base must be a finite number > 1, got {base!r}; e.g. 1.001.", argument="base")
    return float(base)


def check_public_n(n: Any, size: int, neighbouring: str, *, maximum: float = math.inf) -> float:
    """The public (or released) sample size: ``n`` if given, else ``size`` under ``"replace"``.

    Under ``"add_remove"`` the true size is private, so ``n`` is required.
    """
    if n is None:
        if neighbouring == "add_remove":
            raise ParameterError(
                "under neighbouring='add_remove' the sample size is private: pass n, a public "
                "or previously released (noisy) count.",
                argument="n",
            )
        return float(size)
    if (
        isinstance(n, bool)
        or not isinstance(n, numbers.Real)
        or not (math.isfinite(float(n)) and 1 <= float(n) <= maximum)
    ):
        top = "" if math.isinf(maximum) else " and at most 2**53"
        raise ParameterError(f"n must be a finite number >= 1{top}, got {n!r}.", argument="n")
    return float(n)
