"""Input checks for the p-mean portfolios (private)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.fairness._portfolio_mdp import MDP

_SUM_TOL = 1e-8


def check_utilities(utilities: Any) -> np.ndarray:
    """A (n_options, n_objectives) array of non-negative finite utilities, some option positive for all."""
    u = check_numeric_array(utilities, "utilities", ndim=2)
    if u.shape[1] < 1:
        raise DataError("utilities must have at least one objective (column).", argument="utilities")
    if (u < 0).any():
        r, c = np.argwhere(u < 0)[0]
        raise DataError(
            f"utilities must be non-negative (p-means of negative values are undefined); "
            f"utilities[{r}, {c}] = {u[r, c]!r}. Shift the utilities to be >= 0.",
            argument="utilities",
        )
    if u.min(axis=1).max() <= 0:
        raise DataError(
            "utilities: every option gives some objective 0, so every p-mean with p <= 0 is 0 and no "
            "multiplicative guarantee exists; add an option that gives every objective a positive utility.",
            argument="utilities",
        )
    return u


def check_mdp(transitions: Any, rewards: Any, initial: Any, gamma: float) -> MDP:
    """Validate ``transitions[s, a, s']``, ``rewards[s, a, i]`` and ``initial[s]``."""
    P = check_numeric_array(transitions, "transitions", ndim=3)
    s, a, s2 = P.shape
    if s2 != s or a < 1:
        raise DataError(
            f"transitions must have shape (n_states, n_actions, n_states); got {P.shape}.",
            argument="transitions",
        )
    neg = np.argwhere(P < 0)
    if len(neg):
        i, j, k = neg[0]
        raise DataError(
            f"transitions[{i}, {j}] is not a probability distribution: entry {k} is {P[i, j, k]!r} < 0.",
            argument="transitions",
        )
    sums = P.sum(axis=2)
    bad = np.argwhere(np.abs(sums - 1.0) > _SUM_TOL)
    if len(bad):
        i, j = bad[0]
        raise DataError(
            f"transitions[{i}, {j}] sums to {sums[i, j]!r}, not 1: every (state, action) row must be a "
            f"probability distribution over next states ({len(bad)} such rows); normalise them.",
            argument="transitions",
        )
    R = check_numeric_array(rewards, "rewards", ndim=3)
    if R.shape[:2] != (s, a):
        raise DataError(
            f"rewards must have shape (n_states, n_actions, n_objectives) = ({s}, {a}, k); got {R.shape}.",
            argument="rewards",
        )
    if R.shape[2] < 1:
        raise DataError("rewards must have at least one objective.", argument="rewards")
    if (R < 0).any():
        raise DataError(
            "rewards must be non-negative (p-means of negative returns are undefined); shift them to >= 0.",
            argument="rewards",
        )
    if initial is None:
        mu = np.full(s, 1.0 / s)
    else:
        mu = check_numeric_array(initial, "initial", ndim=1)
        if mu.size != s or (mu < 0).any() or abs(mu.sum() - 1.0) > _SUM_TOL:
            raise DataError(
                f"initial must be a probability distribution over the {s} states (non-negative, sum 1).",
                argument="initial",
            )
    return MDP(P, R, mu, float(gamma))
