"""Errors raised by trustlab.

Every error a user can cause is a :class:`TrustlabError`. Its message names the
argument (or column, or command-line flag), says what was wrong and what to do.
Subclasses also derive from the built-in exception that fits, so that
``except ValueError`` keeps working for callers who do not know trustlab.
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DataError",
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


class ParameterError(TrustlabError, ValueError):
    """A parameter has an invalid value (e.g. ``epsilon <= 0``)."""


class DataError(TrustlabError, ValueError):
    """The data is unusable: empty, wrong shape, NaN where none is allowed, unknown column."""


class ModelError(TrustlabError, TypeError):
    """A model is of an unsupported type or lacks a required method."""


class NotFittedError(TrustlabError, AttributeError):
    """An estimator was used before ``fit``."""


class BudgetExceededError(TrustlabError, RuntimeError):
    """A differential-privacy release would spend more than the remaining budget."""
