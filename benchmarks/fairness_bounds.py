"""Fairness generalisation bounds (002-11): trustlab beside fairlearn and beside Monte Carlo.

1. The fairness loss: trustlab's ``fairness_loss`` beside fairlearn's
   ``demographic_parity_difference`` / ``equalized_odds_difference`` on the same 200 random
   decision vectors (agreement and speed ratio).
2. The population fairness risk of the simulation: trustlab's exact binomial computation
   beside a 20,000-draw Monte-Carlo estimate (agreement in Monte-Carlo standard errors, speed).
3. The bounds beside the measured gap and the classical uniform-convergence bound.

Run: ``python -m benchmarks fairness_bounds [--quick]``.
"""

from __future__ import annotations

import time

import numpy as np
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

from trustlab.fairness.bounds import fairness_loss
from trustlab.theory.fairness_generalization import population_fairness_risk, simulate_fairness_generalization


def _losses(rows: list[dict], n_cases: int) -> None:
    rng = np.random.default_rng(0)
    cases = [
        (rng.integers(0, 2, 2000), rng.choice(["a", "b", "c"], 2000), rng.integers(0, 2, 2000))
        for _ in range(n_cases)
    ]
    for name, theirs, kw in [
        ("DP loss", demographic_parity_difference, {}),
        ("EO loss", equalized_odds_difference, {"criterion": "equalized_odds"}),
    ]:
        t = time.perf_counter()
        a = [fairness_loss(p, sensitive_features=s, y_true=y, **kw) for p, s, y in cases]
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        b = [theirs(y, p, sensitive_features=s) for p, s, y in cases]
        t_theirs = time.perf_counter() - t
        rows.append(
            {
                "comparison": f"{name}: trustlab vs fairlearn ({n_cases} vectors)",
                "agreement": f"max |diff| {np.max(np.abs(np.subtract(a, b))):.1e}",
                "trustlab_ms": 1e3 * t_ours / n_cases,
                "peer_ms": 1e3 * t_theirs / n_cases,
                "speed_ratio": t_theirs / t_ours,
            }
        )


def _population(rows: list[dict]) -> None:
    rng = np.random.default_rng(1)
    for rates, counts, criterion in [
        ([0.31, 0.47], [50, 50], "demographic_parity"),
        ([0.2, 0.7, 0.35, 0.6], [25, 25, 25, 25], "equalized_odds"),
    ]:
        t = time.perf_counter()
        exact = population_fairness_risk(rates, counts, criterion)
        t_exact = time.perf_counter() - t
        t = time.perf_counter()
        d = rng.binomial(counts, rates, size=(20_000, len(counts))) / np.asarray(counts)
        mc = (
            np.abs(d[:, 0] - d[:, 1])
            if criterion == "demographic_parity"
            else np.maximum(np.abs(d[:, 0] - d[:, 2]), np.abs(d[:, 1] - d[:, 3]))
        )
        t_mc = time.perf_counter() - t
        z = (exact - mc.mean()) / (mc.std() / np.sqrt(len(mc)))
        rows.append(
            {
                "comparison": f"{criterion} population risk: exact vs 20,000-draw Monte Carlo",
                "agreement": f"{exact:.5f} vs {mc.mean():.5f} (z = {z:+.2f})",
                "trustlab_ms": 1e3 * t_exact,
                "peer_ms": 1e3 * t_mc,
                "speed_ratio": t_mc / t_exact,
            }
        )


def run(quick: bool = False) -> dict:
    rows: list[dict] = []
    _losses(rows, 20 if quick else 200)
    _population(rows)
    notes = []
    settings = (
        [("demographic_parity", 50)]
        if quick
        else [
            ("demographic_parity", 50),
            ("demographic_parity", 200),
            ("equalized_odds", 50),
        ]
    )
    for criterion, n in settings:
        s = simulate_fairness_generalization(criterion=criterion, n_per_cell=n, penalty=1.0)
        notes.append(
            f"{criterion}, n = {n} per cell: gap {s.gap:.4f} +- {s.gap_se:.4f}; MI bound {s.mi_bound:.3f} "
            f"({s.tightness:.1f}x the gap), CMI bound {s.cmi_bound:.3f}, uniform-convergence bound "
            f"{s.uniform_bound:.3f} (MI / uniform {s.mi_to_uniform:.2f})"
        )
    return {"title": "Fairness generalisation bounds (002-11)", "rows": rows, "notes": notes}
