"""Errors raised by trustlab.

Every error a user can cause is a :class:`TrustlabError`. Its message names the
argument (or column, or command-line flag), says what was wrong and what to do.
Subclasses also derive from the built-in exception that fits, so that
``except ValueError`` keeps working for callers who do not know trustlab.
"""

from __future__ import annotations

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

__all__ = [
    "BudgetExceededError",
    "DataError",
    "DataTypeError",
    "MissingDependencyError",
    "ModelError",
    "NotFittedError",
    "ParameterError",
    "TrustlabError",
]


class TrustlabError(Exception):
    """Base class of every error trustlab raises on bad input or misuse.

    Parameters
    ----------
    message : str
        What was wrong and how to fix it.
    argument : str, optional
        The argument, column or flag the problem is about, when there is one.
    """

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


class ParameterError(TrustlabError, ValueError, TypeError):
    """A parameter has an invalid value or type (e.g. ``epsilon <= 0``, ``epsilon="1"``).

    Like scikit-learn's ``InvalidParameterError``, it is both a :class:`ValueError`
    and a :class:`TypeError`, so callers catching either keep working whichever
    way the parameter was wrong.
    """


class DataError(TrustlabError, ValueError):
    """The data is unusable: empty, wrong shape, NaN where none is allowed, unknown column."""


class DataTypeError(DataError, TypeError):
    """The data holds values of a type that cannot be used (e.g. a dict where numbers are needed).

    A :class:`DataError` that is also a :class:`TypeError`, as scikit-learn raises for
    such input.
    """


class ModelError(TrustlabError, TypeError):
    """A model is of an unsupported type or lacks a required method."""


class NotFittedError(TrustlabError, _SklearnNotFittedError):
    """An estimator was used before ``fit``.

    It is also scikit-learn's :class:`sklearn.exceptions.NotFittedError` (hence a
    :class:`ValueError` and an :class:`AttributeError`), so scikit-learn's tools and
    users' ``except`` clauses recognise it.
    """


class BudgetExceededError(TrustlabError, RuntimeError):
    """A differential-privacy release would spend more than the remaining budget."""


class MissingDependencyError(TrustlabError, ImportError):
    """An optional dependency needed for this call is not installed (``argument`` names it)."""
