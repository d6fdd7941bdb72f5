"""Looped transformers (Xu & Sato, ICML 2025): test error against the number of loops.

No peer library trains looped transformers, so the reference is the paper's own comparison:
the weight-tied block (plain), the Timestep-Modulated Looped Transformer (timestep) and, as an
ablation, the same gated block with loop-independent scales (constant). Each row is one loop
count; errors are the mean test MSE over seeds divided by the target variance, with the
seed standard error. ``TARGET`` selects the sequence-to-sequence function (``flow``: the
time-inhomogeneous token ODE of ``flow_target``; ``flow_autonomous``: its time-independent
control; ``default``: ``default_target``).
"""

from __future__ import annotations

import os
import time

import numpy as np


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.theory.looped_transformers import simulate_looped

    torch.set_num_threads(1)
    target = os.environ.get("TARGET", "flow")
    loops = [1, 2, 4] if quick else [1, 2, 4, 8]
    steps = 300 if quick else 600
    t = time.perf_counter()
    sim = simulate_looped(loops, target=target, steps=steps, n_seeds=3)
    wall = time.perf_counter() - t
    v = sim.target_variance
    rows = []
    for j, r in enumerate(sim.loops):
        row: dict = {"loops": int(r)}
        for name in ("plain", "timestep", "constant"):
            e = getattr(sim, name)[j] / v
            row[name] = float(e.mean())
            row[name + "_se"] = float(e.std(ddof=1) / np.sqrt(e.size))
        row["log_ratio_timestep_plain"] = float(np.mean(np.log(sim.timestep[j] / sim.plain[j])))
        row["log_ratio_timestep_constant"] = float(np.mean(np.log(sim.timestep[j] / sim.constant[j])))
        rows.append(row)
    return {
        "title": f"Looped transformer test MSE / Var(y) on '{target}' (N = 4, d = 2, width 16, "
        f"{steps} Adam steps, 3 seeds)",
        "rows": rows,
        "notes": [
            f"slope of log MSE on log r: plain {sim.plain_slope:.3f} +- {sim.plain_slope_se:.3f}, "
            f"timestep {sim.timestep_slope:.3f} +- {sim.timestep_slope_se:.3f} (OLS SE, seeds as replicates)",
            "log_ratio_*: mean over seeds of log(MSE_timestep / MSE_other) "
            "(< 0: the timestep encoding helps)",
            f"training wall time {wall:.0f} s on this machine (torch, 1 thread)",
        ],
    }
