"""Looped transformers at many loops on a target whose per-step map changes with the step.

Xu & Sato (ICML 2025, Lemma 4.1 / Theorem 4.2) credit the timestep encoding with letting the
tied block change its map across loops. ``commutator_target`` needs exactly that: four phases
(rotate token offsets by +pi/2, push out, rotate back, pull in) whose averaged field is zero.
Plain looped block, the timestep-modulated block (TMLT) and the constant-scale ablation (same
gated block, scales independent of the loop index), width 8, 600 Adam steps, 5 seeds, at
``r = 2 ... 64``. The loop counts are trained in two calls of ``simulate_looped``
(``[4, 8, 16, 32]`` and ``[2, 64]``, each call seeds its loop counts by their position), as in
the figures of ``docs/theory/looped-transformers.md``. ``--quick``: ``r = 4, 16``, 300 steps.
"""

from __future__ import annotations

import time

import numpy as np


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.theory._looped_torch import _slope
    from trustlab.theory.looped_transformers import simulate_looped

    torch.set_num_threads(1)
    calls = [[4, 16]] if quick else [[4, 8, 16, 32], [2, 64]]
    steps = 300 if quick else 600
    t = time.process_time()
    sims = [simulate_looped(c, target="commutator", width=8, steps=steps, n_seeds=5) for c in calls]
    cpu = time.process_time() - t
    loops = np.concatenate([s.loops for s in sims])
    order = np.argsort(loops)
    variants = ("plain", "timestep", "constant")
    errs = {v: np.concatenate([getattr(s, v) for s in sims])[order] for v in variants}
    loops = loops[order]
    var = sims[0].target_variance
    rows = []
    for j, r in enumerate(loops):
        row: dict = {"loops": int(r)}
        for name, e in errs.items():
            row[name] = float(e[j].mean() / var)
            row[name + "_se"] = float(e[j].std(ddof=1) / var / np.sqrt(e[j].size))
        for other in ("constant", "plain"):
            lr = np.log(errs["timestep"][j] / errs[other][j])
            row[f"log_ratio_timestep_{other}"] = float(lr.mean())
            row[f"log_ratio_timestep_{other}_se"] = float(lr.std(ddof=1) / np.sqrt(lr.size))
        rows.append(row)
    slopes = {k: _slope(np.log(loops), e) for k, e in errs.items()}
    big = loops >= 16
    tail = {k: _slope(np.log(loops[big]), e[big]) for k, e in errs.items()} if big.sum() >= 2 else {}
    return {
        "title": "Looped transformers on commutator_target: test MSE / Var(y) "
        f"(N = 4, d = 2, width 8, {steps} Adam steps, 5 seeds)",
        "rows": rows,
        "slopes": {k: {"slope": v[0], "se": v[1]} for k, v in slopes.items()},
        "slopes_r_ge_16": {k: {"slope": v[0], "se": v[1]} for k, v in tail.items()},
        "notes": [
            "slope of log MSE on log r (OLS over (r, seed) points, SE with seeds as replicates): "
            + ", ".join(f"{k} {a:.3f} +- {b:.3f}" for k, (a, b) in slopes.items()),
            "r >= 16 only: " + ", ".join(f"{k} {a:.3f} +- {b:.3f}" for k, (a, b) in tail.items()),
            "log_ratio_timestep_*: mean over seeds of log(MSE_timestep / MSE_other) +- seed SE "
            "(< 0: the timestep encoding helps)",
            f"training CPU time {cpu:.0f} s (torch, 1 thread)",
        ],
    }
