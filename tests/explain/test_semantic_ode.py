"""Semantic modelling of multi-dimensional trajectories (catalog row 004-01)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.ensemble import RandomForestRegressor

from trustlab.errors import DataError, NotFittedError, ParameterError, TrustlabError
from trustlab.explain._semantic_motifs import CompositionShape, composition_library, transition_type
from trustlab.explain.semantic_ode import SemanticTrajectoryModel, make_pk_trajectories

N_TRAIN, N_TEST, N_TIMES = 60, 40, 12
ALLOWED = {0: [("+-",), ("+-", "--", "-+")], 1: [("++",), ("++", "+-")]}


def _shape_violations(comp: tuple[str, ...], times: np.ndarray, grid: np.ndarray, curve: np.ndarray) -> int:
    """Motifs whose first or second differences on a dense grid have the wrong sign."""
    bad = 0
    for j, motif in enumerate(comp):
        inside = curve[(grid > times[j] + 1e-3) & (grid < times[j + 1] - 1e-3)]
        if len(inside) < 4:
            continue
        s1 = 1.0 if motif[0] == "+" else -1.0
        s2 = 1.0 if motif[1] == "+" else -1.0
        scale = max(1.0, float(np.abs(inside).max()))
        if np.any(s1 * np.diff(inside) < -1e-12 * scale) or np.any(s2 * np.diff(inside, 2) < -1e-10 * scale):
            bad += 1
    return bad


@pytest.fixture(scope="module")
def pk():
    X, y, t, truth = make_pk_trajectories(N_TRAIN + N_TEST, n_times=N_TIMES, noise=0.01, random_state=1)
    model = SemanticTrajectoryModel(max_motifs=3, n_epochs=40, score_max_iter=20, random_state=0)
    model.fit(X[:N_TRAIN], y[:N_TRAIN], times=t)
    return X, y, t, truth, model


def test_library_follows_the_succession_rules() -> None:
    lib = composition_library(3)
    assert len(lib) == 14 and len(composition_library(4)) == 18
    assert len(composition_library(3, simplified=False)) == 18
    for comp in lib:
        for a, b in pairwise(comp):
            assert transition_type(a, b) in ("extremum", "inflection")
    assert transition_type("+-", "--") == "extremum" and transition_type("++", "+-") == "inflection"
    with pytest.raises(ValueError):
        transition_type("++", "--")


def test_every_drawn_trajectory_has_its_composition_exactly() -> None:
    rng = np.random.default_rng(0)
    grid = np.linspace(0.0, 1.0, 801)
    for comp in composition_library(4):
        shape = CompositionShape([comp])
        raw = torch.as_tensor(rng.normal(0.0, 2.0, size=(10, shape.n_params)))
        idx = torch.zeros(10, dtype=torch.long)
        curve = shape.curve(raw, idx, torch.as_tensor(grid).repeat(10, 1), 0.0, 1.0).numpy()
        times, values = shape.knots(raw, idx, 0.0, 1.0)
        at_knots = shape.curve(raw, idx, times[:, :-1].contiguous(), 0.0, 1.0).numpy()
        np.testing.assert_allclose(at_knots, values[:, :-1].numpy(), atol=1e-9)
        for i in range(10):
            assert _shape_violations(comp, times[i].numpy(), grid, curve[i]) == 0, comp


@pytest.mark.claims
def test_claim_recovers_semantics_matches_black_box_and_keeps_shapes(pk) -> None:
    X, y, _, truth, model = pk
    test = slice(N_TRAIN, None)
    # The planted structure: the composition depends on the formulation only.
    assert all(tree["feature"] == 2 for tree in model.trees_)
    found = model.predict_composition(X[test])
    accuracy = np.mean([found[i] == truth[N_TRAIN + i] for i in range(N_TEST)])
    assert accuracy >= 1 - 3 * np.sqrt(0.25 / N_TEST)  # observed 1.0
    # At least as accurate as a black-box regressor: paired per-trajectory squared errors.
    pred = model.predict(X[test])
    rf = RandomForestRegressor(100, random_state=0).fit(X[:N_TRAIN], y[:N_TRAIN].reshape(N_TRAIN, -1))
    rf_pred = rf.predict(X[test]).reshape(pred.shape)
    for dim in range(2):
        ours = ((pred[:, :, dim] - y[test, :, dim]) ** 2).mean(axis=1)
        theirs = ((rf_pred[:, :, dim] - y[test, :, dim]) ** 2).mean(axis=1)
        diff = ours - theirs
        assert diff.mean() <= 2 * diff.std(ddof=1) / np.sqrt(N_TEST)
    # Behaviour holds exactly: every prediction's derivative signs follow its composition.
    grid = np.linspace(0.0, 1.0, 1201)
    dense = model.predict(X[test], times=grid)
    sems = model.semantic_representation(X[test])
    for i in range(N_TEST):
        for dim in range(2):
            s = sems[i][dim]
            assert _shape_violations(s.composition, s.times, grid, dense[i, :, dim]) == 0


def test_allowed_compositions_are_a_hard_constraint() -> None:
    X, y, t, _ = make_pk_trajectories(40, n_times=8, noise=0.05, random_state=3)
    model = SemanticTrajectoryModel(compositions=ALLOWED, n_epochs=10, score_max_iter=10, random_state=0)
    model.fit(X, y, times=t)
    X_new = np.column_stack([np.linspace(40, 120, 9), np.linspace(10, 90, 9), np.arange(9) % 2])
    for row in model.predict_composition(X_new):  # also outside the training ranges
        assert row[0] in ALLOWED[0] and row[1] in ALLOWED[1]
    one_dim = SemanticTrajectoryModel(compositions=[("++", "+-")], n_epochs=5, score_max_iter=5)
    pred = one_dim.fit(X, y[:, :, 1]).predict(X[:3])
    assert pred.shape == (3, 8) and one_dim.predict_composition(X[:1]) == [[("++", "+-")]]


def test_semantic_representation_agrees_with_predict(pk) -> None:
    X, _, t, _, model = pk
    sems = model.semantic_representation(X[:5])
    for i, row in enumerate(sems):
        for dim, s in enumerate(row):
            assert s.transitions[0] == "start" and s.transitions[-1] == "end"
            assert len(s.times) == len(s.composition) + 1
            assert s.times[0] == pytest.approx(t[0]) and s.times[-1] == pytest.approx(t[-1])
            at = model.predict(X[i : i + 1], times=s.times)[0, :, dim]
            np.testing.assert_allclose(at, s.values, atol=1e-8)
    text = model.describe(["weight", "age", "extended_release"])
    assert "extended_release <= 0.5" in text and "(+-, --, -+)" in text


def test_estimator_contract(pk) -> None:
    model = pk[4]
    params = model.get_params()
    assert params["max_motifs"] == 3 and params["relative_motif_cost"] == 0.01
    fresh = clone(model)
    assert not hasattr(fresh, "trees_")
    with pytest.raises(NotFittedError):
        fresh.predict(pk[0][:2])
    assert fresh.set_params(max_depth=1) is fresh and fresh.max_depth == 1
    defaults = SemanticTrajectoryModel().get_params()
    assert (
        defaults["max_motifs"],
        defaults["max_depth"],
        defaults["n_basis"],
        defaults["learning_rate"],
    ) == (
        4,
        3,
        6,
        0.1,
    )


def test_bad_input_raises_trustlab_errors(pk) -> None:
    X, y, t, _, model = pk
    fast = {"n_epochs": 1, "score_max_iter": 1, "compositions": [("+-",)]}
    with pytest.raises(DataError, match="times"):  # trajectories of different lengths
        SemanticTrajectoryModel(**fast).fit(X[:10], y[:10], times=t[:-1])
    bad_t = t.copy()
    bad_t[3] = bad_t[2]
    with pytest.raises(DataError, match="increasing"):
        SemanticTrajectoryModel(**fast).fit(X[:10], y[:10], times=bad_t)
    with pytest.raises(DataError, match="y"):
        SemanticTrajectoryModel(**fast).fit(X[:10], y[:9])
    with pytest.raises(DataError, match="y"):
        SemanticTrajectoryModel(**fast).fit(X[:10], y[:10, :2])
    with pytest.raises(DataError, match="X"):
        model.predict(X[:3, :2])
    with pytest.raises(DataError, match="range"):
        model.predict(X[:3], times=np.linspace(0, 2, 5))
    with pytest.raises(ParameterError, match="compositions"):
        SemanticTrajectoryModel(compositions=[("++", "--")]).fit(X[:10], y[:10])
    with pytest.raises(ParameterError, match="compositions"):
        SemanticTrajectoryModel(compositions=[("+x",)]).fit(X[:10], y[:10])
    with pytest.raises(ParameterError, match="max_motifs"):
        SemanticTrajectoryModel(max_motifs=0).fit(X[:10], y[:10])
    with pytest.raises(ParameterError, match="feature_names"):
        model.describe(["a"])
    for kwargs in ({"n_samples": 0}, {"n_samples": 5, "n_times": 2}, {"n_samples": 5, "noise": -1.0}):
        with pytest.raises(ParameterError):
            make_pk_trajectories(**kwargs)


_SMALL = make_pk_trajectories(10, n_times=N_TIMES, random_state=0)[:3]


@settings(max_examples=10, deadline=None)
@given(row=st.integers(0, 9), col=st.integers(0, N_TIMES - 1), value=st.sampled_from([np.nan, np.inf]))
def test_nan_or_inf_anywhere_is_refused(row: int, col: int, value: float) -> None:
    X, y, t = _SMALL
    y = y.copy()
    y[row, col, 0] = value
    with pytest.raises(TrustlabError, match="NaN"):
        SemanticTrajectoryModel(n_epochs=1, score_max_iter=1).fit(X, y, times=t)
    X = X.copy()
    X[row, 0] = value
    with pytest.raises(DataError, match="X"):
        SemanticTrajectoryModel(n_epochs=1, score_max_iter=1).fit(X, np.zeros((10, N_TIMES)))


def test_docs_example_runs(run_docs_example) -> None:
    run_docs_example(Path(__file__).resolve().parents[2] / "docs" / "explain" / "semantic-trajectories.md")


def test_dof_correction_divides_scores_by_the_gcv_factor() -> None:
    X, y, t = _SMALL
    kw = {"compositions": ALLOWED, "n_epochs": 0, "score_max_iter": 5, "random_state": 0}
    plain = SemanticTrajectoryModel(**kw).fit(X, y, times=t)
    gcv = SemanticTrajectoryModel(dof_correction=True, **kw).fit(X, y, times=t)
    for dim in range(2):
        lengths = np.array([len(c) for c in plain.compositions_[dim]])
        factor = (1 - (2 * lengths + 2) / N_TIMES) ** -2
        np.testing.assert_allclose(gcv.composition_scores_[dim], plain.composition_scores_[dim] * factor)


@pytest.mark.slow  # one fit of 100 trajectories at 20 times with the full library, about 10 s
@pytest.mark.claims
def test_claim_recovery_at_twenty_times_needs_width_and_gcv() -> None:
    X, y, t, truth = make_pk_trajectories(150, n_times=20, noise=0.01, random_state=0)
    model = SemanticTrajectoryModel(min_motif_width=0.1, dof_correction=True, random_state=0)
    found = model.fit(X[:100], y[:100], times=t).predict_composition(X[100:])
    accuracy = np.mean([found[i] == truth[100 + i] for i in range(50)])
    assert accuracy >= 1 - 3 * np.sqrt(0.25 / 50)  # observed 0.96
