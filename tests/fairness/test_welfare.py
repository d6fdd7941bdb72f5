"""Welfare of prediction vs capacity in screening the worst-off (catalog row 004-05)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.fairness.welfare import (
    capacity_equivalent,
    compare_prediction_capacity,
    prediction_access_ratio,
    screening_value,
    targeting_reach,
)


def _gaussian(n: int, r2: float, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Outcome y (higher = worse), a score with R^2 = r2, and the shared noise."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(3, n))
    score = math.sqrt(r2) * z[0] + math.sqrt(1 - r2) * z[1]
    return z[0], score, z[1]


def test_model_value_matches_simulation() -> None:
    n, beta = 400_000, 0.1
    y, s, _ = _gaussian(n, 0.3, seed=1)
    flags = (y >= np.quantile(y, 1 - beta)).astype(int)
    for alpha in (0.05, 0.1, 0.3, 0.7):  # 0.7: the Owen-T branch with h k < 0
        served = s >= np.quantile(s, 1 - alpha)
        observed = flags[served].sum() / flags.sum()
        v = screening_value(alpha, 0.3, beta)
        sd = math.sqrt(v * (1 - v) / flags.sum())
        assert abs(observed - v) < 4 * sd + 2 / flags.sum(), (alpha, observed, v)
    assert screening_value(0.2, 0.0, 0.1) == pytest.approx(0.2)
    assert screening_value(0.05, 1.0, 0.1) == pytest.approx(0.5)
    assert screening_value(1.0, 0.4, 0.1) == 1.0


def test_ratio_is_the_ratio_of_finite_difference_derivatives() -> None:
    alpha, r2, beta, h = 0.15, 0.3, 0.1, 1e-6
    d_alpha = (screening_value(alpha + h, r2, beta) - screening_value(alpha - h, r2, beta)) / (2 * h)
    d_r2 = (screening_value(alpha, r2 + h, beta) - screening_value(alpha, r2 - h, beta)) / (2 * h)
    assert prediction_access_ratio(alpha, r2, beta) == pytest.approx(d_alpha / d_r2, rel=1e-5)


@pytest.mark.claims
def test_headline_capacity_beats_prediction_except_first_and_last_mile() -> None:
    """The paper's comparison in its Gaussian model, alpha = beta = 10%."""
    par = {
        r2: prediction_access_ratio(0.1, r2, 0.1)
        for r2 in (0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.9, 0.95, 0.999)
    }
    # first mile: from a useless predictor, prediction is the better lever
    assert par[0.001] < 0.3 and par[0.01] < 1
    # the typical range of social-science predictors: one point of capacity beats one point of R^2
    assert all(par[r] > 1 for r in (0.05, 0.1, 0.3, 0.5, 0.9, 0.95))
    assert par[0.3] == pytest.approx(4.06, abs=0.01) and par[0.5] == pytest.approx(4.90, abs=0.01)
    # last mile: near-perfect prediction, prediction wins again
    assert par[0.999] < 1
    # capacity below the worst-off share: no last mile (PAR grows without bound)
    low = [prediction_access_ratio(0.05, r2, 0.1) for r2 in (0.05, 0.5, 0.9, 0.99)]
    assert all(a < b for a, b in itertools.pairwise(low)) and low[0] > 1 and low[-1] > 1000


def test_capacity_equivalent_solves_the_equation_and_matches_first_order() -> None:
    d = capacity_equivalent(0.1, 0.25, 0.1, 0.05)
    assert screening_value(0.1 + d, 0.25, 0.1) == pytest.approx(screening_value(0.1, 0.3, 0.1), abs=1e-9)
    small = capacity_equivalent(0.1, 0.25, 0.1, 1e-4)
    assert small == pytest.approx(1e-4 / prediction_access_ratio(0.1, 0.25, 0.1), rel=0.01)
    assert capacity_equivalent(0.1, 1.0, 0.1, 0.1) == 0.0  # nothing left to gain
    assert capacity_equivalent(0.9, 0.1, 0.1, 1.0) <= 0.1  # capped: everyone served


def test_data_driven_estimates_cover_the_model_truth() -> None:
    y, s, noise = _gaussian(20_000, 0.25, seed=7)
    c = compare_prediction_capacity(
        s, y, capacity=0.1, worst_off_fraction=0.1, delta_r2=0.05, n_bootstrap=100, random_state=0
    )
    iv = c.intervals
    assert c.worst_off_fraction == pytest.approx(0.1)
    assert iv.loc["r2_equivalent", "low"] < 0.25 < iv.loc["r2_equivalent", "high"]
    truth = capacity_equivalent(0.1, 0.25, 0.1, 0.05)
    assert iv.loc["capacity_increase", "low"] < truth < iv.loc["capacity_increase", "high"]
    assert iv.loc["prediction_access_ratio", "low"] < prediction_access_ratio(0.1, 0.25, 0.1)
    assert prediction_access_ratio(0.1, 0.25, 0.1) < iv.loc["prediction_access_ratio", "high"]
    # a genuinely better predictor (R^2 = 0.35) on the same rows: measured gain
    better = math.sqrt(0.35) * y + math.sqrt(0.65) * noise
    m = compare_prediction_capacity(
        s, y, capacity=0.1, worst_off_fraction=0.1, improved_scores=better, n_bootstrap=0
    )
    gain = screening_value(0.1, 0.35, 0.1) - screening_value(0.1, 0.25, 0.1)
    assert m.method == "improved_scores" and abs(m.reach_gain - gain) < 4 * math.sqrt(0.3 * 0.7 / 2000)
    assert m.capacity_increase > 0


def test_targeting_reach_per_group_ties_and_intervals() -> None:
    s = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.1])
    y = np.array([1, 0, 1, 1, 0, 0])
    r = targeting_reach(s, y, capacity=0.5, sensitive_features=list("aabbab"), delta_r2=None)
    t = r.table
    assert list(t.index) == ["all", "a", "b"]
    np.testing.assert_allclose(t["reach"], [2 / 3, 1.0, 0.5])
    np.testing.assert_allclose(t["served_share"], [0.5, 2 / 3, 1 / 3])
    assert (t["reach_low"] <= t["reach"]).all() and (t["reach"] <= t["reach_high"]).all()
    assert r.comparison is None
    # all scores tied: every row gets capacity / 1 of a place, reach = capacity
    tied = targeting_reach(np.zeros(10), np.r_[np.ones(3), np.zeros(7)], capacity=0.3, delta_r2=None)
    assert tied.table.loc["all", "reach"] == pytest.approx(0.3)
    # Wilson interval at 95% for 1 of 2
    assert t.loc["b", "reach_low"] == pytest.approx(0.0945, abs=1e-3)


def test_embedded_data_runs_per_group() -> None:
    from sklearn.linear_model import LogisticRegression

    from trustlab.datasets import load_default

    df, info, _ = load_default()
    X = df.drop(columns=[info.target]).select_dtypes("number")
    worst = (df[info.target] == "no").astype(int).to_numpy()  # eligible but not receiving benefits
    risk = LogisticRegression(max_iter=1000).fit(X, worst).predict_proba(X)[:, 1]
    r = targeting_reach(
        risk, worst, capacity=0.2, sensitive_features=df["sex"], n_bootstrap=20, random_state=0
    )
    assert set(r.table.index) == {"all", *df["sex"].unique()}
    assert 0.2 < r.table.loc["all", "reach"] < 1
    assert r.comparison is not None and r.comparison.capacity_increase >= 0


def test_bad_input_names_the_argument() -> None:
    s, y = np.linspace(0, 1, 20), np.r_[np.ones(5), np.zeros(15)]
    for cap in (0, 1.5, -0.1, math.nan):
        with pytest.raises(ParameterError, match="capacity"):
            targeting_reach(s, y, capacity=cap)
    with pytest.raises(DataError, match="NaN"):
        targeting_reach(np.r_[np.nan, s[1:]], y, capacity=0.2)
    with pytest.raises(DataError, match="group 'z' has no worst-off"):
        targeting_reach(s, y, capacity=0.2, sensitive_features=["a"] * 10 + ["z"] * 10, delta_r2=None)
    ok = targeting_reach(
        s, y, capacity=0.2, sensitive_features=["a"] * 10 + ["z"] * 10, delta_r2=None, empty_groups="drop"
    )
    assert list(ok.table.index) == ["all", "a"]
    with pytest.raises(DataError, match="worst_off_fraction"):
        targeting_reach(s, np.linspace(0, 3, 20), capacity=0.2)
    with pytest.raises(DataError, match="one per row"):
        targeting_reach(s, y[:5], capacity=0.2)
    with pytest.raises(DataError, match="no one"):
        compare_prediction_capacity(s, np.zeros(20), capacity=0.2)
    with pytest.raises(ParameterError, match="r2"):
        prediction_access_ratio(0.1, 1.0, 0.1)
    with pytest.raises(ParameterError, match="worst_off_fraction"):
        screening_value(0.1, 0.2, 0.0)
    with pytest.raises(DataError, match="improved_scores"):
        compare_prediction_capacity(s, y, capacity=0.2, improved_scores=s[:3])


@settings(max_examples=40, deadline=None)
@given(
    scores=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8),
    flags=st.lists(st.sampled_from([0, 1, 0.5, math.nan]), max_size=8),
    capacity=st.one_of(st.floats(allow_nan=True), st.integers(-2, 2), st.just("0.1")),
)
def test_fuzz_only_trustlab_errors(scores: list, flags: list, capacity: object) -> None:
    for call in (
        lambda: targeting_reach(scores, flags, capacity=capacity, delta_r2=None),
        lambda: compare_prediction_capacity(scores, flags, capacity=capacity, n_bootstrap=2),
        lambda: screening_value(capacity, 0.2, 0.1),
        lambda: capacity_equivalent(capacity, 0.2, 0.1, 0.01),
        lambda: prediction_access_ratio(capacity, 0.2, 0.1),
    ):
        try:
            call()
        except TrustlabError:
            pass


# ------------------------------------------- the paper's residual scaling (its Appendix B.3)
def test_residual_scaling_raises_r2_exactly_and_keeps_the_residual_shape() -> None:
    from trustlab.fairness import residual_scaled_scores

    rng = np.random.default_rng(3)
    p = rng.normal(size=5000)
    y = p + rng.standard_t(4, size=5000)  # heavy-tailed residuals: their shape must survive

    def r2(q: np.ndarray) -> float:
        return float(1 - ((y - q) ** 2).sum() / ((y - y.mean()) ** 2).sum())

    better = residual_scaled_scores(p, y, 0.07)
    assert r2(better) - r2(p) == pytest.approx(0.07, abs=1e-12)
    ratio = (y - better) / (y - p)
    assert np.ptp(ratio) < 1e-12 and 0 < ratio[0] < 1  # residuals scaled by one factor (1 - delta)
    with pytest.raises(DataError, match="exceeds 1 - R"):
        residual_scaled_scores(p, y, 1 - r2(p) + 0.01)


def test_compare_with_residual_scaling_matches_the_gaussian_model() -> None:
    """In the paper's Gaussian model the residual-scaled predictor reaches what the model
    predicts at its correlation (the scaled predictor's corr^2 is 0.302, not 0.300)."""
    from trustlab.fairness import residual_scaled_scores

    rng = np.random.default_rng(0)
    n = 100_000
    yhat = 0.5 * rng.normal(size=n)
    y = yhat + np.sqrt(0.75) * rng.normal(size=n)  # R^2 = 0.25
    c = compare_prediction_capacity(
        yhat,
        y,
        capacity=0.1,
        worst_off_fraction=0.1,
        delta_r2=0.05,
        improvement="residual_scaling",
        n_bootstrap=0,
    )
    assert c.method == "residual_scaling" and c.delta_r2 == 0.05
    same = compare_prediction_capacity(
        yhat,
        y,
        capacity=0.1,
        worst_off_fraction=0.1,
        improved_scores=residual_scaled_scores(yhat, y, 0.05),
        n_bootstrap=0,
    )
    assert c.reach_gain == same.reach_gain and c.capacity_increase == same.capacity_increase
    better = residual_scaled_scores(yhat, y, 0.05)
    r2_new = float(np.corrcoef(better, y)[0, 1] ** 2)
    r2_old = float(np.corrcoef(yhat, y)[0, 1] ** 2)
    expected = screening_value(0.1, r2_new, 0.1) - screening_value(0.1, r2_old, 0.1)
    # 10,000 worst-off: a reach has standard error 0.003; the gain is a paired difference
    assert c.reach_gain == pytest.approx(expected, abs=0.006)
    assert c.capacity_increase > 0


def test_finite_step_par_is_the_papers_equation_3() -> None:
    """Eq. 3 with Delta_alpha = Delta_R2 = delta; its limit is the local ratio."""
    a, r2, b, d = 0.2, 0.15, 0.2, 0.1
    eq3 = (screening_value(a + d, r2, b) - screening_value(a, r2, b)) / (
        screening_value(a, r2 + d, b) - screening_value(a, r2, b)
    )
    assert prediction_access_ratio(a, r2, b, delta=d) == pytest.approx(eq3, rel=1e-12)
    assert prediction_access_ratio(a, r2, b, delta=1e-7) == pytest.approx(
        prediction_access_ratio(a, r2, b), rel=1e-5
    )


@pytest.mark.claims
def test_proposition_3_3_local_par_at_least_one_on_its_ranges() -> None:
    """Proposition 3.3: local PAR >= 1 for R^2 in (0.15, 0.85), beta in (0.03, 0.5), alpha <= beta,
    or R^2 in (0.2, 0.5), beta >= 0.15, alpha <= 0.5 (grids inside the open ranges)."""
    low = min(
        prediction_access_ratio(f * b, r2, b)
        for r2 in np.linspace(0.16, 0.84, 8)
        for b in np.linspace(0.035, 0.49, 8)
        for f in np.linspace(0.02, 1.0, 8)
    )
    assert low >= 1.0
    low2 = min(
        prediction_access_ratio(a, r2, b)
        for r2 in np.linspace(0.21, 0.49, 6)
        for b in np.linspace(0.15, 0.95, 8)
        for a in np.linspace(0.01, 0.5, 8)
    )
    assert low2 >= 1.0
