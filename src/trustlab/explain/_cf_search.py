"""The search solver: growing spheres in a scaled parameter space, then a local polish.

Works with any binary classifier with ``predict`` and any fitted SCM. Approximate; stops at
a deadline with the best counterfactual found so far.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from trustlab.explain._cf_problem import Problem
from trustlab.explain._spheres import grow_rings

__all__ = ["search", "search_cf"]


def search(
    gen: Callable[[np.ndarray], np.ndarray],
    score: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    k: int,
    rng: np.random.Generator,
    deadline: float,
    *,
    batch: int = 256,
    step: float = 0.1,
    max_radius: float = 20.0,
) -> tuple[np.ndarray | None, float, int, bool]:
    """Growing spheres in a scaled k-dim parameter space, then polish.

    ``gen(P)`` maps parameters (n, k) to feature rows; ``score(P, X)`` returns
    (objective, valid). Returns (best parameters or None, objective, evaluations, timed_out).
    """
    evals = 0
    best: np.ndarray | None = None
    best_f = math.inf

    def consider(P: np.ndarray) -> bool:
        nonlocal best, best_f, evals
        X = gen(P)
        f, ok = score(P, X)
        evals += len(P)
        if not ok.any():
            return False
        f = np.where(ok, f, np.inf)
        i = int(np.argmin(f))
        if f[i] < best_f:
            best, best_f = P[i].copy(), float(f[i])
            return True
        return False

    # 1. growing spheres: uniform samples in shells [lo, lo + step) of the scaled space
    _, _, timed_out = grow_rings(
        consider, k, rng, n=batch, width=step, growth=1.1, max_radius=max_radius, deadline=deadline
    )
    if timed_out:
        return best, best_f, evals, True
    if best is None:
        return None, math.inf, evals, False
    # 2. polish: line search to the factual, sparsify, shrinking local search
    radius = 0.5 * float(np.linalg.norm(best)) + 1e-12
    stall = 0
    while radius > 1e-5 * (1 + float(np.linalg.norm(best))) and stall < 40:
        if time.perf_counter() > deadline:
            return best, best_f, evals, True
        t = np.linspace(0.0, 1.0, 33)[1:, None]
        improved = consider(t * best[None, :])
        Z = np.repeat(best[None, :], k, axis=0)
        Z[np.arange(k), np.arange(k)] = 0.0
        improved |= consider(Z)
        E = rng.standard_normal((batch, k)) * radius / math.sqrt(k)
        improved |= consider(best[None, :] + E)
        if improved:
            stall = 0
        else:
            radius *= 0.6
            stall += 1
    return best, best_f, evals, False


def search_cf(
    p: Problem, lam: float, rng: np.random.Generator, deadline: float
) -> tuple[np.ndarray, str, int]:
    """BRACE by search: the counterfactual found, its status and the number of model evaluations."""
    m = p.mutable
    imm = np.flatnonzero(~m)
    scm = p.scm

    # lam = 0 (Wachter) searches the scaled feature space, where its l1 objective is sparse;
    # otherwise the scaled noise space of the mutable features (immutables fixed by intervention).
    in_x = lam == 0

    def gen(P: np.ndarray) -> np.ndarray:
        if in_x:
            X = np.repeat(p.x[None, :], len(P), axis=0)
            X[:, m] += P * p.sx[m]
            return X
        U = np.repeat(p.u[None, :], len(P), axis=0)
        U[:, m] += P * p.su[m]
        return scm.intervene(U, list(imm), np.repeat(p.x[None, imm], len(P), axis=0))

    def score(P: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = p.valid(X) & p.inside(X) if p.bounded else p.valid(X)
        if in_x:
            return np.abs(P).sum(axis=1), ok
        dx = p.d_x(X)
        du = np.linalg.norm(P, axis=1)
        return p.objective(dx, du), ok

    best, _, evals, timed_out = search(gen, score, int(m.sum()), rng, deadline)
    if best is None:
        return p.x.copy(), ("time_limit" if timed_out else "not_found"), evals
    return gen(best[None, :])[0], ("time_limit" if timed_out else "approximate"), evals
