"""Tests of trustlab.explain.scm: abduction/generation round trips, fitting, interventions, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression

from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain.scm import AdditiveNoiseSCM, LinearSCM

GRAPH = {"a": [], "b": ["a"], "c": ["a", "b"], "d": ["c"]}


def _linear_data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(2, 1, n)
    b = 0.8 * a + rng.normal(0, 0.5, n)
    c = -1.0 * a + 2.0 * b + 3 + rng.normal(0, 1, n)
    d = 0.5 * c + rng.normal(0, 2, n)
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


def _nonlinear_data(n=1500, seed=1):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = np.sin(2 * a) + 0.2 * rng.normal(size=n)
    c = a * b + np.tanh(b) + 0.3 * rng.normal(size=n)
    d = np.cos(c) + 0.1 * rng.normal(size=n)
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


def test_linear_fit_recovers_coefficients():
    X = _linear_data()
    scm = LinearSCM(GRAPH).fit(X)
    # OLS standard error of a coefficient ~ sd(noise) / (sd(parent | other parents) sqrt(n)).
    # n = 4000: b|a: 0.5 / (1 * 63) = 0.008; c|(a,b): 1 / (0.5 * 63) = 0.032 (b given a has sd 0.5);
    # a in c: 1 / (sd(a | b) = 0.53 * 63) = 0.030; d|c: 2 / (sd(c) ~ 1.2 * 63) = 0.027. Tolerance: 5 se.
    assert scm.B_[1, 0] == pytest.approx(0.8, abs=5 * 0.008)
    assert scm.B_[2, 0] == pytest.approx(-1.0, abs=5 * 0.030)
    assert scm.B_[2, 1] == pytest.approx(2.0, abs=5 * 0.032)
    assert scm.B_[3, 2] == pytest.approx(0.5, abs=5 * 0.027)
    # noise sd: relative se of a sample sd is 1/sqrt(2n) = 1.1%; 5 se = 5.6%.
    assert scm.noise_scale_[1:] == pytest.approx([0.5, 1.0, 2.0], rel=0.056)
    assert np.allclose(scm.noise_mean_, 0, atol=1e-9)
    assert scm.order_[0] == "a" and scm.order_[-1] == "d"
    # zero weights outside the graph
    assert np.count_nonzero(scm.B_) == 4


@pytest.mark.parametrize("kind", ["linear", "anm_fitted", "anm_supplied", "anm_linear_estimator"])
def test_round_trip(kind):
    X = _linear_data(500) if kind in ("linear", "anm_linear_estimator") else _nonlinear_data(500)
    if kind == "linear":
        scm = LinearSCM(GRAPH).fit(X)
    elif kind == "anm_fitted":
        scm = AdditiveNoiseSCM(GRAPH).fit(X)
    elif kind == "anm_linear_estimator":
        scm = AdditiveNoiseSCM(GRAPH, estimator=LinearRegression()).fit(X)
        ref = LinearSCM(GRAPH).fit(X)
        assert np.allclose(scm.abduct(X), ref.abduct(X), atol=1e-8)
    else:
        mech = {"b": lambda P: np.sin(2 * P[:, 0]), "c": lambda P: P[:, 0] * P[:, 1] + np.tanh(P[:, 1])}
        scm = AdditiveNoiseSCM(GRAPH, mechanisms=mech).fit(X)
        assert scm.noise_scale_[1] == pytest.approx(0.2, rel=0.2)
    U = scm.abduct(X)
    assert U.shape == X.shape
    assert np.allclose(scm.generate(U), X.to_numpy(), atol=1e-9)
    row = X.to_numpy()[3]
    assert np.allclose(scm.generate(scm.abduct(row)), row, atol=1e-9)
    assert np.allclose(scm.abduct(X.iloc[3]), U[3])


@pytest.mark.claims
@pytest.mark.parametrize("linear", [True, False])
def test_theorem_5_1_interventions_are_backtracking(linear):
    """Paper Theorem 5.1: F(F^{-1}(F_A(u))) = F_A(u) for any intervened set A and values."""
    X = _linear_data(500) if linear else _nonlinear_data(500)
    scm = (LinearSCM(GRAPH) if linear else AdditiveNoiseSCM(GRAPH)).fit(X)
    rng = np.random.default_rng(3)
    U = scm.abduct(X.iloc[:50])
    for _ in range(10):
        A = list(rng.choice(4, size=rng.integers(1, 4), replace=False))
        vals = rng.normal(size=(50, len(A)))
        XA = scm.intervene(U, A, vals)
        assert np.allclose(XA[:, A], vals)
        UA = scm.abduct(XA)
        assert np.allclose(scm.generate(UA), XA, atol=1e-9)
        # non-descendants of A keep their factual values
        desc = set().union(*(scm.descendants(int(j)) for j in A)) | {scm.feature_names_in_[j] for j in A}
        keep = [j for j, n in enumerate(scm.feature_names_in_) if n not in desc]
        assert np.allclose(XA[:, keep], X.to_numpy()[:50, keep])


def test_linear_intervention_matches_equations():
    X = _linear_data(300)
    scm = LinearSCM(GRAPH, coef={"b": {"a": 0.8}}, intercept={"b": 0.0}).fit(X)
    assert scm.B_[1, 0] == 0.8 and scm.c_[1] == 0.0
    u = scm.abduct(X.to_numpy()[0])
    x_do = scm.intervene(u, ["b"], [5.0])
    assert x_do[0] == pytest.approx(X.a[0])
    assert x_do[2] == pytest.approx(scm.B_[2, 0] * X.a[0] + scm.B_[2, 1] * 5.0 + scm.c_[2] + u[2])
    assert scm.descendants("a") == ["b", "c", "d"]
    assert scm.descendants("d") == []


def test_column_order_follows_frame():
    X = _linear_data(300)[["d", "b", "a", "c"]]
    scm = LinearSCM(GRAPH).fit(X)
    assert list(scm.feature_names_in_) == ["d", "b", "a", "c"]
    assert np.allclose(scm.generate(scm.abduct(X)), X.to_numpy())
    # a frame in another order is matched by name
    assert np.allclose(scm.abduct(X[["a", "b", "c", "d"]]), scm.abduct(X))


def test_bad_graphs():
    X = _linear_data(100)
    with pytest.raises(ParameterError) as info:
        LinearSCM({"a": ["b"], "b": ["a"], "c": [], "d": []}).fit(X)
    assert info.value.argument == "graph" and "cycle" in str(info.value)
    with pytest.raises(ParameterError) as info:
        AdditiveNoiseSCM({"a": [], "b": ["z"]}).fit(X[["a", "b"]])
    assert info.value.argument == "graph" and "'z'" in str(info.value)
    for bad in ([("a", [])], {}, {"a": "b"}, {"a": ["a"]}):
        with pytest.raises(ParameterError) as info:
            LinearSCM(bad).fit(X)  # type: ignore[arg-type]
        assert info.value.argument == "graph"


def test_scm_inconsistent_with_columns():
    X = _linear_data(100)
    with pytest.raises(DataError) as info:
        LinearSCM({"a": [], "b": ["a"], "c": ["b"], "e": []}).fit(X)
    assert info.value.argument == "X" and "'e'" in str(info.value) and "'d'" in str(info.value)
    with pytest.raises(DataError) as info:
        AdditiveNoiseSCM({"a": [], "b": ["a"]}).fit(X.to_numpy())
    assert info.value.argument == "X"
    scm = LinearSCM(GRAPH).fit(X)
    with pytest.raises(DataError) as info:
        scm.abduct(X.rename(columns={"d": "dd"}))
    assert info.value.argument == "X"
    with pytest.raises(DataError) as info:
        scm.abduct(np.zeros(3))
    assert info.value.argument == "X"


def test_bad_values_and_parameters():
    X = _linear_data(100)
    Xn = X.copy()
    Xn.iloc[3, 1] = np.nan
    with pytest.raises(DataError) as info:
        LinearSCM(GRAPH).fit(Xn)
    assert info.value.argument == "X"
    Xi = X.copy()
    Xi.iloc[0, 0] = np.inf
    with pytest.raises(DataError):
        AdditiveNoiseSCM(GRAPH).fit(Xi)
    with pytest.raises(DataError) as info:
        LinearSCM(GRAPH).fit(X.iloc[:1])
    assert info.value.argument == "X"
    Xc = X.assign(a=1.0)
    with pytest.raises(DataError) as info:
        LinearSCM(GRAPH).fit(Xc)
    assert "constant" in str(info.value)
    with pytest.raises(ParameterError) as info:
        LinearSCM(GRAPH, coef={"b": {"c": 1.0}}).fit(X)
    assert info.value.argument == "coef"
    with pytest.raises(ParameterError) as info:
        LinearSCM(GRAPH, coef={"b": {"a": np.nan}}).fit(X)
    assert info.value.argument == "coef"
    with pytest.raises(ParameterError) as info:
        LinearSCM(GRAPH, intercept={"q": 1.0}).fit(X)
    assert info.value.argument == "intercept"
    for coef in ({"b": [1.0]}, "b", [("b", 1.0)]):
        with pytest.raises(ParameterError) as info:
            LinearSCM(GRAPH, coef=coef).fit(X)
        assert info.value.argument == "coef"
    for intercept in ("b", {"b": "one"}):
        with pytest.raises(ParameterError) as info:
            LinearSCM(GRAPH, intercept=intercept).fit(X)
        assert info.value.argument == "intercept"
    with pytest.raises(ParameterError) as info:
        AdditiveNoiseSCM(GRAPH, mechanisms={"q": np.sin}).fit(X)
    assert info.value.argument == "mechanisms"
    with pytest.raises(ParameterError) as info:
        AdditiveNoiseSCM(GRAPH, mechanisms={"b": 3}).fit(X)
    assert info.value.argument == "mechanisms"


def test_not_fitted_and_intervention_errors():
    with pytest.raises(NotFittedError) as info:
        LinearSCM(GRAPH).abduct(np.zeros(4))
    assert info.value.argument == "scm"
    scm = LinearSCM(GRAPH).fit(_linear_data(100))
    u = np.zeros(4)
    with pytest.raises(DataError) as info:
        scm.intervene(u, ["zz"], [1.0])
    assert info.value.argument == "features"
    with pytest.raises(ParameterError):
        scm.intervene(u, [7], [1.0])
    with pytest.raises(DataError) as info:
        scm.intervene(u, ["a", "b"], [1.0, 2.0, 3.0])
    assert info.value.argument == "values"
    with pytest.raises(DataError) as info:
        scm.intervene(u, ["a"], [np.nan])
    assert info.value.argument == "values"
    with pytest.raises(DataError) as info:
        scm.generate(np.full(4, np.nan))
    assert info.value.argument == "U"
