"""Tabular OOD scores and label flips under bounded perturbations (trustlab.security.robustness)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError
from trustlab.security._robustness_flips import wilson
from trustlab.security._robustness_models import torch_logits
from trustlab.security.robustness import KNNShiftDetector, prediction_flips, tabular_ood_scores


def _linear_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5]
    y = (X @ [1.0, -0.5, 2.0] + rng.normal(0, 0.5, n) > 0).astype(int)
    return X, y


def test_shifted_rows_score_higher_and_in_distribution_rows_exceed_at_the_nominal_rate():
    rng = np.random.default_rng(0)
    X_train = rng.normal(size=(1000, 4))
    same = rng.normal(size=(2000, 4))
    shifted = rng.normal(size=(40, 4)) + np.array([5.0, 0, 0, 0])  # 3.7 IQRs
    res = tabular_ood_scores(X_train, np.r_[same, shifted], n_top=40)
    # the nominal 5% of fresh rows from the training distribution exceed the threshold
    ind = res.scores[:2000] > res.threshold
    lo, hi = wilson(int(ind.sum()), 2000)
    assert lo <= 0.05 <= hi
    # shifted rows: almost all above, and they fill the top of the list
    assert (res.scores[2000:] > res.threshold).mean() > 0.8
    assert (res.top_index >= 2000).mean() > 0.8
    assert np.all(np.diff(res.top_scores) <= 0)


def test_score_is_monotone_in_a_shift_and_reads_categories():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {"a": rng.normal(size=300), "b": rng.normal(size=300) * 10, "c": rng.choice(["x", "y"], 300)}
    )
    det = KNNShiftDetector().fit(frame)
    base = frame.iloc[[0]].copy()
    scores = []
    for shift in (0.0, 2.0, 4.0, 8.0):
        row = base.copy()
        row["a"] += shift
        scores.append(det.score_samples(row)[0])
    assert np.all(np.diff(scores) > 0)
    unseen = base.copy()
    unseen["c"] = "z"
    assert det.score_samples(unseen)[0] > det.score_samples(base)[0]
    # IQR scaling: a shift of one IQR of b moves the row as far as one IQR of a
    iqr_a = np.subtract(*np.percentile(frame["a"], [75, 25]))
    iqr_b = np.subtract(*np.percentile(frame["b"], [75, 25]))
    far = pd.DataFrame({"a": [100 * iqr_a], "b": [0.0], "c": ["x"]})
    far_b = pd.DataFrame({"a": [0.0], "b": [100 * iqr_b], "c": ["x"]})
    assert det.score_samples(far)[0] == pytest.approx(det.score_samples(far_b)[0], rel=0.05)


def test_logistic_gradient_flips_are_exact():
    X, y = _linear_data()
    model = LogisticRegression().fit(X, y)
    for eps in (0.02, 0.1, 0.3):
        res = prediction_flips(model, X, eps=eps)
        z = X @ model.coef_[0] + model.intercept_[0]
        exact = np.abs(z) <= np.abs(model.coef_[0]) @ res.radius
        np.testing.assert_array_equal(res.flipped, exact)
        assert res.method.startswith("gradient search (analytic")
        # the black-box search is exact too for a (monotone) linear score: the secant corner
        search = prediction_flips(model, X, eps=eps, method="search")
        np.testing.assert_array_equal(search.flipped, exact)
        assert search.method.startswith("black-box search")


def test_pipeline_uses_the_search_and_groups_get_wilson_intervals():
    X, y = _linear_data()
    frame = pd.DataFrame(X, columns=["p", "q", "r"])
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(frame, y)
    groups = np.where(np.arange(len(X)) % 3 == 0, "a", "b")
    res = prediction_flips(model, frame, eps=0.1, sensitive_features=groups)
    lin = model[-1]
    w = lin.coef_[0] / model[0].scale_
    z = model.decision_function(frame)
    exact = np.abs(z) <= np.abs(w) @ res.radius
    np.testing.assert_array_equal(res.flipped, exact)
    table = res.by_group.set_index("group")
    assert table.loc["a", "n"] == 200 and table.loc["b", "n"] == 400
    for _, row in table.iterrows():
        assert row["low"] <= row["share"] <= row["high"]
        assert (row["low"], row["high"]) == wilson(int(row["flipped"]), int(row["n"]))
    assert res.interval[0] <= res.share <= res.interval[1]


def test_mlp_logits_match_predict_and_flips_grow_with_eps():
    X, y = _linear_data(400)
    mlp = MLPClassifier(hidden_layer_sizes=(16,), max_iter=300, random_state=0).fit(X, y)
    import torch

    logits = torch_logits(mlp, "mlp")(torch.as_tensor(X)).detach().numpy()
    np.testing.assert_array_equal(mlp.classes_[logits.argmax(1)], mlp.predict(X))
    shares = [prediction_flips(mlp, X, eps=e).share for e in (0.01, 0.1, 0.5)]
    assert shares[0] < shares[1] < shares[2]
    # the gradient finds at least what the black-box search finds, on the rows near the boundary
    grad = prediction_flips(mlp, X, eps=0.1)
    search = prediction_flips(mlp, X, eps=0.1, method="search")
    assert grad.flipped.sum() >= search.flipped.sum() - 3


def test_torch_model_flips():
    torch = pytest.importorskip("torch")
    X, y = _linear_data(300)
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)
    torch.set_num_threads(1)  # restored below: the tests share 2 cores
    for _ in range(100):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xt), yt).backward()
        opt.step()
    small, big = (prediction_flips(net, X, eps=e) for e in (0.01, 0.3))
    assert small.method.startswith("gradient search (torch")
    assert 0 <= small.share < big.share
    assert not small.flipped[~big.flipped].any()  # a flip in the small box is one in the big box
    torch.set_num_threads(threads)


def test_trees_get_no_gradient():
    X, y = _linear_data(300)
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y)
    with pytest.raises(ModelError, match="tree model") as err:
        prediction_flips(tree, X)
    assert err.value.argument == "model"
    res = prediction_flips(tree, X, method="search", n_random=4)
    assert res.method.startswith("black-box")
    with pytest.raises(ModelError, match="method='search'"):
        prediction_flips(
            make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y), X, method="gradient"
        )


def test_bad_input_names_the_argument():
    X, y = _linear_data(100)
    model = LogisticRegression().fit(X, y)
    for eps in (0, -1.0):
        with pytest.raises(ParameterError, match="eps") as err:
            prediction_flips(model, X, eps=eps)
        assert err.value.argument == "eps"
    bad = X.copy()
    bad[0, 0] = np.inf
    with pytest.raises(DataError, match="NaN or infinite"):
        prediction_flips(model, bad)
    with pytest.raises(DataError):
        prediction_flips(model, np.zeros((0, 3)))
    with pytest.raises(DataError, match="columns"):
        prediction_flips(model, pd.DataFrame(X, columns=list("abc")), columns=["zz"])
    with pytest.raises(DataError, match="sensitive_features"):
        prediction_flips(model, X, sensitive_features=[1, 2])
    with pytest.raises(ParameterError, match="scale"):
        prediction_flips(model, X, scale=[1.0, -1.0, 1.0])
    with pytest.raises(DataError, match="n_neighbors"):
        tabular_ood_scores(X[:3], X)
    with pytest.raises(NotFittedError):
        KNNShiftDetector().score_samples(X)
    with pytest.raises(DataError, match="columns"):
        KNNShiftDetector().fit(X).score_samples(X[:, :2])
    with pytest.raises(ParameterError, match="n_neighbors"):
        tabular_ood_scores(X, X, n_neighbors=0)


@settings(max_examples=30, deadline=None)
@given(
    data=st.one_of(
        st.lists(
            st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=3, max_size=3), max_size=6
        ),
        st.lists(st.floats(), max_size=5),
        st.text(max_size=4),
        st.none(),
    ),
    eps=st.one_of(st.floats(allow_nan=True), st.integers(-1, 1), st.none()),
)
def test_fuzz_only_trustlab_errors(data, eps):
    X, y = _linear_data(60)
    model = LogisticRegression().fit(X, y)
    for call in (
        lambda: prediction_flips(model, data, eps=eps),
        lambda: prediction_flips(model, X[:5], eps=eps, method="search"),
        lambda: tabular_ood_scores(X, data),
        lambda: tabular_ood_scores(data, X),
    ):
        try:
            call()
        except TrustlabError:
            pass


def test_values_near_the_float_limit_score_finite():
    """A finite value near 1.8e308 overflowed to inf when standardised (found by the fuzz test)."""

    train = pd.DataFrame({"a": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "b": [1.0, 0.0] * 3 + [1.0]})
    odd = pd.DataFrame({"a": [1.1442037168863373e308, 2.0], "b": [0.0, 1.0]})
    res = tabular_ood_scores(train, odd)
    scores = np.asarray(getattr(res, "scores", res), dtype=float)
    assert np.all(np.isfinite(scores)) and scores[0] > scores[1]


@pytest.mark.parametrize("method", ["search", "gradient"])
def test_absurd_eps_is_a_parameter_error_not_an_overflow(method):
    """eps = 1e308 once reached the model as infinite rows (sklearn's ValueError, found by the fuzz)."""
    X, y = _linear_data(60)
    model = LogisticRegression().fit(X, y)
    with pytest.raises(ParameterError) as err:
        prediction_flips(model, X[:5], eps=1e308, method=method)
    assert err.value.argument == "eps"
