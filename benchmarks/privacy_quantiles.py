"""DP quantiles: trustlab (JointExp) vs OpenDP's make_private_quantile, n=1e6, 5 levels, eps=1.

diffprivlib is not compared (it fails to import beside scikit-learn 1.9; no venv was made).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

LEVELS = [0.1, 0.25, 0.5, 0.75, 0.9]


def _opendp(x: np.ndarray, eps: float, bounds: tuple[float, float]) -> np.ndarray:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    cands = np.linspace(bounds[0], bounds[1], 10001).tolist()
    dom = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=x.size)
    out = []
    xs = x.tolist()
    for a in LEVELS:  # eps/5 per level; input_domain with known size
        m = dp.m.make_private_quantile(
            dom, dp.symmetric_distance(), dp.max_divergence(), candidates=cands, alpha=a, scale=1.0
        )
        # calibrate scale so that the map at d_in=2 (one replacement) is eps/5
        scale = dp.binary_search_param(
            lambda s, a=a: dp.m.make_private_quantile(
                dom,
                dp.symmetric_distance(),
                dp.max_divergence(),
                candidates=cands,
                alpha=a,
                scale=s,
            ),
            d_in=2,
            d_out=eps / len(LEVELS),
        )
        m = dp.m.make_private_quantile(
            dom,
            dp.symmetric_distance(),
            dp.max_divergence(),
            candidates=cands,
            alpha=a,
            scale=scale,
        )
        out.append(m(xs))
    return np.array(out)


def run(quick: bool = False) -> dict:
    from trustlab.privacy import dp_quantiles

    n = 10**5 if quick else 10**6
    reps = 3 if quick else 5
    bounds = (0.0, 100.0)
    rows = []
    for seed in range(reps):
        x = np.random.default_rng(seed).lognormal(size=n)
        true = np.quantile(x, LEVELS)
        t = time.perf_counter()
        ours = dp_quantiles(x, LEVELS, 1.0, bounds, random_state=seed).value
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        peer = _opendp(x, 1.0, bounds)
        t_peer = time.perf_counter() - t
        rows.append(
            {
                "seed": seed,
                "trustlab_mae": float(np.mean(np.abs(ours - true))),
                "opendp_mae": float(np.mean(np.abs(peer - true))),
                "trustlab_s": t_ours,
                "opendp_s": t_peer,
            }
        )
    summary = {
        "seed": "median",
        "trustlab_mae": statistics.median(r["trustlab_mae"] for r in rows),
        "opendp_mae": statistics.median(r["opendp_mae"] for r in rows),
        "trustlab_s": statistics.median(r["trustlab_s"] for r in rows),
        "opendp_s": statistics.median(r["opendp_s"] for r in rows),
    }
    rows.append(summary)
    return {
        "title": f"DP quantiles, lognormal n={n}, 5 levels, eps=1, bounds {bounds}",
        "rows": rows,
        "notes": [
            "trustlab: JointExp (all 5 levels jointly, eps=1, replace-one).",
            "OpenDP 0.16 make_private_quantile: eps/5 per level on 10,001 grid candidates, "
            "known-size domain, calibrated by binary search for one replacement (d_in=2).",
            f"error ratio trustlab/opendp = "
            f"{summary['trustlab_mae'] / summary['opendp_mae']:.3g}; time ratio = "
            f"{summary['trustlab_s'] / summary['opendp_s']:.3g}",
            "diffprivlib not compared: it does not import beside scikit-learn 1.9.",
        ],
    }
