"""Prediction-aware learning in time-varying games: POMWU (Capitaine et al., ICML 2025).

The game's payoffs depend on a state of nature ``theta_t`` that changes every round;
each player predicts it (``theta_hat_t``) before playing. :func:`pomwu` runs the
paper's Algorithm 1 — one optimistic-MWU instance per state; a player plays from the
instance of its *predicted* state and, once the state is revealed, feeds the round's
utilities to the instance of the *realised* state — and :func:`omwu` the plain
optimistic MWU baseline that ignores the state. Both report each player's contextual
regret (against the best state-dependent action, the paper's eq. 4), the static
external regret, social welfare and the Nash gap per round; :func:`social_regret_bound`
is the paper's Proposition 7. Games: :class:`NormalFormGame` (payoff tensors) and
:class:`CongestionGame` (traffic routing on parallel routes, vectorised over players).
See docs/fairness/games.md.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.fairness import _games_core as core

__all__ = [
    "CongestionGame",
    "GameRun",
    "NormalFormGame",
    "make_routing_game",
    "noisy_predictions",
    "omwu",
    "pomwu",
    "social_regret_bound",
]


@dataclass(frozen=True)
class NormalFormGame:
    """A finite game whose payoffs depend on a state of nature.

    Parameters
    ----------
    payoffs : numpy.ndarray of shape (n_states, n_players, n_actions, ..., n_actions)
        ``payoffs[s, i, a_1, ..., a_P]``: player ``i``'s utility in state ``s`` when the
        players play ``a_1..a_P`` (one action axis per player, all of the same length).

    Examples
    --------
    >>> import numpy as np
    >>> game = NormalFormGame(np.zeros((2, 2, 3, 3)))
    >>> game.payoffs.shape
    (2, 2, 3, 3)
    """

    payoffs: np.ndarray


@dataclass(frozen=True)
class CongestionGame:
    """Atomic routing: ``n_players`` each send one unit over one of ``n_routes`` parallel routes.

    Route ``r`` has latency ``free_flow[s, r] + slope[s, r] * load_r / n_players`` in state
    ``s`` (``load_r`` = players on it); a player's utility is minus its latency.

    Parameters
    ----------
    free_flow : numpy.ndarray of shape (n_states, n_routes)
        Latency of an empty route (>= 0).
    slope : numpy.ndarray of shape (n_states, n_routes)
        Latency added when every player takes the route (>= 0).
    n_players : int
        Number of players (>= 1).

    Examples
    --------
    >>> game = make_routing_game(n_players=10, n_routes=3, n_states=2, random_state=0)
    >>> game.free_flow.shape, game.n_players
    ((2, 3), 10)
    """

    free_flow: np.ndarray
    slope: np.ndarray
    n_players: int


@dataclass(frozen=True)
class GameRun:
    """Outcome of a run of (P)OMWU.

    Attributes
    ----------
    regret : numpy.ndarray of shape (n_players,)
        Regret against the best mapping from the *true* state to an action:
        ``max_pi sum_t u_t(pi(theta_t)) - sum_t <x_t, u_t>``.
    regret_predicted : numpy.ndarray of shape (n_players,)
        Regret against the best mapping from the context the player used (the
        predicted state for POMWU; a single context for OMWU, i.e. static regret).
    regret_static : numpy.ndarray of shape (n_players,)
        External regret against the best fixed action.
    welfare : numpy.ndarray of shape (n_rounds,)
        Sum of the players' expected utilities per round.
    nash_gap : numpy.ndarray of shape (n_rounds,)
        Per round, the largest gain a player would get from a best response.
    mean_strategy : numpy.ndarray of shape (n_players, n_actions)
        Average mixed strategy over the rounds.
    n_prediction_errors : int
        The paper's ``L_T``: mispredictions summed over players (``sum_j L_T^j``; 0
        for OMWU).
    step_size : float
        The learning rate used.

    See Also
    --------
    pomwu, omwu
    """

    regret: np.ndarray
    regret_predicted: np.ndarray
    regret_static: np.ndarray
    welfare: np.ndarray
    nash_gap: np.ndarray
    mean_strategy: np.ndarray
    n_prediction_errors: int
    step_size: float


def _game(game: Any) -> tuple[Any, int, int, int]:
    """Check a game; return ``(utilities(state, X), n_states, n_players, n_actions)``."""
    if isinstance(game, NormalFormGame):
        U = check_numeric_array(game.payoffs, "game.payoffs")
        if U.ndim < 3 or U.shape[1] != U.ndim - 2 or len(set(U.shape[2:])) != 1 or U.shape[2] < 1:
            raise DataError(
                "game.payoffs must have shape (n_states, n_players, n_actions, ..., n_actions) with one "
                f"action axis per player, all of one length; got shape {U.shape}.",
                argument="game",
            )
        if U.ndim - 2 > 8 or U.size > 5 * 10**7:
            raise DataError(
                "game.payoffs is too large for exact expected utilities (> 5e7 entries).", argument="game"
            )
        return partial(core.normal_form_utilities, U), U.shape[0], U.shape[1], U.shape[2]
    if isinstance(game, CongestionGame):
        a = check_numeric_array(game.free_flow, "game.free_flow", ndim=2)
        b = check_numeric_array(game.slope, "game.slope", ndim=2)
        if a.shape != b.shape or a.shape[1] < 1:
            raise DataError(
                f"game.free_flow {a.shape} and game.slope {b.shape} must both be (n_states, n_routes).",
                argument="game",
            )
        if (a < 0).any() or (b < 0).any():
            raise DataError("game latencies (free_flow, slope) must be >= 0.", argument="game")
        p = game.n_players
        if isinstance(p, bool) or not isinstance(p, numbers.Integral) or p < 1:
            raise DataError(f"game.n_players must be an int >= 1; got {p!r}.", argument="game")
        return partial(core.congestion_utilities, a, b), a.shape[0], int(p), a.shape[1]
    raise ParameterError(
        f"game must be a NormalFormGame or a CongestionGame; got {type(game).__name__}.", argument="game"
    )


def _states(states: Any, n_states: int, name: str, n: int | None = None) -> np.ndarray:
    arr = check_numeric_array(states, name, ndim=1)
    if not np.all(arr == np.round(arr)) or (arr < 0).any() or (arr >= n_states).any():
        raise DataError(f"{name} must hold state indices 0..{n_states - 1}.", argument=name)
    if n is not None and arr.size != n:
        raise DataError(
            f"{name} has {arr.size} entries but states has {n}; pass one per round.", argument=name
        )
    return arr.astype(np.int64)


def _predictions(predictions: Any, n_states: int, n_rounds: int, n_players: int) -> np.ndarray:
    """Predictions as an ``(n_rounds, n_players)`` int array (one column shared by all if 1-D)."""
    arr = check_numeric_array(predictions, "predictions")
    if arr.ndim == 1:
        arr = np.repeat(arr[:, None], n_players, axis=1)
    elif arr.ndim != 2 or arr.shape[1] != n_players:
        raise DataError(
            f"predictions must have shape (n_rounds,) or (n_rounds, {n_players}); got {arr.shape}.",
            argument="predictions",
        )
    if arr.shape[0] != n_rounds:
        raise DataError(
            f"predictions has {arr.shape[0]} rounds but states has {n_rounds}; pass one per round.",
            argument="predictions",
        )
    if not np.all(arr == np.round(arr)) or (arr < 0).any() or (arr >= n_states).any():
        raise DataError(f"predictions must hold state indices 0..{n_states - 1}.", argument="predictions")
    return arr.astype(np.int64)


def _payoff_bound(game: Any) -> float:
    """Largest absolute utility any player can get (the scale the paper's H1 normalises to 1)."""
    if isinstance(game, NormalFormGame):
        return float(np.max(np.abs(np.asarray(game.payoffs, dtype=float)), initial=0.0))
    return float(np.max(np.asarray(game.free_flow, float) + np.asarray(game.slope, float), initial=0.0))


def _step(step_size: float | None, game: Any, n_players: int) -> float:
    """The paper's learning rate ``1 / (4 (J - 1))`` (Prop. 7) on utilities scaled into [-1, 1]."""
    if step_size is not None:
        return float(step_size)
    bound = _payoff_bound(game)
    if not np.isfinite(bound):
        raise DataError("game payoffs must be finite.", argument="game")
    return 1.0 / (4.0 * max(n_players - 1, 1) * (bound if bound > 0 else 1.0))


def _result(stats: dict[str, np.ndarray], errors: int, step_size: float) -> GameRun:
    return GameRun(
        regret=stats["regret_true_state"],
        regret_predicted=stats["regret_context"],
        regret_static=stats["regret_static"],
        welfare=stats["welfare"],
        nash_gap=stats["nash_gap"],
        mean_strategy=stats["mean_strategy"],
        n_prediction_errors=errors,
        step_size=float(step_size),
    )


@validate_params(
    {
        "game": [NormalFormGame, CongestionGame],
        "states": ["array-like"],
        "predictions": ["array-like"],
        "step_size": [Interval(numbers.Real, 0, None, closed="neither"), None],
    }
)
def pomwu(game: Any, states: Any, predictions: Any, *, step_size: float | None = None) -> GameRun:
    """Prediction-aware optimistic multiplicative weights (POMWU) in a time-varying game.

    The paper's Algorithm 1, for every player at once. Each player keeps one
    optimistic-MWU instance per state ``z``: ``S[z]`` (the sum of the utility vectors of
    the rounds whose realised state was ``z``) and ``m[z]`` (the last of them, the
    optimistic hint). At round ``t`` player ``j`` predicts ``theta_hat_t^j`` and plays
    ``x = softmax(eta * (S[theta_hat] + m[theta_hat]))``; the realised state
    ``theta_t`` sets the payoffs, and the observed utility vector updates
    ``S[theta_t]`` and ``m[theta_t]`` — a wrong prediction costs the round, it never
    feeds one state's instance with another state's utilities.

    Parameters
    ----------
    game : NormalFormGame or CongestionGame
        The game; its payoffs depend on the state.
    states : array-like of int, shape (n_rounds,)
        The realised states ``theta_t``.
    predictions : array-like of int, shape (n_rounds,) or (n_rounds, n_players)
        The players' predictions ``theta_hat_t`` (made before round ``t``): one column
        shared by every player (the paper's experiment: a common predictor) or one per
        player.
    step_size : float or None, default None
        The learning rate ``eta`` (> 0). ``None``: the paper's Proposition 7 rate
        ``1 / (4 (J - 1))`` for utilities in [-1, 1], divided by the game's largest
        absolute utility (so that it applies to payoffs on any scale).

    Returns
    -------
    GameRun
        Regrets, welfare and Nash gap.

    Examples
    --------
    >>> game = make_routing_game(n_players=20, n_routes=3, n_states=3, random_state=0)
    >>> states = np.random.default_rng(1).integers(0, 3, 300)
    >>> good = pomwu(game, states, states, step_size=1.0)
    >>> plain = omwu(game, states, step_size=1.0)
    >>> bool(good.regret.max() < plain.regret.max())
    True

    References
    ----------
    A. Capitaine, E. Boursier, E. Moulines, M. I. Jordan, A. Durmus. Prediction-aware
    Learning in Multi-agent Systems. ICML 2025 (PMLR 267), Algorithm 1.
    """
    utilities, n_states, n_players, n_actions = _game(game)
    s = _states(states, n_states, "states")
    p = _predictions(predictions, n_states, s.size, n_players)
    eta = _step(step_size, game, n_players)
    stats = core.run_dynamics(utilities, n_states, n_players, n_actions, s, p, s, n_states, eta)
    return _result(stats, int(np.sum(s[:, None] != p)), eta)


@validate_params(
    {
        "game": [NormalFormGame, CongestionGame],
        "states": ["array-like"],
        "step_size": [Interval(numbers.Real, 0, None, closed="neither"), None],
    }
)
def omwu(game: Any, states: Any, *, step_size: float | None = None) -> GameRun:
    """Optimistic multiplicative weights (Syrgkanis et al. 2015), blind to the state: the baseline.

    One table per player: ``x = softmax(eta * (S + m))`` with ``S`` the sum of past
    utility vectors and ``m`` the last one.

    Parameters
    ----------
    game : NormalFormGame or CongestionGame
        The game.
    states : array-like of int, shape (n_rounds,)
        The realised states (they set the payoffs; the players do not see them).
    step_size : float or None, default None
        The learning rate ``eta`` (> 0); ``None``: the same default as :func:`pomwu`.

    Returns
    -------
    GameRun
        ``regret`` is measured against the best *state-dependent* action, as for
        :func:`pomwu`; ``regret_predicted`` equals the static regret.

    Examples
    --------
    >>> game = NormalFormGame(np.random.default_rng(0).uniform(size=(2, 2, 3, 3)))
    >>> run = omwu(game, [0, 1] * 50, step_size=0.5)
    >>> run.welfare.shape
    (100,)

    References
    ----------
    V. Syrgkanis, A. Agarwal, H. Luo, R. E. Schapire. Fast Convergence of Regularized
    Learning in Games. NeurIPS 2015.
    """
    utilities, n_states, n_players, n_actions = _game(game)
    s = _states(states, n_states, "states")
    eta = _step(step_size, game, n_players)
    zeros = np.zeros((s.size, n_players), dtype=np.int64)
    stats = core.run_dynamics(utilities, n_states, n_players, n_actions, s, zeros, zeros[:, 0], 1, eta)
    return _result(stats, 0, eta)


@validate_params(
    {
        "n_players": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_actions": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_states": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_prediction_errors": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def social_regret_bound(n_players: int, n_actions: int, n_states: int, n_prediction_errors: int) -> float:
    """The paper's Proposition 7: a bound on the players' summed contextual regret under POMWU.

    When every player runs POMWU with ``eta = 1 / (4 (J - 1))`` and utilities lie in
    [-1, 1], ``sum_j R_T^j <= 4 J ((5 + ln K) L_T + m J ln K) + L_T / (J - 1)``, where
    ``L_T`` is the number of mispredictions summed over players. Multiply by the
    game's largest absolute utility for payoffs on another scale (what
    ``pomwu(..., step_size=None)`` assumes).

    Parameters
    ----------
    n_players : int
        ``J`` (>= 2).
    n_actions : int
        ``K``, actions per player.
    n_states : int
        ``m``, the number of states of nature.
    n_prediction_errors : int
        ``L_T`` (:attr:`GameRun.n_prediction_errors`).

    Returns
    -------
    float
        The bound, constant in the number of rounds.

    Examples
    --------
    >>> round(social_regret_bound(2, 2, 1, 0), 2)
    11.09

    References
    ----------
    A. Capitaine, E. Boursier, E. Moulines, M. I. Jordan, A. Durmus. Prediction-aware
    Learning in Multi-agent Systems. ICML 2025, Proposition 7.
    """
    J, K, m, L = int(n_players), int(n_actions), int(n_states), int(n_prediction_errors)
    return float(4 * J * ((5 + np.log(K)) * L + m * J * np.log(K)) + L / (J - 1))


@validate_params(
    {
        "states": ["array-like"],
        "error_rate": [Interval(numbers.Real, 0, 1, closed="both")],
        "n_states": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def noisy_predictions(
    states: Any, *, error_rate: float, n_states: int, random_state: Any = None
) -> np.ndarray:
    """Predictions that are wrong in a share ``error_rate`` of the rounds (a uniform other state).

    Parameters
    ----------
    states : array-like of int
        The true states.
    error_rate : float
        Probability that a round's prediction is wrong, in [0, 1].
    n_states : int
        Number of states (>= 2).
    random_state : int, numpy Generator or None
        Seed.

    Returns
    -------
    numpy.ndarray
        Predicted states.

    Examples
    --------
    >>> noisy_predictions([0, 1, 2, 0], error_rate=0.0, n_states=3).tolist()
    [0, 1, 2, 0]
    """
    s = _states(states, n_states, "states")
    rng = make_generator(random_state)
    wrong = rng.random(s.size) < error_rate
    return np.where(wrong, (s + rng.integers(1, n_states, s.size)) % n_states, s)


@validate_params(
    {
        "n_players": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_routes": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_states": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_routing_game(
    n_players: int = 50, n_routes: int = 4, n_states: int = 3, *, random_state: Any = None
) -> CongestionGame:
    """A traffic-routing game whose state (weather, an incident, ...) reshuffles the routes' latencies.

    In each state one route is fast when empty (free-flow 0.1) and the others slow
    (uniform on [0.5, 1]); slopes are uniform on [0.2, 1]. Which route is fast differs
    across states, so a state-blind learner cannot be right in all of them.

    Parameters
    ----------
    n_players : int, default 50
        Number of drivers.
    n_routes : int, default 4
        Number of parallel routes (>= 2).
    n_states : int, default 3
        Number of states of nature.
    random_state : int, numpy Generator or None
        Seed.

    Returns
    -------
    CongestionGame
        The game.

    Examples
    --------
    >>> make_routing_game(5, 2, 2, random_state=0).slope.shape
    (2, 2)
    """
    rng = make_generator(random_state)
    free = rng.uniform(0.5, 1.0, (n_states, n_routes))
    free[np.arange(n_states), np.arange(n_states) % n_routes] = 0.1
    slope = rng.uniform(0.2, 1.0, (n_states, n_routes))
    return CongestionGame(free_flow=free, slope=slope, n_players=int(n_players))
