"""Feature markets (Sommer et al., ICML 2025): market-aware learning beside the fixed-cost baseline.

No library on PyPI implements classifier-induced feature markets, so the peer is the
standard strategic-classification learner with a fixed linear cost (Hardt et al. 2016),
run by the same code with ``anticipate="fixed"`` at the sellers' marginal cost. Same
training and test populations; every learner is evaluated after the test population
responds at the market prices its classifier induces. Reports fit time (the largest
stated setting: 20,000 training users) and the price computation alone on 10^6 users.
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def run(quick: bool = False) -> dict:
    from trustlab.fairness.strategic import (
        DEMO_SUPPLY,
        MarketAwareClassifier,
        make_feature_market,
        market_equilibrium,
    )

    n_train, n_test, repeats = (3000, 20000, 1) if quick else (20000, 100000, 3)
    X, y, B = make_feature_market(n_train, random_state=1)
    Xt, yt, Bt = make_feature_market(n_test, random_state=2)
    rows = []
    results = {}
    for name, kw in [
        ("naive", {"anticipate": "none"}),
        ("fixed cost (Hardt)", {"anticipate": "fixed", "fixed_costs": DEMO_SUPPLY["marginal_cost"]}),
        ("market-aware", {"anticipate": "market"}),
    ]:
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            clf = MarketAwareClassifier(**kw, **DEMO_SUPPLY).fit(X, y, B)
            times.append(time.perf_counter() - t)
        results[name] = (statistics.median(times), clf.score_strategic(Xt, yt, Bt))
    t_fixed, a_fixed = results["fixed cost (Hardt)"]
    for name, (t_fit, acc) in results.items():
        rows.append(
            {
                "method": name,
                "fit_s": t_fit,
                "strategic_accuracy": acc,
                "time_over_fixed_cost": t_fit / t_fixed,
                "accuracy_minus_fixed_cost": acc - a_fixed,
            }
        )
    Xb, _, Bb = make_feature_market(10**5 if quick else 10**6, random_state=3)
    t = time.perf_counter()
    eq = market_equilibrium(Xb, [0.6, 0.7, 0.4], -0.5, Bb, **DEMO_SUPPLY)
    t_eq = time.perf_counter() - t
    rows.append(
        {
            "method": f"market_equilibrium on {Xb.shape[0]:.0e} users",
            "fit_s": t_eq,
            "strategic_accuracy": float("nan"),
            "time_over_fixed_cost": float("nan"),
            "accuracy_minus_fixed_cost": float(np.mean(eq.moved)),
        }
    )
    return {
        "title": f"feature markets: {n_train} train / {n_test} test users, median of {repeats}",
        "rows": rows,
        "notes": [
            "peer: the fixed-cost strategic learner (no PyPI package implements feature markets)",
            "last row: time to clear the market; its last column is the share of users who buy",
        ],
    }
