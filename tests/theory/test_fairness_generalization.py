"""The fairness generalisation bounds against a simulation on the shipped benefits table (002-11)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab import theory
from trustlab.errors import ParameterError, TrustlabError
from trustlab.fairness.bounds import fairness_loss
from trustlab.theory.fairness_generalization import (
    _fit,
    benefits_threshold_population,
    population_fairness_risk,
    simulate_fairness_generalization,
)


@pytest.mark.claims
@pytest.mark.parametrize(("criterion", "n_per_cell"), [("demographic_parity", 50), ("equalized_odds", 25)])
def test_bound_holds_and_beats_uniform_convergence(criterion, n_per_cell) -> None:
    # Fairness-regularised threshold ERM over 2,000 resamples: the training fairness loss is
    # optimistic (fairness overfitting), the MI bound lies above the measured gap (by more than
    # 3 standard errors of the gap) and below the classical finite-class bound. Measured:
    # DP gap 0.063 vs MI bound 0.244 (3.9x), UC 0.353; EO gap 0.137 vs 0.593 (4.3x), UC 0.706.
    sim = simulate_fairness_generalization(
        criterion=criterion,
        n_per_cell=n_per_cell,
        penalty=1.0,
        n_datasets=2000,
        n_supersamples=5,
        n_masks=200,
    )
    assert sim.gap > 10 * sim.gap_se
    assert sim.gap + 3 * sim.gap_se < sim.mi_bound < sim.uniform_bound
    # The second inequality holds by construction (plug-in entropy < log 2|W|); the ratio is
    # the content: 0.69 (DP) and 0.84 (EO), sampling error about 0.005 at 2,000 resamples.
    assert sim.mi_to_uniform < 0.9
    assert sim.gap + 3 * sim.gap_se < sim.cmi_bound
    assert sim.cmi <= sum(sim.cell_counts) * np.log(2)


@pytest.mark.claims
@pytest.mark.parametrize(("criterion", "n_per_cell"), [("demographic_parity", 50), ("equalized_odds", 25)])
def test_evaluated_cmi_bound_holds_and_is_tighter_than_mi_for_dp_only(criterion, n_per_cell) -> None:
    # Theorem 5 (prediction-level CMI weighted by the pairs' discordance) on the same learner,
    # 20 supersamples x 200 masks. The decisions on the supersample carry exactly the
    # hypothesis's information here (f-CMI = CMI: thresholds are told apart by supersample
    # points), so the gain is the discordance: only 21 % (DP) / 40 % (EO) of the worst-case
    # constant. Measured (seeds 0-4): DP evaluated bound 0.19-0.21 = 0.79-0.86x the MI bound
    # 0.244 (the "CMI tighter" direction reproduces); EO 0.64-0.67 = 1.08-1.13x the MI bound
    # 0.593 (it does not).
    sim = simulate_fairness_generalization(
        criterion=criterion, n_per_cell=n_per_cell, n_datasets=2000, n_supersamples=20, n_masks=200
    )
    assert sim.gap + 3 * sim.gap_se < sim.evaluated_cmi_bound <= sim.cmi_bound
    assert sim.prediction_cmi <= sim.cmi + 1e-12  # F is a function of W (plug-in keeps it)
    assert sim.discordance <= 0.5 * sum(1 / c for c in sim.cell_counts)
    if criterion == "demographic_parity":
        assert sim.evaluated_to_mi < 0.95
    else:
        assert sim.evaluated_to_mi > 1.0


def test_population_risk_is_exact() -> None:
    # E|B0/n0 - B1/n1| and E max_y |...| against 40,000 fresh draws (within 4 MC standard errors).
    rng = np.random.default_rng(3)
    for rates, counts, criterion in [
        ([0.3, 0.5], [7, 12], "demographic_parity"),
        ([0.2, 0.7, 0.35, 0.6], [5, 9, 6, 4], "equalized_odds"),
    ]:
        draws = rng.binomial(counts, rates, size=(40_000, len(counts))) / np.asarray(counts)
        if criterion == "demographic_parity":
            mc = np.abs(draws[:, 0] - draws[:, 1])
        else:
            mc = np.maximum(np.abs(draws[:, 0] - draws[:, 2]), np.abs(draws[:, 1] - draws[:, 3]))
        exact = population_fairness_risk(rates, counts, criterion)
        assert abs(exact - mc.mean()) < 4 * mc.std() / np.sqrt(len(mc))


def test_learner_minimises_its_objective_and_reports_the_training_loss() -> None:
    pop = benefits_threshold_population("equalized_odds", 6)
    rng = np.random.default_rng(0)
    idx = [rng.integers(0, len(s), size=(1, 8)) for s in pop.scores]
    choice, train = _fit(pop, idx, penalty=2.0)
    scores = np.concatenate([pop.scores[c][idx[c][0]] for c in range(4)])
    labels = np.concatenate([pop.labels[c][idx[c][0]] for c in range(4)])
    group = np.repeat([0, 0, 1, 1], 8)
    objective = {}
    for k0 in range(6):
        for k1 in range(6):
            dec = (scores > pop.thresholds[np.where(group == 0, k0, k1)]).astype(float)
            loss = fairness_loss(dec, sensitive_features=group, y_true=labels, criterion="equalized_odds")
            objective[k0 * 6 + k1] = (np.mean(dec != labels) + 2.0 * loss, loss)
    best = min(objective, key=lambda w: (objective[w][0], w))
    assert objective[int(choice[0])][0] == pytest.approx(objective[best][0])
    assert train[0] == pytest.approx(objective[int(choice[0])][1])


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"n_per_cell": 1}, "n_per_cell"),
        ({"n_per_cell": [10, 10, 10]}, "n_per_cell"),
        ({"penalty": -1.0}, "penalty"),
        ({"n_thresholds": 1}, "n_thresholds"),
        ({"criterion": "calibration"}, "criterion"),
        ({"n_datasets": 0}, "n_datasets"),
    ],
)
def test_bad_input(kwargs, argument) -> None:
    with pytest.raises(ParameterError) as info:
        simulate_fairness_generalization(**kwargs)
    assert info.value.argument == argument


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        *[
            (name, lambda v, name=name: theory.simulate_fairness_generalization(**{name: v}))
            for name in ("n_per_cell", "n_thresholds", "n_datasets", "n_supersamples", "n_masks")
        ],
    ],
    ids=lambda c: c if isinstance(c, str) else "",
)
@settings(max_examples=3, deadline=None)
@given(bad=st.integers(max_value=0))
def test_non_positive_sizes_name_the_argument(argument: str, call, bad: int) -> None:
    """Issue 34: a non-positive dimension, step or sample count raises a TrustlabError naming it."""
    with pytest.raises(TrustlabError) as info:
        call(bad)
    assert info.value.argument == argument and argument in str(info.value)
