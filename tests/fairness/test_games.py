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
    social_regret_bound,
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


def _algorithm_1_literally(U, states, predictions, eta):
    """The paper's Algorithm 1 transcribed per player, with costs ``-U`` and weights ``rho``."""
    n_states, n_players, n_actions = U.shape[0], U.shape[1], U.shape[2]
    rho = np.full((n_players, n_states, n_actions), 1.0 / n_actions)
    psi = np.zeros((n_players, n_states, n_actions))  # last cost vector seen in each state
    played = []
    for t, z in enumerate(states):
        W = np.empty((n_players, n_actions))
        for j in range(n_players):
            zh = predictions[t, j]
            w = rho[j, zh] * np.exp(-eta * psi[j, zh])
            W[j] = w / w.sum()
        played.append(W)
        cost = -core.normal_form_utilities(U, int(z), W)  # Phi^j(w^-j)^T Z_t for every player
        for j in range(n_players):
            psi[j, z] = cost[j]
            rho[j, z] = rho[j, z] * np.exp(-eta * cost[j])
            rho[j, z] /= rho[j, z].sum()  # normalising does not change the softmax
    return np.array(played)


def test_pomwu_is_the_papers_algorithm_1_with_per_player_predictions() -> None:
    rng = np.random.default_rng(5)
    U = rng.uniform(-1, 1, size=(3, 3, 2, 2, 2))
    states = rng.integers(0, 3, 60)
    preds = np.where(rng.random((60, 3)) < 0.3, rng.integers(0, 3, (60, 3)), states[:, None])
    W = _algorithm_1_literally(U, states, preds, 0.7)
    run = pomwu(NormalFormGame(U), states, preds, step_size=0.7)
    np.testing.assert_allclose(run.mean_strategy, W.mean(axis=0), atol=1e-12)
    value = [
        np.einsum("pa,pa->p", W[t], core.normal_form_utilities(U, int(states[t]), W[t])) for t in range(60)
    ]
    np.testing.assert_allclose(run.welfare, np.sum(value, axis=1), atol=1e-12)
    assert run.n_prediction_errors == int(np.sum(preds != states[:, None]))


def test_wrong_predictions_never_feed_another_states_instance() -> None:
    """Rounds with a wrong prediction cost regret then, but the realised state's instance still learns.

    First half: every prediction is the other state; second half: all right. With the
    paper's update (feedback to the realised state) the second half is played from
    instances already trained on the right states: regret ~ 0 there. Feeding the
    predicted state's instance instead (this module's reconstruction before the check
    against the paper) left the instances trained on swapped payoffs.
    """
    U = np.zeros((2, 1, 2))
    U[0, 0] = [1.0, 0.0]  # state 0: action 0 pays
    U[1, 0] = [0.0, 1.0]  # state 1: action 1 pays
    game = NormalFormGame(U)
    states = np.random.default_rng(0).integers(0, 2, 400)
    preds = np.r_[1 - states[:200], states[200:]]
    full = pomwu(game, states, preds, step_size=1.0)
    first = pomwu(game, states[:200], preds[:200], step_size=1.0)
    second_half_regret = full.regret[0] - first.regret[0]
    assert first.regret[0] > 150  # wrong predictions: the wrong action nearly every round
    assert second_half_regret < 5  # no unlearning needed once the predictions are right
    # the swapped update would need ~100 rounds per state to unlearn (regret > 50)
    bad = core.run_dynamics(lambda s, X: np.stack([U[s, 0]]), 2, 1, 2, states, preds[:, None], preds, 2, 1.0)
    bad_first = core.run_dynamics(
        lambda s, X: np.stack([U[s, 0]]), 2, 1, 2, states[:200], preds[:200, None], preds[:200], 2, 1.0
    )
    assert bad["regret_true_state"][0] - bad_first["regret_true_state"][0] > 50


@pytest.mark.claims
def test_claim_proposition_7_social_regret_bound_holds_with_the_papers_rate() -> None:
    """Default step size = the paper's 1/(4(J-1)) on utilities scaled to [-1, 1]; Prop. 7 holds.

    Measured (routing, 20 drivers, 3 routes, 1500 rounds, largest latency B = 1.76):
    summed regret 5,636 with perfect predictions <= B * bound = 9,256 (OMWU: 12,684);
    8,313 with 20% wrong predictions (the bound, 5.3e6, grows with L_T). OMWU's summed
    regret grows linearly: 16,720 after 2,000 rounds, 66,429 after 8,000.
    """
    game = make_routing_game(20, 3, 3, random_state=0)
    B = float(np.max(game.free_flow + game.slope))
    states = np.random.default_rng(1).integers(0, 3, 1500)
    for rate in (0.0, 0.2):
        preds = noisy_predictions(states, error_rate=rate, n_states=3, random_state=3)
        run = pomwu(game, states, preds)
        assert run.step_size == pytest.approx(1 / (4 * 19 * B))
        bound = B * social_regret_bound(20, 3, 3, run.n_prediction_errors)
        assert run.regret.sum() <= bound
    # the state-blind baseline's summed regret grows linearly and leaves any constant bound behind
    long_states = np.random.default_rng(1).integers(0, 3, 8000)
    o_short, o_long = omwu(game, long_states[:2000]), omwu(game, long_states)
    assert o_long.regret.sum() > 3.0 * o_short.regret.sum()


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

    Measured (seeds fixed): OMWU regret 1552; POMWU 1.8 / 139 / 283 / 594 / 1296 at
    error rates 0 / 0.05 / 0.1 / 0.2 / 0.4 — linear in the number of wrong predictions
    (Proposition 5's shape: ``(c0 + c1 L_T) / eta + eta (...)``).
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
    with pytest.raises(DataError, match="predictions"):
        pomwu(game, [0, 1], [[0, 1], [1, 0]])  # 5 players, 2 columns
    with pytest.raises(DataError, match="predictions"):
        pomwu(game, [0, 1], [0, 3])
    with pytest.raises(ParameterError, match="n_players"):
        social_regret_bound(1, 2, 2, 0)
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
