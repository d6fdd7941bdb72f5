"""Feature markets (Sommer et al., ICML 2025): MASC beside the paper's Naive and Strat baselines.

No library on PyPI implements classifier-induced feature markets, so the comparison is
with the paper's own baselines run by the same code: Naive (logistic regression) and
Strat (the naive weights, intercept line-searched at the price the naive classifier
induces). Same training and test populations (budget inequality 64, budgets correlated
with the label); every learner is evaluated after the test population responds at the
price its classifier induces. Reports fit time (the largest stated setting: 20,000
training users) and the price computation alone on 10^6 users.
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def run(quick: bool = False) -> dict:
    from trustlab.fairness.strategic import MarketAwareClassifier, make_feature_market, market_equilibrium

    n_train, n_test, repeats, epochs = (3000, 20000, 1, 30) if quick else (20000, 100000, 3, 100)
    X, y, B = make_feature_market(n_train, random_state=1)
    Xt, yt, Bt = make_feature_market(n_test, random_state=2)
    results = {}
    for name, kw in [
        ("naive", {"anticipate": "none"}),
        ("Strat (fixed price, line search)", {"anticipate": "fixed"}),
        ("MASC (market-aware)", {"anticipate": "market", "max_iter": epochs}),
    ]:
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            clf = MarketAwareClassifier(**kw).fit(X, y, B)
            times.append(time.perf_counter() - t)
        results[name] = (statistics.median(times), clf.score_strategic(Xt, yt, Bt))
    t_strat, a_strat = results["Strat (fixed price, line search)"]
    rows = [
        {
            "method": name,
            "fit_s": t_fit,
            "strategic_accuracy": acc,
            "time_over_strat": t_fit / t_strat,
            "accuracy_minus_strat": acc - a_strat,
        }
        for name, (t_fit, acc) in results.items()
    ]
    Xb, _, Bb = make_feature_market(10**5 if quick else 10**6, random_state=3)
    t = time.perf_counter()
    eq = market_equilibrium(Xb, [0.8, 0.5], -0.4, Bb)
    t_eq = time.perf_counter() - t
    rows.append(
        {
            "method": f"market_equilibrium on {Xb.shape[0]:.0e} users",
            "fit_s": t_eq,
            "strategic_accuracy": float("nan"),
            "time_over_strat": float("nan"),
            "accuracy_minus_strat": float(np.mean(eq.moved)),
        }
    )
    return {
        "title": f"feature markets: {n_train} train / {n_test} test users, median of {repeats}",
        "rows": rows,
        "notes": [
            "no PyPI package implements feature markets; the peers are the paper's Naive and Strat baselines",
            "last row: time to compute the revenue-maximising price; last column: the share of users who buy",
        ],
    }
