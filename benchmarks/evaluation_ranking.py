"""Ranking-based harm metric: trustlab's Rank Centrality beside choix's; HodgeRank/Elo vs truth.

Synthetic Bradley-Terry judgements (items with evenly spaced strengths in [-2, 2]), each
judgement a random pair, shuffled. trustlab's ``rank_centrality_scores`` and
``choix.rank_centrality`` run on the same judgements (choix's input: (winner, loser)
index pairs); their agreement is the largest absolute difference of centred log scores
and Kendall's tau between them. Accuracy: Kendall's tau with the true strengths for
Rank Centrality, HodgeRank (log-odds flow) and Elo (one pass, K = 32), and choix's
Bradley-Terry maximum likelihood (``ilsr_pairwise``) as the reference estimator.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pandas as pd
from scipy.stats import kendalltau


def _judgements(m: int, n: int, seed: int) -> tuple[np.ndarray, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    theta = np.linspace(-2, 2, m)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    win = rng.random(n) < 1 / (1 + np.exp(-(theta[a] - theta[b])))
    return theta, pd.DataFrame({"item_a": a, "item_b": b, "winner": np.where(win, a, b)})


def run(quick: bool = False) -> dict:
    import choix

    from trustlab.evaluation.ranking import elo_scores, hodgerank_scores, rank_centrality_scores

    sizes = [(100, 20_000)] if quick else [(100, 20_000), (1_000, 200_000)]
    repeats = 3 if quick else 5
    rows = []
    for m, n in sizes:
        theta, df = _judgements(m, n, seed=m)
        data = list(
            zip(
                np.where(df.winner == df.item_a, df.item_a, df.item_b).tolist(),
                np.where(df.winner == df.item_a, df.item_b, df.item_a).tolist(),
                strict=True,
            )
        )
        t_ours, t_peer = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            ours = rank_centrality_scores(df, items=list(range(m))).scores
            t_ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            peer = choix.rank_centrality(m, data)
            t_peer.append(time.perf_counter() - t)
        log_ours = np.log(ours) - np.log(ours).mean()
        to, tp = statistics.median(t_ours), statistics.median(t_peer)
        case = f"{m} items, {n} judgements"
        rows.append(
            {
                "case": case,
                "metric": f"Rank Centrality time, s (median of {repeats})",
                "trustlab": to,
                "peer": tp,
                "peer_over_trustlab": tp / to,
            }
        )
        rows.append(
            {
                "case": case,
                "metric": "max |log score difference| (agreement)",
                "trustlab": float(np.max(np.abs(log_ours - peer))),
                "peer": 0.0,
                "peer_over_trustlab": float("nan"),
            }
        )
        rows.append(
            {
                "case": case,
                "metric": "Kendall tau with truth: Rank Centrality",
                "trustlab": float(kendalltau(ours, theta).statistic),
                "peer": float(kendalltau(peer, theta).statistic),
                "peer_over_trustlab": float("nan"),
            }
        )
        t = time.perf_counter()
        hodge = hodgerank_scores(df, items=list(range(m)))
        t_h = time.perf_counter() - t
        t = time.perf_counter()
        mle = choix.ilsr_pairwise(m, data, alpha=1e-4)
        t_mle = time.perf_counter() - t
        rows.append(
            {
                "case": case,
                "metric": "Kendall tau with truth: HodgeRank (trustlab) vs BT MLE (choix ilsr)",
                "trustlab": float(kendalltau(hodge.scores, theta).statistic),
                "peer": float(kendalltau(mle, theta).statistic),
                "peer_over_trustlab": float("nan"),
            }
        )
        rows.append(
            {
                "case": case,
                "metric": "time, s: HodgeRank (trustlab) vs BT MLE (choix ilsr)",
                "trustlab": t_h,
                "peer": t_mle,
                "peer_over_trustlab": t_mle / t_h,
            }
        )
        t = time.perf_counter()
        elo = elo_scores(df, items=list(range(m)))
        t_e = time.perf_counter() - t
        rows.append(
            {
                "case": case,
                "metric": "Elo (one pass): Kendall tau with truth / time s",
                "trustlab": float(kendalltau(elo.scores, theta).statistic),
                "peer": t_e,
                "peer_over_trustlab": float("nan"),
            }
        )
    return {
        "title": "Ranking-based harm metric vs choix (peer = choix 0.4.1)",
        "rows": rows,
        "notes": [
            "peer: choix.rank_centrality(n_items, [(winner, loser), ...], alpha=0); the same estimator, so "
            "agreement is the largest absolute difference of centred log scores",
            "HodgeRank has no choix counterpart; it is compared in accuracy with choix's Bradley-Terry "
            "maximum likelihood (ilsr_pairwise, alpha=1e-4)",
            "Elo's peer column is its own time (it has no peer here)",
        ],
    }
