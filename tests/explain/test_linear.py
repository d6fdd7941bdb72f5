"""Tests of the one reader of a model's linear form (counterfactuals, recourse, recourse audit)."""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import SVC

from trustlab.explain._linear import coef_intercept, decision_scores, pipeline_linear_form

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 3)) * [1.0, 10.0, 0.1] + [0.0, 50.0, -1.0]
Y = (X[:, 0] + 0.1 * X[:, 1] > 5).astype(int)


def test_coef_intercept_shapes() -> None:
    lr = LogisticRegression().fit(X, Y)
    w, b = coef_intercept(lr)
    assert w.shape == (3,) and b == float(lr.intercept_[0])
    w_reg, b_reg = coef_intercept(LinearRegression().fit(X, X[:, 0]))  # coef_ of shape (d,)
    assert w_reg.shape == (3,) and isinstance(b_reg, float)
    sgd = SGDClassifier(random_state=0).fit(X, Y).sparsify()
    assert sparse.issparse(sgd.coef_) and coef_intercept(sgd)[0].shape == (3,)
    assert coef_intercept(LogisticRegression().fit(X, np.arange(200) % 3)) is None  # multiclass
    assert coef_intercept(SVC().fit(X[:50], Y[:50])) is None  # coef_ refuses for an rbf kernel
    assert coef_intercept("not a model") is None


def test_pipeline_linear_form_composes_scalers_and_checks_itself() -> None:
    pipe = make_pipeline(StandardScaler(), StandardScaler(with_mean=False), LogisticRegression()).fit(X, Y)
    w, b = pipeline_linear_form(pipe)
    np.testing.assert_allclose(X @ w + b, pipe.decision_function(X), rtol=1e-9, atol=1e-9)
    assert pipeline_linear_form(make_pipeline(MinMaxScaler(), LogisticRegression()).fit(X, Y)) is None

    class Bent(LogisticRegression):
        """Has coef_ and intercept_, but its score is not w . x + b."""

        def decision_function(self, Z):
            return super().decision_function(Z) + 0.5 * np.asarray(Z)[:, 0] ** 2

    assert pipeline_linear_form(Bent().fit(X, Y)) is None
    assert pipeline_linear_form(LinearRegression().fit(X, X[:, 0])) is None  # not a classifier


def test_decision_scores_logit_fallback() -> None:
    lr = LogisticRegression().fit(X, Y)

    class ProbaOnly:
        def predict_proba(self, Z):
            return lr.predict_proba(Z)

    np.testing.assert_allclose(decision_scores(ProbaOnly(), X[:20]), lr.decision_function(X[:20]), atol=1e-8)
