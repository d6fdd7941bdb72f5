"""Validation tuning of semantic trajectory models (catalog row 004-01: the authors' tune_depth, tuning)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from trustlab.errors import ParameterError
from trustlab.explain._semantic_tree import grow_tree, leaves, split_train_val, tune_tree_depth
from trustlab.explain.semantic_ode import SemanticTrajectoryModel, make_pk_trajectories

ALLOWED = {0: [("+-",), ("+-", "--", "-+")], 1: [("++",), ("++", "+-")]}


def test_split_is_the_authors_eighty_twenty() -> None:
    train, val = split_train_val(50, np.random.default_rng(0))
    assert len(train) == 40 and len(val) == 10
    assert sorted(np.r_[train, val].tolist()) == list(range(50))


def test_depth_tuning_picks_the_smallest_validation_regret() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(200, 2))
    # Composition 0 is best where x0 <= 0.5, composition 1 elsewhere; x1 is noise.
    scores = np.column_stack([np.where(x[:, 0] <= 0.5, 0.0, 1.0), np.where(x[:, 0] <= 0.5, 1.0, 0.0)])
    scores += rng.uniform(0, 0.01, size=scores.shape)
    est = SimpleNamespace(max_depth=3, min_samples_leaf=5, min_relative_gain_to_split=0.01)
    depth, regrets = tune_tree_depth(scores, x, est, np.random.default_rng(1))
    assert set(regrets) == {0, 1, 2, 3}
    assert regrets[0] > 0.3 and regrets[1] < 0.01  # one split finds the rule
    assert depth == min(regrets, key=lambda d: (regrets[d], d)) and depth >= 1
    tree = grow_tree(scores, x, np.arange(200), 0, SimpleNamespace(**{**vars(est), "max_depth": depth}))
    assert tree["feature"] == 0 and abs(tree["threshold"] - 0.5) < 0.05
    assert sum(len(rows) for _, _, rows in leaves(tree, x, np.arange(200))) == 200


def test_validation_tuned_model_keeps_shapes_and_records_depths() -> None:
    X, y, t, _ = make_pk_trajectories(50, n_times=8, noise=0.01, random_state=2)
    kw = {"compositions": ALLOWED, "n_epochs": 15, "score_max_iter": 10, "random_state": 0}
    model = SemanticTrajectoryModel(tune_depth=True, n_tune=2, **kw).fit(X, y, times=t)
    assert len(model.depth_regrets_) == 2 and all(set(r) == {0, 1, 2, 3} for r in model.depth_regrets_)
    assert model.predict(X[:4]).shape == (4, 8, 2)
    for row in model.predict_composition(X):
        assert row[0] in ALLOWED[0] and row[1] in ALLOWED[1]
    plain = SemanticTrajectoryModel(**kw).fit(X, y, times=t)
    assert plain.depth_regrets_ == []
    assert not np.allclose(plain.predict(X[:4]), model.predict(X[:4]))  # the tuned maps differ
    with pytest.raises(ParameterError, match="n_tune"):
        SemanticTrajectoryModel(n_tune=-1).fit(X, y, times=t)
