"""Tabular multi-objective MDPs: value iteration, occupancy measures, p-mean optimisation (private).

A policy's return vector ``x_i = sum_{s,a} d(s,a) r_i(s,a)`` is linear in its discounted
occupancy measure ``d``; the achievable return vectors form a polytope whose vertices
come from deterministic policies. The p-mean (p <= 1) is concave, so its maximum over
that polytope is found by Frank-Wolfe: each step maximises a weighted sum of the
objectives, a single-objective MDP solved by value iteration (then polished to the exact
optimum by policy iteration). The Frank-Wolfe gap certifies an upper bound on the
optimum. ``p = -inf`` (egalitarian) is a linear programme over occupancy measures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog, minimize, minimize_scalar
from scipy.special import logsumexp

from trustlab.errors import DataError


def p_mean(x: np.ndarray, p: float) -> np.ndarray:
    """Generalised mean along the last axis (``x >= 0``; 0 when an entry is 0 and ``p <= 0``).

    Computed in logs, ``exp((logsumexp(p log x) - log N) / p)``, so extreme p or values
    neither overflow nor underflow.
    """
    x = np.asarray(x, dtype=float)
    if p == -math.inf:
        return np.min(x, axis=-1)
    with np.errstate(divide="ignore"):
        lx = np.log(x)
    zero = np.min(x, axis=-1) <= 0
    if p == 0:
        out = np.exp(np.mean(np.where(np.isneginf(lx), 0.0, lx), axis=-1))
        return np.where(zero, 0.0, out)
    with np.errstate(invalid="ignore"):
        z = np.where(np.isneginf(lx), -np.inf if p > 0 else np.inf, p * lx)
    if p < 0:
        z = np.where(zero[..., None], 0.0, z)
    finite = z[np.isfinite(z)]
    if finite.size == 0 or np.max(np.abs(finite)) < 600:  # direct powers are exact enough and safe
        with np.errstate(divide="ignore", over="ignore"):
            out = np.mean(np.exp(z), axis=-1) ** (1.0 / p)
    else:
        out = np.exp((logsumexp(z, axis=-1) - math.log(x.shape[-1])) / p)
    return np.where(zero, 0.0, out) if p < 0 else out


def p_mean_gradient(x: np.ndarray, p: float) -> np.ndarray:
    """Gradient of the p-mean at a positive vector (finite p)."""
    m = float(p_mean(x, p))
    n = x.size
    if p == 0:
        return m / (n * x)
    return (x / m) ** (p - 1.0) / n


@dataclass(frozen=True)
class MDP:
    """Validated tabular MDP: ``P[s, a, s']``, ``R[s, a, i]``, ``mu[s]``, ``gamma``."""

    P: np.ndarray
    R: np.ndarray
    mu: np.ndarray
    gamma: float

    @property
    def n_states(self) -> int:
        return self.P.shape[0]

    @property
    def n_actions(self) -> int:
        return self.P.shape[1]

    def occupancy(self, policy: np.ndarray) -> np.ndarray:
        """Discounted occupancy ``d(s, a)`` of a stationary policy ``policy[s, a]``."""
        p_pi = np.einsum("sa,sat->st", policy, self.P)
        ds = np.linalg.solve(np.eye(self.n_states) - self.gamma * p_pi.T, self.mu)
        return ds[:, None] * policy

    def returns(self, d: np.ndarray) -> np.ndarray:
        """Expected discounted return of each objective under occupancy ``d``."""
        return np.einsum("sa,sai->i", d, self.R)

    def best_response(self, weights: np.ndarray, tol: float) -> np.ndarray:
        """Occupancy of an optimal deterministic policy for reward ``R @ weights``."""
        r = self.R @ weights
        v = np.zeros(self.n_states)
        span = float(np.max(np.abs(r))) + 1e-300
        for _ in range(100_000):
            q = r + self.gamma * self.P @ v
            new = q.max(axis=1)
            if np.max(np.abs(new - v)) <= tol * span * (1 - self.gamma):
                v = new
                break
            v = new
        act = np.argmax(r + self.gamma * self.P @ v, axis=1)
        rows = np.arange(self.n_states)
        for _ in range(100):  # policy iteration from the value-iteration policy: exact optimum
            p_pi = self.P[rows, act]
            v = np.linalg.solve(np.eye(self.n_states) - self.gamma * p_pi, r[rows, act])
            q = r + self.gamma * self.P @ v
            better = q.max(axis=1) > q[rows, act] + 1e-12 * span
            if not better.any():
                break
            act = np.where(better, np.argmax(q, axis=1), act)
        return self.occupancy(np.eye(self.n_actions)[act])

    def egalitarian(self) -> np.ndarray:
        """Occupancy maximising the smallest objective return (a linear programme)."""
        s, a, n = self.R.shape
        nv = s * a
        # variables: d (s*a), t; maximise t
        c = np.zeros(nv + 1)
        c[-1] = -1.0
        flow = np.zeros((s, nv + 1))
        for sp in range(s):
            flow[sp, sp * a : (sp + 1) * a] += 1.0
        flow[:, :nv] -= self.gamma * self.P.reshape(nv, s).T
        ub = np.hstack([-self.R.reshape(nv, n).T, np.ones((n, 1))])
        res = linprog(
            c,
            A_ub=ub,
            b_ub=np.zeros(n),
            A_eq=flow,
            b_eq=self.mu,
            bounds=[(0, None)] * nv + [(None, None)],
            method="highs",
        )
        if res.status != 0:  # pragma: no cover - the flow polytope is never empty
            raise DataError(f"transitions: the egalitarian linear programme failed ({res.message}).")
        return np.clip(res.x[:nv].reshape(s, a), 0.0, None)


def policy_from_occupancy(d: np.ndarray) -> np.ndarray:
    """Stationary policy ``d(s, a) / d(s)`` (uniform in states the occupancy never visits)."""
    ds = d.sum(axis=1, keepdims=True)
    uniform = np.full_like(d, 1.0 / d.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        pol = np.where(ds > 1e-300, d / ds, uniform)
    return pol / pol.sum(axis=1, keepdims=True)


def _utility(x: np.ndarray, p: float) -> float:
    """``log M_p(x)``, concave (the log of a positive concave function), computed stably."""
    if np.min(x) <= 0:
        return -math.inf
    lx = np.log(x)
    if p == 0:
        return float(np.mean(lx))
    return float((logsumexp(p * lx) - math.log(x.size)) / p)


def _utility_grad(x: np.ndarray, p: float) -> np.ndarray:
    """``d log M_p / dx_i = softmax(p log x)_i / x_i``."""
    lx = np.log(x)
    z = p * lx
    w = np.exp(z - logsumexp(z))
    return w / x


def _corrective(X: np.ndarray, w_old: np.ndarray, p: float) -> np.ndarray:
    """Next mixture weights over the vertices ``X`` (the last row is new).

    The best of: the old weights, a Frank-Wolfe line search towards the new vertex, and a
    fully corrective re-optimisation (SLSQP) started from the line search.
    """
    k = len(X)
    base = np.r_[w_old, 0.0]
    toward = np.eye(k)[-1] - base

    def along(step: float) -> float:
        return -_utility(X.T @ (base + step * toward), p)

    step = float(minimize_scalar(along, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-12}).x)
    best = base + step * toward
    if along(1.0) < along(step):
        best = base + toward

    def fun(v: np.ndarray) -> tuple[float, np.ndarray]:
        x = X.T @ v
        if np.min(x) <= 0:
            return math.inf, np.zeros_like(v)
        return -_utility(x, p), -(X @ _utility_grad(x, p))

    res = minimize(
        fun,
        best,
        jac=True,
        method="SLSQP",
        bounds=[(0.0, 1.0)] * k,
        constraints=[{"type": "eq", "fun": lambda v: np.sum(v) - 1.0, "jac": lambda v: np.ones_like(v)}],
        options={"maxiter": 300, "ftol": 1e-14},
    )
    v = np.clip(res.x, 0.0, None)
    v = v / v.sum() if v.sum() > 0 else best
    candidates = [base, best, v]
    return max(candidates, key=lambda c: _utility(X.T @ c, p))


def frank_wolfe(
    mdp: MDP, p: float, start: np.ndarray, *, tol: float, max_iter: int
) -> tuple[np.ndarray, float, float]:
    """Maximise the p-mean of returns: ``(occupancy, welfare, certified upper bound)``.

    Fully corrective Frank-Wolfe on the mixture of the vertices (deterministic policies)
    found so far, maximising the concave ``log M_p``; each new vertex is a value-iteration
    best response to its gradient. Concavity certifies
    ``OPT <= M_p(x) * exp(grad . (x_s - x))``.
    """
    occ = [start]
    X = mdp.returns(start)[None, :]
    w = np.ones(1)
    best_ub = math.inf
    for _ in range(max_iter):
        x = X.T @ w
        u = _utility(x, p)
        g = _utility_grad(x, p)
        d_s = mdp.best_response(g / g.sum(), tol=1e-10)
        x_s = mdp.returns(d_s)
        gap = max(float(g @ (x_s - x)), 0.0)
        best_ub = min(best_ub, math.exp(u + gap))
        value = math.exp(u)
        if best_ub - value <= tol * value:
            break
        if np.any(np.all(np.abs(X - x_s) <= 1e-13 * np.abs(x_s).max(), axis=1)):
            break  # pragma: no cover - the best response is already a vertex of the mixture
        keep = w > 1e-12
        occ = [o for o, kk in zip(occ, keep, strict=True) if kk] + [d_s]
        X = np.vstack([X[keep], x_s])
        w = _corrective(X, w[keep] / w[keep].sum(), p)
    d = np.einsum("k,ksa->sa", w, np.array(occ))
    value = float(p_mean(mdp.returns(d), p))
    return d, value, max(best_ub, value)
