"""Fairness generalisation bounds (002-11): trustlab beside fairlearn and beside Monte Carlo.

1. The fairness loss: trustlab's ``fairness_loss`` beside fairlearn's
   ``demographic_parity_difference`` / ``equalized_odds_difference`` on the same 200 random
   decision vectors (agreement and speed ratio).
2. The population fairness risk of the simulation: trustlab's exact binomial computation
   beside a 20,000-draw Monte-Carlo estimate (agreement in Monte-Carlo standard errors, speed).
3. The bounds beside the measured gap and the classical uniform-convergence bound.

Run: ``python benchmarks/fairness_bounds.py``.
"""

from __future__ import annotations

import time

import numpy as np
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

from trustlab.fairness.bounds import fairness_loss
from trustlab.theory.fairness_generalization import population_fairness_risk, simulate_fairness_generalization


def _losses() -> None:
    rng = np.random.default_rng(0)
    cases = [
        (rng.integers(0, 2, 2000), rng.choice(["a", "b", "c"], 2000), rng.integers(0, 2, 2000))
        for _ in range(200)
    ]
    for name, ours, theirs, kw in [
        ("DP", fairness_loss, demographic_parity_difference, {}),
        ("EO", fairness_loss, equalized_odds_difference, {"criterion": "equalized_odds"}),
    ]:
        t = time.perf_counter()
        a = [ours(p, sensitive_features=s, y_true=y, **kw) for p, s, y in cases]
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        b = [theirs(y, p, sensitive_features=s) for p, s, y in cases]
        t_theirs = time.perf_counter() - t
        print(
            f"{name} loss: max |trustlab - fairlearn| = {np.max(np.abs(np.subtract(a, b))):.1e}; "
            f"trustlab {t_ours * 5:.2f} ms/call, fairlearn {t_theirs * 5:.2f} ms/call "
            f"({t_theirs / t_ours:.1f}x)"
        )


def _population() -> None:
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
        print(
            f"{criterion} population risk: exact {exact:.5f}, Monte Carlo {mc.mean():.5f} (z = {z:+.2f}); "
            f"exact {t_exact * 1e3:.2f} ms vs Monte Carlo {t_mc * 1e3:.2f} ms ({t_mc / t_exact:.1f}x)"
        )


def _bounds() -> None:
    print("| loss | n/cell | gap ± SE | MI bound | CMI bound | uniform | MI/gap | MI/uniform |")
    for criterion, n in [("demographic_parity", 50), ("demographic_parity", 200), ("equalized_odds", 50)]:
        s = simulate_fairness_generalization(criterion=criterion, n_per_cell=n, penalty=1.0)
        print(
            f"| {criterion} | {n} | {s.gap:.4f} ± {s.gap_se:.4f} | {s.mi_bound:.3f} | {s.cmi_bound:.3f} | "
            f"{s.uniform_bound:.3f} | {s.tightness:.1f}x | {s.mi_to_uniform:.2f} |"
        )


if __name__ == "__main__":
    _losses()
    _population()
    _bounds()
