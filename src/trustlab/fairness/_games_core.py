"""Vectorised utilities of time-varying games and the (P)OMWU dynamics loop.

Utilities are computed for all players at once: a congestion game needs only the
total load (``L - x_i`` is each player's view of the others); a normal-form game
contracts each player's payoff tensor with the other players' mixed strategies
(``P`` tensor contractions of ``P - 1`` axes each; players share one payoff array).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def normal_form_utilities(payoffs: np.ndarray, state: int, X: np.ndarray) -> np.ndarray:
    """``u[i, a] = E_{a_-i ~ x_-i} U[state, i, a, a_-i]`` for every player ``i``: shape ``(P, A)``."""
    n_players = X.shape[0]
    out = np.empty_like(X)
    for i in range(n_players):
        t = payoffs[state, i]
        for j in range(n_players - 1, -1, -1):  # contract the last axes first so indices stay valid
            if j != i:
                t = np.tensordot(t, X[j], axes=([j], [0]))
        out[i] = t
    return out


def congestion_utilities(free_flow: np.ndarray, slope: np.ndarray, state: int, X: np.ndarray) -> np.ndarray:
    """Minus the expected latency of each route for each player: ``-(a_r + b_r (L_-i,r + 1) / P)``."""
    n_players = X.shape[0]
    others = X.sum(axis=0)[None, :] - X
    return -(free_flow[state][None, :] + slope[state][None, :] * (others + 1.0) / n_players)


def run_dynamics(
    utilities: Any,
    n_states: int,
    n_players: int,
    n_actions: int,
    states: np.ndarray,
    contexts: np.ndarray,
    updates: np.ndarray,
    n_contexts: int,
    step_size: float,
) -> dict[str, np.ndarray]:
    """Optimistic MWU with one weight table per context; returns per-round and per-player statistics.

    Algorithm 1 of Capitaine et al. (2025), vectorised over players. ``contexts[t, i]``
    selects the table player ``i`` plays from at round ``t`` (its predicted state for
    POMWU, 0 for OMWU); ``updates[t]`` the table the round's feedback goes to (the
    realised state for POMWU, 0 for OMWU). Strategy
    ``x = softmax(eta * (cum[c] + hint[c]))``; after the round, ``cum[s] += u`` and
    ``hint[s] = u`` for ``s = updates[t]`` (the optimistic guess that the next utility
    in a state equals the last one seen in it). Written with utilities (the paper
    minimises costs ``<Z, Phi w>``): ``u = -Phi^T Z``, the same iterates.
    """
    cum = np.zeros((n_contexts, n_players, n_actions))
    hint = np.zeros((n_contexts, n_players, n_actions))
    per_state = np.zeros((n_states, n_players, n_actions))
    per_context = np.zeros((n_contexts, n_players, n_actions))
    earned = np.zeros(n_players)
    players = np.arange(n_players)
    T = states.size
    welfare = np.empty(T)
    gap = np.empty(T)
    mean_strategy = np.zeros((n_players, n_actions))
    for t in range(T):
        c, s, k = contexts[t], int(states[t]), int(updates[t])
        z = step_size * (cum[c, players] + hint[c, players])
        z -= z.max(axis=1, keepdims=True)
        X = np.exp(z)
        X /= X.sum(axis=1, keepdims=True)
        u = utilities(s, X)
        value = np.einsum("pa,pa->p", X, u)
        earned += value
        welfare[t] = value.sum()
        gap[t] = float(np.max(u.max(axis=1) - value))
        per_state[s] += u
        per_context[c, players] += u
        cum[k] += u
        hint[k] = u
        mean_strategy += X
    return {
        "regret_true_state": per_state.max(axis=2).sum(axis=0) - earned,
        "regret_context": per_context.max(axis=2).sum(axis=0) - earned,
        "regret_static": per_state.sum(axis=0).max(axis=1) - earned,
        "welfare": welfare,
        "nash_gap": gap,
        "mean_strategy": mean_strategy / max(T, 1),
    }
