"""Label DP randomized response: OpenDP's RR (speed, flip rates) and naive fits (MSE, coverage)."""

from __future__ import annotations

import math
import statistics
import time
import warnings

import numpy as np
from scipy.special import expit


def _time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def _row(case: str, metric: str, ours: float, peer: float, peer_name: str) -> dict:
    return {
        "case": case,
        "metric": metric,
        "trustlab": float(ours),
        "peer": float(peer),
        "peer_is": peer_name,
        "peer_over_trustlab": float(peer) / float(ours) if ours else math.nan,
    }


def _mechanism_rows(quick: bool) -> list[dict]:
    import opendp.prelude as dp

    from trustlab.privacy.label_dp import RandomizedResponseLabelDP

    dp.enable_features("contrib")
    n, n_peer, repeats = (10**5, 2 * 10**4, 3) if quick else (10**6, 10**5, 3)
    y = np.tile([0, 1], n // 2)
    mech = RandomizedResponseLabelDP(1.0)
    t_ours, rel = _time(lambda: mech.privatize(None, y), repeats)
    keep = float(rel.p1[0])
    peer = dp.m.make_randomized_response_bool(keep)
    yb = [bool(v) for v in y[:n_peer]]
    t_peer, out = _time(lambda: np.array([peer(v) for v in yb]), repeats)
    flip_ours = float(np.mean(rel.y_tilde != y))
    flip_peer = float(np.mean(out != y[:n_peer]))
    se = math.sqrt(keep * (1 - keep) / n_peer)
    case = f"RR eps=1, n={n:.0e} (peer loop n={n_peer:.0e})"
    return [
        _row(case, "microseconds per label", 1e6 * t_ours / n, 1e6 * t_peer / n_peer, "OpenDP RR bool loop"),
        _row(case, f"flip rate (expected {1 - keep:.4f})", flip_ours, flip_peer, "OpenDP RR bool loop"),
        _row(case, "flip-rate difference / peer's binomial se", abs(flip_ours - flip_peer) / se, 1.0, "1 se"),
    ]


def _fit_rows(quick: bool) -> tuple[list[dict], float]:
    from sklearn.linear_model import LogisticRegression

    from trustlab.privacy.label_dp import LabelDPBinaryRegression, RandomizedResponseLabelDP

    reps, n = (50, 2000) if quick else (200, 5000)
    beta = np.array([0.5, 1.0, -1.0])
    z = 1.959964
    rows = []
    agree = 0.0
    for eps in (0.5, 1.0, 2.0):
        keys = ("ours", "naive", "nonpriv", "cov", "ncov", "len", "t", "ts")
        stats: dict[str, list] = {k: [] for k in keys}
        for r in range(reps):
            rng = np.random.default_rng(r)
            X = rng.normal(size=(n, 2))
            y = (rng.random(n) < expit(beta[0] + X @ beta[1:])).astype(int)
            rel = RandomizedResponseLabelDP(eps).privatize(X, y)
            t = time.perf_counter()
            m = LabelDPBinaryRegression().fit(X, rel)
            stats["t"].append(time.perf_counter() - t)
            t = time.perf_counter()
            sk = LogisticRegression(C=np.inf, tol=1e-8, max_iter=1000).fit(X, rel.y_tilde)
            stats["ts"].append(time.perf_counter() - t)
            naive = np.r_[sk.intercept_, sk.coef_[0]]
            # naive Wald intervals: our estimator with p0 = p1 = 1 is ordinary logistic MLE
            nm = LabelDPBinaryRegression().fit(X, rel.y_tilde, 1.0, 1.0)
            agree = max(agree, float(np.max(np.abs(nm.params_ - naive))))
            truth = LogisticRegression(C=np.inf, tol=1e-8, max_iter=1000).fit(X, y)
            stats["ours"].append(np.sum((m.params_ - beta) ** 2))
            stats["naive"].append(np.sum((naive - beta) ** 2))
            stats["nonpriv"].append(np.sum((np.r_[truth.intercept_, truth.coef_[0]] - beta) ** 2))
            stats["cov"].append(np.abs(m.params_ - beta) <= z * m.bse_)
            stats["ncov"].append(np.abs(nm.params_ - beta) <= z * nm.bse_)
            stats["len"].append(2 * z * m.bse_.mean())
        case = f"logit n={n} eps={eps:g} ({reps} reps)"
        naive_name = "sklearn naive fit on y~"
        rows += [
            _row(case, "MSE of beta", np.mean(stats["ours"]), np.mean(stats["naive"]), naive_name),
            _row(case, "MSE of beta", np.mean(stats["ours"]), np.mean(stats["nonpriv"]), "sklearn on true y"),
            _row(case, "95% CI coverage", np.mean(stats["cov"]), np.mean(stats["ncov"]), naive_name),
            _row(case, "mean 95% CI length", np.mean(stats["len"]), math.nan, "-"),
            _row(
                case,
                "fit time ms (median)",
                1e3 * statistics.median(stats["t"]),
                1e3 * statistics.median(stats["ts"]),
                naive_name,
            ),
        ]
    return rows, agree


def _delta_rows(quick: bool) -> list[dict]:
    from trustlab.privacy.label_dp import LabelDPBinaryRegression, RandomizedResponseLabelDP

    reps, n = (30, 20000) if quick else (100, 20000)
    eps, delta = 0.5, 0.05
    beta = np.array([-3.0, 1.0])
    err: dict[str, list[float]] = {"symmetric": [], "pointwise": []}
    cov: dict[str, list[np.ndarray]] = {"symmetric": [], "pointwise": []}
    for r in range(reps):
        rng = np.random.default_rng(1000 + r)
        X = rng.normal(size=(n, 1))
        y = (rng.random(n) < expit(beta[0] + X @ beta[1:])).astype(int)
        for mode in err:
            rel = RandomizedResponseLabelDP(eps, delta, mode=mode, random_state=r).privatize(X, y)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                m = LabelDPBinaryRegression().fit(X, rel)
            err[mode].append(float(np.sum((m.params_ - beta) ** 2)))
            cov[mode].append(np.abs(m.params_ - beta) <= 1.959964 * m.bse_)
    d = np.array(err["pointwise"]) - np.array(err["symmetric"])
    case = f"rare events beta=(-3,1) n={n} eps={eps} delta={delta} ({reps} reps)"
    sym = "symmetric RR + corrected MLE"
    return [
        _row(case, "MSE of beta", np.mean(err["pointwise"]), np.mean(err["symmetric"]), sym),
        _row(case, "95% CI coverage", np.mean(cov["pointwise"]), np.mean(cov["symmetric"]), sym),
        _row(
            case, "paired z of squared-error difference", d.mean() / (d.std(ddof=1) / math.sqrt(reps)), 0, "-"
        ),
    ]


def run(quick: bool = False) -> dict:
    mech = _mechanism_rows(quick)
    fits, agree = _fit_rows(quick)
    rare = _delta_rows(quick)
    return {
        "title": "Label DP randomized response: trustlab vs OpenDP RR and naive logistic fits",
        "rows": mech + fits + rare,
        "notes": [
            "Mechanism: trustlab draws all coins in one OpenDP bit-vector call (exact Bernoulli); "
            "the peer loops OpenDP's make_randomized_response_bool per label with the same keep "
            "probability. The flip-rate difference is given in the peer's binomial standard errors.",
            "Fits: x = (1, N(0, I2)), beta = (0.5, 1, -1), labels released by trustlab's mechanism "
            "(symmetric RR, optimal for delta = 0); naive = scikit-learn LogisticRegression "
            "(C=inf) on the released labels (standard RR + naive fit); nonprivate = same on the "
            "true labels; MSE = mean ||beta_hat - beta||^2; coverage over all 3 coordinates.",
            f"Agreement: trustlab's estimator with p0 = p1 = 1 matches scikit-learn's unpenalised "
            f"logistic fit to max |diff| = {agree:.2g} on every released sample.",
            "Rare events: optimal vertex per record (20% pilot) vs symmetric RR at the same "
            "(eps, delta), both with the corrected MLE; a paired z below 0 favours the optimal mechanism.",
            "diffprivlib is skipped: 0.6.6 fails to import beside scikit-learn 1.9 (and its "
            "LogisticRegression protects features too, so it is not like-for-like). statsmodels "
            "is not installed; scikit-learn provides the naive fits.",
        ],
    }
