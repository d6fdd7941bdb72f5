"""Explain's estimators declare every constructor parameter in ``_parameter_constraints``
(trustlab._param_validation), and a bad value raises ParameterError naming it at fit."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingRegressor

from trustlab.errors import ParameterError
from trustlab.explain import ActionSet, ConfinedRegionFinder, FastPD, LimeTabular

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 2))
GBR = GradientBoostingRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, X[:, 0])


class _Bad:
    """A value of no valid type for any parameter."""


def _fit(cls, **params):
    if cls is FastPD:
        return FastPD(GBR, **params).fit(X)
    if cls is ConfinedRegionFinder:
        return ConfinedRegionFinder(ActionSet(["a", "b"], lb=[-3, -3], ub=[3, 3]), **params).fit(
            np.array([1.0, -1.0]), -0.5
        )
    return LimeTabular(**params).fit(X)


@pytest.mark.parametrize("cls", [FastPD, ConfinedRegionFinder, LimeTabular])
def test_every_parameter_is_declared_and_checked(cls):
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    constraints = cls._parameter_constraints
    assert set(constraints) == set(params)
    for name, allowed in constraints.items():
        if allowed == "no_validation":
            continue
        with pytest.raises(ParameterError) as info:
            _fit(cls, **{name: _Bad()})
        assert info.value.argument == name and f"{name} of {cls.__name__} must be" in str(info.value)
