"""The paper's penalty solver for differentiable models (Adam on a penalised objective)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from trustlab.explain._cf_problem import Problem

__all__ = ["penalty_cf"]


def penalty_cf(
    p: Problem, f: Callable[[np.ndarray], tuple[float, np.ndarray]], deadline: float
) -> tuple[np.ndarray, str, int]:
    """The paper's penalty method: Adam on ``d_X + lam d_U + beta CE(h(x'), target)``.

    Over the scaled mutable feature change ``y`` of a LinearSCM (``u'`` follows linearly), from
    ``y = 0`` (``u' = u``); ``|.|`` smoothed by ``sqrt(z^2 + 1e-8)``; ``beta = 1, 10, 100, ...``
    (at most 8 rounds of 500 steps) until a valid iterate appears; returns the valid iterate
    with the lowest objective.
    """
    m = p.mutable
    G = p.noise_map()
    sign = p.sign
    lam = p.lam
    ly, hy = p.scaled_box()
    y = np.clip(np.zeros(int(m.sum())), ly, hy)  # projected onto the bounds
    mom, vel = np.zeros_like(y), np.zeros_like(y)
    lr, b1, b2 = 0.01, 0.9, 0.999
    best, best_f, steps, t = None, math.inf, 0, 0
    x = p.x.copy()
    for round_ in range(8):
        beta = 10.0**round_
        for _ in range(500):
            x[m] = p.x[m] + y * p.sx[m]
            logit, gx = f(x)
            steps += 1
            Gy = G @ y
            nl1 = float(np.abs(y).sum())
            nl2 = float(np.linalg.norm(Gy))
            if sign * logit > 0:
                obj = nl2 if math.isinf(lam) else nl1 + lam * nl2
                if obj < best_f:
                    best, best_f = x.copy(), obj
            margin = -sign * logit
            g_ce = -sign / (1 + math.exp(-margin)) * gx[m] * p.sx[m] if margin > -700 else 0.0 * y
            g_l2 = G.T @ Gy / math.sqrt(nl2 * nl2 + 1e-8)
            if math.isinf(lam):
                g = g_l2 + beta * g_ce
            else:
                g = y / np.sqrt(y * y + 1e-8) + lam * g_l2 + beta * g_ce
            t += 1
            if not np.all(np.abs(g) < 1e150):  # Adam squares g: a gradient this large has no sensible step
                break
            mom = b1 * mom + (1 - b1) * g
            vel = b2 * vel + (1 - b2) * g * g
            y = np.clip(y - lr * (mom / (1 - b1**t)) / (np.sqrt(vel / (1 - b2**t)) + 1e-8), ly, hy)
            if time.perf_counter() > deadline:
                return (best if best is not None else p.x.copy()), "time_limit", steps
        if best is not None:
            break
    if best is None:
        return p.x.copy(), "not_found", steps
    return best, "approximate", steps
