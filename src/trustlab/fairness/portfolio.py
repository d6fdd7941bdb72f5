r"""Alpha-approximate portfolios of policies over generalised p-means.

Stakeholders ``i = 1..N`` each get a utility (an expected discounted return in a
multi-objective MDP, or a utility from a one-shot allocation). The generalised p-mean
``M_p(x) = (mean_i x_i^p)^(1/p)`` aggregates them: egalitarian (min) at ``p = -inf``,
Nash (geometric mean) at 0, utilitarian (mean) at 1. Different p favour different
policies. An *alpha-approximate portfolio* is a small set of policies such that for
every ``p in [-inf, 1]`` the best of them reaches at least ``alpha`` times the optimal
p-mean (Kim, Moondra, Verma, Pollack, Kong, Tambe, Gupta, ICML 2025).

Functions: :func:`p_mean`; :func:`optimal_p_mean_policy` (value iteration inside
Frank-Wolfe, with a certified upper bound); :func:`mdp_portfolio` and
:func:`allocation_portfolio` (the portfolio search); :func:`check_portfolio` (the
guarantee on a grid of p).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.fairness import _portfolio_mdp as _mdp
from trustlab.fairness import _portfolio_search as _search
from trustlab.fairness._portfolio_inputs import check_mdp, check_utilities

__all__ = [
    "Portfolio",
    "WelfarePolicy",
    "allocation_portfolio",
    "check_portfolio",
    "mdp_portfolio",
    "optimal_p_mean_policy",
    "p_mean",
]

_P = Interval(numbers.Real, None, 1, closed="right", finite=False)
_ALPHA = Interval(numbers.Real, 0, 1, closed="neither")
_GAMMA = Interval(numbers.Real, 0, 1, closed="neither")
_TOL = Interval(numbers.Real, 0, 0.1, closed="neither")


def _check_p(p: float) -> float:
    """``p`` as a float (the validate_params constraint already bounds it to [-inf, 1])."""
    return float(p)


@validate_params({"p": [_P]})
def p_mean(values: Any, p: float) -> np.ndarray | float:
    """Generalised p-mean of non-negative values along the last axis.

    ``M_p(x) = (mean_i x_i^p)^(1/p)``; ``min`` at ``p = -inf``, geometric mean at 0.
    For ``p <= 0`` a zero entry makes the mean 0.

    Parameters
    ----------
    values : array-like
        Non-negative utilities, objectives along the last axis.
    p : float in [-inf, 1]
        The exponent.

    Returns
    -------
    float or numpy.ndarray
        One mean per row (a float for 1-D input).

    References
    ----------
    C. W. Kim, J. Moondra, S. Verma, M. Pollack, L. Kong, M. Tambe, S. Gupta, "Navigating
    the Social Welfare Frontier: Portfolios for Multi-objective Reinforcement Learning",
    ICML 2025 (arXiv 2502.09724).

    Examples
    --------
    >>> [round(float(p_mean([1.0, 4.0], p)), 3) for p in (-math.inf, 0, 1)]
    [1.0, 2.0, 2.5]
    """
    x = check_numeric_array(values, "values")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise DataError("values must have at least one objective along the last axis.", argument="values")
    if (x < 0).any():
        raise DataError(
            "values must be non-negative (p-means of negative values are undefined).", argument="values"
        )
    out = _mdp.p_mean(x, _check_p(p))
    return float(out) if np.ndim(out) == 0 else out


@dataclass(frozen=True)
class WelfarePolicy:
    """A policy maximising one p-mean of the objectives' returns.

    Attributes
    ----------
    p : float
        The exponent.
    policy : numpy.ndarray of shape (n_states, n_actions)
        Stationary stochastic policy (rows sum to 1).
    returns : numpy.ndarray of shape (n_objectives,)
        Expected discounted return of each objective from ``initial``.
    welfare : float
        ``p_mean(returns, p)``.
    upper_bound : float
        Certified upper bound on the optimal p-mean (the Frank-Wolfe gap; equal to
        ``welfare`` for ``p = -inf``, solved exactly by linear programming).

    See Also
    --------
    optimal_p_mean_policy : builds it.
    """

    p: float
    policy: np.ndarray
    returns: np.ndarray
    welfare: float
    upper_bound: float


def _solve_mdp(mdp: _mdp.MDP, p: float, start: np.ndarray, tol: float, max_iter: int) -> _search.Solution:
    if p == -math.inf:
        d = start
        x = mdp.returns(d)
        return _search.Solution(_mdp.policy_from_occupancy(d), x, float(x.min()), float(x.min()))
    d, val, ub = _mdp.frank_wolfe(mdp, p, start, tol=tol, max_iter=max_iter)
    return _search.Solution(_mdp.policy_from_occupancy(d), mdp.returns(d), val, ub)


def _egalitarian_start(mdp: _mdp.MDP) -> np.ndarray:
    d = mdp.egalitarian()
    if mdp.returns(d).min() <= 0:
        raise DataError(
            "rewards: no policy gives every objective a positive return, so every p-mean with p <= 0 is 0 "
            "and no multiplicative guarantee exists; make each objective reachable with positive reward.",
            argument="rewards",
        )
    return d


@validate_params(
    {
        "p": [_P],
        "gamma": [_GAMMA],
        "tol": [_TOL],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
    }
)
def optimal_p_mean_policy(
    transitions: Any,
    rewards: Any,
    *,
    p: float,
    gamma: float = 0.9,
    initial: Any = None,
    tol: float = 1e-6,
    max_iter: int = 500,
) -> WelfarePolicy:
    """The policy maximising the p-mean of the objectives' expected discounted returns.

    ``p = -inf``: a linear programme over discounted occupancy measures (maximise the
    smallest return). Otherwise fully corrective Frank-Wolfe over occupancy measures,
    started at the egalitarian optimum: each step solves the single-objective MDP with
    reward ``sum_i g_i r_i`` (``g`` the gradient of the p-mean's concave utility) by
    value iteration polished with policy iteration, then re-weights the deterministic
    policies found. It stops when the certified gap is below ``tol`` (relative).

    Parameters
    ----------
    transitions : array-like of shape (n_states, n_actions, n_states)
        ``transitions[s, a, s']`` = probability of ``s'`` after ``a`` in ``s``.
    rewards : array-like of shape (n_states, n_actions, n_objectives)
        Non-negative reward of each objective.
    p : float in [-inf, 1]
        The welfare exponent.
    gamma : float in (0, 1), default=0.9
        Discount factor.
    initial : array-like of shape (n_states,), optional
        Initial-state distribution (default uniform).
    tol : float in (0, 0.1), default=1e-6
        Relative optimality gap at which to stop.
    max_iter : int, default=500
        Frank-Wolfe iterations at most.

    Returns
    -------
    WelfarePolicy
        The policy, its returns, its p-mean and the certified upper bound.

    Raises
    ------
    DataError
        A transition row that is not a distribution (named), negative rewards, shapes
        that do not match, no policy giving every objective a positive return.
    ParameterError
        ``p`` outside [-inf, 1], ``gamma`` outside (0, 1).

    References
    ----------
    C. W. Kim et al., "Navigating the Social Welfare Frontier: Portfolios for
    Multi-objective Reinforcement Learning", ICML 2025; M. Frank, P. Wolfe, "An algorithm
    for quadratic programming", Naval Res. Logistics Quarterly 1956.

    Examples
    --------
    >>> P = np.zeros((1, 2, 1)); P[0, :, 0] = 1.0  # one state, two actions
    >>> R = np.array([[[1.0, 0.0], [0.0, 1.0]]])  # each action serves one objective
    >>> w = optimal_p_mean_policy(P, R, p=0.0, gamma=0.5)
    >>> np.round(w.policy, 3).tolist(), round(w.welfare, 3)
    ([[0.5, 0.5]], 1.0)
    """
    mdp = check_mdp(transitions, rewards, initial, gamma)
    pp = _check_p(p)
    sol = _solve_mdp(mdp, pp, _egalitarian_start(mdp), float(tol), int(max_iter))
    return WelfarePolicy(pp, sol.member, sol.values, sol.welfare, sol.upper)


@dataclass(frozen=True)
class Portfolio:
    """An alpha-approximate portfolio over p in [-inf, 1].

    Attributes
    ----------
    alpha : float
        The guarantee: for every p the best member reaches ``alpha * OPT_p``.
    members : tuple
        Policies (``(n_states, n_actions)`` arrays) or option indices (allocation).
    values : numpy.ndarray of shape (k, n_objectives)
        Each member's utilities (returns).
    starts : numpy.ndarray of shape (n_segments,)
        Segment ``t`` is ``[starts[t], starts[t + 1]]`` (the first from -inf, the last up
        to 1); member ``segment_members[t]`` is certified alpha-approximate on it.
    segment_members : numpy.ndarray of shape (n_segments,)
        Index of the member certified on each segment.
    n_oracle_calls : int
        Welfare maximisations solved (one per p visited).
    size_bound : int
        ``1 + ceil(ln(OPT_1 / OPT_-inf) / ln(1 / alpha))``, the bound on the size.
    opt_range : tuple of float
        ``(OPT_-inf, upper bound on OPT_1)``.

    See Also
    --------
    mdp_portfolio, allocation_portfolio : build it.
    check_portfolio : verifies the guarantee on a grid of p.
    """

    alpha: float
    members: tuple[Any, ...]
    values: np.ndarray
    starts: np.ndarray
    segment_members: np.ndarray
    n_oracle_calls: int
    size_bound: int
    opt_range: tuple[float, float]
    _oracle: Any = field(repr=False, compare=False, default=None)

    @property
    def size(self) -> int:
        """Number of members."""
        return len(self.members)

    def best(self, p: float) -> tuple[int, float]:
        """The member with the highest p-mean and that p-mean.

        Parameters
        ----------
        p : float in [-inf, 1]
            The exponent.

        Returns
        -------
        tuple of (int, float)
            Member index and its p-mean.
        """
        w = np.asarray(p_mean(self.values, p), dtype=float).reshape(-1)
        j = int(np.argmax(w))
        return j, float(w[j])


def _portfolio(oracle: Any, n_obj: int, alpha: float, p_tol: float) -> Portfolio:
    members, starts, owner, calls = _search.search(oracle, n_obj, alpha, p_tol=p_tol)
    low = members[0].welfare
    high = oracle(1.0).upper if n_obj > 1 else low
    return Portfolio(
        alpha=alpha,
        members=tuple(m.member for m in members),
        values=np.array([m.values for m in members]),
        starts=np.array(starts, dtype=float),
        segment_members=np.array(owner, dtype=np.int64),
        n_oracle_calls=calls,
        size_bound=_search.size_bound(low, high, alpha),
        opt_range=(low, high),
        _oracle=oracle,
    )


@validate_params(
    {
        "alpha": [_ALPHA],
        "gamma": [_GAMMA],
        "tol": [_TOL],
        "p_tol": [Interval(numbers.Real, 0, 1, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
    }
)
def mdp_portfolio(
    transitions: Any,
    rewards: Any,
    *,
    alpha: float,
    gamma: float = 0.9,
    initial: Any = None,
    tol: float = 1e-6,
    p_tol: float = 1e-3,
    max_iter: int = 500,
) -> Portfolio:
    """An alpha-approximate portfolio of policies for a tabular multi-objective MDP.

    Start with the egalitarian optimum, which covers every ``p <= -ln N / ln(1/alpha)``;
    then repeatedly bisect (to ``p_tol``) for the largest p' whose certified optimum is at
    most ``1/alpha`` times the current member's covered value, and add the optimal policy
    just past it (see :func:`optimal_p_mean_policy` for the welfare maximisation).

    Parameters
    ----------
    transitions : array-like of shape (n_states, n_actions, n_states)
        Transition probabilities (each ``[s, a]`` row sums to 1).
    rewards : array-like of shape (n_states, n_actions, n_objectives)
        Non-negative rewards.
    alpha : float in (0, 1)
        Approximation factor.
    gamma : float in (0, 1), default=0.9
        Discount factor.
    initial : array-like of shape (n_states,), optional
        Initial-state distribution (default uniform).
    tol : float in (0, 0.1), default=1e-6
        Relative optimality gap of each welfare maximisation.
    p_tol : float in (0, 1), default=1e-3
        Resolution of the bisection over p.
    max_iter : int, default=500
        Frank-Wolfe iterations per welfare maximisation.

    Returns
    -------
    Portfolio
        Members, their returns, where each is certified, the size bound.

    Raises
    ------
    DataError
        As :func:`optimal_p_mean_policy`.
    ParameterError
        ``alpha`` outside (0, 1) (``alpha = 1`` asks for an exact portfolio, which may
        need a member for every p), ``gamma`` outside (0, 1).

    References
    ----------
    C. W. Kim, J. Moondra, S. Verma, M. Pollack, L. Kong, M. Tambe, S. Gupta, "Navigating
    the Social Welfare Frontier: Portfolios for Multi-objective Reinforcement Learning",
    ICML 2025 (arXiv 2502.09724).

    Examples
    --------
    >>> P = np.zeros((1, 3, 1)); P[0, :, 0] = 1.0
    >>> R = np.array([[[4.0, 0.1], [0.1, 4.0], [1.0, 1.0]]])
    >>> port = mdp_portfolio(P, R, alpha=0.9, gamma=0.5)
    >>> port.size <= port.size_bound, bool(check_portfolio(port)["ok"].all())
    (True, True)
    """
    mdp = check_mdp(transitions, rewards, initial, gamma)
    start = _egalitarian_start(mdp)

    def oracle(p: float) -> _search.Solution:
        return _solve_mdp(mdp, p, start, float(tol), int(max_iter))

    return _portfolio(oracle, mdp.R.shape[2], float(alpha), float(p_tol))


@validate_params({"alpha": [_ALPHA], "p_tol": [Interval(numbers.Real, 0, 1, closed="neither")]})
def allocation_portfolio(utilities: Any, *, alpha: float, p_tol: float = 1e-3) -> Portfolio:
    """An alpha-approximate portfolio over a finite set of one-shot allocations.

    Each row of ``utilities`` is an option (an allocation) and its utility to each
    stakeholder; the welfare maximisation for a p is exact (the best row). The search is
    that of :func:`mdp_portfolio`.

    Parameters
    ----------
    utilities : array-like of shape (n_options, n_objectives)
        Non-negative utilities; some option must give every objective a positive one.
    alpha : float in (0, 1)
        Approximation factor.
    p_tol : float in (0, 1), default=1e-3
        Resolution of the bisection over p.

    Returns
    -------
    Portfolio
        ``members`` are row indices of ``utilities``.

    Raises
    ------
    DataError
        Negative, NaN or non-2-D utilities; no option positive for every objective.
    ParameterError
        ``alpha`` outside (0, 1).

    References
    ----------
    C. W. Kim et al., "Navigating the Social Welfare Frontier: Portfolios for
    Multi-objective Reinforcement Learning", ICML 2025.

    Examples
    --------
    >>> u = [[10.0, 1.0], [6.0, 4.0], [1.0, 10.0], [3.0, 3.0]]
    >>> port = allocation_portfolio(u, alpha=0.9)
    >>> port.members, port.segment_members.tolist(), bool(check_portfolio(port)["ok"].all())
    ((1, 0), [0, 1], True)
    """
    u = check_utilities(utilities)

    def oracle(p: float) -> _search.Solution:
        w = _mdp.p_mean(u, p)
        k = int(np.argmax(w))
        return _search.Solution(k, u[k], float(w[k]), float(w[k]))

    return _portfolio(oracle, u.shape[1], float(alpha), float(p_tol))


@validate_params({"p_values": ["array-like", None]})
def check_portfolio(portfolio: Portfolio, p_values: Any = None) -> pd.DataFrame:
    """Verify the guarantee: for each p, best member's p-mean over the optimum's upper bound.

    Parameters
    ----------
    portfolio : Portfolio
        From :func:`mdp_portfolio` or :func:`allocation_portfolio`.
    p_values : array-like of float in [-inf, 1], optional
        The grid (default: -inf, -64, -16, -8, -4, -2, -1, -0.5, 0, 0.25, 0.5, 0.75, 1
        and the members' starts).

    Returns
    -------
    pandas.DataFrame
        One row per p: ``member`` (best), ``welfare`` (its p-mean), ``optimum_upper``
        (certified upper bound on OPT_p, solved afresh), ``ratio`` and ``ok``
        (``ratio >= alpha``).

    Raises
    ------
    DataError
        ``p_values`` outside [-inf, 1]; a portfolio not built by this module.

    References
    ----------
    C. W. Kim et al., "Navigating the Social Welfare Frontier: Portfolios for
    Multi-objective Reinforcement Learning", ICML 2025.

    Examples
    --------
    >>> port = allocation_portfolio([[3.0, 1.0], [1.0, 3.0], [2.0, 2.0]], alpha=0.9)
    >>> check_portfolio(port, [-math.inf, 0.0, 1.0])["ratio"].round(3).tolist()
    [1.0, 1.0, 1.0]
    """
    if not isinstance(portfolio, Portfolio) or portfolio._oracle is None:
        raise DataError(
            "portfolio must be a Portfolio built by mdp_portfolio or allocation_portfolio.",
            argument="portfolio",
        )
    if p_values is None:
        grid = [-math.inf, -64, -16, -8, -4, -2, -1, -0.5, 0, 0.25, 0.5, 0.75, 1.0]
        grid += [float(s) for s in portfolio.starts if np.isfinite(s)]
        ps = np.unique(np.array(grid, dtype=float))
    else:
        ps = check_numeric_array(p_values, "p_values", ndim=1, allow_nan=True)
        if np.isnan(ps).any() or (ps > 1).any():
            raise DataError("p_values must lie in [-inf, 1] (no NaN).", argument="p_values")
    rows = []
    for p in ps:
        j, val = portfolio.best(float(p))
        upper = portfolio._oracle(float(p)).upper
        ratio = val / upper if upper > 0 else 1.0
        rows.append(
            {
                "p": float(p),
                "member": j,
                "welfare": val,
                "optimum_upper": upper,
                "ratio": ratio,
                "ok": bool(ratio >= portfolio.alpha * (1 - 1e-9)),
            }
        )
    return pd.DataFrame(rows)
