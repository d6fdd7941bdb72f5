"""Disparate benefits of ensembles (Schweighofer et al., ICML 2025): rates, gaps, deltas, diversity."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame, selection_rate, true_positive_rate
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.fairness import (
    ensemble_benefits,
    ensemble_size_curve,
    fairness_gaps,
    group_rates,
    predictive_diversity,
)


def test_group_rates_match_fairlearn() -> None:
    rng = np.random.default_rng(0)
    y, p, g = rng.integers(0, 2, 500), rng.integers(0, 2, 500), rng.choice(["x", "y", "z"], 500)
    ours = group_rates(y, p, sensitive_features=g)
    mf = MetricFrame(
        metrics={"accuracy": accuracy_score, "tpr": true_positive_rate, "sr": selection_rate},
        y_true=y,
        y_pred=p,
        sensitive_features=g,
    ).by_group
    np.testing.assert_allclose(ours["accuracy"], mf["accuracy"])
    np.testing.assert_allclose(ours["true_positive_rate"], mf["tpr"])
    np.testing.assert_allclose(ours["selection_rate"], mf["sr"])
    assert ours["count"].sum() == 500


def test_fairness_gaps_signs_and_privileged() -> None:
    y = [1, 1, 0, 0, 1, 1, 0, 0]
    p = [1, 1, 1, 0, 1, 0, 0, 0]
    a = [1, 1, 1, 1, 0, 0, 0, 0]
    gaps = fairness_gaps(y, p, sensitive_features=a)
    # group 1: PR 3/4, TPR 1, FPR 1/2; group 0: PR 1/4, TPR 1/2, FPR 0
    assert gaps == pytest.approx({"spd": 0.5, "eod": 0.5, "aod": 0.5})
    flipped = fairness_gaps(y, p, sensitive_features=a, privileged=0)
    assert flipped["spd"] == pytest.approx(-0.5) and flipped["eod"] == pytest.approx(-0.5)
    assert fairness_gaps(y, p, sensitive_features=a, privileged=0, absolute=True)["spd"] == pytest.approx(0.5)
    with pytest.raises(ParameterError, match="absolute=True") as info:
        fairness_gaps(y, p, sensitive_features=[0, 0, 1, 1, 2, 2, 2, 2])
    assert info.value.argument == "absolute"
    # TPR gap 0, FPR gap 1/2, SPD 1/4: aod uses the FPR gap, not the SPD
    odd = fairness_gaps([1, 1, 0, 0, 1, 1, 0, 0], [1, 1, 1, 0, 1, 1, 0, 0], sensitive_features=a)
    assert odd == pytest.approx({"spd": 0.25, "eod": 0.0, "aod": 0.25})
    three = fairness_gaps(y, p, sensitive_features=[0, 0, 1, 1, 2, 2, 2, 2], absolute=True)
    assert three["spd"] == pytest.approx(1.0 - 0.25)


def test_identical_members_give_zero_deltas_and_zero_diversity() -> None:
    rng = np.random.default_rng(1)
    y, a = rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    one = rng.uniform(size=300)
    probs = np.tile(one, (5, 1))
    b = ensemble_benefits(probs, y, sensitive_features=a)
    # equal up to the rounding of a mean of five equal floats
    assert b.per_group["delta"].abs().max() < 1e-12 and b.gaps["delta"].abs().max() < 1e-12
    div = predictive_diversity(probs, y, sensitive_features=a, by_label=True)
    assert div.table["diversity"].max() < 1e-12 and div.overall < 1e-12 and div.gap < 1e-12


def test_benefit_delta_is_ensemble_minus_member_mean(diverse_members) -> None:
    probs, y, a = diverse_members(2000, 4, seed=2)
    b = ensemble_benefits(probs, y, sensitive_features=a)
    member_acc = [((probs[m] > 0.5) == y)[a == 1].mean() for m in range(4)]
    ens_acc = ((probs.mean(0) > 0.5) == y)[a == 1].mean()
    row = b.per_group.loc[("accuracy", 1)]
    assert row["member_mean"] == pytest.approx(np.mean(member_acc))
    assert row["ensemble"] == pytest.approx(ens_acc)
    assert row["delta"] == pytest.approx(ens_acc - np.mean(member_acc))
    # two-class input (M, n, 2) and the first member alone give the same thing
    both = np.stack([1 - probs, probs], axis=-1)
    assert ensemble_benefits(both, y, sensitive_features=a).gaps.equals(b.gaps)
    curve = ensemble_size_curve(probs, y, sensitive_features=a)
    assert curve.loc[1, ("accuracy", 1)] == pytest.approx(member_acc[0])
    assert curve.loc[4, ("eod", "")] == pytest.approx(b.gaps.loc["eod", "ensemble"])


def test_hard_prediction_is_argmax_with_ties_to_class_0() -> None:
    probs = np.array([[0.5, 0.5, 0.9], [0.5, 0.7, 0.1]])
    b = ensemble_benefits(probs, [1, 1, 1], sensitive_features=[0, 0, 0])
    # member 1 predicts (0, 0, 1), member 2 (0, 1, 0): TPR 1/3 each; the ensemble (0.5, 0.6, 0.5): 1/3
    row = b.per_group.loc[("true_positive_rate", 0)]
    assert row["member_mean"] == pytest.approx(1 / 3) and row["ensemble"] == pytest.approx(1 / 3)


def test_weights_pick_one_member(diverse_members) -> None:
    probs, y, a = diverse_members(1000, 3, seed=3)
    b = ensemble_benefits(probs, y, sensitive_features=a, weights=[0.0, 1.0, 0.0])
    expected = fairness_gaps(y, (probs[1] > 0.5).astype(int), sensitive_features=a)
    assert b.gaps.loc["eod", "ensemble"] == pytest.approx(expected["eod"])
    assert predictive_diversity(probs, y, weights=[0.0, 1.0, 0.0]).overall == 0.0


def test_diversity_matches_hand_computation() -> None:
    p = np.array([[0.9, 0.2], [0.5, 0.4]])
    y = np.array([1, 0])
    r = predictive_diversity(p, y)
    row1 = np.log(0.7) - 0.5 * (np.log(0.9) + np.log(0.5))
    row2 = np.log(0.7) - 0.5 * (np.log(0.8) + np.log(0.6))
    assert r.overall == pytest.approx((row1 + row2) / 2)


@pytest.mark.claims
def test_claim_unequal_diversity_gives_disparate_benefits(diverse_members) -> None:
    """Paper's pattern: the group whose members disagree more gains more from ensembling.

    n = 100,000 rows, 10 members with equal member accuracy in both groups. The
    standard error of a group's rate is at most sqrt(0.25 / 25,000) = 0.0032 (about
    25,000 positives per group), so a difference of two groups' deltas has s.e. below
    0.0063 (the member mean shares the rows): 0.03 is > 4.5 s.e.
    """
    probs, y, a = diverse_members(100_000, 10, seed=1)
    div = predictive_diversity(probs, y, sensitive_features=a, by_label=True)
    d = div.table["diversity"]
    assert d.loc[(1, 1)] > 5 * d.loc[(0, 1)] and d.loc[(1, 0)] > 5 * d.loc[(0, 0)]
    b = ensemble_benefits(probs, y, sensitive_features=a)
    delta = b.per_group["delta"]
    # measured: accuracy +0.050 (group 1) vs +0.002 (group 0); TPR +0.050 vs +0.003
    assert delta[("accuracy", 1)] - delta[("accuracy", 0)] > 0.03
    assert delta[("true_positive_rate", 1)] - delta[("true_positive_rate", 0)] > 0.03
    # members are fair (|EOD| ~ 0.001), the ensemble is not (EOD ~ +0.048)
    assert abs(b.gaps.loc["eod", "member_mean"]) < 0.01
    assert b.gaps.loc["eod", "delta"] > 0.03


# -- bad input ------------------------------------------------------------------------


def test_bad_input_names_the_argument(diverse_members) -> None:
    probs, y, a = diverse_members(50, 3, seed=0)
    cases = [
        (lambda: ensemble_benefits(probs, y, sensitive_features=a, weights=[1.5, -0.5, 0.0]), "weights"),
        (lambda: ensemble_benefits(probs, y, sensitive_features=a, weights=[0.2, 0.2, 0.2]), "weights"),
        (lambda: ensemble_benefits(probs, y, sensitive_features=a, weights=[0.5, 0.5]), "weights"),
        (lambda: ensemble_benefits(probs * 2, y, sensitive_features=a), "member_probs"),
        (lambda: ensemble_benefits(probs[0], y, sensitive_features=a), "member_probs"),
        (lambda: ensemble_benefits(probs, y[:-1], sensitive_features=a), "y_true"),
        (lambda: ensemble_benefits(probs, y + 1, sensitive_features=a), "y_true"),
        (lambda: ensemble_benefits(probs, y, sensitive_features=np.r_[a[:-1], np.nan]), "sensitive_features"),
        (lambda: ensemble_benefits(probs, y, sensitive_features=a[:-1]), "sensitive_features"),
        (lambda: ensemble_benefits(probs, y, sensitive_features=a, privileged=7), "privileged"),
        (lambda: group_rates(y, [0.5] * 50, sensitive_features=a), "y_pred"),
        (lambda: predictive_diversity(probs, y, by_label="yes"), "by_label"),
    ]
    for call, argument in cases:
        with pytest.raises(TrustlabError) as info:
            call()
        assert info.value.argument == argument, (argument, str(info.value))
    with pytest.raises(DataError, match="NaN"):
        ensemble_benefits(np.full((2, 3), np.nan), [0, 1, 0], sensitive_features=[0, 0, 1])


def test_group_without_positives_gives_nan_rate_not_error() -> None:
    r = group_rates([0, 0, 1, 0], [0, 1, 1, 0], sensitive_features=["a", "a", "b", "b"])
    assert np.isnan(r.loc["a", "true_positive_rate"]) and r.loc["b", "true_positive_rate"] == 1.0
    assert isinstance(r, pd.DataFrame)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    m=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_fuzz_diversity_non_negative_and_deltas_bounded(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    probs = rng.choice([0.0, 0.5, 1.0, rng.uniform()], size=(m, n))
    y, a = rng.integers(0, 2, n), rng.integers(0, 3, n)
    div = predictive_diversity(probs, y, sensitive_features=a, by_label=True)
    assert div.overall >= 0 and (div.table["diversity"].dropna() >= 0).all()
    b = ensemble_benefits(probs, y, sensitive_features=a)
    finite = b.per_group["delta"].dropna()
    assert (finite.abs() <= 1).all()
