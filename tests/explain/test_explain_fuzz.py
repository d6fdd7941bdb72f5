"""Property-based probes of every public entry point of trustlab.explain with hostile inputs.

Properties: a call either returns what it promises (finite numbers of the right shape
where finite outputs are promised) or raises a :class:`trustlab.errors.TrustlabError`
naming an argument; never an exception from deep inside NumPy, SciPy or scikit-learn,
and no NumPy ``RuntimeWarning`` (overflow, invalid value) on the way.

Inputs: NaN, +-inf, 1e308, tiny and subnormal magnitudes, empty and one-row data,
constant columns, wrong shapes and types, unknown column names. The default profile
(``derandomize=True``, a few dozen examples per test) runs in CI; ``-m slow`` runs a
longer random profile.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression

from trustlab.errors import TrustlabError
from trustlab.explain import (
    ActionSet,
    AmenableLime,
    ConfinedRegionFinder,
    FastPD,
    LimeTabular,
    LinearSCM,
    brace,
    causal_recourse,
    commit_model,
    counterfactual_metrics,
    derive_seed,
    has_recourse,
    linearize,
    max_reachable_score,
    prove_explanation,
    recourse_check,
    verify_explanation,
    wachter,
)

FAST = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(FAST, max_examples=300, derandomize=False)
PROFILES = [pytest.param(FAST, id="fast"), pytest.param(SLOW, id="slow", marks=pytest.mark.slow)]

HOSTILE = [0.0, -0.0, 1.0, -1.0, 1e308, -1e308, 1e-308, 5e-324, 1e15, -1e15, np.nan, np.inf, -np.inf]
floats = st.one_of(st.sampled_from(HOSTILE), st.floats(allow_nan=True, allow_infinity=True, width=64))
finite_floats = st.one_of(
    st.sampled_from([h for h in HOSTILE if math.isfinite(h)]),
    st.floats(allow_nan=False, allow_infinity=False),
)


def matrices(d: int, *, elements: st.SearchStrategy[float] = floats, max_rows: int = 6) -> Any:
    """Arrays of about ``d`` columns (sometimes one more or less), 0 to ``max_rows`` rows."""
    return st.tuples(st.integers(0, max_rows), st.sampled_from([d, d, d, d - 1, d + 1])).flatmap(
        lambda shape: st.lists(elements, min_size=shape[0] * shape[1], max_size=shape[0] * shape[1]).map(
            lambda v, shape=shape: np.array(v, dtype=float).reshape(shape)
        )
    )


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[bool, Any]:
    """``(True, result)``, or ``(False, error)`` for a TrustlabError; anything else fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        try:
            return True, fn(*args, **kwargs)
        except TrustlabError as exc:
            assert exc.argument, f"{type(exc).__name__} without an argument: {exc}"
            return False, exc


def finite(a: Any) -> bool:
    return bool(np.all(np.isfinite(np.asarray(a, dtype=float))))


# ----------------------------------------------------------------------------- shared models
RNG = np.random.default_rng(0)
X3 = RNG.normal(size=(120, 3))
Y3 = X3[:, 0] + X3[:, 1] * X3[:, 2]
GBR = GradientBoostingRegressor(n_estimators=8, max_depth=3, random_state=0).fit(X3, Y3)  # no NaN
HGB = HistGradientBoostingRegressor(max_iter=8, random_state=0).fit(X3, Y3)  # takes NaN
FPD = {"gbr": FastPD(GBR).fit(X3[:60]), "hgb": FastPD(HGB).fit(X3[:60])}

A2 = np.c_[RNG.normal(size=300), RNG.normal(size=300)]
A2[:, 1] += A2[:, 0]
FRAME2 = pd.DataFrame(A2, columns=["a", "b"])
CLF2 = LogisticRegression().fit(FRAME2, (A2[:, 0] + A2[:, 1] > 0).astype(int))
SCM2 = LinearSCM({"a": [], "b": ["a"]}).fit(FRAME2)


# ----------------------------------------------------------------------------- FastPD
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", sorted(FPD))
def test_fastpd_queries(profile: settings, name: str) -> None:
    fpd = FPD[name]

    @profile
    @given(X=matrices(3))
    def check(X: np.ndarray) -> None:
        for method in (fpd.shap_values, fpd.predict, lambda Z: fpd.pd(Z, [(0,), (1, 2)])):
            ok, out = call(method, X)
            if not ok:
                continue
            assert np.isfinite(X).all() or (name == "hgb" and not np.isinf(X).any())
            values = np.concatenate([np.ravel(v) for v in out.values()]) if isinstance(out, dict) else out
            assert finite(values)
        ok, phi = call(fpd.shap_values, X)
        if ok:
            pred = fpd.predict(X)
            assert phi.shape == X.shape
            np.testing.assert_allclose(fpd.expected_value_ + phi.sum(axis=1), pred, atol=1e-6)

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_fastpd_fit_and_curves(profile: settings) -> None:
    @profile
    @given(X=matrices(3), feature=st.sampled_from([0, 2, 3, -1, "x0", "nope", 1.5, None]))
    def check(X: np.ndarray, feature: Any) -> None:
        ok, fpd = call(FastPD(GBR).fit, X)
        if not ok:
            return
        assert X.shape[0] >= 1 and np.isfinite(X).all()
        ok, out = call(fpd.pd_curve, feature, grid_resolution=5)
        if ok:
            assert finite(out[0]) and finite(out[1])
        ok, comp = call(fpd.components, X)
        if ok:
            assert finite(comp[1].to_numpy())

    check()


def test_fastpd_rejects_non_finite_queries_like_fit() -> None:
    """shap_values rejects inf (as fit does), and NaN for a model that takes no missing values."""
    q = X3[:3].copy()
    q[0, 1] = np.inf
    for fpd in FPD.values():
        with pytest.raises(TrustlabError, match="infinite") as err:
            fpd.shap_values(q)
        assert err.value.argument == "X"
    q[0, 1] = np.nan
    with pytest.raises(TrustlabError, match="missing values") as err:
        FPD["gbr"].shap_values(q)
    assert err.value.argument == "X"
    assert finite(FPD["hgb"].shap_values(q))  # HGB routes NaN as FastPD does
    q[0, 1] = 1e308  # beyond float32: scikit-learn's trees compare float32 inputs
    with pytest.raises(TrustlabError, match="float32"):
        FPD["gbr"].shap_values(q)
    with pytest.raises(TrustlabError, match="float32"):
        FastPD(GBR).fit(q)


# ----------------------------------------------------------------------------- recourse
action_bounds = st.tuples(
    st.sampled_from([0.0, -1e308, -1e15, -5.0, 1e-300, 7.0]),
    st.sampled_from([0.0, 1e308, 1e15, 5.0, 1e-300, 7.0, 10.0]),
)
coefs = st.lists(
    st.sampled_from([1.0, -1.0, 1e300, -1e300, 1e-300, 5e-324, 0.0, 3.5, 1e15]), min_size=2, max_size=2
)


@pytest.mark.parametrize("profile", PROFILES)
def test_confined_regions_extreme_magnitudes(profile: settings) -> None:
    @profile
    @given(
        b0=action_bounds,
        b1=action_bounds,
        w=coefs,
        b=st.sampled_from([-1.0, 0.0, 1.0, -1e300, 1e-300, -30.0]),
        ints=st.booleans(),
    )
    def check(b0: tuple[float, float], b1: tuple[float, float], w: list[float], b: float, ints: bool) -> None:
        lb, ub = [b0[0], b1[0]], [b0[1], b1[1]]
        ok, A = call(ActionSet, ["a", "b"], lb, ub, dtype=["int" if ints else "float"] * 2)
        if not ok:
            return
        ok, finder = call(ConfinedRegionFinder(A, time_limit=5).fit, np.array(w), b)
        if not ok:
            return
        ok, regions = call(finder.enumerate, 2)
        if not ok:
            return
        assert regions.status in ("certified", "exhausted", "max_regions", "time_limit")
        for box in regions.boxes:
            assert box.verified and finite(box.lower) and finite(box.upper)
        # every corner of the population region, checked pointwise, agrees with the regions up to
        # the documented tolerance: 1e-6 of the largest |score| over the feature ranges
        corners = np.array(
            [
                [x0, x1]
                for x0 in (A.population_lb[0], A.population_ub[0])
                for x1 in (A.population_lb[1], A.population_ub[1])
            ]
        )
        ok, reach = call(max_reachable_score, corners, np.array(w), A, intercept=b)
        if not ok:
            return
        tol = 1e-6 * (abs(b) + np.sum(np.abs(w) * np.maximum(np.abs(A.lb), np.abs(A.ub))))
        if regions.certified:
            assert np.all(reach > -tol), "certified, yet a corner of the population region has no recourse"
        inside = regions.contains(corners)
        assert np.all(reach[inside] <= tol), "a point inside a confined region has recourse"

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_pointwise_recourse_hostile_points(profile: settings) -> None:
    A = ActionSet(["a", "b"], [0, 0], [10, 10], dtype=["int", "float"], step_ub=[3, 1])

    @profile
    @given(
        X=matrices(2, max_rows=4), w=st.one_of(coefs, st.just([np.nan, 1.0]), st.just([1.0]), st.just("w"))
    )
    def check(X: np.ndarray, w: Any) -> None:
        coef = np.asarray(w, dtype=object if isinstance(w, str) else float)
        ok, reach = call(max_reachable_score, X, coef, A, intercept=-1.0)
        if ok:
            assert reach.shape == (len(X),)
        ok2, has = call(has_recourse, X, coef, A, intercept=-1.0)
        assert ok2 == ok
        if ok:
            np.testing.assert_array_equal(has, reach > 0)

    check()


def test_one_row_and_constant_columns_recourse_check() -> None:
    X = pd.DataFrame({"income": [3.0, 4.0, 5.0, 6.0] * 10, "age": [30.0] * 40})
    y = np.array([0, 0, 1, 1] * 10)
    model = LogisticRegression().fit(X, y)
    for evaluate in (X.iloc[[0]], X):
        ok, res = call(recourse_check, model, X, evaluate, time_limit=5)
        assert ok, res
        assert res.n_checked == len(evaluate)
    ok, _ = call(recourse_check, model, X.iloc[[0]], X, time_limit=5)
    assert ok
    ok, err = call(linearize, model, X.iloc[:0])
    assert not ok and err.argument == "X"


@pytest.mark.parametrize("profile", PROFILES)
def test_linearize_and_recourse_check_hostile_frames(profile: settings) -> None:
    model = LogisticRegression().fit(FRAME2, (A2[:, 0] > 0).astype(int))

    @profile
    @given(X=matrices(2, max_rows=5), names=st.sampled_from([["a", "b"], ["a", "c"], ["b", "a"], [0, 1]]))
    def check(X: np.ndarray, names: list[Any]) -> None:
        frame = pd.DataFrame(X, columns=names[: X.shape[1]] + [f"x{j}" for j in range(X.shape[1] - 2)])
        ok, raw = call(linearize, model, frame)
        if ok:
            assert finite(raw.coef) and math.isfinite(raw.intercept)
        ok, res = call(recourse_check, model, FRAME2.iloc[:50], frame, time_limit=2)
        if ok:
            assert res.n_checked + res.n_skipped == len(frame)
        int_named = LogisticRegression().fit(FRAME2.set_axis([0, 1], axis=1), (A2[:, 0] > 0).astype(int))
        ok, raw = call(linearize, int_named, frame.set_axis(list(range(frame.shape[1])), axis=1))
        if ok:
            assert raw.names == ("0", "1")

    check()


# ----------------------------------------------------------------------------- counterfactuals
@pytest.mark.parametrize("profile", PROFILES)
def test_counterfactuals_hostile_instances(profile: settings) -> None:
    @profile
    @given(
        x=st.lists(floats, min_size=1, max_size=3),
        lam=st.sampled_from([0.0, 1.0, np.inf, -1.0, np.nan, 1e308, "1"]),
        bounds=st.sampled_from(
            [None, {"a": (None, 1e308)}, {"a": (np.nan, 1)}, {"zz": (0, 1)}, {"a": (2, 1)}]
        ),
        solver=st.sampled_from(["auto", "search", "penalty", "exact", "nope"]),
    )
    def check(x: list[float], lam: Any, bounds: Any, solver: str) -> None:
        ok, r = call(brace, CLF2, SCM2, x, 1, lam=lam, bounds=bounds, solver=solver, time_limit=0.5)
        if ok:
            assert len(x) == 2 and finite(x)
            assert r.x_cf.shape == (2,) and finite(r.x_cf) and math.isfinite(r.d_x)
        ok, r = call(wachter, CLF2, SCM2, pd.Series(dict(zip(["a", "b", "c"], x, strict=False))), 1)
        if ok:
            assert finite(r.x_cf)
        ok, r = call(causal_recourse, CLF2, SCM2, x, 1, bounds=bounds, solver=solver, time_limit=0.5)
        if ok:
            assert finite(r.x_cf)
            ok, m = call(counterfactual_metrics, CLF2, SCM2, [r])
            assert ok and finite(m[["proximity", "noise_distance", "plausibility"]].to_numpy(dtype=float))

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_scm_fit_hostile_data(profile: settings) -> None:
    @profile
    @given(X=matrices(2, elements=floats))
    def check(X: np.ndarray) -> None:
        ok, scm = call(LinearSCM({"a": [], "b": ["a"]}).fit, X)
        if ok:
            assert finite(X) and X.shape == (len(X), 2) and len(X) >= 2
            assert finite(scm.noise_scale_) and finite(scm.B_)
            ok, U = call(scm.abduct, X)
            assert ok and finite(U)

    check()


# ----------------------------------------------------------------------------- LIME
@pytest.mark.parametrize("profile", PROFILES)
def test_lime_hostile_data_and_models(profile: settings) -> None:
    @profile
    @given(
        X=matrices(3, max_rows=5),
        x=st.lists(floats, min_size=2, max_size=4),
        out=st.sampled_from(["sigmoid", "nan", "inf", "huge", "wrong_shape", "strings"]),
    )
    def check(X: np.ndarray, x: list[float], out: str) -> None:
        fns: dict[str, Callable[[np.ndarray], Any]] = {
            "sigmoid": lambda Z: 1 / (1 + np.exp(-np.clip(Z[:, 0], -50, 50))),
            "nan": lambda Z: np.full(len(Z), np.nan),
            "inf": lambda Z: np.full(len(Z), np.inf),
            "huge": lambda Z: np.full(len(Z), 1e308),
            "wrong_shape": lambda Z: np.zeros(len(Z) + 1),
            "strings": lambda Z: np.array(["a"] * len(Z)),
        }
        ok, lime = call(LimeTabular(n_samples=50).fit, X)
        if not ok:
            return
        assert finite(lime.scale_) and finite(lime.mean_)
        ok, exp = call(lime.explain, fns[out], x)
        if ok:
            assert finite(exp.coef) and math.isfinite(exp.intercept)

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_verifiable_lime_hostile_instances(profile: settings) -> None:
    lime = AmenableLime(n_samples=20, top_k=2)
    commitment = commit_model([np.ones(2)], salt=b"0123456789abcdef")

    def f(Z: np.ndarray) -> np.ndarray:  # any number of columns
        return 1 / (1 + np.exp(-np.clip(Z.sum(axis=1), -50, 50)))

    @profile
    @given(x=st.lists(floats, min_size=0, max_size=3), nonce=st.sampled_from(["q", b"q", 3, None]))
    def check(x: list[float], nonce: Any) -> None:
        ok, seed = call(derive_seed, commitment, x, nonce)
        assert not ok or len(seed) == 32
        ok, proof = call(prove_explanation, f, x, commitment=commitment, nonce=nonce, lime=lime)
        if ok:
            assert finite(proof.explanation.coef)
            ok, rep = call(verify_explanation, proof, commitment=commitment, x=x, nonce=nonce, lime=lime)
            assert ok and rep.ok

    check()


# ----------------------------------------------------------------------------- every public callable
def _baselines() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
    """One valid call per public entry point; the probe swaps one argument for a hostile value."""
    from trustlab.explain import (
        AdditiveNoiseSCM,
        DirectionalLinkage,
        OneHot,
        Thermometer,
        brace_path,
        check_certificate,
        counterfactuals,
        deep_backtracking,
        default_action_set,
        ensemble_from_model,
        find_border_point,
        trees_from_lightgbm,
        trees_from_sklearn,
        trees_from_xgboost,
        zk_prove_explanation,
        zk_verify_explanation,
    )

    x0 = FRAME2.iloc[0].to_numpy()
    x_neg = np.array([-1.0, -1.0])
    action = ActionSet(["a", "b"], [0, 0], [10, 10], dtype=["int", "float"], step_ub=[3, 1])
    lime = AmenableLime(n_samples=10, top_k=1)
    commitment = commit_model([np.ones(2)], salt=b"0123456789abcdef")

    def f(Z: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-np.clip(np.asarray(Z, float).sum(axis=1), -50, 50)))

    seed = derive_seed(commitment, lime.quantize(x0))
    proof = prove_explanation(f, x0, commitment=commitment, lime=lime)
    res = brace(CLF2, SCM2, x_neg, 1, time_limit=0.2)
    model = LogisticRegression().fit(FRAME2, (A2[:, 0] > 0).astype(int))
    raw = linearize(model, FRAME2)
    fitted_lime = LimeTabular(n_samples=30).fit(X3)
    return {
        "brace": (brace, (CLF2, SCM2, x_neg, 1), {"time_limit": 0.2}),
        "wachter": (wachter, (CLF2, SCM2, x_neg, 1), {"time_limit": 0.2}),
        "deep_backtracking": (deep_backtracking, (CLF2, SCM2, x_neg, 1), {"time_limit": 0.2}),
        "brace_path": (brace_path, (CLF2, SCM2, x_neg, [0.0, 1.0]), {"time_limit": 0.2}),
        "causal_recourse": (causal_recourse, (CLF2, SCM2, x_neg, 1), {"time_limit": 0.2}),
        "counterfactuals": (counterfactuals, (CLF2, SCM2, FRAME2.iloc[:2]), {"time_limit": 0.2}),
        "counterfactual_metrics": (counterfactual_metrics, (CLF2, SCM2, [res]), {}),
        "LinearSCM.fit": (lambda g, X: LinearSCM(g).fit(X), ({"a": [], "b": ["a"]}, FRAME2), {}),
        "AdditiveNoiseSCM.fit": (
            lambda g, X, m: AdditiveNoiseSCM(g, mechanisms=m).fit(X),
            ({"a": [], "b": ["a"]}, FRAME2, {"b": np.sin}),
            {},
        ),
        "SCM.intervene": (SCM2.intervene, (SCM2.abduct(x0), ["a"], [0.0]), {}),
        "has_recourse": (has_recourse, (X3[:2, :2] % 10, np.array([1.0, -1.0]), action), {"intercept": -1.0}),
        "ActionSet": (ActionSet, (["a", "b"], [0, 0], [1, 1]), {"dtype": ["float", "bool"]}),
        "ActionSet.from_data": (ActionSet.from_data, (np.abs(X3[:5, :2]),), {"immutable": ["x0"]}),
        "OneHot": (OneHot, (("a", "b"),), {}),
        "Thermometer": (Thermometer, (("a", "b"),), {}),
        "DirectionalLinkage": (DirectionalLinkage, ("a", ("b",), (1.0,)), {}),
        "ConfinedRegionFinder.fit": (
            lambda A, w, b: ConfinedRegionFinder(A, time_limit=2).fit(w, b).enumerate(1),
            (action, np.array([1.0, -1.0]), -5.0),
            {},
        ),
        "linearize": (linearize, (model, FRAME2.iloc[:20]), {}),
        "recourse_check": (recourse_check, (model, FRAME2.iloc[:20], FRAME2.iloc[20:25]), {"time_limit": 1}),
        "default_action_set": (default_action_set, (raw, FRAME2.iloc[:20]), {"immutable": ["a"]}),
        "FastPD.fit": (lambda m, X: FastPD(m).fit(X), (GBR, X3[:20]), {}),
        "FastPD.pd_curve": (FPD["gbr"].pd_curve, (0,), {"grid_resolution": 5}),
        "FastPD.components": (FPD["gbr"].components, (X3[:3],), {"max_order": 1}),
        "FastPD.plot_pd": (FPD["gbr"].plot_pd, (0,), {}),
        "ensemble_from_model": (ensemble_from_model, (GBR,), {}),
        "trees_from_sklearn": (trees_from_sklearn, (GBR,), {}),
        "trees_from_xgboost": (trees_from_xgboost, (GBR,), {}),
        "trees_from_lightgbm": (trees_from_lightgbm, (GBR,), {}),
        "LimeTabular.explain": (fitted_lime.explain, (f, X3[0]), {"label": 0}),
        "LimeTabular.stability": (fitted_lime.stability, (f, X3[0]), {"seeds": [0, 1], "k": 2, "label": 0}),
        "AmenableLime.explain": (lime.explain, (f, x0, seed), {}),
        "derive_seed": (derive_seed, (commitment, [1, 2]), {"nonce": b"n"}),
        "commit_model": (commit_model, ([np.ones(2)],), {"salt": b"0123456789abcdef"}),
        "prove_explanation": (prove_explanation, (f, x0), {"commitment": commitment, "lime": lime}),
        "verify_explanation": (
            verify_explanation,
            (proof,),
            {"commitment": commitment, "x": x0, "lime": lime},
        ),
        "check_certificate": (check_certificate, (lime, proof.explanation), {}),
        "find_border_point": (
            find_border_point,
            (f, np.array([256, 0]), 256),
            {"rng": np.random.default_rng(0), "n_layer": 50, "max_layers": 20},
        ),
        "zk_prove_explanation": (zk_prove_explanation, ("not a setup", x0), {}),
        "zk_verify_explanation": (zk_verify_explanation, ("not a proof", "not public"), {"x": x0}),
    }


BASELINES = _baselines()
HOSTILE_VALUES = [
    None,
    "a",
    b"a",
    [],
    [[]],
    {},
    np.nan,
    np.inf,
    -1,
    0,
    1e308,
    True,
    object(),
    pd.DataFrame({"zz": [1.0]}),
    np.zeros((1, 1)),
    np.array([["a"]]),
    np.full(2, np.nan),
    np.array([1e308, 1.0]),
]


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_public_callable_rejects_hostile_arguments(name: str) -> None:
    """Each argument of each public entry point, in turn, replaced by each hostile value (exhaustive)."""
    fn, args, kwargs = BASELINES[name]
    if name.startswith("zk_"):
        pytest.importorskip("ezkl")
    slots = [("arg", i) for i in range(len(args))] + [("kw", k) for k in kwargs]
    failures = []
    for slot in slots:
        for value in HOSTILE_VALUES:
            a, kw = list(args), dict(kwargs)
            if slot[0] == "arg":
                a[slot[1]] = value
            else:
                kw[slot[1]] = value
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # e.g. scikit-learn's feature-name warnings
                try:
                    call(fn, *a, **kw)  # returns, or raises a TrustlabError naming an argument
                except Exception as exc:  # collect them all, then fail once with the list
                    failures.append(f"{slot} = {value!r:.40}: {type(exc).__name__}: {str(exc)[:120]}")
    assert not failures, "\n".join(failures)
