"""The optimisation problems behind confined regions (Lawless et al., ICML 2025).

- :func:`solve_milp`: the exact MILP for separable action sets (HiGHS);
- :func:`solve_miqcp`: the paper's MIQCP with Farkas multipliers (SCIP);
- :func:`find_fixed_individual_miqcp`: the individual-mode MIQCP;
- :func:`box_max_score`: the LP that re-checks a box.

Each box solver returns ``(status, (lower, upper) or None, seconds)`` with status
``"found"``, ``"infeasible"`` or ``"time_limit"``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from trustlab.explain._rec_regions import Box
from trustlab.explain.recourse_actions import ActionSet, OneHot

__all__ = [
    "LinearSystem",
    "add_disjunctions",
    "box_max_score",
    "disjoint_rows",
    "find_fixed_individual_miqcp",
    "linear_system",
    "milp_applies",
    "solve_milp",
    "solve_miqcp",
]

_Solved = tuple[str, tuple[np.ndarray, np.ndarray] | None, float]


@dataclass(frozen=True)
class LinearSystem:
    """``G x + H a <= g``; region rows have their right-hand side in u/l (row indices)."""

    G: np.ndarray
    H: np.ndarray
    g: np.ndarray  # NaN on region rows
    row_u: np.ndarray
    row_l: np.ndarray


def linear_system(A: ActionSet, w: np.ndarray, b: float) -> LinearSystem:
    d = len(A)
    eye = np.eye(d)
    zero = np.zeros((d, d))
    blocks_G = [eye, -eye, zero, zero, eye, -eye]
    blocks_H = [zero, zero, eye, -eye, eye, -eye]
    blocks_g = [np.full(d, np.nan), np.full(d, np.nan), A.step_ub, -A.step_lb, A.ub, -A.lb]
    Gc, Hc, gc = A.constraint_rows()
    G = np.vstack([*blocks_G, Gc, -w[None, :]])
    H = np.vstack([*blocks_H, Hc, -w[None, :]])
    g = np.concatenate([*blocks_g, gc, [b]])
    return LinearSystem(G, H, g, np.arange(d), np.arange(d, 2 * d))


def milp_applies(A: ActionSet) -> bool:
    """Whether the exact MILP applies: joint constraints only on immutable one-hot groups."""
    idx = A.index
    return all(
        isinstance(c, OneHot) and not any(A.actionable[idx[n]] for n in c.names) for c in A.constraints
    ) and len({n for c in A.constraints for n in c.names}) == sum(len(c.names) for c in A.constraints)


def box_max_score(A: ActionSet, w: np.ndarray, b: float, lower: np.ndarray, upper: np.ndarray) -> float:
    """Maximise ``w^T (x + a) + b`` over x in the box and the feasible (continuous) actions, by LP."""
    d = len(A)
    Gc, Hc, gc = A.constraint_rows()
    eye = np.eye(d)
    A_ub = np.vstack([np.hstack([eye, eye]), np.hstack([-eye, -eye]), np.hstack([Gc, Hc])])
    b_ub = np.concatenate([A.ub, -A.lb, gc])
    bounds = list(zip(lower, upper, strict=True)) + list(zip(A.step_lb, A.step_ub, strict=True))
    res = linprog(-np.concatenate([w, w]), A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        return -math.inf  # no feasible (x, a) in the box: vacuously confined
    return float(-res.fun + b)


def disjoint_rows(
    A: ActionSet, previous: list[Box], gap: float
) -> list[list[tuple[str, int, float, float]]] | None:
    """Per earlier box, big-M alternatives ``(kind, j, bound, big)``; None if impossible.

    ``("l", j, bound, big)``: the new box lies above (``l_j >= bound``, relaxed by ``big``);
    ``("u", j, bound, big)``: below (``u_j <= bound``).
    """
    PL, PU = A.population_lb, A.population_ub
    out = []
    for box in previous:
        alts = []
        for j in range(len(A)):
            if box.upper[j] + gap <= PU[j] + 1e-9:  # new box above: l_j >= u_j^k + gap
                alts.append(("l", j, box.upper[j] + gap, box.upper[j] + gap - PL[j]))
            if box.lower[j] - gap >= PL[j] - 1e-9:  # new box below: u_j <= l_j^k - gap
                alts.append(("u", j, box.lower[j] - gap, PU[j] - box.lower[j] + gap))
        if not alts:
            return None
        out.append(alts)
    return out


def add_disjunctions(
    alternatives: list[list[tuple[str, int, float, float]]],
    add: Callable[[str, int, float, float], Any],
    at_least_one: Callable[[list[Any]], Any],
) -> None:
    """Per earlier box, one binary per way of lying apart from it (``add``), at least one on.

    ``add(kind, j, bound, big)`` creates the binary ``z`` and its big-M row, returning ``z``;
    the same disjunction serves the MILP (rows for HiGHS) and the MIQCP (SCIP constraints).
    """
    for box_alts in alternatives:
        at_least_one([add(*alt) for alt in box_alts])


def solve_milp(
    A: ActionSet,
    w: np.ndarray,
    b: float,
    previous: list[Box],
    *,
    gap: float,
    mip_gap: float,
    time_left: float | None,
) -> _Solved:
    """Exact MILP for separable action sets (HiGHS through scipy.optimize.milp).

    For a box ``[l, u]`` and separable actions, the largest reachable score is
    ``b + sum_j V_j`` with ``V_j = w_j min(ub_j, u_j + step_ub_j)`` (``w_j > 0``),
    ``w_j max(lb_j, l_j + step_lb_j)`` (``w_j < 0``), and for an immutable one-hot
    group the largest coefficient among the levels the box allows. Each ``V_j`` is
    the minimum of two linear functions, so ``c_j >= V_j`` is one binary
    disjunction; confinement is ``b + sum_j c_j <= 0``.
    """
    d = len(A)
    PL, PU = A.population_lb, A.population_ub
    idx = A.index
    grouped = {idx[n] for c in A.constraints for n in c.names}
    n_var = 2 * d
    lbs = list(PL) + list(PL)
    ubs = list(PU) + list(PU)
    integ = [0 if t == "float" else 1 for t in A.dtype] * 2
    rows: list[tuple[dict[int, float], float, float]] = []  # (coefs, lo, hi)

    def new_var(lo: float, hi: float, integer: bool) -> int:
        nonlocal n_var
        lbs.append(lo)
        ubs.append(hi)
        integ.append(1 if integer else 0)
        n_var += 1
        return n_var - 1

    for j in range(d):  # u_j >= l_j
        rows.append(({j: 1.0, d + j: -1.0}, 0.0, np.inf))
    conf: dict[int, float] = {}
    const = b
    for j in range(d):
        if j in grouped or w[j] == 0:
            continue
        if w[j] > 0:  # V = min(w U, w (u + aub)) over u in [PL, PU]
            var, f2, shift = j, w[j] * A.ub[j], w[j] * A.step_ub[j]
        else:  # V = min(w L, w (l + alb))
            var, f2, shift = d + j, w[j] * A.lb[j], w[j] * A.step_lb[j]
        f1_lo = min(w[j] * PL[j], w[j] * PU[j]) + shift
        f1_hi = max(w[j] * PL[j], w[j] * PU[j]) + shift
        if f1_lo >= f2 - 1e-12:  # always reaches the bound
            const += f2
        elif f1_hi <= f2 + 1e-12:  # never reaches it: linear
            conf[var] = conf.get(var, 0.0) + w[j]
            const += shift
        else:
            c = new_var(-np.inf, np.inf, False)
            z = new_var(0.0, 1.0, True)
            m1, m2 = f1_hi - f2, f2 - f1_lo
            rows.append(({c: 1.0, var: -w[j], z: m1}, shift, np.inf))  # c >= f1 - m1 z
            rows.append(({c: 1.0, z: -m2}, f2 - m2, np.inf))  # c >= f2 - m2 (1 - z)
            conf[c] = 1.0
    for con in A.constraints:  # immutable one-hot groups
        members = [idx[n] for n in con.names]
        wk = w[members]
        c = new_var(float(wk.min()), np.inf, False)
        for k in members:
            rows.append(({c: 1.0, k: -(w[k] - wk.min())}, float(wk.min()), np.inf))
        rows.append(({k: 1.0 for k in members}, 1.0, np.inf))  # some level allowed
        rows.append(({d + k: 1.0 for k in members}, -np.inf, 1.0))  # at most one fixed
        for k in members:
            for j in members:
                if j != k:
                    rows.append(({d + k: 1.0, j: 1.0}, -np.inf, 1.0))
        conf[c] = conf.get(c, 0.0) + 1.0
    rows.append((conf, -np.inf, -const))
    alts = disjoint_rows(A, previous, gap)
    if alts is None:
        return "infeasible", None, 0.0

    def apart(kind: str, j: int, bound: float, big: float) -> int:
        z = new_var(0.0, 1.0, True)
        if kind == "l":  # l_j - big z >= bound - big
            rows.append(({d + j: 1.0, z: -big}, bound - big, np.inf))
        else:  # u_j + big z <= bound + big
            rows.append(({j: 1.0, z: big}, -np.inf, bound + big))
        return z

    add_disjunctions(alts, apart, lambda zs: rows.append(({z: 1.0 for z in zs}, 1.0, np.inf)))
    mat = np.zeros((len(rows), n_var))
    lo_r = np.empty(len(rows))
    hi_r = np.empty(len(rows))
    for r, (coefs, lo_v, hi_v) in enumerate(rows):
        for k, v in coefs.items():
            mat[r, k] += v
        lo_r[r], hi_r[r] = lo_v, hi_v
    obj = np.zeros(n_var)
    inv = 1.0 / (PU - PL + 1.0)
    obj[:d] = -inv
    obj[d : 2 * d] = inv
    options: dict[str, Any] = {"mip_rel_gap": float(mip_gap) if mip_gap > 0 else 1e-9}
    if time_left is not None:
        options["time_limit"] = max(float(time_left), 0.01)
    t0 = time.perf_counter()
    res = milp(
        obj,
        constraints=[LinearConstraint(mat, lo_r, hi_r)],
        bounds=Bounds(np.array(lbs), np.array(ubs)),
        integrality=np.array(integ),
        options=options,
    )
    elapsed = time.perf_counter() - t0
    if res.x is None:
        return ("infeasible" if res.status == 2 else "time_limit"), None, elapsed
    return ("found" if res.status == 0 else "time_limit"), (res.x[d : 2 * d], res.x[:d]), elapsed


def solve_miqcp(
    A: ActionSet,
    S: LinearSystem,
    w: np.ndarray,
    b: float,
    previous: list[Box],
    *,
    gap: float,
    mip_gap: float,
    dual_bound: float,
    time_left: float | None,
) -> _Solved:
    """The paper's MIQCP (population mode), solved by SCIP; see :mod:`trustlab.explain.recourse`."""
    from pyscipopt import Model, quicksum

    d = len(A)
    PL, PU = A.population_lb, A.population_ub
    vt = ["C" if t == "float" else "I" for t in A.dtype]
    m = Model("confined_region")
    m.hideOutput()
    m.setParam("numerics/feastol", 1e-9)
    m.setParam("limits/gap", float(mip_gap))
    if time_left is not None:
        m.setParam("limits/time", max(time_left, 0.01))
    u = [m.addVar(f"u{j}", vtype=vt[j], lb=PL[j], ub=PU[j]) for j in range(d)]
    lo = [m.addVar(f"l{j}", vtype=vt[j], lb=PL[j], ub=PU[j]) for j in range(d)]
    for j in range(d):
        m.addCons(u[j] >= lo[j])
    n_rows = len(S.g)
    M = dual_bound
    y = [m.addVar(f"y{i}", lb=0.0, ub=M) for i in range(n_rows - 1)]
    # Farkas conditions; the last row's multiplier is fixed to 1.
    for mat in (S.G, S.H):
        for j in range(d):
            col = mat[:, j]
            nz = np.flatnonzero(col[:-1])
            m.addCons(quicksum(float(col[i]) * y[i] for i in nz) + float(col[-1]) == 0)
    const = [i for i in range(n_rows - 1) if np.isfinite(S.g[i])]
    m.addCons(
        quicksum(y[S.row_u[j]] * u[j] - y[S.row_l[j]] * lo[j] for j in range(d))
        + quicksum(float(S.g[i]) * y[i] for i in const if S.g[i] != 0)
        + b
        <= 0
    )
    # Valid inequality: the box lies in the negative half-space.
    m.addCons(
        quicksum(float(max(w[j], 0)) * u[j] + float(min(w[j], 0)) * lo[j] for j in range(d) if w[j] != 0)
        <= -b
    )
    # A witness point in the box that satisfies the population (encoding) constraints.
    xb = [m.addVar(f"x{j}", vtype=vt[j], lb=PL[j], ub=PU[j]) for j in range(d)]
    for j in range(d):
        m.addCons(xb[j] >= lo[j])
        m.addCons(xb[j] <= u[j])
    Gc, _, gc = A.constraint_rows()
    for row, rhs in zip(Gc, gc, strict=True):
        nz = np.flatnonzero(row)
        if nz.size:
            m.addCons(quicksum(float(row[j]) * xb[j] for j in nz) <= float(rhs))
    # A box never fixes one level of a one-hot group and allows another.
    for con in A.constraints:
        if isinstance(con, OneHot):
            members = [A.index[n] for n in con.names]
            for k in members:
                for j in members:
                    if j != k:
                        m.addCons(lo[k] + u[j] <= 1)
    # Disjoint from the boxes found before (big-M from the population bounds).
    alts = disjoint_rows(A, previous, gap)
    if alts is None:
        return "infeasible", None, 0.0

    def apart(kind: str, j: int, bound: float, big: float) -> Any:
        z = m.addVar(vtype="B")
        m.addCons(lo[j] >= bound - big * (1 - z) if kind == "l" else u[j] <= bound + big * (1 - z))
        return z

    add_disjunctions(alts, apart, lambda zs: m.addCons(quicksum(zs) >= 1))
    width = PU - PL + 1.0
    m.setObjective(quicksum((u[j] - lo[j]) * (1.0 / width[j]) for j in range(d)), "maximize")
    t0 = time.perf_counter()
    m.optimize()
    elapsed = time.perf_counter() - t0
    status = m.getStatus()
    if m.getNSols() == 0:
        return ("infeasible" if status == "infeasible" else "time_limit"), None, elapsed
    sol = m.getBestSol()
    lv = np.array([m.getSolVal(sol, v) for v in lo])
    uv = np.array([m.getSolVal(sol, v) for v in u])
    return ("time_limit" if status == "timelimit" else "found"), (lv, uv), elapsed


def find_fixed_individual_miqcp(
    A: ActionSet, S: LinearSystem, w: np.ndarray, b: float, *, dual_bound: float, time_limit: float | None
) -> np.ndarray | None:
    """One individual in the population region with a fixed prediction (individual mode).

    Solves the MIQCP whose variable is the point ``x`` itself: ``w^T x + b <= 0``
    and a Farkas multiplier ``y`` with ``H^T y = 0``, ``y_last = 1`` and
    ``sum_i y_i (g_i - G_i x) <= 0``. Returns None when there is none (or the time
    limit ran out first).
    """
    from pyscipopt import Model, quicksum

    d = len(A)
    vt = ["C" if t == "float" else "I" for t in A.dtype]
    m = Model("fixed_individual")
    m.hideOutput()
    m.setParam("numerics/feastol", 1e-9)
    if time_limit is not None:
        m.setParam("limits/time", float(time_limit))
    x = [m.addVar(f"x{j}", vtype=vt[j], lb=A.population_lb[j], ub=A.population_ub[j]) for j in range(d)]
    keep = [i for i in range(len(S.g) - 1) if np.isfinite(S.g[i])]  # region rows drop out
    M = dual_bound
    y = {i: m.addVar(f"y{i}", lb=0.0, ub=M) for i in keep}
    for j in range(d):
        rows_j = [i for i in keep if S.H[i, j] != 0]
        m.addCons(quicksum(float(S.H[i, j]) * y[i] for i in rows_j) + float(S.H[-1, j]) == 0)
    terms = []
    for i in keep:
        cols = np.flatnonzero(S.G[i])
        terms.append(float(S.g[i]) * y[i] - quicksum(float(S.G[i, j]) * y[i] * x[j] for j in cols))
    m.addCons(quicksum(terms) + b + quicksum(float(w[j]) * x[j] for j in range(d)) <= 0)
    m.addCons(quicksum(float(w[j]) * x[j] for j in range(d)) <= -b)
    Gc, _, gc = A.constraint_rows()
    for row, rhs in zip(Gc, gc, strict=True):
        nz = np.flatnonzero(row)
        if nz.size:
            m.addCons(quicksum(float(row[j]) * x[j] for j in nz) <= float(rhs))
    m.optimize()
    if m.getNSols() == 0:
        return None
    sol = m.getBestSol()
    xv = np.array([m.getSolVal(sol, v) for v in x])
    integral = np.array([t != "float" for t in A.dtype])
    return np.where(integral, np.round(xv), xv)
