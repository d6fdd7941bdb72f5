"""Ranking-based harm metric: Elo, HodgeRank, Rank Centrality (catalog row 003-07)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau, norm

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.evaluation.ranking import (
    elo_scores,
    harm_ranking,
    hodgerank_scores,
    rank_centrality_scores,
)


def _bt_judgements(theta: np.ndarray, per_pair: int, seed: int) -> pd.DataFrame:
    """Every pair compared ``per_pair`` times under Bradley-Terry, in shuffled order."""
    rng = np.random.default_rng(seed)
    m = len(theta)
    i, j = np.triu_indices(m, 1)
    i, j = np.repeat(i, per_pair), np.repeat(j, per_pair)
    p = 1 / (1 + np.exp(-(theta[i] - theta[j])))
    win = rng.random(len(i)) < p
    order = rng.permutation(len(i))
    return pd.DataFrame({"item_a": i[order], "item_b": j[order], "winner": np.where(win, i, j)[order]})


def _discordance_moments(theta: np.ndarray, per_pair: int) -> tuple[float, float]:
    """E[#misordered pairs] of the complete-graph least-squares log-odds estimate, and
    sum_pairs sd(misorder indicator), a bound on sd(#misordered) under any dependence.

    On the complete graph with equal weights, s_i = mean_l Y_il; by the delta method
    Var(Y_il) = 1 / (k p_il (1 - p_il)), so s_i - s_j is approximately normal with mean
    theta_i - theta_j and variance (sum_{l != i,j} (v_il + v_jl) + 4 v_ij) / m^2.
    """
    m = len(theta)
    p = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    v = 1 / (per_pair * p * (1 - p))
    np.fill_diagonal(v, 0.0)
    total, sd_sum = 0.0, 0.0
    for a in range(m):
        for b in range(a + 1, m):
            var = (v[a].sum() + v[b].sum() - 2 * v[a, b] + 4 * v[a, b]) / m**2
            q = norm.cdf(-abs(theta[a] - theta[b]) / math.sqrt(var))
            total += q
            sd_sum += math.sqrt(q * (1 - q))
    return total, sd_sum


@pytest.mark.claims
def test_recovers_bradley_terry_ranking_above_the_comparison_bound() -> None:
    m, per_pair = 30, 20
    theta = np.linspace(-2, 2, m)
    df = _bt_judgements(theta, per_pair, seed=3)
    h = harm_ranking(df, success=pd.Series((theta > 0).astype(float)))
    # D = #misordered pairs, tau = 1 - 4 D / (m (m - 1)) without ties. With probability
    # >= 1 - delta: D <= E[D] / delta (Markov) and D <= E[D] + sd_sum / sqrt(delta)
    # (Chebyshev, sd(D) <= sum of the indicators' sds whatever their dependence).
    delta = 0.05
    mean, sd_sum = _discordance_moments(theta, per_pair)
    bound = 1 - 4 * min(mean / delta, mean + sd_sum / math.sqrt(delta)) / (m * (m - 1))
    assert 0.5 < bound < 0.9  # informative at this sample size (8700 judgements; E[tau] = 0.965)
    taus = {c: kendalltau(h.scores[c], theta).statistic for c in h.scores}
    for method, tau in taus.items():
        assert tau > bound, (method, tau, bound)
    # Agreement: Kendall distance is a metric, so tau_xy >= tau_x + tau_y - 1 >= 2 bound - 1.
    assert (h.agreement.to_numpy() > 2 * bound - 1).all()
    assert (h.success_agreement > 0.6).all()  # tau_b with a step function of theta is at most 0.72
    assert 0 <= h.inconsistency < 0.2  # BT judgements are nearly transitive (sampling noise only)


def test_exact_bradley_terry_probabilities_are_recovered_exactly() -> None:
    theta = np.array([0.3, -1.0, 1.2, 0.0, -0.4])
    a, b = np.array([0, 1, 2, 3, 0, 2]), np.array([1, 2, 3, 4, 4, 0])
    p = 1 / (1 + np.exp(-(theta[a] - theta[b])))
    df = pd.DataFrame({"item_a": a, "item_b": b, "p_a": p})
    h = hodgerank_scores(df, pseudo_count=1e-12)
    np.testing.assert_allclose(h.scores, theta - theta.mean(), atol=1e-9)
    assert h.inconsistency < 1e-18
    # Detailed balance: pi_i * pi_j / (pi_i + pi_j) is symmetric, so pi ~ exp(theta) on any graph.
    rc = rank_centrality_scores(df)
    np.testing.assert_allclose(rc.scores, np.exp(theta) / np.exp(theta).sum(), rtol=1e-10)


def test_cycle_is_fully_inconsistent_and_elo_update_matches_hand_computation() -> None:
    cyc = hodgerank_scores([("a", "b", "a"), ("b", "c", "b"), ("c", "a", "c")])
    np.testing.assert_allclose(cyc.scores, 0, atol=1e-12)
    assert cyc.inconsistency == pytest.approx(1.0)
    two = pd.DataFrame({"item_a": ["u", "u"], "item_b": ["v", "v"], "p_a": [0.75, 1.0]})
    # Uniform-noise flow: (w_u - w_v) / n = (1.75 - 0.25) / 2 = 0.75, split around the mean.
    np.testing.assert_allclose(hodgerank_scores(two, flow="difference").scores, [0.375, -0.375])
    r = elo_scores([("a", "b", "b"), ("a", "b", "a")], k_factor=10, scale=400)
    first = 10 * (0 - 0.5)  # a loses at equal ratings
    e2 = 1 / (1 + 10 ** ((1000 - first - (1000 + first)) / 400))
    second = 10 * (1 - e2)
    np.testing.assert_allclose(r.scores, [1000 + first + second, 1000 - first - second])
    assert second > -first and r.order() == ["a", "b"]  # the upset win gains more than the loss cost


def test_matches_choix_rank_centrality() -> None:
    choix = pytest.importorskip("choix")
    df = _bt_judgements(np.linspace(-1, 1, 12), 5, seed=9)
    data = [(w, a if w == b else b) for a, b, w in df.itertuples(index=False)]
    ours = np.log(rank_centrality_scores(df).scores)
    np.testing.assert_allclose(ours - ours.mean(), choix.rank_centrality(12, data), atol=1e-9)
    reg = np.log(rank_centrality_scores(df, regularization=1.0).scores)
    assert np.all(np.isfinite(reg))


def test_items_scores_and_success_alignment() -> None:
    j = [("x", "y", "x"), ("y", "z", "y"), ("x", "z", "x"), ("x", "y", "x")]
    h = harm_ranking(j, success={"x": 0.9, "y": 0.5, "z": 0.1}, rank_centrality_regularization=1.0)
    assert list(h.scores.index) == ["x", "y", "z"]
    assert h.agreement.shape == (3, 3)
    np.testing.assert_allclose(h.success_agreement.to_numpy(), 1.0)
    s = hodgerank_scores(j).to_series()
    assert s.idxmax() == "x" and s.name == "hodgerank"
    only = harm_ranking(j, methods=["elo"])
    assert list(only.scores.columns) == ["elo"] and only.inconsistency is None


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(DataError, match=r"not in items: \['w'\]"):
        hodgerank_scores([("x", "w", "x")], items=["x", "y"])
    with pytest.raises(DataError, match=r"disconnected.*2 components") as err:
        rank_centrality_scores([("a", "b", "a"), ("c", "d", "d")])
    assert "'a'" in str(err.value) and "'c'" in str(err.value)
    with pytest.raises(DataError, match="disconnected"):
        hodgerank_scores([("a", "b", "a")], items=["a", "b", "lonely"])
    with pytest.raises(DataError, match="empty"):
        harm_ranking(pd.DataFrame({"item_a": [], "item_b": [], "winner": []}))
    with pytest.raises(DataError, match="winner must be item_a or item_b"):
        elo_scores([("a", "b", "c")])
    with pytest.raises(DataError, match="with itself"):
        elo_scores([("a", "a", "a")])
    with pytest.raises(DataError, match=r"p_a must lie in \[0, 1\]"):
        elo_scores(pd.DataFrame({"item_a": [1], "item_b": [2], "p_a": [1.5]}))
    with pytest.raises(DataError, match="closed classes"):
        rank_centrality_scores([("a", "c", "a"), ("b", "c", "b")])
    with pytest.raises(DataError, match="success has no rate"):
        harm_ranking([("a", "b", "a")], success={"a": 1.0})
    with pytest.raises(DataError, match="methods"):
        harm_ranking([("a", "b", "a")], methods=["borda"])
    with pytest.raises(ParameterError, match="rank_centrality_regularization"):
        harm_ranking([("a", "b", "a")], rank_centrality_regularization=-1.0)
    with pytest.raises(ParameterError, match="k_factor"):
        elo_scores([("a", "b", "a")], k_factor=0)
    with pytest.raises(TrustlabError, match="columns item_a, item_b"):
        hodgerank_scores(pd.DataFrame({"a": [1]}))
    # Elo is defined on a disconnected graph (no error).
    assert elo_scores([("a", "b", "a"), ("c", "d", "d")]).scores.shape == (4,)


_label = st.sampled_from(["a", "b", "c", 1, None, 2.5])
_row = st.one_of(st.tuples(_label, _label, _label), st.just("bad"), st.tuples(_label))


@settings(max_examples=60, deadline=None)
@given(rows=st.one_of(st.lists(_row, max_size=6), st.none(), st.text(max_size=3)))
def test_fuzz_only_trustlab_errors(rows: object) -> None:
    for f in (elo_scores, hodgerank_scores, rank_centrality_scores, harm_ranking):
        try:
            f(rows)
        except TrustlabError:
            pass
