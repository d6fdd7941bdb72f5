"""Multi-head attention learns debiased GD in context (He, Pan, Chen & Yang, ICML 2025; 003-18)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import TrustlabError
from trustlab.theory import (
    ICLAttention,
    attention_pattern,
    compare_with_bayes,
    debiased_gd_predict,
    debiased_gd_risk,
    linear_regression_prompts,
    manifold_output_weight,
    simulate_debiased_gd,
    train_icl_attention,
)

D, N = 5, 40  # the paper's experiment: beta ~ N(0, I/d), sigma^2 = 0.1 (the defaults)


@pytest.fixture(scope="module")
def trained():
    pytest.importorskip("torch")
    two = train_icl_attention(2, D, N, steps=600, batch_size=64, learning_rate=2e-2)
    one = train_icl_attention(1, D, N, steps=300, batch_size=64, learning_rate=2e-2)
    return two, one


@pytest.mark.claims
def test_claim_two_heads_learn_debiased_gd_and_beat_one_head(trained) -> None:
    """Short training (600 Adam steps, d 5, L 40, sigma^2 0.1): the heads split into +omega/-omega
    with matching signs of mu, which cancel; the prediction approaches debiased GD, and the risk
    beats a single head by > 3 paired SEs."""
    two, one = trained
    c2 = simulate_debiased_gd(two, N, n_test=8000)
    c1 = simulate_debiased_gd(one, N, n_test=8000)
    p = c2.pattern
    assert p.omega[0] * p.omega[1] < 0 and p.mu[0] * p.mu[1] < 0  # the heads split
    assert np.all(np.sign(p.omega) == np.sign(p.mu))  # sign matching
    assert p.zero_sum < 0.25 and p.diagonal_spread < 0.25 and p.off_diagonal < 0.4
    # same test prompts (same seed): a paired comparison of squared errors
    x, y, xq, yq = linear_regression_prompts(8000, N, D, random_state=12345)
    diff = (one.predict(x, y, xq) - yq) ** 2 - (two.predict(x, y, xq) - yq) ** 2
    assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(len(diff))
    # one head keeps the bias mu * ybar: it is further from debiased GD than the pair
    assert c2.agreement < 0.5 * c1.agreement


@pytest.mark.claims
def test_claim_two_heads_sit_near_debiased_gd_a_factor_above_bayes(trained) -> None:
    """Same short training, 8000 test prompts: Bayes < two heads < one head (paired, 3 SE); two
    heads are within 60 % of the debiased-GD-to-Bayes gap above debiased GD (position < 1.6; 1.42
    measured) and within 2.6x Bayes (2.43), one head beyond 2x the gap (2.57) and 3.3x Bayes."""
    two, one = trained
    c2, c1 = compare_with_bayes(two, N, n_test=8000), compare_with_bayes(one, N, n_test=8000)
    assert c2.model_risk - c2.bayes_risk > 3 * c2.excess_se["bayes"]
    assert c2.bayes_risk < c2.debiased_gd_risk < c1.model_risk
    assert 1.0 < c2.position < 1.6 and c2.ratio_to_bayes < 2.6
    assert c1.position > 2.0 and c1.ratio_to_bayes > 3.3


def test_closed_form_risk_equals_monte_carlo() -> None:
    """The Wishart closed form vs 40,000 prompts, within 4 standard errors, for noise 0 and 0.25."""
    for noise in (0.0, 0.25):
        prior = {"signal_variance": 1.0, "noise_variance": noise}
        x, y, xq, yq = linear_regression_prompts(40_000, 10, 3, random_state=1, **prior)
        for eta in (0.3, None):
            r = debiased_gd_risk(10, 3, step_size=eta, **prior)
            err = (debiased_gd_predict(x, y, xq, r.step_size) - yq) ** 2
            assert abs(err.mean() - r.risk) < 4 * err.std(ddof=1) / np.sqrt(len(err))
        # plain GD at its optimum eta_v = n tau^2 / (tau^2 (n + 1 + d) + sigma^2)
        plain = (np.einsum("pn,pnd->pd", y, x) / 10 * xq).sum(axis=1) * 10 / (14 + noise)
        err = (plain - yq) ** 2
        assert abs(err.mean() - r.vanilla_optimal_risk) < 4 * err.std(ddof=1) / np.sqrt(len(err))
    r = debiased_gd_risk(20, 4, signal_variance=1.0, noise_variance=0.0)
    assert r.optimal_step_size == pytest.approx(20 / 24)
    # the paper's prior N(0, I/d): eta* = 1 / (1 + (1 + sigma^2) d / L) (Theorem 1(2))
    assert debiased_gd_risk(40, 5).optimal_step_size == pytest.approx(1 / (1 + 1.1 * 5 / 40))
    assert r.optimal_risk < r.risk + 1e-12 and r.optimal_risk < r.null_risk
    assert debiased_gd_risk(
        20, 4, step_size=0.0, signal_variance=1.0, noise_variance=0.0
    ).risk == pytest.approx(r.null_risk)


def test_pattern_of_an_exact_construction_is_debiased_gd() -> None:
    """A hand-built +omega/-omega, +mu/-mu pair agrees with debiased GD to O(omega^2)."""
    kq = np.zeros((2, D + 1, D))
    kq[0, :D], kq[1, :D] = 0.01 * np.eye(D), -0.01 * np.eye(D)
    ov = np.zeros((2, D + 1))
    ov[:, D] = [40.0, -40.0]
    c = simulate_debiased_gd(ICLAttention(kq, ov, np.zeros(1)), N, n_test=4000)
    assert c.pattern.step_size == pytest.approx(0.8)
    assert c.agreement < 1e-3
    assert c.model_risk == pytest.approx(c.theory_mc_risk, rel=0.02)


def test_bad_input() -> None:
    x, y, xq, _ = linear_regression_prompts(4, 5, 2)
    with pytest.raises(TrustlabError, match="n_context"):
        linear_regression_prompts(4, 1, 2)
    with pytest.raises(TrustlabError, match="noise_variance"):
        debiased_gd_risk(5, 2, noise_variance=-1.0)
    with pytest.raises(TrustlabError, match="y"):
        debiased_gd_predict(x, y[:, :3], xq, 1.0)
    bad = x.copy()
    bad[0, 0, 0] = np.inf
    with pytest.raises(TrustlabError, match="X"):
        debiased_gd_predict(bad, y, xq, 1.0)
    with pytest.raises(TrustlabError, match="model"):
        attention_pattern("not a model")  # type: ignore[arg-type]
    model = ICLAttention(np.zeros((1, 4, 3)), np.zeros((1, 4)), np.zeros(1))
    with pytest.raises(TrustlabError, match="X"):
        model.predict(x, y, xq)
    with pytest.raises(TrustlabError, match="n_heads"):
        train_icl_attention(0)


@pytest.mark.slow
@pytest.mark.claims
def test_claim_converged_pattern_matches_the_theory_slow() -> None:
    """1500 Adam steps at the paper's setting, H = 1, 2, 3 (~75 s on a busy machine): zero-sum,
    sign-matching, diagonal pattern sharp; the positive heads' mu on the solution manifold
    mu_gamma (within 3 %); |omega| falls during training; learned eta near eta*; risk within
    10 % of debiased GD at eta*, at most 1.2 of the debiased-GD-to-Bayes gap above it, 2.3x
    Bayes, far below one head."""
    one = train_icl_attention(1, D, N, steps=1500, batch_size=256, learning_rate=1e-2)
    c1 = simulate_debiased_gd(one, N)
    for heads in (2, 3):
        model = train_icl_attention(
            heads, D, N, steps=1500, batch_size=256, learning_rate=1e-2, record_every=50
        )
        c = simulate_debiased_gd(model, N)
        p = c.pattern
        assert p.zero_sum < 0.03 and p.diagonal_spread < 0.1 and p.other_entries < 0.1
        assert np.all(np.sign(p.omega) == np.sign(p.mu))
        gamma = np.abs(p.omega).mean()
        assert np.abs(p.omega).max() < 1.05 * gamma  # homogeneous |omega_h|
        assert p.mu[p.mu > 0].sum() == pytest.approx(manifold_output_weight(gamma), rel=0.03)
        assert np.abs(model.trajectory[2, 0]).max() > 1.5 * gamma  # |omega| rose early, then fell
        assert p.step_size == pytest.approx(c.optimal.optimal_step_size, rel=0.05)
        assert c.agreement < 0.05
        b = compare_with_bayes(model, N)
        assert b.model_risk < 1.1 * b.debiased_gd_risk and b.position < 1.2 and b.ratio_to_bayes < 2.3
        assert c.model_risk + 3 * c.risk_se < c1.model_risk
        assert p.off_diagonal < (0.15 if heads == 2 else 0.5)  # the third head sharpens slower


# modest magnitudes (huge valid inputs may overflow to inf legitimately) plus the bad values
_BAD_OR_MODEST = st.one_of(st.floats(-1e6, 1e6), st.sampled_from([float("nan"), float("inf"), -float("inf")]))


@settings(max_examples=60, deadline=None)
@given(
    n=st.one_of(st.integers(-1, 6), st.floats(allow_nan=True), st.none()),
    d=st.one_of(st.integers(-1, 4), st.just("3")),
    eta=st.one_of(_BAD_OR_MODEST, st.none()),
    noise=_BAD_OR_MODEST,
    values=st.lists(_BAD_OR_MODEST, min_size=0, max_size=8),
)
def test_closed_forms_raise_only_trustlab_errors(n, d, eta, noise, values) -> None:
    try:
        r = debiased_gd_risk(n, d, step_size=eta, noise_variance=noise)
        assert np.isfinite(r.risk) and r.optimal_risk <= r.risk + 1e-9
    except TrustlabError:
        pass
    try:
        x = np.array(values[:4], dtype=float).reshape(1, -1, 1) if len(values) >= 4 else values
        out = debiased_gd_predict(x, np.ones((1, 4)), [[1.0]], 1.0 if eta is None else eta)
        assert np.all(np.isfinite(out))
    except TrustlabError:
        pass
