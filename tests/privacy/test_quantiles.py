"""Tests of trustlab.privacy.quantiles: exponential mechanism, JointExp, unbounded method."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustlab.errors import DataError, ParameterError
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.quantiles import (
    dp_quantile,
    dp_quantiles,
    jointexp_sensitivity,
    unbounded_quantile,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=5000)


def test_jointexp_close_to_true_quartiles():
    rel = dp_quantiles(X, [0.25, 0.5, 0.75], 1.0, (-10, 10), random_state=1)
    true = np.quantile(X, [0.25, 0.5, 0.75])
    # EM rank error is O(log(n)/eps) ranks; 0.02 is ~30 ranks' worth of N(0,1) spacing.
    assert np.all(np.abs(rel.value - true) < 0.02)
    assert np.all(np.diff(rel.value) >= 0)
    assert rel.epsilon == 1.0
    assert "clipped" in rel.parameters["note"]


def test_independent_method_and_single_quantile():
    rel = dp_quantiles(X, [0.1, 0.9], 1.0, (-10, 10), method="independent")
    assert np.all(np.abs(rel.value - np.quantile(X, [0.1, 0.9])) < 0.05)
    one = dp_quantile(X, 0.5, 1.0, (-10, 10))
    assert abs(one.value - np.median(X)) < 0.03
    assert one.parameters["sensitivity"] == 1.0


def test_outputs_inside_bounds_with_clipping_and_repeats():
    rel = dp_quantiles([50.0, 60.0, -70.0], [0.1, 0.2, 0.5, 0.9], 1.0, (-1, 1))
    assert np.all((rel.value >= -1) & (rel.value <= 1))
    assert len(rel.value) == 4


def test_sensitivity():
    assert jointexp_sensitivity([0.25, 0.5, 0.75]) == 2.0
    assert jointexp_sensitivity([0.25, 0.5, 0.75], "add_remove") == pytest.approx(1.5)


def test_jointexp_distribution_matches_exact_em_on_tiny_data():
    # Data [1, 2] in (0, 3): intervals of length 1 with 0, 1, 2 points below; the
    # median's interval probabilities are proportional to exp(-eps |i - 1| / 2).
    eps = 2.0
    draws = np.array([dp_quantile([1.0, 2.0], 0.5, eps, (0, 3)).value for _ in range(3000)])
    counts = np.array([(draws < 1).sum(), ((draws > 1) & (draws < 2)).sum(), (draws > 2).sum()])
    w = np.exp(-eps * np.abs(np.arange(3) - 1) / 2)
    p = w / w.sum()
    se = np.sqrt(p * (1 - p) / 3000)
    assert np.all(np.abs(counts / 3000 - p) < 5 * se)


def test_unbounded_quantile_close():
    x = RNG.exponential(size=20000)
    r = unbounded_quantile(x, 0.99, 1.0, 0.0)
    assert abs(r.value - np.quantile(x, 0.99)) / np.quantile(x, 0.99) < 0.1
    with pytest.raises(ParameterError, match="n"):
        unbounded_quantile(x, 0.5, 1.0, 0.0, neighbouring="add_remove")
    r2 = unbounded_quantile(x, 0.5, 1.0, 0.0, neighbouring="add_remove", n=20000)
    assert abs(r2.value - np.median(x)) < 0.05


def test_audit_quantile_within_claim():
    x = RNG.normal(size=200)
    x2 = x.copy()
    x2[np.argmin(x)] = 10.0
    res = audit_epsilon(lambda d: dp_quantile(d, 0.5, 1.0, (-10, 10)).value, x, x2, n_trials=800)
    assert res.epsilon_lower <= 1.0


def test_audit_unbounded_within_claim():
    x = np.linspace(0, 1, 100)
    x2 = x.copy()
    x2[-1] = 0.0
    res = audit_epsilon(lambda d: unbounded_quantile(d, 0.9, 1.0, 0.0, base=1.05).value, x, x2, n_trials=600)
    assert res.epsilon_lower <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"bounds": (1, 1)}, "bounds"),
        ({"bounds": (0, math.inf)}, "bounds"),
        ({"q": [0.5, 0.2]}, "q"),
        ({"q": [1.0]}, "q"),
        ({"x": []}, "x"),
        ({"x": [1.0, np.nan]}, "x"),
        ({"x": [1.0, np.inf]}, "x"),
        ({"x": [[1.0]]}, "x"),
        ({"x": "abc"}, "x"),
        ({"method": "bogus"}, "method"),
        ({"neighbouring": "swap"}, "neighbouring"),
    ],
)
def test_bad_input(kwargs, arg):
    args = {"x": [1.0, 2.0], "q": [0.5], "epsilon": 1.0, "bounds": (0, 3)} | kwargs
    with pytest.raises((DataError, ParameterError)) as info:
        dp_quantiles(**args)
    assert info.value.argument == arg


@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"lower": math.nan}, "lower"),
        ({"base": 1.0}, "base"),
        ({"x": []}, "x"),
        ({"epsilon": -1}, "epsilon"),
        ({"q": 0.0}, "q"),
    ],
)
def test_unbounded_bad_input(kwargs, arg):
    args = {"x": [1.0, 2.0], "q": 0.5, "epsilon": 1.0, "lower": 0.0} | kwargs
    with pytest.raises((DataError, ParameterError)) as info:
        unbounded_quantile(**args)
    assert info.value.argument == arg
