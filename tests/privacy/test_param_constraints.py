"""The privacy mechanisms declare their scalar parameters (trustlab._param_validation), and the
DP boxplots charge an accountant: the plan is checked before any noise, releases recorded after."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

from trustlab.errors import BudgetExceededError, ParameterError
from trustlab.privacy import (
    Accountant,
    dp_bounds,
    dp_boxplot_stats,
    dp_count,
    dp_histogram,
    dp_mean,
    dp_quantile,
    dp_quantiles,
    dp_sum,
    grouped_dp_boxplot,
    unbounded_quantile,
)

X = np.random.default_rng(0).normal(size=400)
G = np.array(["a", "b"] * 200)

CALLS = {
    dp_count: lambda **kw: dp_count(10, 1.0, **kw),
    dp_histogram: lambda **kw: dp_histogram([0, 1, 1], 3, 1.0, **kw),
    dp_sum: lambda **kw: dp_sum(X, (-5.0, 5.0), 1.0, **kw),
    dp_mean: lambda **kw: dp_mean(X, (-5.0, 5.0), 1.0, **kw),
    dp_quantiles: lambda **kw: dp_quantiles(X, [0.5], 1.0, (-5, 5), **kw),
    dp_quantile: lambda **kw: dp_quantile(X, 0.5, 1.0, (-5, 5), **kw),
    unbounded_quantile: lambda **kw: unbounded_quantile(X, 0.5, 1.0, -5.0, **kw),
    dp_bounds: lambda **kw: dp_bounds(X, 1.0, **kw),
    dp_boxplot_stats: lambda **kw: dp_boxplot_stats(X, 1.0, (-5, 5), **kw),
    grouped_dp_boxplot: lambda **kw: grouped_dp_boxplot(X, G, 1.0, (-5, 5), categories=["a", "b"], **kw),
}


class _Bad:
    """A value of no valid type for any parameter."""


@pytest.mark.parametrize("func", list(CALLS), ids=lambda f: f.__name__)
def test_declared_parameters_are_checked(func):
    constraints = func._parameter_constraints
    signature = inspect.signature(func).parameters
    assert set(constraints) <= set(signature)
    assert "epsilon" in constraints and "accountant" in constraints
    positional = [p for p in signature if signature[p].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    for name in constraints:
        if name in positional[:4] and name != "description":
            continue  # the call fixes the leading positional arguments
        with pytest.raises(ParameterError) as info:
            CALLS[func](**{name: _Bad()})
        assert info.value.argument == name
        assert f"{name} of {func.__name__} must be" in str(info.value)


@pytest.mark.parametrize("func", [dp_boxplot_stats, grouped_dp_boxplot], ids=lambda f: f.__name__)
def test_boxplots_charge_the_accountant(func):
    acc = Accountant(2.0)
    result = CALLS[func](accountant=acc)
    assert math.isclose(acc.spent_epsilon, 1.0)
    assert len(acc.ledger()) == len(result.releases)
    assert {e.description for e in acc.ledger()} == {r.description for r in result.releases}


@pytest.mark.parametrize("func", [dp_boxplot_stats, grouped_dp_boxplot], ids=lambda f: f.__name__)
def test_boxplots_refuse_before_drawing(func, monkeypatch):
    import trustlab.privacy._boxplot_core as box_core
    import trustlab.privacy._boxplot_grouped as box_grouped

    def no_noise(*args, **kwargs):  # pragma: no cover - reached only on a bug
        raise AssertionError("noise drawn before the budget was checked")

    for module in (box_core, box_grouped):  # every draw of a box and of the group sizes
        monkeypatch.setattr(module, "add_discrete_laplace", no_noise)
    acc = Accountant(0.5)
    with pytest.raises(BudgetExceededError):
        CALLS[func](accountant=acc)
    assert acc.spent_epsilon == 0.0 and acc.ledger() == []


def test_non_private_boxplot_cannot_be_charged():
    with pytest.raises(ParameterError) as info:
        dp_boxplot_stats(X, math.inf, (-5, 5), accountant=Accountant(1.0))
    assert info.value.argument == "accountant"
    with pytest.raises(ParameterError) as info:
        grouped_dp_boxplot(X, G, math.inf, (-5, 5), categories=["a", "b"], accountant=Accountant(1.0))
    assert info.value.argument == "accountant"
