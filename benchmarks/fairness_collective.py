"""Collective action (Gauthier, Bach and Jordan, ICML 2025): time of the a-priori bound and the simulation.

No PyPI package implements these bounds; the reference is the authors' notebook code,
which loops over every signal cell and every member with pandas filters (not a library,
so not run here). Reports trustlab's time on the largest stated setting (the paper's:
N = 10^6 training users, 10^5 test users) and the agreement of the a-priori estimate
with the realised success across alphas.
"""

from __future__ import annotations

import statistics
import time


def run(quick: bool = False) -> dict:
    from trustlab.fairness.collective import (
        PRODUCT_CARDINALITIES,
        PRODUCT_SIGNAL,
        make_product_ratings,
        simulate_collective,
    )

    n_train, n_test, repeats = (200_000, 20_000, 1) if quick else (1_000_000, 100_000, 3)
    X, y = make_product_ratings(n_train + n_test, random_state=0)
    rows = []
    for alpha in (0.01, 0.05, 0.1, 0.3):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            out = simulate_collective(
                X,
                y,
                alpha=alpha,
                signal=PRODUCT_SIGNAL,
                target=1,
                n_train=n_train,
                n_test=n_test,
                random_state=1,
                cardinalities=PRODUCT_CARDINALITIES,
            )
            times.append(time.perf_counter() - t)
        rows.append(
            {
                "alpha": alpha,
                "members": out.n_collective,
                "realised": out.success,
                "estimate": out.estimate,
                "lower_bound": out.lower_bound,
                "simulate_s": statistics.median(times),
            }
        )
    return {
        "title": f"collective action: N={n_train}, N_test={n_test}, median of {repeats}",
        "rows": rows,
        "notes": [
            "no peer on PyPI; simulate_s = split + coordination + platform fit + bound",
            "plant target 'good' with PRODUCT_SIGNAL (5 signal cells)",
        ],
    }
