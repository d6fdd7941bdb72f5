"""Certified unlearning by noisy fine-tuning (row 003-16): accountant, unlearner, claims, bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import train_test_split

from trustlab.errors import DataError, ModelError, ParameterError, TrustlabError
from trustlab.unlearning._certified_accountant import (
    calibrate_sigmas,
    default_steps,
    epsilon_to_rho,
    pabi_rho,
    rho_to_epsilon,
)
from trustlab.unlearning.certified import (
    NoisyFinetuneUnlearner,
    certificate_epsilon,
    compare_to_retraining,
    membership_advantage,
)


# ---------------------------------------------------------------- accountant (spec oracles)
@pytest.mark.parametrize(
    ("C0", "C1", "lr", "lam", "T", "sigma"),
    [(0.1, 10, 1e-3, 50, 10, 0.077256), (0.01, 10, 1e-4, 750, 6, 0.0077520), (1, 1, 0.01, 0, 100, 0.28284)],
)
def test_steps_and_sigma_oracles(C0, C1, lr, lam, T, sigma) -> None:
    assert default_steps(C0, C1, lr, lam) == T
    for schedule in ("constant", "decreasing"):
        sig = calibrate_sigmas(C0, C1, lr, lam, T, 1.0, schedule)
        assert pabi_rho(C0, C1, lr, lam, sig) == pytest.approx(1.0, rel=1e-9)
    assert calibrate_sigmas(C0, C1, lr, lam, T, 1.0, "constant")[0] == pytest.approx(sigma, rel=1e-4)


def test_rho_to_epsilon_and_gaussian_limit() -> None:
    eps, alpha = rho_to_epsilon(1.0, 1e-5)
    assert eps == pytest.approx(7.077, abs=1e-3) and alpha == pytest.approx(4.18, abs=0.01)
    assert epsilon_to_rho(eps, 1e-5) == pytest.approx(1.0, rel=1e-6)
    # T = 1, lam = 0: the Gaussian mechanism with sensitivity 2 C0 + 2 lr C1, R = s^2 / (2 sigma^2)
    eps1, R = certificate_epsilon(0.5, 2.0, 0.1, 0.0, [1.3])
    assert R == pytest.approx((2 * 0.5 + 2 * 0.1 * 2.0) ** 2 / (2 * 1.3**2))
    assert certificate_epsilon(0.5, 2.0, 0.1, 0.0, [2.6])[0] < eps1  # more noise, smaller epsilon
    assert certificate_epsilon(0.6, 2.0, 0.1, 0.0, [1.3])[0] > eps1  # larger ball, larger epsilon
    assert certificate_epsilon(0.5, 3.0, 0.1, 0.0, [1.3])[0] > eps1


def test_plan_accounts_for_the_grid() -> None:
    plan = NoisyFinetuneUnlearner(C0=10.0, grid_exponent=-20).plan(100)
    assert plan["grid_slack"] == pytest.approx(math.sqrt(100) * 2.0**-20)
    assert plan["renyi_rho"] == pytest.approx(1.0, rel=1e-9) and plan["epsilon"] == pytest.approx(
        7.077, abs=1e-3
    )
    no_slack = calibrate_sigmas(10.0, 1.0, 0.5, 0.5, plan["n_steps"], 1.0, "constant")
    assert np.all(plan["sigmas"] > no_slack)  # the rounding slack costs a little more noise
    assert NoisyFinetuneUnlearner(C0=10.0, epsilon=2.0).plan(10)["epsilon"] == pytest.approx(2.0, rel=1e-6)


# ---------------------------------------------------------------- the unlearner
def _toy(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray, LogisticRegression]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    return X, y, LogisticRegression().fit(X, y)


def test_unlearn_release_and_projection() -> None:
    X, y, model = _toy()
    coef = model.coef_.copy()
    unl = NoisyFinetuneUnlearner(C0=1.0, finetune_iter=0, batch_size=None, random_state=0)
    release = unl.unlearn(model, X, y, forget=np.arange(20))
    assert np.array_equal(model.coef_, coef)  # the model passed in is unchanged
    p = release.parameters
    assert release.guarantee == "certified unlearning" and not release.is_dp
    assert release.delta == 1e-5 and release.epsilon == pytest.approx(7.077, abs=1e-3)
    assert p["n_forget"] == 20 and p["n_retain"] == 280
    assert p["gradient_evaluations_noisy"] == p["n_steps"] * 280 and p["gradient_evaluations_finetune"] == 0
    x = np.r_[release.value.coef_.ravel(), release.value.intercept_]
    assert np.all(x == np.round(x / 2.0**-30) * 2.0**-30)  # outputs on the public noise grid
    assert release.to_dict()["parameters"]["renyi_rho"] == pytest.approx(1.0, rel=1e-9)


@pytest.mark.claims
def test_noisy_phase_destroys_the_start() -> None:
    """Two very different starts in the C0 ball end indistinguishable in mean after the noisy phase."""
    X, y, model = _toy()
    far = LogisticRegression().fit(X, 1 - y)  # the opposite model
    unl = NoisyFinetuneUnlearner(C0=2.0, finetune_iter=0, batch_size=None, grid_exponent=-20)
    a = np.array([unl.unlearn(model, X, y, [0]).value.coef_.ravel() for _ in range(40)])
    b = np.array([unl.unlearn(far, X, y, [0]).value.coef_.ravel() for _ in range(40)])
    sigma = unl.plan(4)["sigmas"][0]
    # the means differ by much less than the starts did (|start gap| ~ 2 C0 = 4)
    assert np.linalg.norm(a.mean(0) - b.mean(0)) < 4 * sigma * math.sqrt(2 / 40) * 3 + 0.5


@pytest.mark.claims
def test_claim_matches_retraining_at_a_fraction_of_compute() -> None:
    """Digits, 20% of the training rows carry wrong labels and are forgotten (epsilon 7.08, delta 1e-5)."""
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16, y, test_size=0.5, random_state=0, stratify=y)
    rng = np.random.default_rng(0)
    forget = rng.random(ytr.size) < 0.2
    yn = ytr.copy()
    yn[forget] = (ytr[forget] + rng.integers(1, 10, forget.sum())) % 10
    with warnings.catch_warnings():  # the original need not have converged: any trained model will do
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LogisticRegression(C=1e3, max_iter=200).fit(Xtr, yn)
    unlearner = NoisyFinetuneUnlearner(C0=400.0, random_state=0)
    out = compare_to_retraining(unlearner, model, Xtr, yn, forget, Xte, yte, retrain_max_iter=2000)
    t = out.table
    n_f, n_t = int(forget.sum()), yte.size
    # 3 sd of the forget accuracy (on the wrong labels) of a model that never saw them: about
    # 1/9 of its errors hit the wrong label, so p <= 0.02 (retraining measures 0.000-0.006)
    tol_f = 3 * math.sqrt(0.02 * 0.98 / n_f)
    tol_t = 3 * math.sqrt(2 * 0.05 * 0.95 / n_t)  # 3 sd of a difference of test accuracies near 0.95
    assert (
        t.loc["original", "forget_accuracy"] - t.loc["retrained", "forget_accuracy"] > tol_f
    )  # the test has power
    assert abs(t.loc["unlearned", "forget_accuracy"] - t.loc["retrained", "forget_accuracy"]) <= tol_f
    assert abs(t.loc["unlearned", "test_accuracy"] - t.loc["retrained", "test_accuracy"]) <= tol_t
    assert t.loc["unlearned", "mia_advantage"] <= t.loc["retrained", "mia_advantage"] + out.mia_noise_level
    assert out.release.epsilon == pytest.approx(7.077, abs=1e-3)
    assert out.compute_ratio < 0.5  # gradient evaluations counted, not time


def test_membership_advantage_detects_memorisation() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 150))
    y = rng.integers(0, 2, 400)  # pure noise labels: only memorisation fits them
    model = LogisticRegression(C=1e4, max_iter=10_000).fit(X[:200], y[:200])
    assert membership_advantage(model, X[:200], y[:200], X[200:], y[200:]) > 0.5
    assert membership_advantage(model, X[300:], y[300:], X[200:300], y[200:300]) < 1.224 * math.sqrt(2 / 100)


# ---------------------------------------------------------------- bad input
def test_bad_input() -> None:
    X, y, model = _toy()
    unl = NoisyFinetuneUnlearner(C0=1.0)
    with pytest.raises(DataError, match="forget set is empty"):
        unl.unlearn(model, X, y, forget=np.array([], dtype=int))
    with pytest.raises(DataError, match="forget set is empty"):
        unl.unlearn(model, X, y, forget=np.zeros(300, dtype=bool))
    with pytest.raises(DataError, match="every row"):
        unl.unlearn(model, X, y, forget=np.ones(300, dtype=bool))
    with pytest.raises(DataError, match=r"\[0, 300\)"):
        unl.unlearn(model, X, y, forget=[300])
    with pytest.raises(ModelError, match="LogisticRegression") as info:
        unl.unlearn(LinearRegression().fit(X, y), X, y, forget=[0])
    assert info.value.argument == "model"
    with pytest.raises(ModelError, match="L1"):
        unl.unlearn(LogisticRegression(l1_ratio=1.0, solver="saga").fit(X, y), X, y, forget=[0])
    with pytest.raises(ParameterError, match="target_rho"):
        NoisyFinetuneUnlearner(C0=1.0, target_rho=0).unlearn(model, X, y, [0])
    with pytest.raises(ParameterError, match="n_steps"):
        NoisyFinetuneUnlearner(C0=1.0, n_steps=0).unlearn(model, X, y, [0])
    with pytest.raises(ParameterError, match="C0"):
        NoisyFinetuneUnlearner(C0=-1.0).unlearn(model, X, y, [0])
    with pytest.raises(ParameterError, match="sigmas"):
        certificate_epsilon(1.0, 1.0, 0.1, 0.0, [0.0])
    with pytest.raises(ParameterError, match="weight_decay"):
        NoisyFinetuneUnlearner(C0=1.0, lr=1.0, weight_decay=1.0).unlearn(model, X, y, [0])
    with pytest.raises(DataError, match="columns"):
        unl.unlearn(model, X[:, :2], y, [0])
    with pytest.raises(DataError, match="labels"):
        unl.unlearn(model, X, y + 5, [0])


FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.lists(st.integers(-3, 400), max_size=5),
    st.lists(st.floats(allow_nan=True), max_size=4),
    st.lists(st.lists(st.floats(allow_nan=True), max_size=3), max_size=3),
)


@FAST
@given(forget=junk, X=junk, y=junk, C0=junk, sigma=junk)
def test_hostile_input_raises_trustlab_errors(forget, X, y, C0, sigma) -> None:
    Xg, yg, model = _toy(60)
    for call in (
        lambda: NoisyFinetuneUnlearner(C0=1.0, finetune_iter=2).unlearn(model, Xg, yg, forget),
        lambda: NoisyFinetuneUnlearner(C0=1.0, finetune_iter=2).unlearn(model, X, y, [0]),
        lambda: NoisyFinetuneUnlearner(C0=C0, n_steps=2, finetune_iter=0).unlearn(model, Xg, yg, [0]),
        lambda: certificate_epsilon(1.0, 1.0, 0.1, 0.0, sigma),
        lambda: membership_advantage(model, X, y, Xg, yg),
    ):
        try:
            call()
        except TrustlabError:
            pass


@pytest.mark.claims
def test_privacy_audit_of_the_certificate() -> None:
    """Worst-case starts (opposite ends of the C0 ball), same retain data: the empirical lower
    bound on epsilon never exceeds the certificate; without noise it would be unbounded."""
    from trustlab.privacy.audit import audit_epsilon

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = (X[:, 0] > 0).astype(int)
    a = LogisticRegression(fit_intercept=False).fit(X, y)
    b = LogisticRegression(fit_intercept=False).fit(X, 1 - y)
    u = np.array([1.0, 0.0])
    a.coef_, b.coef_ = 0.5 * u[None, :], -0.5 * u[None, :]  # both on the C0 sphere, 2 C0 apart
    unl = NoisyFinetuneUnlearner(
        C0=0.5, C1=1.0, lr=0.5, weight_decay=0.0, target_rho=0.01, batch_size=None, finetune_iter=0
    )
    claimed = unl.plan(2)["epsilon"]
    result = audit_epsilon(
        lambda model: float(unl.unlearn(model, X, y, [0]).value.coef_[0] @ u),
        a,
        b,
        n_trials=600,
        delta=1e-5,
    )
    assert result.epsilon_lower <= claimed
