import numpy as np
import pandas as pd
import pytest

from trustlab._validation import (
    check_binary_target,
    check_bounds,
    check_choice,
    check_columns,
    check_delta,
    check_epsilon,
    check_frame,
    check_numeric_array,
    check_positive,
    make_generator,
)
from trustlab.errors import DataError, ParameterError


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf"), "1", True, None])
def test_epsilon_rejected(eps):
    with pytest.raises(ParameterError, match="epsilon"):
        check_epsilon(eps)


def test_epsilon_ok():
    assert check_epsilon(2) == 2.0


@pytest.mark.parametrize("delta", [-0.1, 1.0, "x"])
def test_delta_rejected(delta):
    with pytest.raises(ParameterError, match="delta"):
        check_delta(delta)


@pytest.mark.parametrize("b", [(1, 1), (2, 1), (0, float("inf")), "ab", (1,)])
def test_bounds_rejected(b):
    with pytest.raises(ParameterError, match="bounds"):
        check_bounds(b)


def test_array_checks():
    with pytest.raises(DataError, match="NaN"):
        check_numeric_array([1.0, np.nan])
    with pytest.raises(DataError, match="2-dimensional"):
        check_numeric_array([1.0, 2.0], ndim=2)
    with pytest.raises(DataError, match="at least 1"):
        check_numeric_array([])
    with pytest.raises(DataError, match="array-like"):
        check_numeric_array("abc")


def test_frame_and_columns():
    with pytest.raises(DataError, match="DataFrame"):
        check_frame([[1]])
    df = pd.DataFrame({"a": [1]})
    with pytest.raises(DataError, match=r"unknown column\(s\) \['b'\]"):
        check_columns(df, ["b"], "sensitive")


def test_binary_target():
    y, neg, pos = check_binary_target(pd.Series(["no", "yes", "yes"]))
    assert (neg, pos) == ("no", "yes") and y.tolist() == [0, 1, 1]
    with pytest.raises(DataError, match="binary"):
        check_binary_target(pd.Series([1, 2, 3]))
    with pytest.raises(DataError, match="positive label"):
        check_binary_target(pd.Series(["a", "b"]), positive="c")


def test_random_state_same_seed_same_stream():
    assert make_generator(3).random() == make_generator(3).random()
    with pytest.raises(ParameterError):
        make_generator("seed")


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "1", True, None])
def test_positive_rejected(value):
    with pytest.raises(ParameterError, match="sigma must be a finite number > 0") as info:
        check_positive(value, "sigma")
    assert info.value.argument == "sigma"


def test_positive_allow_zero():
    assert check_positive(0, "alpha", allow_zero=True) == 0.0
    assert check_positive(np.float64(2.5), "alpha", allow_zero=True) == 2.5
    assert check_positive(np.int64(3), "sigma") == 3.0
    for bad in (-1e-9, float("inf"), False):
        with pytest.raises(ParameterError, match=">= 0"):
            check_positive(bad, "alpha", allow_zero=True)


def test_choice():
    assert check_choice("b", "kind", ("a", "b")) == "b"
    assert type(check_choice(np.str_("a"), "kind", ["a", "b"])) is str
    for bad in ("c", None, ["a"], np.array(["a", "b"]), 1):
        with pytest.raises(ParameterError, match="kind must be one of 'a', 'b'") as info:
            check_choice(bad, "kind", ("a", "b"))
        assert info.value.argument == "kind"


def test_error_hierarchy_matches_scikit_learn():
    """ParameterError is a ValueError and a TypeError; NotFittedError is scikit-learn's too."""
    from sklearn.exceptions import NotFittedError as SkNotFitted

    from trustlab.errors import NotFittedError, ParameterError, TrustlabError

    err = ParameterError("epsilon must be a number", argument="epsilon")
    assert isinstance(err, ValueError) and isinstance(err, TypeError) and isinstance(err, TrustlabError)
    assert err.argument == "epsilon"
    nf = NotFittedError("call fit first", argument="estimator")
    assert isinstance(nf, SkNotFitted) and isinstance(nf, AttributeError) and isinstance(nf, ValueError)
    assert nf.argument == "estimator"
