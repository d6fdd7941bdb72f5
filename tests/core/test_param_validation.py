"""Tests of the declarative parameter validation (trustlab._param_validation)."""

from __future__ import annotations

import math
import numbers
from typing import ClassVar

import numpy as np
import pytest

from trustlab._param_validation import (
    EPSILON,
    HasMethods,
    Interval,
    Options,
    ParamsValidationMixin,
    check_params,
    validate_params,
)
from trustlab.errors import ParameterError


@pytest.mark.parametrize(
    ("interval", "good", "bad"),
    [
        (
            Interval(numbers.Real, 0, 1, closed="neither"),
            [0.5, np.float32(0.1)],
            [0, 1, math.nan, True, "0.5"],
        ),
        (Interval(numbers.Real, 0, 1, closed="both"), [0, 1, 0.5], [-1e-9, 1 + 1e-9]),
        (Interval(numbers.Real, 0, None, closed="left"), [0, 1e308], [math.inf, -1]),
        (Interval(numbers.Integral, 1, None, closed="left"), [1, np.int64(5), 2**70], [0, 1.0, True]),
        (EPSILON, [1e-12, 1.0, 1e6], [0, 5e-324, 1e7, math.inf, -1, None]),
    ],
)
def test_interval(interval, good, bad):
    assert all(interval.is_satisfied_by(v) for v in good)
    assert not any(interval.is_satisfied_by(v) for v in bad)


def test_options_and_methods():
    opts = Options({"l1", "l2"})
    assert opts.is_satisfied_by("l1") and not opts.is_satisfied_by("l3")
    assert not opts.is_satisfied_by(["l1"])  # unhashable never matches
    assert HasMethods(["fit"]).is_satisfied_by(Options) is False
    assert HasMethods(["is_satisfied_by"]).is_satisfied_by(opts)


def test_check_params_message_names_the_argument():
    constraints = {
        "epsilon": [EPSILON],
        "method": [Options({"a", "b"})],
        "random_state": ["random_state"],
        "flag": ["boolean"],
        "x": ["array-like", None],
        "f": [callable],
    }
    check_params(
        {"epsilon": 1.0, "method": "a", "random_state": None, "flag": False, "x": [1], "f": len},
        constraints,
        "g",
    )
    cases = {
        "epsilon": -1,
        "method": "c",
        "random_state": -3,
        "flag": "yes",
        "x": "abc",
        "f": 3,
    }
    for name, value in cases.items():
        params = {"epsilon": 1.0, "method": "a", "random_state": None, "flag": False, "x": None, "f": len}
        params[name] = value
        with pytest.raises(ParameterError) as info:
            check_params(params, constraints, "g")
        assert info.value.argument == name
        assert f"{name} of g must be" in str(info.value)
        assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_decorator_checks_and_keeps_signature():
    @validate_params(
        {"n": [Interval(numbers.Integral, 1, None, closed="left")], "how": [Options({"x"}), None]}
    )
    def f(n, *, how=None):
        """Doc."""
        return n

    assert f(3) == 3 and f.__doc__ == "Doc."
    with pytest.raises(ParameterError, match="n of f must be an int"):
        f(0)
    with pytest.raises(ParameterError, match="how of f must be one of 'x' or None"):
        f(1, how="y")
    with pytest.raises(TypeError):

        @validate_params({"missing": [None]})
        def g(n):
            return n


def test_estimator_mixin():
    class Est(ParamsValidationMixin):
        _parameter_constraints: ClassVar[dict] = {"alpha": [Interval(numbers.Real, 0, None, closed="left")]}

        def __init__(self, alpha=1.0):
            self.alpha = alpha

        def fit(self):
            self._validate_params()
            return self

    assert Est(2.0).fit().alpha == 2.0
    with pytest.raises(ParameterError) as info:
        Est(-1).fit()
    assert info.value.argument == "alpha" and "alpha of Est" in str(info.value)
