"""Fairness generalisation bounds: losses, bound formulas, estimators, bad input (002-11)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.fairness.bounds import (
    cell_counts,
    cmi_fairness_bound,
    discrete_mutual_information,
    fairness_loss,
    mi_fairness_bound,
    output_entropy,
    supersample_cmi,
    uniform_convergence_fairness_bound,
)


def test_losses_agree_with_fairlearn() -> None:
    from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

    rng = np.random.default_rng(0)
    y, a = rng.integers(0, 2, 400), rng.choice(["f", "m", "x"], 400)
    pred = rng.binomial(1, np.where(a == "m", 0.6, 0.4))
    dp = fairness_loss(pred, sensitive_features=a)
    eo = fairness_loss(pred, sensitive_features=a, y_true=y, criterion="equalized_odds")
    assert dp == pytest.approx(demographic_parity_difference(y, pred, sensitive_features=a), abs=1e-12)
    assert eo == pytest.approx(equalized_odds_difference(y, pred, sensitive_features=a), abs=1e-12)
    assert cell_counts(a, y_true=y, criterion="equalized_odds").sum() == 400


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=6, max_size=30),
    st.integers(0, 10_000),
    st.floats(0, 1),
    st.sampled_from(["demographic_parity", "equalized_odds"]),
)
def test_replacing_one_sample_moves_the_loss_by_at_most_one_over_its_cell(
    preds, seed, new, criterion
) -> None:
    # The bounded-differences property both theorems rest on.
    rng = np.random.default_rng(seed)
    n = len(preds)
    a, y = np.arange(n) % 2, (np.arange(n) // 2) % 2
    before = fairness_loss(preds, sensitive_features=a, y_true=y, criterion=criterion)
    i = int(rng.integers(n))
    changed = np.array(preds)
    changed[i] = new
    after = fairness_loss(changed, sensitive_features=a, y_true=y, criterion=criterion)
    cells = a * 2 + y if criterion == "equalized_odds" else a
    assert abs(after - before) <= 1 / np.sum(cells == cells[i]) + 1e-12


def test_bound_formulas() -> None:
    counts = [50, 200]
    s = 1 / 50 + 1 / 200
    assert mi_fairness_bound(3.0, counts) == pytest.approx(math.sqrt(s * 3.0 / 2))
    assert cmi_fairness_bound(3.0, counts) == pytest.approx(math.sqrt(2 * s * 3.0))
    assert uniform_convergence_fairness_bound(100, counts) == pytest.approx(math.sqrt(s * math.log(200) / 2))
    # I(W;S) <= H(W) <= log|W|: the MI bound is never looser than the finite-class one.
    assert mi_fairness_bound(math.log(100), counts) < uniform_convergence_fairness_bound(100, counts)


def test_estimators() -> None:
    rng = np.random.default_rng(1)
    w = rng.integers(0, 8, 20_000)
    # Plug-in error of an 8-outcome entropy at N = 20,000 is ~ sqrt(Var/N) < 0.01.
    assert output_entropy(w) == pytest.approx(math.log(8), abs=0.01)
    assert output_entropy(np.column_stack([w % 2, w // 2])) == pytest.approx(output_entropy(w))
    # A randomised learner ignoring its data: I(W; S) ~ 0 although H(W) = log 8.
    data_id = np.repeat(np.arange(200), 100)
    assert discrete_mutual_information(w, data_id) < 0.05
    assert discrete_mutual_information(data_id % 8, data_id) == pytest.approx(math.log(8), abs=0.01)
    assert supersample_cmi([0, 0, 0, 0, 1, 2, 3, 4], [0, 0, 0, 0, 1, 1, 1, 1], correction="none") == (
        pytest.approx(math.log(4) / 2)
    )


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: mi_fairness_bound(-1.0, [10, 10]), "information"),
        (lambda: cmi_fairness_bound(float("nan"), [10, 10]), "cmi"),
        (lambda: mi_fairness_bound(1.0, [10, 0]), "cell_counts"),
        (lambda: mi_fairness_bound(1.0, [10, 2.5]), "cell_counts"),
        (lambda: uniform_convergence_fairness_bound(0, [10, 10]), "n_hypotheses"),
        (lambda: fairness_loss([0.5, 2.0], sensitive_features=[0, 1]), "y_pred"),
        (lambda: fairness_loss([0, 1], sensitive_features=[0, 0]), "sensitive_features"),
        (lambda: fairness_loss([0, 1, 1], sensitive_features=[0, 1]), "sensitive_features"),
        (lambda: fairness_loss([0, 1], sensitive_features=[0, None]), "sensitive_features"),
        (lambda: fairness_loss([0, 1], sensitive_features=[0, 1], criterion="equalized_odds"), "y_true"),
        (
            lambda: fairness_loss(
                [0, 1], sensitive_features=[0, 1], y_true=[1, 1], criterion="equalized_odds"
            ),
            "sensitive_features",
        ),
        (lambda: fairness_loss([0, 1], sensitive_features=[0, 1], criterion="parity"), "criterion"),
        (lambda: output_entropy([]), "outputs"),
        (lambda: discrete_mutual_information([0, 1], [0]), "conditions"),
        (lambda: supersample_cmi([0, 1], [0, 0, 1]), "supersample_ids"),
    ],
)
def test_bad_input_names_the_argument(call, argument) -> None:
    with pytest.raises(TrustlabError) as info:
        call()
    assert info.value.argument == argument
    assert isinstance(info.value, DataError | ParameterError)
