"""Multicalibration on proxy groups: trustlab's MCBoost/MABoost beside the `multicalibration` package (HKRR).

Same data (a model blind to three overlapping true groups; proxies with 10-20%
membership errors), same fitting and test splits, same proxies given to both. The
figure that matters is the worst TRUE-group violation on the test split (the
methods never see the true groups). The peer is `multicalibration` 0.0.2 (PyPI,
Devic & Hansen: HKRR Algorithm 1 of Hebert-Johnson et al. 2018, pure Python);
when it is not importable the peer columns compare against the unprocessed model.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np


def _data(n: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    g = np.column_stack([rng.random(n) < 0.3, rng.random(n) < 0.2, rng.random(n) < 0.5]).astype(int)
    y = rng.binomial(1, 1 / (1 + np.exp(-(1.2 * x + g[:, 0] - g[:, 1] + 0.5 * g[:, 0] * x))))
    f = 1 / (1 + np.exp(-1.2 * x))
    flips = rng.random(g.shape) < np.array([0.1, 0.2, 0.1])
    return f, y, g, np.where(flips, 1 - g, g)


def run(quick: bool = False) -> dict:
    from trustlab.fairness import (
        MultiaccuracyBoost,
        MulticalibrationBoost,
        multiaccuracy_violation,
        multicalibration_violation,
        proxy_error_rates,
        proxy_violation_bound,
    )

    n, repeats = (3000, 1) if quick else (10_000, 3)
    f, y, _, gh = _data(n, seed=1)
    ft, yt, gt, ght = _data(n, seed=2)
    err = proxy_error_rates(gt, ght)

    def worst_mc(p: np.ndarray) -> float:
        return float(multicalibration_violation(yt, p, groups=gt, n_levels=20).max())

    def worst_ma(p: np.ndarray) -> float:
        return float(multiaccuracy_violation(yt, p, groups=gt).max())

    def ours_mc() -> np.ndarray:
        return MulticalibrationBoost(alpha=1e-4, n_levels=20).fit(f, y, groups=gh).predict(ft, groups=ght)

    def ours_ma() -> np.ndarray:
        return MultiaccuracyBoost().fit(f, y, groups=gh).predict(ft, groups=ght)

    try:
        from multicalibration import MulticalibrationPredictor

        def peer() -> np.ndarray:
            np.random.seed(0)  # noqa: NPY002 - the package draws from NumPy's global generator
            mcp = MulticalibrationPredictor("HKRR")
            fit_groups = [list(np.flatnonzero(gh[:, j])) for j in range(gh.shape[1])]
            params = {"alpha": 0.05, "lambda": 0.05, "max_iter": 30, "randomized": True, "use_oracle": False}
            mcp.fit(f.copy(), y, fit_groups, params)
            test_groups = [set(np.flatnonzero(ght[:, j]).tolist()) for j in range(ght.shape[1])]
            return np.asarray(mcp.predict(ft.copy(), test_groups), dtype=float)

        peer_name = "multicalibration 0.0.2 HKRR (alpha=lambda=0.05, no oracle)"
    except ImportError:

        def peer() -> np.ndarray:
            return ft.copy()

        peer_name = "unprocessed model (package 'multicalibration' not installed)"

    def timed(fn) -> tuple[float, np.ndarray]:
        times, out = [], ft
        for _ in range(repeats):
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times), out

    t_mc, p_mc = timed(ours_mc)
    t_ma, p_ma = timed(ours_ma)
    t_peer, p_peer = timed(peer)
    bound_before = proxy_violation_bound(yt, ft, proxy_groups=ght, proxy_errors=err, n_levels=20).worst_bound
    rows = []
    case = f"n={n} fit / {n} test, 3 hidden groups"
    for label, p, t in (
        ("trustlab MCBoost(alpha=1e-4, m=20)", p_mc, t_mc),
        ("trustlab MABoost lstsq", p_ma, t_ma),
    ):
        rows += [
            {
                "case": case,
                "method": label,
                "metric": "worst true MC (l1, 20 levels)",
                "trustlab": worst_mc(p),
                "peer": worst_mc(p_peer),
                "peer_over_trustlab": worst_mc(p_peer) / worst_mc(p),
            },
            {
                "case": case,
                "method": label,
                "metric": "worst true MA",
                "trustlab": worst_ma(p),
                "peer": worst_ma(p_peer),
                "peer_over_trustlab": worst_ma(p_peer) / worst_ma(p),
            },
            {
                "case": case,
                "method": label,
                "metric": "test MSE (Brier)",
                "trustlab": float(np.mean((p - yt) ** 2)),
                "peer": float(np.mean((p_peer - yt) ** 2)),
                "peer_over_trustlab": float(np.mean((p_peer - yt) ** 2) / np.mean((p - yt) ** 2)),
            },
            {
                "case": case,
                "method": label,
                "metric": f"fit+predict s (median of {repeats})",
                "trustlab": t,
                "peer": t_peer,
                "peer_over_trustlab": t_peer / t if t else math.nan,
            },
        ]
    rows.append(
        {
            "case": case,
            "method": "unprocessed model",
            "metric": "worst true MC / proxy bound",
            "trustlab": worst_mc(ft),
            "peer": bound_before,
            "peer_over_trustlab": math.nan,
        }
    )
    return {
        "title": "Multicalibration on proxy groups: worst true-group violation on test (peer = "
        + peer_name
        + ")",
        "rows": rows,
        "notes": [
            f"peer: {peer_name}; fitted on the same proxies and fitting split",
            "last row: the unprocessed model's worst true MC (trustlab column) and its proxy bound "
            "(peer column)",
            "the methods never see the true groups; proxies flip membership with prob. 0.1/0.2/0.1",
        ],
    }
