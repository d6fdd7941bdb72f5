"""Tests of trustlab.explain.recourse (confined regions, ReVer) and its audit helpers."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.explain.recourse import (
    ActionSet,
    ConfinedRegionFinder,
    DirectionalLinkage,
    OneHot,
    Thermometer,
    has_recourse,
    max_reachable_score,
)
from trustlab.explain.recourse_audit import default_action_set, linearize, recourse_check

SOLVERS = ["scip", "highs"]


def _grid(lb, ub):
    axes = [np.arange(lo, hi + 1) for lo, hi in zip(lb, ub, strict=True)]
    return np.array(list(itertools.product(*axes)), dtype=float)


def _brute_max(points, w, b, A):
    """Exact integer maximum of w^T (x + a) + b by enumerating every reachable grid point."""
    targets = _grid(A.lb.astype(int), A.ub.astype(int))
    diff = targets[None, :, :] - points[:, None, :]
    ok = np.all((diff >= A.step_lb - 1e-9) & (diff <= A.step_ub + 1e-9), axis=2)
    scores = np.where(ok, (targets @ w)[None, :], -np.inf)
    return scores.max(axis=1) + b


def _random_instance(seed, d=3, hi=10):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d).round(2)
    kinds = rng.integers(0, 4, d)  # 0 immutable, 1 free, 2 increase-only, 3 limited steps
    step_lb = np.where(kinds == 0, 0, np.where(kinds == 2, 0, np.where(kinds == 3, -2, -hi)))
    step_ub = np.where(kinds == 0, 0, np.where(kinds == 3, 2, hi))
    A = ActionSet(
        [f"f{j}" for j in range(d)],
        np.zeros(d),
        np.full(d, hi),
        dtype=["int"] * d,
        actionable=kinds != 0,
        step_lb=step_lb,
        step_ub=step_ub,
    )
    # intercept so that a sizeable share of the grid is fixed
    grid = _grid(A.lb.astype(int), A.ub.astype(int))
    b = -float(np.quantile(_brute_max(grid, w, 0.0, A), rng.uniform(0.2, 0.7)))
    return A, w, round(b, 3) + 0.0005


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", range(4))
def test_soundness_and_completeness_on_integer_grids(solver, seed):
    # Oracles 1, 3 and 4: every point of every box is fixed (exact enumeration of
    # integer actions); boxes are disjoint; enumeration to exhaustion covers every
    # fixed grid point, and certification happens exactly when none is fixed.
    A, w, b = _random_instance(seed, d=3, hi=5)
    grid = _grid(A.lb.astype(int), A.ub.astype(int))
    fixed = _brute_max(grid, w, b, A) <= 0
    res = ConfinedRegionFinder(A, solver=solver).fit(w, b).enumerate(max_regions=60)
    assert res.status in {"exhausted", "certified"}
    assert res.certified == (not fixed.any())
    covered = np.zeros(len(grid), bool)
    for k, box in enumerate(res.boxes):
        inside = box.contains(grid)
        assert inside.any() and box.verified
        assert fixed[inside].all()
        assert not (covered & inside).any()
        covered |= inside
        for other in res.boxes[:k]:
            sep = np.maximum(other.lower - box.upper, box.lower - other.upper)
            assert sep.max() >= 1
    assert np.array_equal(covered, fixed)
    np.testing.assert_allclose(max_reachable_score(grid, w, A, intercept=b), _brute_max(grid, w, b, A))
    if solver == "highs" and seed == 0:  # the per-row ILP path agrees with the closed form
        sub = grid[::7]
        np.testing.assert_allclose(
            max_reachable_score(sub, w, A, intercept=b, method="ilp"), _brute_max(sub, w, b, A), atol=1e-9
        )


def _closed_form_confined(lo, hi, w, b, A):
    up = np.where(w > 0, np.minimum(A.ub, hi + A.step_ub), np.maximum(A.lb, lo + A.step_lb))
    return b + np.sum(w * up) <= 1e-12


@pytest.mark.parametrize("seed", range(5))
def test_largest_box_matches_brute_force_over_all_boxes(seed):
    # Oracle 2: with separable actions, confinement of [l, u] has a closed form;
    # brute force over all 28^2 boxes of a 2-feature 0..6 grid gives the optimum.
    rng = np.random.default_rng(100 + seed)
    A, w, b = _random_instance(100 + seed, d=2, hi=6)
    width = A.population_ub - A.population_lb + 1
    best = -1.0
    intervals = [(lo, hi) for lo in range(7) for hi in range(lo, 7)]
    for (l0, u0), (l1, u1) in itertools.product(intervals, intervals):
        lo, hi = np.array([l0, l1], float), np.array([u0, u1], float)
        if _closed_form_confined(lo, hi, w, b, A):
            best = max(best, float(np.sum((hi - lo) / width)))
    for solver in SOLVERS:
        box = ConfinedRegionFinder(A, solver=solver).fit(w, b).largest_region()
        if best < 0:
            assert box is None
        else:
            assert box is not None and box.objective == pytest.approx(best, abs=1e-6)
            assert _closed_form_confined(box.lower, box.upper, w, b, A)
    assert rng is not None


def test_trivial_cases():
    # Oracle 6: all immutable -> the largest box is the whole negative part; a fully
    # actionable feature with positive weight over its whole range -> certified.
    A = ActionSet(["x"], [0], [20], dtype=["int"], actionable=np.array([False]))
    box = ConfinedRegionFinder(A).fit(np.array([1.0]), -7.5).largest_region()
    assert box is not None and (box.lower[0], box.upper[0]) == (0, 7)
    A2 = ActionSet(["x", "y"], [0, 0], [20, 20], dtype=["int", "float"], actionable=np.array([False, True]))
    for solver in SOLVERS:
        res = ConfinedRegionFinder(A2, solver=solver).fit(np.array([-1.0, 1.0]), 0.5).certify()
        assert res.certified and res.boxes == ()
        finder = ConfinedRegionFinder(A2, solver="scip").fit(np.array([-1.0, 1.0]), 0.5)
        assert finder.find_fixed_individual() is None


def test_individual_mode_finds_a_fixed_point():
    A, w, b = _random_instance(2)
    x = ConfinedRegionFinder(A, solver="scip").fit(w, b).find_fixed_individual()
    assert x is not None
    assert _brute_max(x[None, :], w, b, A)[0] <= 1e-9


def test_joint_constraints_use_the_miqcp_and_stay_sound():
    # An actionable one-hot group (e.g. a job type one can change) and a linkage
    # (waiting a year also ages you): the MIQCP path, checked by exact enumeration.
    names = ["age", "wait", "job_a", "job_b", "job_c"]
    A = ActionSet(
        names,
        [18, 0, 0, 0, 0],
        [30, 5, 1, 1, 1],
        dtype=["int", "int", "bool", "bool", "bool"],
        actionable=np.array([True, True, True, True, True]),
        step_lb=[0, 0, -1, -1, -1],
        constraints=[OneHot(("job_a", "job_b", "job_c")), DirectionalLinkage("wait", ("age",), (1.0,))],
    )
    w = np.array([-0.3, 0.5, 0.0, 1.0, 2.0])
    b = 3.0
    finder = ConfinedRegionFinder(A).fit(w, b)
    assert finder.solver_ == "scip"
    res = finder.enumerate(max_regions=3)
    assert res.boxes
    # every feasible (one-hot) grid point in a box has no feasible action reaching > 0
    grid = _grid([18, 0, 0, 0, 0], [30, 5, 1, 1, 1])
    grid = grid[grid[:, 2:].sum(axis=1) == 1]
    reach = max_reachable_score(grid, w, A, intercept=b)
    for box in res.boxes:
        assert box.verified and (reach[box.contains(grid)] <= 1e-9).all()
    # exact reach check for one point: age 18, wait 0, job_a: best is job_c and wait 5
    assert reach[0] == pytest.approx(-0.3 * 23 + 0.5 * 5 + 2.0 + 3.0)
    assert Thermometer(("a", "b")).names == ("a", "b")


@pytest.mark.claims
def test_claim_regions_anticipate_out_of_sample_fixed_predictions():
    # The paper's central claim: confined regions found from the model and the
    # action set alone (population region = the training ranges) identify test
    # individuals with fixed predictions that a pointwise audit of the training data
    # cannot anticipate. Two immutable integer features (age 18..80, prior defaults
    # 0..8) and an income 0..10 that can rise by at most 3; features uniform on the
    # lattice, so population shares are exact lattice counts (6237 cells).
    rng = np.random.default_rng(7)
    n = 800
    age = rng.integers(18, 81, n)
    defaults = rng.integers(0, 9, n)
    income = rng.integers(0, 11, n)
    X = np.column_stack([age, defaults, income]).astype(float)
    logit = 0.08 * (age - 50) - 0.6 * (defaults - 4) + 0.5 * (income - 5)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    train, test = np.arange(400), np.arange(400, n)
    model = LogisticRegression(C=10.0, max_iter=1000).fit(X[train], y[train])
    A0 = ActionSet.from_data(X[train], ["age", "defaults", "income"], immutable=["age", "defaults"])
    A = ActionSet(
        A0.names, A0.lb, A0.ub, dtype=A0.dtype, actionable=A0.actionable, step_lb=0, step_ub=[0, 0, 3]
    )
    res = ConfinedRegionFinder(A).fit(model).enumerate(max_regions=12)
    assert len(res.boxes) == 12 and all(b.verified for b in res.boxes)
    lattice = _grid(A.population_lb.astype(int), A.population_ub.astype(int))
    fixed_lat = ~has_recourse(lattice, model, A)
    p_box = res.contains(lattice)[fixed_lat].mean()  # exact population coverage
    train_fixed = {tuple(r) for r in X[train][~has_recourse(X[train], model, A)]}
    p_point = len(train_fixed) / fixed_lat.sum()  # exact share a pointwise audit anticipates
    Xt = X[test]
    fixed_test = ~has_recourse(Xt, model, A)
    covered = res.contains(Xt)
    n_fixed = int(fixed_test.sum())
    # Soundness is exact: every test individual inside a region is fixed.
    assert fixed_test[covered].all()
    # Test shares are binomial estimates of p_box and p_point over n_fixed (~120)
    # individuals; 3 standard deviations (sd <= sqrt(p(1-p)/n_fixed)) bound them.
    sd = lambda p: np.sqrt(p * (1 - p) / n_fixed)  # noqa: E731
    cover_test = covered[fixed_test].mean()
    seen = np.array([tuple(r) in train_fixed for r in Xt[fixed_test]])
    assert n_fixed >= 80
    assert abs(cover_test - p_box) <= 3 * sd(p_box) + 1e-12
    assert abs(seen.mean() - p_point) <= 3 * sd(p_point) + 1e-12
    # The claim: 12 boxes (12 lines of description) cover most fixed individuals
    # (measured 0.63 of the population's fixed cells; 53 boxes cover all of them),
    # while the pointwise audit of 400 training rows anticipates 0.06.
    assert p_box >= 0.6 and p_point < 0.15
    assert cover_test - seen.mean() >= 0.4


def test_audit_helper_on_a_pipeline():
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(1)
    n = 400
    X = pd.DataFrame(
        {
            "income": rng.integers(0, 20, n).astype(float),
            "age": rng.integers(20, 70, n),
            "job": rng.choice(["a", "b", "c"], n),
        }
    )
    y = ((X.income > 8) & (X.job != "c")).astype(int)
    pre = make_column_transformer((StandardScaler(), ["income", "age"]), (OneHotEncoder(), ["job"]))
    model = make_pipeline(pre, LogisticRegression(C=100, max_iter=2000)).fit(X, y)
    raw = linearize(model, X)
    assert raw.max_error < 1e-8 and raw.names[:2] == ("income", "age")
    res = recourse_check(model, X.iloc[:300], X.iloc[300:], immutable=["age"])
    d = res.to_dict()
    assert d["n_fixed"] > 0 and d["consistent"] and d["n_fixed_covered"] == d["n_fixed"]
    assert any("job in {c}" in r["description"] for r in d["regions"])
    assert d["immutable"] == ["age", "job"]
    with pytest.raises(ModelError) as info:
        linearize(make_pipeline(pre, DecisionTreeClassifier(max_depth=3)).fit(X, y), X)
    assert info.value.argument == "model"


# --------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------
def _small():
    return ActionSet(["a", "b"], [0, 0], [5, 5], dtype=["int", "int"])


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"solver": "gurobi"}, "solver"),
        ({"mip_gap": -0.1}, "mip_gap"),
        ({"time_limit": 0}, "time_limit"),
        ({"time_limit": float("nan")}, "time_limit"),
        ({"gap": 0}, "gap"),
        ({"dual_bound": -1.0}, "dual_bound"),
        ({"mip_gap": True}, "mip_gap"),
    ],
)
def test_bad_parameters(kwargs, argument):
    with pytest.raises(ParameterError) as info:
        ConfinedRegionFinder(_small(), **kwargs).fit(np.ones(2), 0.0)
    assert info.value.argument == argument


def test_bad_models_and_data():
    A = _small()
    with pytest.raises(ModelError) as info:
        ConfinedRegionFinder(A).fit(DecisionTreeClassifier())
    assert info.value.argument == "model"
    with pytest.raises(ParameterError) as pinfo:
        ConfinedRegionFinder(A).fit(np.ones(2))
    assert pinfo.value.argument == "intercept"
    with pytest.raises(DataError) as dinfo:
        ConfinedRegionFinder(A).fit(np.array([1.0, np.nan]), 0.0)
    assert dinfo.value.argument == "coef"
    with pytest.raises(DataError) as dinfo:
        ConfinedRegionFinder(A).fit(np.ones(3), 0.0)
    assert dinfo.value.argument == "action_set"
    with pytest.raises(ParameterError) as pinfo:
        ConfinedRegionFinder(A).fit(np.ones(2), float("inf"))
    assert pinfo.value.argument == "intercept"
    with pytest.raises(ParameterError) as pinfo:
        ConfinedRegionFinder("not an action set").fit(np.ones(2), 0.0)  # type: ignore[arg-type]
    assert pinfo.value.argument == "action_set"
    multi = LogisticRegression().fit(np.arange(9.0).reshape(-1, 1), np.arange(9) % 3)
    with pytest.raises(ModelError):
        ConfinedRegionFinder(ActionSet(["x"], [0], [8])).fit(multi)
    with pytest.raises(NotFittedError) as ninfo:
        ConfinedRegionFinder(A).enumerate()
    assert ninfo.value.argument == "fit"
    with pytest.raises(ParameterError) as pinfo:
        ConfinedRegionFinder(A).fit(np.ones(2), 0.0).enumerate(max_regions=0)
    assert pinfo.value.argument == "max_regions"
    for bad, argument in [
        ([[1.0, np.nan]], "X"),
        ([[1.0, 2.0, 3.0]], "X"),
        ([[9.0, 1.0]], "X"),
        ([], "X"),
        ("text", "X"),
    ]:
        with pytest.raises(DataError) as dinfo:
            has_recourse(bad, np.ones(2), A, intercept=0.0)
        assert dinfo.value.argument == argument
    with pytest.raises(DataError) as dinfo:
        has_recourse(pd.DataFrame({"a": [1]}), np.ones(2), A, intercept=0.0)
    assert dinfo.value.argument == "X"


def test_bad_action_sets():
    cases = [
        (lambda: ActionSet(["a", "b"], [0, 3], [5, 1]), ParameterError, "lb"),
        (lambda: ActionSet(["a", "a"], [0, 0], [1, 1]), ParameterError, "names"),
        (lambda: ActionSet(["a"], [0], [np.inf]), ParameterError, "lb"),
        (lambda: ActionSet(["a"], [0], [1], dtype=["text"]), ParameterError, "dtype"),
        (lambda: ActionSet(["a"], [0], [1.5], dtype=["int"]), ParameterError, "dtype"),
        (lambda: ActionSet(["a"], [0], [1], actionable=[1]), ParameterError, "actionable"),
        (lambda: ActionSet(["a"], [0], [5], population_lb=[-1]), ParameterError, "population_lb"),
        (lambda: ActionSet(["a"], [0], [5], step_ub=[1, 2]), ParameterError, "step_ub"),
        (lambda: _small().add_constraint(OneHot(("a", "z"))), DataError, "constraint"),
        (lambda: _small().add_constraint(OneHot(("a", "b"))), ParameterError, "constraint"),
        (lambda: _small().add_constraint("a+b=1"), ParameterError, "constraint"),
        (lambda: DirectionalLinkage("a", ("b",), (1.0, 2.0)), ParameterError, "scales"),
        (lambda: ActionSet.from_data([[1, 2]], ["a", "b"], immutable=["c"]), DataError, "immutable"),
        (lambda: ActionSet.from_data([[1, 2]], ["a"]), DataError, "names"),
        (lambda: ActionSet.from_data([[1, np.nan]]), DataError, "X"),
        (lambda: ActionSet.from_data(np.zeros((0, 2))), DataError, "X"),
    ]
    for make, exc, argument in cases:
        with pytest.raises(exc) as info:
            make()
        assert info.value.argument == argument, argument
    with pytest.raises(ParameterError) as pinfo:
        B = ActionSet(["a", "b"], [0, 0], [1, 1], dtype=["bool", "bool"])
        B.add_constraint(OneHot(("a", "b")))
        ConfinedRegionFinder(B, solver="highs").fit(np.ones(2), 0.0)
    assert pinfo.value.argument == "solver"


def test_time_limit_is_a_status_not_an_error():
    rng = np.random.default_rng(3)
    d = 12
    A = ActionSet(
        [f"f{j}" for j in range(d)],
        np.zeros(d),
        np.full(d, 50),
        dtype=["int"] * d,
        step_lb=-3,
        step_ub=3,
    )
    res = ConfinedRegionFinder(A, solver="scip", time_limit=0.2).fit(rng.normal(size=d), -5.0).enumerate(5)
    assert res.status in {"time_limit", "max_regions", "exhausted", "certified"}
    assert all(b.verified for b in res.boxes)
    assert sum(res.solve_times) < 60  # the limit holds per solve (0.2 s); generous for loaded machines


def test_unseen_levels_and_missing_values_are_skipped():
    rng = np.random.default_rng(2)
    X = pd.DataFrame({"income": rng.integers(0, 10, 200).astype(float), "job": rng.choice(["a", "b"], 200)})
    y = ((X.income > 5) & (X.job == "a")).astype(int)
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    pre = make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["job"]), remainder="passthrough")
    model = make_pipeline(pre, LogisticRegression(C=100, max_iter=2000)).fit(X, y)
    new = pd.DataFrame({"income": [1.0, np.nan, 9.0], "job": ["c", "a", "b"]})
    res = recourse_check(model, X, new)
    assert (res.n_checked, res.n_skipped) == (1, 2)
    assert res.n_fixed == 1 and res.descriptions == ("job in {b}",)


def test_pointwise_method_must_be_known():
    with pytest.raises(ParameterError) as info:
        has_recourse([[1.0, 1.0]], np.ones(2), _small(), intercept=0.0, method="lp")
    assert info.value.argument == "method"


def test_recourse_check_bad_tables_and_columns():
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"income": rng.integers(0, 10, 100).astype(float), "group": rng.integers(0, 2, 100)})
    y = (X.income + 8 * X.group > 11).astype(int)
    model = LogisticRegression(C=100).fit(X, y)
    for evaluate in (X.to_numpy(), X.iloc[:0], X.rename(columns={"income": "salary"})):
        with pytest.raises(DataError) as info:
            recourse_check(model, X, evaluate)
        assert info.value.argument == "evaluate"
    for arg in ("immutable", "increase_only", "decrease_only"):
        with pytest.raises(DataError) as info:
            recourse_check(model, X, X, **{arg: ["incom"]})
        assert info.value.argument == arg
    with pytest.raises(ParameterError) as info:
        recourse_check(model, X, X, bounds={"income": "wide"})
    assert info.value.argument == "bounds['income']"
    with pytest.raises(DataError) as info:
        default_action_set(linearize(model, X), X[["income"]])
    assert info.value.argument == "data"
    for atol in (-1.0, "tight"):
        with pytest.raises(ParameterError) as info:
            linearize(model, X, atol=atol)
        assert info.value.argument == "atol"
    # sensitive columns need not be model inputs (the audit drops them from the features)
    assert recourse_check(model, X, X, sensitive=["sex"], max_regions=1).n_checked == 100


def test_extreme_magnitudes_give_a_correct_result_or_a_clear_error():
    """ConfinedRegionFinder on extreme inputs (found by the fuzz suite): no None with warnings.

    Before: ranges of 1e308 and coefficients of 1e300 overflowed in the MILP's constants
    (RuntimeWarning) and the solvers' absolute tolerances decided the answer.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ParameterError, match="1e\\+12") as err:
            ActionSet(["a", "b"], [0, 0], [1e308, 10])
        assert err.value.argument == "ub"
        A = ActionSet(["a", "b"], [0, 0], [10, 10])
        with pytest.raises(ModelError, match="1e300") as err:
            ConfinedRegionFinder(A).fit(np.array([1e300, 1.0]), -1.0)
        assert err.value.argument == "model"
        # huge and tiny coefficients that the classifier can take: the same answers as at scale 1
        for scale in (1e-200, 1.0, 1e200):
            finder = ConfinedRegionFinder(A).fit(scale * np.array([1.0, 1.0]), -30.0 * scale)
            box = finder.largest_region()
            assert box is not None and box.verified and box.describe() == "the whole population region"
            certified = ConfinedRegionFinder(A).fit(scale * np.array([1.0, 1.0]), -5.0 * scale).certify()
            assert certified.status == "certified"
        # a feature whose coefficient is huge but whose range is {0} changes no score
        point = ActionSet(["a", "b"], [0, 0], [0, 0])
        assert ConfinedRegionFinder(point).fit(np.array([1.0, 1e300]), 1.0).certify().certified
        # a constant column
        const = ActionSet(["a", "b"], [5, 0], [5, 10])
        box = ConfinedRegionFinder(const).fit(np.array([1.0, 1.0]), -20.0).largest_region()
        assert box is not None and box.verified and box.max_score == pytest.approx(-5.0)


def test_linearize_integer_column_names():
    """Found by the fuzz suite: a model fitted on integer column labels raised KeyError '0'."""
    X = pd.DataFrame(np.random.default_rng(0).normal(size=(60, 2)))
    model = LogisticRegression().fit(X, (X[0] > 0).astype(int))
    raw = linearize(model, X)
    assert raw.names == ("0", "1") and raw.max_error < 1e-6
    res = recourse_check(model, X, X.iloc[:10], time_limit=2)
    assert res.n_checked == 10
