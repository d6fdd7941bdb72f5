"""POMWU in time-varying games (Capitaine et al., ICML 2025): utilities, dynamics, the regret claim."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.fairness import _games_core as core
from trustlab.fairness.games import (
    CongestionGame,
    NormalFormGame,
    make_routing_game,
    noisy_predictions,
    omwu,
    pomwu,
)


def test_normal_form_utilities_match_brute_force() -> None:
    rng = np.random.default_rng(0)
    U = rng.uniform(size=(2, 3, 3, 3, 3))
    X = rng.dirichlet(np.ones(3), size=3)
    got = core.normal_form_utilities(U, 1, X)
    want = np.zeros((3, 3))
    for profile in itertools.product(range(3), repeat=3):
        for i in range(3):
            p_others = np.prod([X[j, profile[j]] for j in range(3) if j != i])
            want[i, profile[i]] += p_others * U[1, i][profile]
    np.testing.assert_allclose(got, want, atol=1e-12)
    # two players: u_0 = A x_1, u_1 = B^T x_0
    U2 = rng.uniform(size=(1, 2, 4, 4))
    X2 = rng.dirichlet(np.ones(4), size=2)
    got2 = core.normal_form_utilities(U2, 0, X2)
    np.testing.assert_allclose(got2[0], U2[0, 0] @ X2[1])
    np.testing.assert_allclose(got2[1], U2[0, 1].T @ X2[0])


def test_congestion_utilities_match_brute_force() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.uniform(size=(1, 3)), rng.uniform(size=(1, 3))
    X = rng.dirichlet(np.ones(3), size=4)
    got = core.congestion_utilities(a, b, 0, X)
    for i in range(4):
        expected_load = X.sum(0) - X[i]
        np.testing.assert_allclose(got[i], -(a[0] + b[0] * (expected_load + 1) / 4))


def test_pomwu_with_one_state_is_omwu_and_optimism_converges_in_zero_sum() -> None:
    rng = np.random.default_rng(2)
    U = rng.uniform(size=(1, 2, 3, 3))
    states = np.zeros(200, int)
    a, b = (
        pomwu(NormalFormGame(U), states, states, step_size=0.3),
        omwu(NormalFormGame(U), states, step_size=0.3),
    )
    np.testing.assert_allclose(a.welfare, b.welfare)
    np.testing.assert_allclose(a.regret, b.regret)
    # a constant-sum game whose equilibrium (1/3, 2/3) is not the uniform start: optimistic MWU's
    # last iterate converges (plain MWU's spirals out, Nash gap 0.5-1 after 4000 rounds)
    A = np.array([[1.0, 0.0], [0.0, 0.5]])
    game = NormalFormGame(np.stack([A, 1 - A])[None])
    run = omwu(game, np.zeros(4000, int), step_size=0.5)
    np.testing.assert_allclose(run.mean_strategy, [[1 / 3, 2 / 3], [1 / 3, 2 / 3]], atol=0.01)
    assert run.regret_static.max() < 2.0
    assert run.nash_gap[-100:].max() < 1e-3


def _regret_by_error(game, states, rates, eta, seeds=3):
    out = []
    for rate in rates:
        runs = [
            pomwu(
                game,
                states,
                noisy_predictions(states, error_rate=rate, n_states=3, random_state=10 + s),
                step_size=eta,
            )
            for s in range(seeds)
        ]
        out.append(
            (
                np.mean([r.regret.max() for r in runs]),
                np.mean([r.n_prediction_errors for r in runs]),
                np.mean([r.welfare.mean() for r in runs]),
            )
        )
    return np.array(out)


@pytest.mark.claims
def test_claim_regret_grows_with_prediction_error_and_beats_omwu_when_good() -> None:
    """Traffic routing (50 drivers, 4 routes, 3 states drawn each round), T = 3000.

    Measured (seeds fixed): OMWU regret 1552; POMWU 1.8 / 185 / 362 / 708 / 1253 at
    error rates 0 / 0.05 / 0.1 / 0.2 / 0.4 — linear in the number of wrong predictions
    (the bound's shape: a static-game term plus a term per prediction error).
    """
    game = make_routing_game(50, 4, 3, random_state=0)
    states = np.random.default_rng(1).integers(0, 3, 3000)
    base = omwu(game, states, step_size=2.0)
    rates = [0.0, 0.05, 0.1, 0.2, 0.4]
    res = _regret_by_error(game, states, rates, eta=2.0)
    regret, errors, welfare = res[:, 0], res[:, 1], res[:, 2]
    assert regret[0] < 0.01 * base.regret.max()  # perfect predictions: static-game regret
    assert regret[2] < 0.5 * base.regret.max()  # 10% wrong: still far better than OMWU
    assert np.all(np.diff(regret) > 0)  # more error, more regret
    assert np.all(np.diff(welfare) < 0)  # ... and less social welfare
    slope, intercept = np.polyfit(errors, regret, 1)
    resid = regret - (slope * errors + intercept)
    r2 = 1 - resid.var() / regret.var()
    assert r2 > 0.98 and slope > 0  # regret ~ c0 + c1 * (number of prediction errors)
    assert abs(intercept) < 0.1 * regret[-1]


@pytest.mark.claims
def test_claim_regret_with_good_predictions_does_not_grow_with_time() -> None:
    game = make_routing_game(30, 3, 3, random_state=3)
    states = np.random.default_rng(4).integers(0, 3, 4000)
    short, long_ = states[:1000], states
    p_short = pomwu(game, short, short, step_size=2.0).regret.max()
    p_long = pomwu(game, long_, long_, step_size=2.0).regret.max()
    o_short = omwu(game, short, step_size=2.0).regret.max()
    o_long = omwu(game, long_, step_size=2.0).regret.max()
    assert p_long < 2.0 * max(p_short, 1.0)  # O(1): far from the 4x of linear growth
    assert o_long > 3.0 * o_short  # the state-blind learner's regret is linear in T


@pytest.mark.claims
def test_claim_normal_form_game() -> None:
    game = NormalFormGame(np.random.default_rng(0).uniform(size=(3, 3, 4, 4, 4)))
    states = np.random.default_rng(1).integers(0, 3, 1500)
    base = omwu(game, states, step_size=1.0).regret.max()
    res = _regret_by_error(game, states, [0.0, 0.1, 0.4], eta=1.0, seeds=2)
    assert res[0, 0] < 0.05 * base and res[1, 0] < 0.2 * base
    assert res[2, 0] > res[0, 0]


def test_bad_input() -> None:
    game = make_routing_game(5, 2, 2, random_state=0)
    with pytest.raises(ParameterError, match="step_size"):
        pomwu(game, [0, 1], [0, 1], step_size=0.0)
    with pytest.raises(ParameterError, match="step_size"):
        omwu(game, [0, 1], step_size=-1.0)
    with pytest.raises(ParameterError, match="game"):
        omwu(np.zeros((2, 2, 2, 2)), [0, 1])
    with pytest.raises(DataError, match="payoffs"):
        omwu(NormalFormGame(np.zeros((2, 3, 2, 2))), [0, 1])  # 3 players, 2 action axes
    with pytest.raises(DataError, match="payoffs"):
        omwu(NormalFormGame(np.zeros((2, 2, 2, 3))), [0, 1])  # unequal action axes
    with pytest.raises(DataError, match="payoffs"):
        omwu(NormalFormGame(np.full((1, 2, 2, 2), np.nan)), [0])
    with pytest.raises(DataError, match="states"):
        omwu(game, [0, 2])
    with pytest.raises(DataError, match="states"):
        omwu(game, [])
    with pytest.raises(DataError, match="predictions"):
        pomwu(game, [0, 1], [0])
    with pytest.raises(DataError, match="game"):
        omwu(CongestionGame(np.ones((2, 2)), -np.ones((2, 2)), 3), [0])
    with pytest.raises(DataError, match="game"):
        omwu(CongestionGame(np.ones((2, 2)), np.ones((2, 2)), 0), [0])
    with pytest.raises(ParameterError, match="error_rate"):
        noisy_predictions([0, 1], error_rate=1.5, n_states=2)


@settings(max_examples=40, deadline=None)
@given(
    payoffs=hnp.arrays(
        np.float64, hnp.array_shapes(min_dims=0, max_dims=5, max_side=3), elements=st.floats()
    ),
    states=hnp.arrays(np.float64, hnp.array_shapes(max_dims=2, max_side=4), elements=st.floats()),
    eta=st.floats(allow_nan=True, allow_infinity=True),
)
def test_fuzz_only_trustlab_errors(payoffs, states, eta) -> None:
    for call in (
        lambda: omwu(NormalFormGame(payoffs), states, step_size=eta),
        lambda: pomwu(NormalFormGame(payoffs), states, states, step_size=eta),
        lambda: omwu(CongestionGame(payoffs, payoffs, 2), states, step_size=eta),
    ):
        try:
            call()
        except TrustlabError:
            pass


@settings(max_examples=40, deadline=None)
@given(
    states=hnp.arrays(np.float64, hnp.array_shapes(max_dims=2, max_side=4), elements=st.floats()),
    rate=st.floats(allow_nan=True, allow_infinity=True),
    k=st.one_of(st.integers(-2, 4), st.floats()),
)
def test_fuzz_generators_only_trustlab_errors(states, rate, k) -> None:
    for call in (
        lambda: noisy_predictions(states, error_rate=rate, n_states=k),
        lambda: make_routing_game(k, k, k, random_state=0),
    ):
        try:
            call()
        except TrustlabError:
            pass
