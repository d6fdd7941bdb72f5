import numpy as np
import pandas as pd
import pytest

from trustlab._validation import (
    check_array,
    check_binary_target,
    check_bounds,
    check_columns,
    check_delta,
    check_epsilon,
    check_frame,
    check_random_state,
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
        check_array([1.0, np.nan])
    with pytest.raises(DataError, match="2-dimensional"):
        check_array([1.0, 2.0], ndim=2)
    with pytest.raises(DataError, match="at least 1"):
        check_array([])
    with pytest.raises(DataError, match="array-like"):
        check_array("abc")


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
    assert check_random_state(3).random() == check_random_state(3).random()
    with pytest.raises(ParameterError):
        check_random_state("seed")
