"""Hardt post-processing: trustlab's HardtPostProcessor beside fairlearn's ThresholdOptimizer.

Same data (a 10-member ensemble with disparate benefits: members err together in group
0 and independently in group 1), same fitting (validation) and test splits, same
scores (the ensemble's mean probability), same constraint at exact parity (eps = 0),
accuracy as the objective. Randomized predictions are averaged over 20 seeded draws.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

DRAWS = 20


def _members(n: int, seed: int, n_members: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    y = rng.binomial(1, np.where(a == 1, 0.55, 0.45))
    member_sd = np.where(a == 1, 0.8, 0.2)
    shared_sd = np.sqrt(1.3**2 - member_sd**2)
    z = (2 * y - 1) + rng.normal(size=n) * shared_sd + rng.normal(size=(n_members, n)) * member_sd
    return (1 / (1 + np.exp(-z))).mean(0), y, a


class _Scores(ClassifierMixin, BaseEstimator):
    """A fitted 'model' whose predict_proba returns the score column (fairlearn needs an estimator)."""

    def fit(self, X, y):
        self.fitted_ = True
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X):
        s = np.asarray(X, dtype=float)[:, 0]
        return np.column_stack([1 - s, s])

    def predict(self, X):
        return (np.asarray(X, dtype=float)[:, 0] > 0.5).astype(int)


def _violation(constraint: str, pred: np.ndarray, y: np.ndarray, a: np.ndarray) -> float:
    def rate(mask: np.ndarray) -> float:
        return float(pred[mask].mean())

    tpr = [rate((a == g) & (y == 1)) for g in (0, 1)]
    fpr = [rate((a == g) & (y == 0)) for g in (0, 1)]
    sr = [rate(a == g) for g in (0, 1)]
    if constraint == "equalized_odds":
        return max(abs(tpr[0] - tpr[1]), abs(fpr[0] - fpr[1]))
    if constraint == "equal_opportunity":
        return abs(tpr[0] - tpr[1])
    return abs(sr[0] - sr[1])


def run(quick: bool = False) -> dict:
    from fairlearn.postprocessing import ThresholdOptimizer

    from trustlab.fairness import HardtPostProcessor

    n, repeats = (20_000, 3) if quick else (200_000, 5)
    sv, yv, av = _members(n, seed=1)
    st, yt, at = _members(n, seed=2)
    peer_names = {
        "equalized_odds": "equalized_odds",
        "equal_opportunity": "true_positive_rate_parity",
        "demographic_parity": "demographic_parity",
    }
    rows = []
    for constraint, peer_constraint in peer_names.items():

        def ours(constraint: str = constraint) -> np.ndarray:
            post = HardtPostProcessor(constraint=constraint).fit(sv, yv, sensitive_features=av)
            return np.array([post.predict(st, sensitive_features=at, random_state=k) for k in range(DRAWS)])

        def peer(peer_constraint: str = peer_constraint) -> np.ndarray:
            opt = ThresholdOptimizer(
                estimator=_Scores().fit(None, None),
                constraints=peer_constraint,
                objective="accuracy_score",
                prefit=True,
                predict_method="predict_proba",
            )
            opt.fit(sv[:, None], yv, sensitive_features=av)
            return np.array(
                [opt.predict(st[:, None], sensitive_features=at, random_state=k) for k in range(DRAWS)]
            )

        t_ours, t_peer = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            p_ours = ours()
            t_ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            p_peer = peer()
            t_peer.append(time.perf_counter() - t)
        v_ours = statistics.mean(_violation(constraint, p, yt, at) for p in p_ours)
        v_peer = statistics.mean(_violation(constraint, p, yt, at) for p in p_peer)
        acc_ours = float(np.mean(p_ours == yt))
        acc_peer = float(np.mean(p_peer == yt))
        case = f"{constraint}, eps=0, n={n:.0e} per split"
        to, tp = statistics.median(t_ours), statistics.median(t_peer)
        rows += [
            {
                "case": case,
                "metric": "test violation (mean of 20 draws)",
                "trustlab": v_ours,
                "peer": v_peer,
                "peer_over_trustlab": v_peer / v_ours if v_ours else math.nan,
            },
            {
                "case": case,
                "metric": "test accuracy",
                "trustlab": acc_ours,
                "peer": acc_peer,
                "peer_over_trustlab": acc_peer / acc_ours,
            },
            {
                "case": case,
                "metric": f"fit + {DRAWS} predicts, s (median of {repeats})",
                "trustlab": to,
                "peer": tp,
                "peer_over_trustlab": tp / to,
            },
        ]
    ens = (st > 0.5).astype(int)
    rows.append(
        {
            "case": "ensemble before post-processing",
            "metric": "test EO violation / accuracy",
            "trustlab": _violation("equalized_odds", ens, yt, at),
            "peer": float(np.mean(ens == yt)),
            "peer_over_trustlab": math.nan,
        }
    )
    return {
        "title": "Hardt post-processing vs fairlearn ThresholdOptimizer (peer = fairlearn)",
        "rows": rows,
        "notes": [
            "peer: fairlearn ThresholdOptimizer(prefit=True, predict_method='predict_proba', "
            "objective='accuracy_score', grid_size=1000); equal opportunity = true_positive_rate_parity",
            "both fit on the same validation split and predict the same test split from the same scores",
            "last row: the unprocessed ensemble (trustlab column = EO violation, peer column = accuracy)",
            "AIF360 EqOddsPostprocessing: not installed here (not in the dev extra); not compared",
        ],
    }
