"""Declarative parameter validation: constraints stated once, checked in one place.

A public function declares what each parameter may be with :func:`validate_params`;
an estimator declares a ``_parameter_constraints`` class attribute and calls
``self._validate_params()`` at the start of ``fit``. A violation raises
:class:`~trustlab.errors.ParameterError` whose ``argument`` is the parameter's name and
whose message says what is allowed, e.g.::

    epsilon of dp_count must be a float in the range [1e-12, 1e+06]; got -1.

Constraints are: an :class:`Interval`, :class:`Options`, :class:`HasMethods`, a type
(``int``, ``str``, ``numbers.Real``, a class), ``None``, ``callable`` or one of the
strings ``"boolean"``, ``"random_state"``, ``"array-like"``. A parameter is valid when
it satisfies any constraint of its list. The design follows scikit-learn's
``sklearn/utils/_param_validation.py`` (whose name clash with scikit-learn's private
module is avoided by keeping this one private and trustlab-specific: messages name the
argument and raise trustlab's error).
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

import numpy as np

from trustlab.errors import ParameterError

__all__ = [
    "DELTA",
    "EPSILON",
    "HasMethods",
    "Interval",
    "Options",
    "ParamsValidationMixin",
    "check_params",
    "validate_params",
]

F = TypeVar("F", bound=Callable[..., Any])

_CLOSED = ("left", "right", "both", "neither")


class Interval:
    """Numbers of a type in a range, e.g. ``Interval(numbers.Real, 0, 1, closed="neither")``.

    Parameters
    ----------
    kind : {numbers.Integral, numbers.Real}
        ``numbers.Integral`` accepts Python and NumPy integers (not booleans);
        ``numbers.Real`` accepts any real number except booleans and NaN.
    left, right : float or None
        The ends (``None`` for unbounded).
    closed : {"left", "right", "both", "neither"}
        Which ends belong to the interval.
    finite : bool, default True
        For reals, reject ``inf`` even where the range is unbounded.

    Examples
    --------
    >>> Interval(numbers.Real, 0, None, closed="neither").is_satisfied_by(2.5)
    True
    >>> str(Interval(numbers.Integral, 1, None, closed="left"))
    'an int in the range [1, inf)'
    """

    def __init__(
        self,
        kind: type,
        left: float | None,
        right: float | None,
        *,
        closed: str,
        finite: bool = True,
    ) -> None:
        if kind not in (numbers.Integral, numbers.Real):
            raise TypeError("Interval kind must be numbers.Integral or numbers.Real")
        if closed not in _CLOSED:
            raise ValueError(f"closed must be one of {_CLOSED}")
        if left is not None and right is not None and left > right:
            raise ValueError("Interval left end is above its right end")
        self.kind, self.left, self.right, self.closed, self.finite = kind, left, right, closed, finite

    def is_satisfied_by(self, value: Any) -> bool:
        """Whether ``value`` is a number of this kind inside the interval."""
        if isinstance(value, bool) or not isinstance(value, self.kind):
            return False
        x = float(value)
        if math.isnan(x) or (self.finite and math.isinf(x)):
            return False
        lo_ok = self.left is None or (x >= self.left if self.closed in ("left", "both") else x > self.left)
        hi_ok = self.right is None or (
            x <= self.right if self.closed in ("right", "both") else x < self.right
        )
        return lo_ok and hi_ok

    def __str__(self) -> str:
        name = "an int" if self.kind is numbers.Integral else "a float"
        lb = "[" if self.closed in ("left", "both") and self.left is not None else "("
        rb = "]" if self.closed in ("right", "both") and self.right is not None else ")"
        lo = "-inf" if self.left is None else f"{self.left:g}"
        hi = "inf" if self.right is None else f"{self.right:g}"
        return f"{name} in the range {lb}{lo}, {hi}{rb}"


class Options:
    """One of a fixed set of values, e.g. ``Options({"replace", "add_remove"})``.

    Unhashable values (lists, arrays) never match.

    Examples
    --------
    >>> Options({"l1", "l2"}).is_satisfied_by("l2")
    True
    >>> str(Options({"b", "a"}))
    "one of 'a', 'b'"
    """

    def __init__(self, options: Iterable[Any]) -> None:
        self.options = frozenset(options)

    def is_satisfied_by(self, value: Any) -> bool:
        """Whether ``value`` is one of the options."""
        try:
            return value in self.options
        except TypeError:
            return False

    def __str__(self) -> str:
        return "one of " + ", ".join(sorted(map(repr, self.options)))


class HasMethods:
    """An object with the named methods, e.g. ``HasMethods(["predict_proba"])``."""

    def __init__(self, methods: Iterable[str]) -> None:
        self.methods = tuple(methods)

    def is_satisfied_by(self, value: Any) -> bool:
        """Whether every method exists and is callable on ``value``."""
        return all(callable(getattr(value, m, None)) for m in self.methods)

    def __str__(self) -> str:
        return "an object with methods " + ", ".join(self.methods)


EPSILON = Interval(numbers.Real, 1e-12, 1e6, closed="both")
"""A privacy budget epsilon: trustlab accepts ``1e-12 <= epsilon <= 1e6``."""

DELTA = Interval(numbers.Real, 0, 1, closed="left")
"""A privacy parameter delta in ``[0, 1)``."""


def _satisfied(constraint: Any, value: Any) -> bool:
    if constraint is None:
        return value is None
    if hasattr(constraint, "is_satisfied_by"):
        return bool(constraint.is_satisfied_by(value))
    if constraint is callable:
        return callable(value)
    if constraint == "boolean":
        return isinstance(value, bool | np.bool_)
    if constraint == "random_state":
        return (
            value is None
            or isinstance(value, np.random.Generator | np.random.RandomState)
            or (isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0)
        )
    if constraint == "array-like":
        return (hasattr(value, "__array__") or isinstance(value, list | tuple)) and not isinstance(
            value, str | bytes
        )
    if isinstance(constraint, type):
        if constraint in (int, numbers.Integral, float, numbers.Real) and isinstance(value, bool):
            return False
        return isinstance(value, constraint)
    raise TypeError(f"unknown parameter constraint {constraint!r}")


def _describe(constraint: Any) -> str:
    if constraint is None:
        return "None"
    if constraint is callable:
        return "a callable"
    if isinstance(constraint, str):
        return {
            "boolean": "a bool",
            "random_state": "None, a non-negative int or a numpy Generator",
            "array-like": "an array-like",
        }[constraint]
    if isinstance(constraint, type):
        return f"an instance of {constraint.__name__}"
    return str(constraint)


def check_params(params: Mapping[str, Any], constraints: Mapping[str, Any], caller: str) -> None:
    """Check every parameter named in ``constraints`` against its list of constraints.

    Parameters absent from ``constraints`` (or mapped to ``"no_validation"``) are not
    checked.

    Parameters
    ----------
    params : mapping
        Parameter name to value.
    constraints : mapping
        Parameter name to a list of constraints (or ``"no_validation"``).
    caller : str
        The function or class name, for the message.

    Raises
    ------
    ParameterError
        Naming the first invalid parameter (its ``argument``) and what it may be.

    Examples
    --------
    >>> check_params({"alpha": -1}, {"alpha": [Interval(numbers.Real, 0, None, closed="left")]}, "f")
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: alpha of f must be a float in the range [0, inf); got -1.
    """
    for name, options in constraints.items():
        if options == "no_validation" or name not in params:
            continue
        value = params[name]
        if any(_satisfied(c, value) for c in options):
            continue
        allowed = [_describe(c) for c in options]
        text = allowed[0] if len(allowed) == 1 else ", ".join(allowed[:-1]) + " or " + allowed[-1]
        shown = repr(value) if len(repr(value)) <= 60 else f"{type(value).__name__} {repr(value)[:57]}..."
        raise ParameterError(f"{name} of {caller} must be {text}; got {shown}.", argument=name)


def validate_params(constraints: Mapping[str, Any]) -> Callable[[F], F]:
    """Decorate a public function so that its arguments are checked against ``constraints``.

    Examples
    --------
    >>> @validate_params({"n": [Interval(numbers.Integral, 1, None, closed="left")]})
    ... def repeat(n):
    ...     return "x" * n
    >>> repeat(2)
    'xx'
    >>> repeat(0)
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: n of repeat must be an int in the range [1, inf); got 0.
    """

    def decorator(func: F) -> F:
        signature = inspect.signature(func)
        unknown = set(constraints) - set(signature.parameters)
        if unknown:
            raise TypeError(f"constraints name parameters {sorted(unknown)} that {func.__name__} lacks")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            check_params(bound.arguments, constraints, func.__name__)
            return func(*args, **kwargs)

        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        wrapper._parameter_constraints = dict(constraints)  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorator


class ParamsValidationMixin:
    """Adds ``_validate_params`` to an estimator that declares ``_parameter_constraints``.

    Call ``self._validate_params()`` first thing in ``fit``: it checks the values stored
    by ``__init__`` (scikit-learn's contract: ``__init__`` only stores, ``fit`` validates).
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {}

    def _validate_params(self) -> None:
        params = {name: getattr(self, name) for name in self._parameter_constraints if hasattr(self, name)}
        check_params(params, self._parameter_constraints, type(self).__name__)
