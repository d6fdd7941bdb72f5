"""Samples-to-recovery of online SGD from random, pre-trained (PCA) and transferred starts.

Two settings of Jones-McCormick, Jagannath & Sen (ICML 2025), link ``He_3 / sqrt 6``:

* isotropic inputs (polynomial gain): random start at the effective dynamics' step, ``d^{k-1} = d^2``
  predicted, vs a transferred start (overlap 0.3), ``d``;
* a spike ``lambda = 0.25`` along the target (exponential gain; trustlab's derivation): a random
  start is trapped near the equator (``exp(c d)``), a PCA start (``32 d`` unlabeled inputs) is not.

Each row: medians over runs of the exact overlap chain of spherical online SGD, the closed form
(mean first passage of the overlap's diffusion limit), fitted slopes of log-samples on ``log d``
and on ``d`` with bootstrap standard errors. Speed: the overlap chain against full
``d``-dimensional SGD on the same runs (the baseline a user would otherwise run).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

HE3 = [0.0, 0.0, 0.0, 1 / np.sqrt(6)]


def run(quick: bool = False) -> dict:
    from trustlab.theory import sample_complexity, simulate_spiked_sample_complexity, spiked_sample_complexity

    runs = 16 if quick else 48
    rows = []
    iso = [16, 32, 64] if quick else [16, 24, 32, 48, 64]
    warm_kw: dict[str, Any] = {"init": "transfer", "initial_overlap": 0.3}
    settings: list[tuple[str, list[int], dict[str, Any], Any]] = [
        (
            "isotropic, transfer m0=0.3",
            iso,
            {"spike": 0.0, "threshold": 0.5, **warm_kw},
            [sample_complexity(HE3, d, step_scale=0.6, **warm_kw).step_size for d in iso],
        ),
        (
            "isotropic, random",
            iso,
            {"spike": 0.0, "threshold": 0.5, "budget_factor": 6},
            [sample_complexity(HE3, d, step_scale=0.6).step_size for d in iso],
        ),
    ]
    spiked = [24, 48, 72] if quick else [24, 48, 72, 96, 120]
    settings += [
        ("spike 0.25, pretrained (PCA)", spiked, {"init": "pretrained"}, 0.014),
        ("spike 0.25, transfer m0=0.7", spiked, {"init": "transfer", "initial_overlap": 0.7}, 0.014),
        ("spike 0.25, random", spiked, {}, 0.014),
    ]
    for name, dims, kw, step in settings:
        t = time.perf_counter()
        sim = simulate_spiked_sample_complexity(HE3, dims, step_size=step, n_runs=runs, **kw)
        rows.append(
            {
                "setting": name,
                "dimensions": " ".join(str(d) for d in dims),
                "median_samples": " ".join(f"{m:.0f}" for m in sim.median_samples),
                "closed_form": " ".join(f"{p:.0f}" for p in sim.predicted_samples),
                "success": f"{sim.success_rate.min():.2f}",
                "loglog_slope": f"{sim.log_exponent:.2f} +- {sim.log_exponent_se:.2f}",
                "closed_loglog": round(sim.predicted_log_exponent, 2),
                "loglin_slope": f"{sim.log_rate:.4f} +- {sim.log_rate_se:.4f}",
                "closed_loglin": round(sim.predicted_log_rate, 4),
                "sim_s": round(time.perf_counter() - t, 1),
            }
        )
    c = spiked_sample_complexity(HE3, 64)
    far = [spiked_sample_complexity(HE3, d).samples for d in (1000, 2000)]
    t = time.perf_counter()
    simulate_spiked_sample_complexity(HE3, [16, 24], n_runs=16, n_bootstrap=10, random_state=3)
    chain_s = time.perf_counter() - t
    t = time.perf_counter()
    simulate_spiked_sample_complexity(HE3, [16, 24], n_runs=16, n_bootstrap=10, method="full", random_state=3)
    full_s = time.perf_counter() - t
    return {
        "title": f"Online SGD samples to overlap threshold, He3/sqrt6, {runs} runs per dimension",
        "rows": rows,
        "notes": [
            f"spike 0.25, step 0.014: trap edge m* = {c.trap_edge:.3f}, drift positive up to "
            f"{c.drift_end:.2f}, "
            f"escape rate c = {c.escape_rate:.4f}; closed form at d = 1000 -> 2000: log-samples slope "
            f"{(np.log(far[1]) - np.log(far[0])) / 1000:.4f} per dimension; PCA start overlap "
            f"{spiked_sample_complexity(HE3, 64, init='pretrained').initial_overlap:.3f}.",
            f"overlap chain {chain_s:.1f} s vs full d-dimensional SGD {full_s:.1f} s on the same 2 x 16 runs "
            "(random starts, d = 16, 24); the chain's cost does not grow with d.",
            "closed_form: mean first-passage time of the overlap's diffusion limit (reflected at the trap's "
            "edge for starts beyond it); medians of escape times sit below means.",
        ],
    }
