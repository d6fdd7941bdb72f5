"""scikit-learn's common estimator checks over every trustlab estimator.

Like scikit-learn's own ``sklearn/tests/test_common.py``: one list of estimator
instances (:data:`ESTIMATORS`, one entry per class, configured as a user would) and
one table of the checks each is *expected* to fail, with the reason
(:data:`EXPECTED_FAILED_CHECKS`, the role of scikit-learn's
``PER_ESTIMATOR_XFAIL_CHECKS``). A check listed there that starts to pass fails the
run (``xfail_strict``), so the table cannot go stale. Properties an estimator has by
design are declared on the estimator itself with ``__sklearn_tags__`` (e.g. the LTM
estimators' ``non_deterministic``: their DP noise is never seeded).

To cover another package, add its estimators to :data:`ESTIMATORS` (and their
expected failures, each with a reason) — e.g. ``trustlab.explain``'s, later
``trustlab.fairness``'. :func:`test_every_estimator_is_listed` fails when a package
in :data:`PACKAGES` exports an estimator that is not in the list.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

from trustlab.efficiency import QuantizationAwareTraining, SAFEPruning
from trustlab.explain import GIST, ExemplarLDA, FeaturePartition, FuzzyBoundaryGCL, GraphGINClassifier
from trustlab.fairness import (
    FDGen,
    HardtPostProcessor,
    MarketAwareClassifier,
    MultiaccuracyBoost,
    MulticalibrationBoost,
)
from trustlab.privacy import (
    DPSGDClassifier,
    LabelDPBinaryRegression,
    LTMLowRank,
    LTMRidge,
    RandomizedResponseLabelDP,
)
from trustlab.security import MixBridge
from trustlab.theory import PositionalTransformerRegressor
from trustlab.uncertainty import CorrGCVRidgeCV, KandinskyConformal, PromptTuner
from trustlab.unlearning import KNNMemory
from trustlab.vision import InfoCons

PACKAGES = (
    "trustlab.privacy",
    "trustlab.uncertainty",
    "trustlab.fairness",
    "trustlab.explain",
    "trustlab.unlearning",
    "trustlab.security",
    "trustlab.theory",
    "trustlab.lm",
    "trustlab.vision",
    "trustlab.efficiency",
)
"""Packages whose every exported :class:`~sklearn.base.BaseEstimator` subclass must be checked."""

ESTIMATORS: list[BaseEstimator] = [
    LTMRidge(random_state=0),
    LTMLowRank(n_components=1, random_state=0),
    # Symmetric randomized response at epsilon = log(3): both keep probabilities 0.75.
    LabelDPBinaryRegression(p0=0.75, p1=0.75),
    CorrGCVRidgeCV(),
    KNNMemory(k=5, backend="numpy"),
    # small annealing schedule: the checks fit dozens of times on 20-30 rows
    FeaturePartition(n_restarts=1, perplexity=3, delta_steps=1, max_iter=5),
    ExemplarLDA(topics_per_document=1.0, min_df=1),
]

NOT_CHECKED: dict[type, str] = {
    PositionalTransformerRegressor: (
        "fit(X, y) takes sequences (n, length) with per-position targets (n, length): scikit-learn's "
        "regressor checks pass 1-D targets; tested in tests/theory/test_positional_attention.py"
    ),
    InfoCons: (
        "explains the user's torch point-cloud classifier, its first argument (no default): fit(X) "
        "takes (n, n_points, 3) clouds and no labels; scikit-learn's checks cannot construct one; "
        "tested in tests/vision/test_infocons.py"
    ),
    QuantizationAwareTraining: (
        "wraps the user's torch model, its first argument (no default), and trains it in place; "
        "scikit-learn's checks cannot construct one; tested in tests/efficiency/test_quest.py"
    ),
    SAFEPruning: (
        "wraps the user's torch model, its first argument (no default), and prunes it; scikit-learn's "
        "checks cannot construct one; tested in tests/efficiency/test_safe.py"
    ),
    GIST: (
        "explains the user's graph classifier, its first argument: fit(graphs) takes a list of "
        "adjacency matrices (a pool labelled by that classifier) and explain(graphs) returns graphs; "
        "scikit-learn's checks call fit(X, y) on tables; tested in tests/explain/test_graph_counterfactual.py"
    ),
    GraphGINClassifier: (
        "a graph classifier: fit(graphs, y) takes a list of n x n adjacency matrices, not a table; "
        "tested in tests/explain/test_graph_counterfactual.py"
    ),
    FDGen: (
        "a graph generator: fit(adjacency, features, sensitive) takes an n x n graph, node features "
        "and a group per node, and sample() draws graphs; scikit-learn's checks call fit(X, y) on "
        "tables; tested in tests/fairness/test_graph_generation.py"
    ),
    PromptTuner: (
        "tunes a prompt of the user's frozen dual encoder, its first argument (no default): fit(X, y, "
        "classnames) takes images and class names; scikit-learn's checks cannot construct one; tested "
        "in tests/uncertainty/test_prompt_tuning.py"
    ),
    FuzzyBoundaryGCL: (
        "learns node embeddings of one graph: fit(adjacency, features) takes an n x n graph and its node "
        "features (no labels) and transform embeds a graph; scikit-learn's checks call fit(X, y) on "
        "tables; tested in tests/explain/test_graph_contrastive.py"
    ),
    RandomizedResponseLabelDP: (
        "a release mechanism, not an estimator: it has no fit, only privatize(X, y) "
        "(scikit-learn's checks need fit); tested in tests/privacy/test_label_dp.py"
    ),
    KandinskyConformal: (
        "wraps an already fitted model passed as `estimator` and calibrates it; scikit-learn's checks "
        "clone it unfitted and treat fit(X, y) as training; tested in tests/uncertainty/test_conformal.py"
    ),
    DPSGDClassifier: (
        "fit needs X already scaled into [-1, 1] from public bounds (DataError otherwise, by design) "
        "and 0/1 labels; scikit-learn's checks fit unbounded X and multiclass y (26 of 53 checks fail "
        "for that reason); tested in tests/privacy/test_training.py"
    ),
    HardtPostProcessor: (
        "fit needs sensitive_features= (the group of each row) as fairlearn's ThresholdOptimizer does; "
        "scikit-learn's checks call fit(X, y); tested in tests/fairness/test_postprocessing.py"
    ),
    MultiaccuracyBoost: (
        "fit needs groups= (the subgroup memberships it post-processes over) and X is a probability; "
        "tested in tests/fairness/test_multicalibration.py"
    ),
    MulticalibrationBoost: (
        "fit needs groups= (the subgroup memberships it post-processes over) and X is a probability; "
        "tested in tests/fairness/test_multicalibration.py"
    ),
    MarketAwareClassifier: (
        "binary strategic classifier: labels must be 0/1 and the market needs budgets; scikit-learn's "
        "checks fit multiclass y (30 of 55 checks fail for that reason); tested in "
        "tests/fairness/test_strategic.py"
    ),
    MixBridge: (
        "wraps the user's torch bridge network, its first argument (no default), and fit(X0, X1, targets) "
        "takes paired images and backdoor target sets; scikit-learn's checks cannot construct one; "
        "tested in tests/security/test_mixbridge.py"
    ),
}
"""Exported BaseEstimator subclasses that scikit-learn's checks do not apply to, and why."""

_NOISE = "DP noise: every fit draws fresh, unseeded noise, so two fits (or fit vs fit_transform) differ"
_PRIVATE_NAN = (
    "the training rows are private: a row holding NaN or inf counts as a zero row (no exception "
    "may depend on private values), so fit does not raise on them; predict/transform on public "
    "rows still do (the allow_nan tag would claim NaN is accepted everywhere)"
)

EXPECTED_FAILED_CHECKS: dict[type, dict[str, str]] = {
    LTMRidge: {
        "check_regressors_train": _NOISE + "; at epsilon=1 on 200 rows the noise dominates the fit",
        "check_regressor_data_not_an_array": _NOISE,
        "check_regressors_int": _NOISE,
        "check_supervised_y_2d": _NOISE + " (the check compares a fit on y with one on y[:, None])",
        "check_fit_idempotent": _NOISE,
        "check_supervised_y_no_nan": _PRIVATE_NAN,
        "check_estimators_nan_inf": _PRIVATE_NAN,
    },
    LTMLowRank: {
        "check_fit_idempotent": _NOISE,
        "check_estimators_nan_inf": _PRIVATE_NAN,
    },
}


def expected_failed_checks(estimator: BaseEstimator) -> dict[str, str]:
    """The checks ``estimator`` is expected to fail, with the reason (scikit-learn's hook)."""
    return EXPECTED_FAILED_CHECKS.get(type(estimator), {})


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks, xfail_strict=True)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_every_estimator_is_listed():
    listed = {type(e) for e in ESTIMATORS} | set(NOT_CHECKED)
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
                assert obj in listed, f"{package}.{name} is an estimator missing from ESTIMATORS"


def test_every_expected_failure_has_a_reason():
    for cls, checks in EXPECTED_FAILED_CHECKS.items():
        assert cls in {type(e) for e in ESTIMATORS}, cls
        for check, reason in checks.items():
            assert check.startswith("check_") and len(reason) > 20, (cls, check)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_declared_tags_are_true(estimator):
    """Tags an estimator declares are properties it has, not a way around a check."""
    from sklearn.utils import get_tags

    tags = get_tags(estimator)
    if isinstance(estimator, LTMRidge | LTMLowRank):
        assert tags.non_deterministic  # fresh DP noise at every fit
        a, b = type(estimator)(random_state=0), type(estimator)(random_state=0)
        rng = np.random.default_rng(0)
        X = rng.uniform(-0.5, 0.5, size=(300, 2))
        if isinstance(estimator, LTMRidge):
            assert not np.allclose(a.fit(X, X[:, 0]).coef_, b.fit(X, X[:, 0]).coef_)
        else:
            assert not np.allclose(a.fit(X).components_, b.fit(X).components_)
    else:
        assert not tags.non_deterministic


class _BadType:
    """A value of no valid type for any parameter."""


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_parameter_constraints_cover_every_parameter(estimator):
    """Like scikit-learn's check_param_validation: each parameter is declared and checked in fit."""
    from sklearn.base import clone

    from trustlab.errors import ParameterError

    constraints = type(estimator)._parameter_constraints
    params = estimator.get_params(deep=False)
    assert set(constraints) == set(params)
    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(40, 3)), rng.integers(0, 2, size=40)
    for name, allowed in constraints.items():
        if allowed == "no_validation":
            continue
        bad = clone(estimator).set_params(**{name: _BadType()})
        with pytest.raises(ParameterError) as info:
            bad.fit(X, y)
        assert info.value.argument == name and f"{name} of {type(estimator).__name__} must be" in str(
            info.value
        )
