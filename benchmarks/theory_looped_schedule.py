"""Looped transformers at many loops on a target whose per-step map changes with the step.

Xu & Sato (ICML 2025, Lemma 4.1 / Theorem 4.2) credit the timestep encoding with letting the
tied block change its map across loops. ``commutator_target`` needs exactly that: four phases
(rotate token offsets by +pi/2, push out, rotate back, pull in) whose averaged field is zero.
Plain looped block, the timestep-modulated block (TMLT) and the constant-scale ablation (same
gated block, scales independent of the loop index), width 8, 600 Adam steps, 5 seeds, at
``r = 2 ... 64``. The loop counts are trained in two calls of ``simulate_looped``
(``[4, 8, 16, 32]`` and ``[2, 64]``, each call seeds its loop counts by their position), as in
the figures of ``docs/theory/looped-transformers.md``. ``--quick``: ``r = 4, 16``, 300 steps.
``STUDY=flow32`` runs the docs' second study instead: ``flow_target`` at width 16 with 3 seeds
(``r = 4, 32``), independently 5 seeds with ``random_state=1`` and ``2`` (``r = 2, 32``) and
8 seeds with ``random_state=3`` (``r = 1, 32``); the log ratios at the largest ``r`` are pooled.
"""

from __future__ import annotations

import os
import time

import numpy as np

VARIANTS = ("plain", "timestep", "constant")


def _rows(sims: list, label: str) -> list[dict]:
    rows = []
    for sim in sims:
        var = sim.target_variance
        for j, r in enumerate(sim.loops):
            row: dict = {"run": label, "loops": int(r)}
            for name in VARIANTS:
                e = getattr(sim, name)[j]
                row[name] = float(e.mean() / var)
                row[name + "_se"] = float(e.std(ddof=1) / var / np.sqrt(e.size))
            for other in ("constant", "plain"):
                lr = np.log(sim.timestep[j] / getattr(sim, other)[j])
                row[f"log_ratio_timestep_{other}"] = float(lr.mean())
                row[f"log_ratio_timestep_{other}_se"] = float(lr.std(ddof=1) / np.sqrt(lr.size))
            rows.append(row)
    return sorted(rows, key=lambda row: row["loops"])


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.theory._looped_torch import _slope
    from trustlab.theory.looped_transformers import simulate_looped

    torch.set_num_threads(1)
    steps = 300 if quick else 600
    study = os.environ.get("STUDY", "commutator")
    t = time.process_time()
    if study == "flow32":  # two independent runs, reported apart
        base = {"target": "flow", "width": 16, "steps": steps}
        runs = {
            "A": [simulate_looped([4, 32], n_seeds=3, **base)],
            "B": [simulate_looped([2, 32], n_seeds=5, random_state=1, **base)],
            "C": [simulate_looped([2, 32], n_seeds=5, random_state=2, **base)],
            "D": [simulate_looped([1, 32], n_seeds=8, random_state=3, **base)],
        }
    else:  # one study split in two calls (each call seeds its loop counts by position)
        base = {"target": "commutator", "width": 8, "steps": steps, "n_seeds": 5}
        calls = [[4, 16]] if quick else [[4, 8, 16, 32], [2, 64]]
        runs = {"A": [simulate_looped(c, **base) for c in calls]}
    cpu = time.process_time() - t
    rows, notes = [], []
    for label, sims in runs.items():
        rows += _rows(sims, label)
        loops = np.concatenate([s.loops for s in sims])
        slopes = {v: _slope(np.log(loops), np.concatenate([getattr(s, v) for s in sims])) for v in VARIANTS}
        notes.append(
            f"run {label}: slope of log MSE on log r (OLS over (r, seed) points, seeds as replicates): "
            + ", ".join(f"{k} {a:.3f} +- {b:.3f}" for k, (a, b) in slopes.items())
        )
    top = [max(sims, key=lambda sim: sim.loops[-1]) for sims in runs.values()]
    pooled = np.concatenate([np.log(s.timestep[-1] / s.constant[-1]) for s in top])
    notes.append(
        f"largest r, all runs pooled: log(MSE_timestep / MSE_constant) {pooled.mean():.3f} +- "
        f"{pooled.std(ddof=1) / np.sqrt(pooled.size):.3f} over {pooled.size} seeds"
    )
    return {
        "title": f"Looped transformers on {base['target']}: test MSE / Var(y) "
        f"(N = 4, d = 2, width {base['width']}, {steps} Adam steps)",
        "rows": rows,
        "notes": [
            *notes,
            "log_ratio_timestep_*: mean over seeds of log(MSE_timestep / MSE_other) +- seed SE "
            "(< 0: the timestep encoding helps)",
            f"training CPU time {cpu:.0f} s (torch, 1 thread)",
        ],
    }
