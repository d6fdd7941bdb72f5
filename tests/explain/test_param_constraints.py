"""Explain's estimators declare every constructor parameter in ``_parameter_constraints``
(trustlab._param_validation), and a bad value raises ParameterError naming it at fit."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor

from trustlab.errors import ParameterError
from trustlab.explain import (
    ActionSet,
    ConfinedRegionFinder,
    ExemplarLDA,
    FastPD,
    FeaturePartition,
    LimeTabular,
    LogitsHierarchy,
    brace,
    causal_recourse,
    counterfactuals,
    has_recourse,
    linearize,
    max_reachable_score,
    recourse_check,
)

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 2))
GBR = GradientBoostingRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, X[:, 0])


class _Bad:
    """A value of no valid type for any parameter."""


def _fit(cls, **params):
    if cls is FastPD:
        return FastPD(GBR, **params).fit(X)
    if cls is LogitsHierarchy:
        return LogitsHierarchy(**params).fit(np.eye(3) * 3)
    if cls is ConfinedRegionFinder:
        return ConfinedRegionFinder(ActionSet(["a", "b"], lb=[-3, -3], ub=[3, 3]), **params).fit(
            np.array([1.0, -1.0]), -0.5
        )
    if cls is FeaturePartition:
        return FeaturePartition(**params).fit(rng.normal(size=(20, 4)))
    if cls is ExemplarLDA:
        return ExemplarLDA(**params).fit(np.ones((4, 5)))
    return LimeTabular(**params).fit(X)


@pytest.mark.parametrize(
    "cls", [FastPD, ConfinedRegionFinder, LimeTabular, LogitsHierarchy, FeaturePartition, ExemplarLDA]
)
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


def _linear_case():
    from sklearn.linear_model import LogisticRegression

    from trustlab.explain import LinearSCM

    frame = pd.DataFrame(rng.normal(size=(80, 2)), columns=["a", "b"])
    clf = LogisticRegression().fit(frame, (frame["a"] + frame["b"] > 0).astype(int))
    scm = LinearSCM({"a": [], "b": ["a"]}).fit(frame)
    return clf, scm, frame


FUNCTION_CALLS = {
    "brace": lambda clf, scm, f, **kw: brace(clf, scm, f.iloc[0], 1, **kw),
    "causal_recourse": lambda clf, scm, f, **kw: causal_recourse(clf, scm, f.iloc[0], 1, **kw),
    "counterfactuals": lambda clf, scm, f, **kw: counterfactuals(clf, scm, f.iloc[:2], **kw),
    "linearize": lambda clf, scm, f, **kw: linearize(clf, f, **kw),
    "recourse_check": lambda clf, scm, f, **kw: recourse_check(clf, f, f, **kw),
    "has_recourse": lambda clf, scm, f, **kw: has_recourse(
        f.to_numpy(), np.ones(2), ActionSet(["a", "b"], lb=[-3, -3], ub=[3, 3]), **kw
    ),
    "max_reachable_score": lambda clf, scm, f, **kw: max_reachable_score(
        f.to_numpy(), np.ones(2), ActionSet(["a", "b"], lb=[-3, -3], ub=[3, 3]), **kw
    ),
}


@pytest.mark.parametrize("name", list(FUNCTION_CALLS))
def test_every_declared_function_parameter_is_checked(name):
    import trustlab.explain as explain

    func = getattr(explain, name)
    clf, scm, frame = _linear_case()
    constraints = func._parameter_constraints
    assert constraints and set(constraints) <= set(inspect.signature(func).parameters)
    for param in constraints:
        with pytest.raises(ParameterError) as info:
            FUNCTION_CALLS[name](clf, scm, frame, **{param: _Bad()})
        assert info.value.argument == param and f"{param} of {name} must be" in str(info.value)
