"""The alpha-approximate portfolio search over p in [-inf, 1] (private; see portfolio.py).

Facts used (x > 0 with N entries, p <= q <= 1):

1. ``M_p(x) <= M_q(x)`` (power-mean inequality), so ``OPT_p`` is non-decreasing in p.
2. For p < 0: ``min(x) <= M_p(x) <= N^(1/|p|) min(x)``. Hence the egalitarian optimum
   (p = -inf) is alpha-approximate for every ``p <= p0 = -ln N / ln(1/alpha)``.
3. A solution x found at p covers every q in [p, p'] as soon as
   ``M_p(x) >= alpha * UB(OPT_p')``: for such q, ``M_q(x) >= M_p(x)`` (fact 1) and
   ``OPT_q <= OPT_p' <= UB(OPT_p')``.

The search bisects for the largest p' that fact 3 certifies, chaining it as the authors'
line search does (``line_search`` in github.com/jaimoondra/approximation-portfolios-for-rl,
``src/portfolio.py``): once ``[p, lo]`` is covered, ``[lo, mid]`` needs only
``M_lo(x) >= alpha * UB(OPT_mid)``, and ``M_lo(x) >= M_p(x)`` (fact 1). It starts the next
segment at the first p past it with the optimum there (checking that it also covers the
bisection's last gap; when that optimum is already a member, the member simply gets a
further segment). Each segment's value ``c = M_p(x)`` at its start exceeds the previous
one's ``c / alpha`` (up to solver tolerance), so there are at most
``1 + ceil(ln(OPT_1 / OPT_-inf) / ln(1 / alpha))`` segments, hence members.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.fairness._portfolio_mdp import p_mean


@dataclass(frozen=True)
class Solution:
    """One oracle answer: the member, its return vector, its p-mean and an upper bound on OPT_p."""

    member: Any
    values: np.ndarray
    welfare: float
    upper: float


Oracle = Callable[[float], Solution]


def search(
    oracle: Oracle, n_objectives: int, alpha: float, *, p_tol: float
) -> tuple[list[Solution], list[float], list[int], int]:
    """Distinct members, the start of each covered segment, its member, and the oracle calls."""
    calls = 0
    cache: dict[float, Solution] = {}

    def solve(p: float) -> Solution:
        nonlocal calls
        if p not in cache:
            calls += 1
            cache[p] = oracle(p)
        return cache[p]

    first = solve(-math.inf)
    members, starts, owner = [first], [-math.inf], [0]
    if n_objectives == 1:
        return members, starts, owner, calls
    p_cur = -math.log(n_objectives) / math.log(1.0 / alpha)  # fact 2
    c = float(p_mean(first.values, p_cur))  # it covers [p_cur, p'] from this value (fact 3)
    while True:
        if alpha * solve(1.0).upper <= c:
            return members, starts, owner, calls
        lo, hi = p_cur, 1.0
        c_lo = c  # M_lo(x): [p_cur, lo] is covered, so [lo, mid] needs only M_lo(x) >= alpha UB(OPT_mid)
        while hi - lo > p_tol:
            mid = 0.5 * (lo + hi)
            if alpha * solve(mid).upper <= c_lo:
                lo = mid
                c_lo = max(c_lo, float(p_mean(members[owner[-1]].values, lo)))
            else:
                hi = mid
        nxt = solve(hi)
        # the new member must also cover (lo, hi]: M_lo(x_new) >= alpha * UB(OPT_hi) (fact 3)
        while float(p_mean(nxt.values, lo)) < alpha * nxt.upper and hi - lo > 1e-12:
            hi = 0.5 * (lo + hi)  # pragma: no cover - only with solver slack at a tiny gap
            nxt = solve(hi)
        same = [j for j, m in enumerate(members) if np.allclose(m.values, nxt.values, rtol=1e-7, atol=0)]
        if same:  # the optimum past the gap is a member already: it covers a further segment
            owner.append(same[0])
        else:
            members.append(nxt)
            owner.append(len(members) - 1)
        starts.append(lo)
        p_cur, c = hi, float(p_mean(nxt.values, hi))


def size_bound(opt_low: float, opt_high: float, alpha: float) -> int:
    """``1 + ceil(ln(OPT_1 / OPT_-inf) / ln(1 / alpha))``."""
    log_ratio = max(math.log(opt_high) - math.log(opt_low), 0.0)
    return 1 + math.ceil(log_ratio / -math.log(alpha) - 1e-9)
