"""DSI optimal Gaussian noise vs the isotropic Gaussian mechanism (OpenDP) at the same (eps, delta).

Both release the same target vector so that it is (1, 1e-5)-indistinguishable from
every listed reference output. trustlab: ``dsi_release`` (optimal covariance, analytic
calibration). Peer: OpenDP 0.16 ``make_gaussian`` on the whole vector with L2
sensitivity ``max_i ||Delta_i||`` (the smallest isotropic noise that covers the same
references), its scale found by ``binary_search_param`` through
``make_zCDP_to_approxDP`` + ``make_fix_delta``. Also shown: isotropic noise restricted
to the span of the differences with the analytic calibration, which separates the gain
of the covariance's shape from the gain of the span and of the calibration.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np

EPS, DELTA = 1.0, 1e-5


def _opendp_release(target: np.ndarray, sensitivity: float) -> tuple[np.ndarray, float]:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = (
        dp.vector_domain(dp.atom_domain(T=float, nan=False), size=target.size),
        dp.l2_distance(T=float),
    )

    def make(scale: float) -> Any:
        return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(*space, scale=scale)), DELTA)

    scale = dp.binary_search_param(make, d_in=sensitivity, d_out=(EPS, DELTA))
    return np.asarray(make(scale)(target.tolist()), dtype=float), float(scale)


def _angle_case(deg: float, d: int) -> tuple[np.ndarray, np.ndarray]:
    a = math.radians(deg)
    diffs = np.zeros((2, d))
    diffs[0, 0] = 1.0
    diffs[1, :2] = [math.cos(a), math.sin(a)]
    target = np.zeros(d)
    return target, target - diffs


def _gradient_case(name: str, batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One averaged, clipped (norm 1) logistic-loss gradient; references leave one example out."""
    from sklearn.datasets import load_breast_cancer, load_digits
    from sklearn.preprocessing import StandardScaler

    from trustlab.privacy.dsi import leave_one_group_out_differences

    rng = np.random.default_rng(seed)
    if name == "breast_cancer":
        x, y = load_breast_cancer(return_X_y=True)
        x = StandardScaler().fit_transform(x)
        idx = rng.choice(len(x), batch, replace=False)
        w = rng.normal(size=x.shape[1]) * 0.1
        p = 1 / (1 + np.exp(-x[idx] @ w))
        grads = (p - y[idx])[:, None] * x[idx]
    else:  # digits, 10-class softmax regression: d = 64 * 10
        x, y = load_digits(return_X_y=True)
        x = x / 16.0
        idx = rng.choice(len(x), batch, replace=False)
        w = rng.normal(size=(x.shape[1], 10)) * 0.1
        logits = x[idx] @ w
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(batch), y[idx]] -= 1
        grads = (x[idx][:, :, None] * p[:, None, :]).reshape(batch, -1)
    mean, diffs = leave_one_group_out_differences(grads, clip_norm=1.0)
    return mean, mean - diffs


def _wide_case(d: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A model-sized vector: leave-one-out means of m heavy-tailed per-example vectors."""
    from trustlab.privacy.dsi import leave_one_group_out_differences

    rng = np.random.default_rng(seed)
    vals = rng.normal(size=(m, d)) * rng.lognormal(size=(m, 1)) / math.sqrt(d)
    mean, diffs = leave_one_group_out_differences(vals, clip_norm=1.0)
    return mean, mean - diffs


def _one(case: str, target: np.ndarray, refs: np.ndarray, reps: int) -> dict:
    from trustlab.privacy.dsi import DSIAccountant, dsi_gaussian_covariance, dsi_release

    diffs = target - refs
    sens = float(np.max(np.linalg.norm(diffs, axis=1)))
    t_ours, t_peer, e_ours, e_peer = [], [], [], []
    for _ in range(reps):
        t = time.perf_counter()
        rel = dsi_release(target, refs, epsilon=EPS, delta=DELTA)
        t_ours.append(time.perf_counter() - t)
        e_ours.append(float(np.sum((rel.value - target) ** 2)))
        t = time.perf_counter()
        out, scale = _opendp_release(target, sens)
        t_peer.append(time.perf_counter() - t)
        e_peer.append(float(np.sum((out - target) ** 2)))
    p = rel.parameters
    sigma_m = DSIAccountant(DELTA).noise_multiplier(EPS)
    # empirical check of the DSI noise energy on many draws (fewer for wide vectors)
    noise = dsi_gaussian_covariance(diffs)
    draws = noise.sample(400 if target.size <= 1000 else 40, noise_multiplier=sigma_m)
    emp = float(np.mean(np.sum(draws**2, axis=1)))
    opendp_energy = target.size * scale**2
    return {
        "case": case,
        "d": int(target.size),
        "m": int(refs.shape[0]),
        "rank": int(p["rank"]),
        "dsi_energy": float(p["noise_energy"]),
        "iso_span_energy": float(p["isotropic_energy"]),
        "opendp_energy": opendp_energy,
        "dsi/opendp": float(p["noise_energy"]) / opendp_energy,
        "dsi/iso_span": float(p["noise_energy"]) / float(p["isotropic_energy"]),
        "dsi_emp/theory": emp / float(p["noise_energy"]),
        "opendp_sigma/analytic": scale / (sens * sigma_m),
        "trustlab_s": statistics.median(t_ours),
        "opendp_s": statistics.median(t_peer),
        "time_ratio": statistics.median(t_ours) / statistics.median(t_peer),
        "converged": bool(p["converged"]),
    }


def run(quick: bool = False) -> dict:
    reps = 2 if quick else 3
    wide_d = 10_000 if quick else 100_000
    cases = [
        ("two unit diffs, 10 deg", *_angle_case(10, 10)),
        ("two unit diffs, 45 deg", *_angle_case(45, 10)),
        ("logreg grad, breast_cancer B=100", *_gradient_case("breast_cancer", 100, 0)),
        ("softmax grad, digits B=100", *_gradient_case("digits", 100, 0)),
        (f"wide vector d={wide_d}, m=50", *_wide_case(wide_d, 50, 0)),
    ]
    rows = [_one(name, target, refs, reps) for name, target, refs in cases]
    gm = math.exp(statistics.mean(math.log(r["dsi/opendp"]) for r in rows))
    return {
        "title": f"DSI optimal Gaussian vs OpenDP isotropic Gaussian, eps={EPS}, delta={DELTA}",
        "rows": rows,
        "notes": [
            "energy = expected squared L2 norm of the noise (trace of its covariance) at the same "
            "(eps, delta) against the same references; dsi_emp/theory checks the DSI energy on "
            "400 draws (40 for the wide case).",
            "OpenDP 0.16 make_gaussian, full vector, L2 sensitivity max_i ||Delta_i||, scale by "
            "binary_search_param via make_zCDP_to_approxDP + make_fix_delta; its zCDP conversion "
            "needs opendp_sigma/analytic more noise than the exact (analytic) calibration.",
            f"geometric-mean energy ratio dsi/opendp over the cases = {gm:.3g}",
            "time: one full release each (trustlab: solve + calibrate + sample rank normals; "
            "OpenDP: calibrate + sample d normals), median of repeats; OpenDP's exact sampler costs "
            "~55 us per normal here, which dominates for wide vectors.",
            "DSI is not DP: it covers only the listed references (leave-one-out here), while the "
            "OpenDP release with the same sensitivity is an isotropic mechanism for those references.",
        ],
    }
