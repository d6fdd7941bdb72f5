"""Interventional causal recourse (Karimi et al., 2021) as BRACE's paper states it: one LP per subset."""

from __future__ import annotations

import itertools
import numbers
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.optimize import linprog

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import ModelError
from trustlab.explain._cf_model import SUPPORTED
from trustlab.explain._cf_problem import (
    SEARCH_PARAMETERS,
    Problem,
    infeasible_result,
    make_result,
    setup_problem,
)
from trustlab.explain._cf_result import CounterfactualResult
from trustlab.explain._cf_search import search
from trustlab.explain.scm import AdditiveNoiseSCM, LinearSCM

__all__ = ["causal_recourse"]

_Best = tuple[float, np.ndarray, tuple[int, ...]] | None  # (d_X, x_cf, intervened set)


def _exact_subsets(
    p: Problem, lin: tuple[np.ndarray, float], subsets: list[tuple[int, ...]]
) -> tuple[_Best, int]:
    """One LP per subset ``A``: ``min d_X(x + T theta, x)`` subject to validity, bounds, immutables.

    Returns the best subset's result and the number of subsets whose LP is infeasible.
    """
    assert isinstance(p.scm, LinearSCM)
    d = len(p.x)
    w, b = lin
    r = p.margin_gap(w, b)
    imm = np.flatnonzero(~p.mutable)
    best: _Best = None
    n_infeasible = 0
    for A in subsets:
        Bt = p.scm.B_.copy()
        Bt[list(A), :] = 0.0
        T = np.linalg.inv(np.eye(d) - Bt)[:, list(A)]  # dx = T theta
        k = len(A)
        Tm = T[p.mutable] / p.sx[p.mutable][:, None]
        nm = Tm.shape[0]
        c = np.r_[np.zeros(k), np.ones(nm)]
        A_ub = np.block(
            [[Tm, -np.eye(nm)], [-Tm, -np.eye(nm)], [-(p.sign * w @ T)[None, :], np.zeros((1, nm))]]
        )
        b_ub = np.r_[np.zeros(2 * nm), -r]
        fin_hi, fin_lo = np.isfinite(p.hi), np.isfinite(p.lo)
        if fin_hi.any() or fin_lo.any():  # lo <= x + T theta <= hi
            A_ub = np.vstack(
                [
                    A_ub,
                    np.c_[T[fin_hi], np.zeros((int(fin_hi.sum()), nm))],
                    np.c_[-T[fin_lo], np.zeros((int(fin_lo.sum()), nm))],
                ]
            )
            b_ub = np.r_[b_ub, (p.hi - p.x)[fin_hi], (p.x - p.lo)[fin_lo]]
        A_eq = np.c_[T[imm], np.zeros((len(imm), nm))] if len(imm) else None
        b_eq = np.zeros(len(imm)) if len(imm) else None
        res = linprog(
            c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=[(None, None)] * (k + nm), method="highs"
        )
        if res.status != 0:
            n_infeasible += res.status == 2
            continue
        x_cf = p.x + T @ res.x[:k]
        cost = float(p.d_x(x_cf)[0])
        if best is None or cost < best[0] - 1e-12:
            best = (cost, x_cf, A)
    return best, n_infeasible


def _search_subsets(
    p: Problem, subsets: list[tuple[int, ...]], rng: np.random.Generator, deadline: float
) -> tuple[_Best, bool]:
    """A search per subset (all sharing one deadline): the best result and whether time ran out."""
    best: _Best = None
    keep_idx = ~p.mutable
    for A in subsets:
        Ai = list(A)

        def gen(P: np.ndarray, Ai: list[int] = Ai) -> np.ndarray:
            U = np.repeat(p.u[None, :], len(P), axis=0)
            return p.scm.intervene(U, Ai, p.x[Ai] + P * p.sx[Ai])

        def score(P: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            keep = np.all(
                np.abs(X[:, keep_idx] - p.x[keep_idx]) <= 1e-9 * (1 + np.abs(p.x[keep_idx])), axis=1
            )
            return p.d_x(X), p.valid(X) & keep & p.inside(X)

        P, f, _, timed_out = search(gen, score, len(Ai), rng, deadline)
        if P is not None and (best is None or f < best[0]):
            best = (f, gen(P[None, :])[0], A)
        if timed_out:
            return best, True
    return best, False


@validate_params(
    {**SEARCH_PARAMETERS, "max_subset_size": [None, Interval(numbers.Integral, 1, None, closed="left")]}
)
def causal_recourse(
    model: Any,
    scm: AdditiveNoiseSCM,
    x: Any,
    target: Any = None,
    *,
    immutable: Sequence[Any] = (),
    scales: Any = None,
    noise_scales: Any = "feature",
    max_subset_size: int | None = None,
    solver: str = "auto",
    tau: float = 1e-6,
    time_limit: float = 10.0,
    random_state: Any = 0,
    bounds: Mapping[Any, tuple[float | None, float | None]] | None = None,
) -> CounterfactualResult:
    """Interventional causal recourse (Karimi et al., 2021) as BRACE's paper states it.

    For every non-empty subset ``A`` of the mutable features (up to
    ``max_subset_size``), intervene ``do(X_A = x_A + theta)``, recompute the
    descendants with the factual noise, and minimise ``d_X(x_cf, x)`` subject to
    validity and the immutable features unchanged; keep the best subset. The
    returned ``u_cf = F^{-1}(F_A(u))`` makes it a backtracking counterfactual
    (the paper's Theorem 5.1). Exact (one LP per subset) for a LinearSCM and a
    linear classifier; otherwise a search per subset sharing ``time_limit``.
    ``bounds`` (as in :func:`brace`) constrain the counterfactual ``x + T theta`` (LP rows
    in the exact case, rejection in the search); ``status="infeasible"`` when every
    subset's LP is infeasible.

    Parameters
    ----------
    model : fitted binary classifier
    scm : fitted LinearSCM or AdditiveNoiseSCM
    x : array of shape (d,), Series or one-row DataFrame
    target : class label, optional
        Default: the class the model does not predict at ``x``.
    immutable, scales, noise_scales, solver, tau, time_limit, random_state, bounds
        As in :func:`~trustlab.explain.counterfactual.brace` (``time_limit`` is shared by
        the subsets' searches).
    max_subset_size : int, optional
        Largest intervened set tried (default: all mutable features).

    Returns
    -------
    CounterfactualResult
        With ``method="causal_recourse"``, ``intervened`` the chosen set and
        ``n_solver_calls`` the number of subsets tried.

    References
    ----------
    Karimi, A.-H., Schölkopf, B., Valera, I. "Algorithmic recourse: from
    counterfactual explanations to interventions". FAccT 2021.
    Fatemi, P., Sharifian, E., Yassaee, M. H. ICML 2025 (Section 5).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.counterfactual import causal_recourse
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> r = causal_recourse(clf, scm, [-1.0, -1.0], target=1)
    >>> r.valid, r.intervened, r.n_solver_calls
    (True, ('a', 'b'), 3)
    """
    p = setup_problem(model, scm, x, target, 0.0, immutable, scales, noise_scales, tau, bounds)
    limit = float(time_limit)
    rng = make_generator(random_state)
    if p.valid(p.x)[0]:
        return make_result(p, p.x.copy(), "causal_recourse", "none", "already_target", 0)
    if p.immutable_outside():
        return infeasible_result(p, "causal_recourse", "none", 0)
    names = [str(n) for n in p.scm.feature_names_in_]
    mut = [int(j) for j in np.flatnonzero(p.mutable)]
    top = len(mut) if max_subset_size is None else min(int(max_subset_size), len(mut))
    subsets = [s for k in range(1, top + 1) for s in itertools.combinations(mut, k)]
    lin = p.model.linear() if isinstance(p.scm, LinearSCM) and solver in ("auto", "exact") else None
    if solver == "exact" and lin is None:
        raise ModelError(
            f"solver='exact' needs a LinearSCM and a linear classifier; use solver='search' "
            f"(supported: {SUPPORTED}).",
            argument="solver",
        )
    if lin is not None:
        best, n_infeasible = _exact_subsets(p, lin, subsets)
        solver_used, timed_out = "exact", False
    else:
        best, timed_out = _search_subsets(p, subsets, rng, time.perf_counter() + limit)
        solver_used, n_infeasible = "search", 0
    status = "time_limit" if timed_out else ("optimal" if solver_used == "exact" else "approximate")
    if best is None:
        if solver_used == "exact" and p.bounded and n_infeasible == len(subsets):
            return infeasible_result(p, "causal_recourse", solver_used, len(subsets))
        notes = ("no valid counterfactual found within the bounds",) if p.bounded else ()
        calls = len(subsets)
        return make_result(p, p.x.copy(), "causal_recourse", solver_used, "not_found", calls, notes=notes)
    return make_result(
        p,
        best[1],
        "causal_recourse",
        solver_used,
        status,
        len(subsets),
        intervened=tuple(names[j] for j in best[2]),
    )
