"""The exact counterfactual solver: a LinearSCM and a linear classifier give a convex program.

In the scaled change ``y = (x'_m - x_m) / sx_m`` of the mutable features the problem is

    min ||y||_1 + lam ||G y||_2  s.t.  a . y >= r  (and ly <= y <= hy with bounds),

solved in closed form for ``lam = 0`` (Wachter: move the most effective feature) and
``lam = inf`` (minimum noise change); in between by SLSQP followed by an exact KKT polish
on the active face. With bounds: an LP (HiGHS) for ``lam = 0``, otherwise SLSQP with the
box, then the stationarity equations solved on the optimal face (Newton) and the KKT
conditions checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog, minimize

from trustlab.explain._cf_problem import Problem
from trustlab.explain.scm import LinearSCM

__all__ = ["ScaledLinear", "exact_cf", "linear_problem"]


@dataclass
class ScaledLinear:
    """The exact problem in scaled coordinates ``y = dx_m / sx_m``.

    min ||y||_1 + lam ||G y||_2  s.t.  a . y >= r.
    """

    G: np.ndarray
    a: np.ndarray
    r: float


def linear_problem(p: Problem) -> ScaledLinear | None:
    """The query as a :class:`ScaledLinear` program, or None when the exact solver does not apply."""
    if not isinstance(p.scm, LinearSCM):
        return None
    lin = p.model.linear()
    if lin is None:
        return None
    w, _ = lin
    m = p.mutable
    return ScaledLinear(p.noise_map(), p.sign * w[m] * p.sx[m], p.margin_gap(*lin))


def _norm_obj(y: np.ndarray, G: np.ndarray, lam: float) -> float:
    if math.isinf(lam):
        return float(np.linalg.norm(G @ y))
    return float(np.abs(y).sum() + lam * np.linalg.norm(G @ y))


def _solve_wachter(L: ScaledLinear) -> np.ndarray:
    j = int(np.argmax(np.abs(L.a)))
    y = np.zeros_like(L.a)
    y[j] = L.r / L.a[j]
    return y


def _solve_min_du(L: ScaledLinear) -> np.ndarray:
    h = np.linalg.solve(L.G.T, L.a)
    v = L.r * h / float(h @ h)
    return np.linalg.solve(L.G, v)


def _polish(L: ScaledLinear, y: np.ndarray, lam: float) -> np.ndarray | None:
    """Solve the KKT system on ``y``'s face exactly; None when it does not certify optimality."""
    scale = np.abs(y).max()
    J = np.abs(y) > 1e-7 * scale
    s = np.sign(y[J])
    GJ = L.G[:, J]
    H = GJ.T @ GJ
    try:
        Ha = np.linalg.solve(H, L.a[J])
        Hs = np.linalg.solve(H, s)
    except np.linalg.LinAlgError:
        return None
    qa, qs, ss = float(L.a[J] @ Ha), float(L.a[J] @ Hs), float(s @ Hs)
    disc = qs * qs - qa * (ss - lam * lam)
    if qa <= 0 or disc < 0:
        return None
    for mu in ((qs + math.sqrt(disc)) / qa, (qs - math.sqrt(disc)) / qa):
        v = mu * Ha - Hs  # H^{-1}(mu a - s)
        av = float(L.a[J] @ v)
        if av <= 0:
            continue
        rho = lam * L.r / av
        yJ = rho * v / lam
        if np.any(np.sign(yJ) != s):
            continue
        cand = np.zeros_like(y)
        cand[J] = yJ
        Gy = L.G @ cand
        grad = mu * L.a - lam * (L.G.T @ Gy) / np.linalg.norm(Gy)
        if np.all(np.abs(grad[~J]) <= 1 + 1e-9) and np.allclose(grad[J], s, atol=1e-7):
            return cand
    return None


def _solve_linear(L: ScaledLinear, lam: float) -> tuple[np.ndarray, str, int]:
    if lam == 0:
        return _solve_wachter(L), "optimal", 1
    if math.isinf(lam):
        return _solve_min_du(L), "optimal", 1
    starts = [_solve_wachter(L), _solve_min_du(L)]
    best = min(starts, key=lambda y: _norm_obj(y, L.G, lam))
    n = len(L.a)

    def f(z: np.ndarray) -> tuple[float, np.ndarray]:
        y = z[:n] - z[n:]
        Gy = L.G @ y
        nrm = float(np.linalg.norm(Gy))
        g = L.G.T @ Gy / max(nrm, 1e-300)
        return float(z.sum() + lam * nrm), np.concatenate([1 + lam * g, 1 - lam * g])

    z0 = np.concatenate([np.maximum(best, 0), np.maximum(-best, 0)])
    cons = {
        "type": "eq",
        "fun": lambda z: float(L.a @ (z[:n] - z[n:]) - L.r),
        "jac": lambda z: np.r_[L.a, -L.a],
    }
    res = minimize(
        f,
        z0,
        jac=True,
        method="SLSQP",
        bounds=[(0, None)] * (2 * n),
        constraints=[cons],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    y = res.x[:n] - res.x[n:]
    y = y * (L.r / float(L.a @ y)) if float(L.a @ y) > 0 else best
    polished = _polish(L, y, lam)
    if polished is not None:
        return polished, "optimal", 2
    cands = [y, *starts]
    return min(cands, key=lambda c: _norm_obj(c, L.G, lam)), "approximate", 2


def _box_max(a: np.ndarray, ly: np.ndarray, hy: np.ndarray) -> float:
    """``max a . y`` over the box ``ly <= y <= hy`` (may be inf)."""
    with np.errstate(invalid="ignore"):
        top = np.where(a > 0, a * hy, np.where(a < 0, a * ly, 0.0))
    return float(np.sum(top))


def _kkt_bounded(
    L: ScaledLinear, y: np.ndarray, lam: float, ly: np.ndarray, hy: np.ndarray, tol: float = 1e-8
) -> bool:
    """Whether a multiplier ``mu >= 0`` certifies ``y`` optimal (KKT conditions).

    The problem is ``min ||y||_1 + lam ||G y||_2`` (``||G y||^2`` for ``lam = inf``)
    subject to ``a . y >= r`` and ``ly <= y <= hy``.
    """
    scale = 1.0 + float(np.abs(y).max())
    if np.any(y < ly - 1e-9 * scale) or np.any(y > hy + 1e-9 * scale):
        return False
    slack = float(L.a @ y) - L.r
    if slack < -1e-9 * (1 + abs(L.r)):
        return False
    Gy = L.G @ y
    nrm = float(np.linalg.norm(Gy))
    if nrm == 0:
        return False
    l1 = not math.isinf(lam)
    grad = lam * (L.G.T @ Gy) / nrm if l1 else L.G.T @ Gy
    at_lo = np.abs(y - ly) <= 1e-9 * scale
    at_hi = np.abs(y - hy) <= 1e-9 * scale
    zero = np.abs(y) <= 1e-9 * scale
    mlo, mhi = 0.0, (0.0 if slack > 1e-9 * (1 + abs(L.r)) else math.inf)
    for j in range(len(y)):
        if at_lo[j] and at_hi[j]:
            continue
        if not l1:
            smin = smax = 0.0
        elif zero[j]:
            smin, smax = -1.0, 1.0
        else:
            smin = smax = float(np.sign(y[j]))
        # c_j = grad_j - mu a_j must lie in [cl, cu]
        if at_hi[j]:
            cl, cu = -math.inf, -smin
        elif at_lo[j]:
            cl, cu = -smax, math.inf
        else:
            cl, cu = -smax, -smin
        g, aj = float(grad[j]), float(L.a[j])
        t = tol * (1 + abs(g))
        if abs(aj) <= 1e-300:
            if not cl - t <= g <= cu + t:
                return False
            continue
        # cl <= g - mu aj <= cu  <=>  mu in [(g - cu)/aj, (g - cl)/aj] (aj > 0), reversed for aj < 0
        lo_m, hi_m = (g - cu - t) / aj, (g - cl + t) / aj
        if aj < 0:
            lo_m, hi_m = hi_m, lo_m
        mlo, mhi = max(mlo, lo_m), min(mhi, hi_m)
    return mlo <= mhi + tol * (1 + abs(mlo))


def _newton_face(
    L: ScaledLinear, y: np.ndarray, lam: float, ly: np.ndarray, hy: np.ndarray
) -> np.ndarray | None:
    """Solve the stationarity equations on ``y``'s face (coordinates at a bound or zero held fixed)."""
    scale = 1.0 + float(np.abs(y).max())
    y = y.copy()
    at_lo = np.abs(y - ly) <= 1e-7 * scale
    at_hi = np.abs(y - hy) <= 1e-7 * scale
    y[at_lo] = ly[at_lo]
    y[at_hi] = hy[at_hi]
    l1 = not math.isinf(lam)
    fixed = at_lo | at_hi
    if l1:
        zero = (np.abs(y) <= 1e-7 * scale) & ~fixed
        y[zero] = 0.0
        fixed |= zero
    J = np.flatnonzero(~fixed)
    active = float(L.a @ y) - L.r <= 1e-7 * (1 + abs(L.r))
    if len(J) == 0:
        return y
    s = np.sign(y[J]) if l1 else np.zeros(len(J))
    GJ, aJ = L.G[:, J], L.a[J]
    H = GJ.T @ GJ
    if not l1:  # min ||G y||^2: linear KKT system on the face
        k = len(J)
        rhs = -(GJ.T @ (L.G[:, fixed] @ y[fixed]))
        if active:
            M = np.block([[H, -aJ[:, None]], [aJ[None, :], np.zeros((1, 1))]])
            rhs = np.r_[rhs, L.r - float(L.a[fixed] @ y[fixed])]
        else:
            M = H
        try:
            sol = np.linalg.solve(M, rhs)
        except np.linalg.LinAlgError:
            return None
        y[J] = sol[:k]
        return y
    mu = 0.0
    for _ in range(60):
        Gy = L.G @ y
        n = float(np.linalg.norm(Gy))
        if not 0 < n < 1e150 or not math.isfinite(mu):
            return None  # Newton diverged from this start
        gJ = GJ.T @ Gy
        F1 = s + lam * gJ / n - mu * aJ
        D = lam * (H / n - np.outer(gJ, gJ) / (n * n * n))
        if active:
            F = np.r_[F1, float(L.a @ y) - L.r]
            M = np.block([[D, -aJ[:, None]], [aJ[None, :], np.zeros((1, 1))]])
        else:
            F, M = F1, D
        if float(np.abs(F).max()) < 1e-14 * scale:
            break
        try:
            step = np.linalg.solve(M, -F)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(step)):
            return None
        y[J] += step[: len(J)]
        if active:
            mu += float(step[-1])
    return y


def _solve_linear_bounded(
    L: ScaledLinear, lam: float, ly: np.ndarray, hy: np.ndarray
) -> tuple[np.ndarray | None, str, int]:
    """The exact problem with the box ``ly <= y <= hy`` (scaled feature changes); None when infeasible.

    ``lam = 0``: one LP (HiGHS). Otherwise SLSQP with the box, then the stationarity equations solved
    on the optimal face (Newton; a linear system for ``lam = inf``) and the KKT conditions checked.
    """
    n = len(L.a)
    if _box_max(L.a, ly, hy) < L.r - 1e-12 * (1 + abs(L.r)):
        return None, "infeasible", 0
    box: list[tuple[float | None, float | None]] = [
        (float(lo) if math.isfinite(lo) else None, float(hi) if math.isfinite(hi) else None)
        for lo, hi in zip(ly, hy, strict=True)
    ]
    c = np.r_[np.zeros(n), np.ones(n)]
    eye = np.eye(n)
    A_ub = np.block([[eye, -eye], [-eye, -eye], [-L.a[None, :], np.zeros((1, n))]])
    b_ub = np.r_[np.zeros(2 * n), -L.r]
    lp = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=box + [(0, None)] * n, method="highs")
    if lp.status == 2:
        return None, "infeasible", 1
    if lp.status != 0:
        return None, "not_found", 1
    y0 = np.clip(lp.x[:n], ly, hy)
    if lam == 0:
        return y0, "optimal", 1
    cons = [{"type": "ineq", "fun": lambda y: float(L.a @ y - L.r), "jac": lambda y: L.a}]
    if math.isinf(lam):
        res = minimize(
            lambda y: (float((L.G @ y) @ (L.G @ y)), 2 * L.G.T @ (L.G @ y)),
            y0,
            jac=True,
            method="SLSQP",
            bounds=box,
            constraints=cons,
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        y1 = np.clip(res.x, ly, hy)
    else:

        def f(z: np.ndarray) -> tuple[float, np.ndarray]:
            Gy = L.G @ z[:n]
            nrm = float(np.linalg.norm(Gy))
            g = L.G.T @ Gy / max(nrm, 1e-300)
            return float(z[n:].sum() + lam * nrm), np.r_[lam * g, np.ones(n)]

        cons += [
            {"type": "ineq", "fun": lambda z: z[n:] - z[:n], "jac": lambda z: np.c_[-eye, eye]},
            {"type": "ineq", "fun": lambda z: z[n:] + z[:n], "jac": lambda z: np.c_[eye, eye]},
        ]
        cons[0] = {
            "type": "ineq",
            "fun": lambda z: float(L.a @ z[:n] - L.r),
            "jac": lambda z: np.r_[L.a, 0 * L.a],
        }
        res = minimize(
            f,
            np.r_[y0, np.abs(y0)],
            jac=True,
            method="SLSQP",
            bounds=box + [(0, None)] * n,
            constraints=cons,
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        y1 = np.clip(res.x[:n], ly, hy)

    def obj(y: np.ndarray) -> float:
        return float((L.G @ y) @ (L.G @ y)) if math.isinf(lam) else _norm_obj(y, L.G, lam)

    cands = [y for y in (y1, y0) if float(L.a @ y) >= L.r - 1e-12 * (1 + abs(L.r))]
    for y in list(cands):
        # the face SLSQP found, then its neighbours (one coordinate moved to zero, a bound or either sign)
        eps = 1e-5 * (1.0 + float(np.abs(y).max()))
        starts = [y]
        for j in range(n):
            for v in (0.0, ly[j], hy[j], eps, -eps):
                if math.isfinite(v) and ly[j] <= v <= hy[j] and v != y[j]:
                    z = y.copy()
                    z[j] = v
                    starts.append(z)
        for z in starts:
            polished = _newton_face(L, z, lam, ly, hy)
            if polished is not None and _kkt_bounded(L, polished, lam, ly, hy):
                return np.clip(polished, ly, hy), "optimal", 2
    if not cands:
        return y0, "approximate", 2
    return min(cands, key=obj), "approximate", 2


def exact_cf(p: Problem, L: ScaledLinear, lam: float) -> tuple[np.ndarray | None, str, int]:
    """The optimal counterfactual (None when the bounds make it infeasible), its status and solves."""
    if p.bounded:
        ly, hy = p.scaled_box()
        yb, status, calls = _solve_linear_bounded(L, lam, ly, hy)
        if yb is None:
            return None, status, calls
        y = yb
    else:
        y, status, calls = _solve_linear(L, lam)
    m = p.mutable
    x_cf = p.x.copy()
    x_cf[m] += y * p.sx[m]
    if p.bounded:
        x_cf[m] = np.clip(x_cf[m], p.lo[m], p.hi[m])
    return x_cf, status, calls
