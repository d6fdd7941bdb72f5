"""Fair k-median coresets in the weak-strong oracle model (Braverman et al., ICML 2025; reconstructed)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.fairness import WeakStrongOracle, fair_assignment_cost, fair_kmedian, weak_strong_coreset
from trustlab.fairness.coresets import Coreset


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """4 Gaussian blobs; group 1 is 70% of blobs 0-1 and 30% of blobs 2-3 (groups correlate with blobs)."""
    rng = np.random.default_rng(seed)
    centres = np.array([(0, 0), (6, 0), (0, 6), (6, 6)])
    lab = rng.integers(0, 4, n)
    X = centres[lab] + rng.normal(0, 1, (n, 2))
    g = (rng.random(n) < np.where(lab < 2, 0.7, 0.3)).astype(int)
    return X, g


def test_weak_oracle_is_persistent_symmetric_and_corrupts_at_its_rate() -> None:
    X, _ = blobs(3000, seed=0)
    o = WeakStrongOracle(X, corrupt_prob=1 / 3, random_state=3)
    js = np.arange(3000)
    a = o.weak(17, js)
    np.testing.assert_array_equal(a, o.weak(17, js))
    sym = np.array([o.weak(int(j), [17])[0] for j in js[:200]])
    np.testing.assert_array_equal(sym, a[:200])
    bad = np.mean(a != np.linalg.norm(X - X[17], axis=1))
    # 2999 pairs: s.e. sqrt(2/9 / 2999) = 0.0086; 4 s.e.
    assert abs(bad - 1 / 3) < 4 * 0.0086
    assert o.n_weak == 6200 and o.n_strong == 0
    assert WeakStrongOracle(X, corrupt_prob=0.0).weak(17, js) == pytest.approx(
        np.linalg.norm(X - X[17], axis=1)
    )
    other_seed = WeakStrongOracle(X, corrupt_prob=1 / 3, random_state=4).weak(17, js)
    assert not np.array_equal(a, other_seed)


def test_strong_and_point_query_counters_are_exact() -> None:
    X, _ = blobs(50, seed=1)
    o = WeakStrongOracle(X, random_state=0)
    o.strong(0, [1, 2, 3])
    o.strong(0, 1)
    assert o.n_strong == 4
    o.reveal([0, 1, 1])
    o.reveal(0)
    assert o.n_point == 2
    o.strong(0, [1])  # both revealed: free
    o.strong(0, [2])
    assert o.n_strong == 5


def test_median_of_proxies_misses_at_the_binomial_tail_rate() -> None:
    """Spec oracle: under one-sided corruption a median of m weak answers is wrong iff >= (m+1)/2 are.

    m = 15, rate 1/3: P(Bin(15, 1/3) >= 8) = 0.0882. Over 4,000 rows the s.e. is 0.0045; 4 s.e.
    """
    X, _ = blobs(4015, seed=2)
    o = WeakStrongOracle(X, corrupt_prob=1 / 3, corruption="far", random_state=7)
    proxies = np.arange(15)
    rows = np.arange(15, 4015)
    weak = np.stack([o.weak(int(b), rows) for b in proxies])
    exact = np.stack([np.linalg.norm(X[rows] - X[b], axis=1) for b in proxies])
    miss = np.mean(np.median(weak - exact, axis=0) > 0)  # the median is an overestimate
    expected = binom.sf(7, 15, 1 / 3)
    assert expected == pytest.approx(0.0882, abs=1e-4)
    assert abs(miss - expected) < 4 * math.sqrt(expected * (1 - expected) / 4000)


def test_weights_keep_every_group_count_exactly() -> None:
    X, g = blobs(4000, seed=3)
    cs = weak_strong_coreset(WeakStrongOracle(X, random_state=1), 4, eps=0.2, groups=g, random_state=0)
    assert cs.weights.sum() == pytest.approx(4000)
    for j in (0, 1):
        assert cs.weights[cs.groups == j].sum() == pytest.approx(np.sum(g == j))
    assert np.unique(cs.indices).size == cs.indices.size and cs.indices.size < 4000
    assert cs.rough_centers.size == 8 and cs.n_strong > 0 and cs.n_point > 0


@pytest.mark.claims
def test_claim_cost_within_one_plus_eps_with_noisy_weak_oracle() -> None:
    """n = 4,000, k = 4, eps = 0.2, a third of weak answers corrupted: cost ratio within 1 +- 2 eps (spec).

    Measured: unconstrained ratios in [0.991, 1.003] over 50 centre sets; fair ratios within 0.01.
    The strong queries spent (2,400) are about 0.6 n here; the point of the method is that
    they grow like polylog(n) (see benchmarks/fairness_coresets.py: 1.28x per doubling).
    """
    eps = 0.2
    X, g = blobs(4000, seed=0)
    o = WeakStrongOracle(X, corrupt_prob=1 / 3, random_state=1)
    cs = weak_strong_coreset(o, 4, eps=eps, groups=g, random_state=0)
    rng = np.random.default_rng(5)
    ratios, fair_ratios = [], []
    for t in range(50):
        centres = X[rng.choice(4000, 4, replace=False)]
        full = np.linalg.norm(X[:, None, :] - centres[None], axis=-1)
        core = full[cs.indices]
        ratios.append(
            fair_assignment_cost(core, cs.weights, fair=False) / fair_assignment_cost(full, fair=False)
        )
        if t < 4:
            kw = {"alpha": [0.4, 0.4], "beta": [0.6, 0.6]}
            fair_ratios.append(
                fair_assignment_cost(core, cs.weights, cs.groups, **kw)
                / fair_assignment_cost(full, None, g, **kw)
            )
    assert np.max(np.abs(np.array(ratios) - 1)) <= 2 * eps
    assert np.max(np.abs(np.array(fair_ratios) - 1)) <= 2 * eps
    assert np.max(np.abs(np.array(ratios) - 1)) <= 0.05  # measured 0.009: far inside


def test_centres_found_on_the_coreset_are_near_the_full_data_search() -> None:
    """Spec oracle: local search on the coreset, scored on all points, within (1 + 2 eps) of the same
    search on all points (measured: 5480 vs 5388, ratio 1.017)."""
    X, g = blobs(4000, seed=0)
    o = WeakStrongOracle(X, corrupt_prob=1 / 3, random_state=1)
    cs = weak_strong_coreset(o, 4, eps=0.2, groups=g, random_state=0)
    on_core = fair_kmedian(cs, o, 4, fair=False, random_state=0)
    everyone = Coreset(np.arange(4000), np.ones(4000), g, 0, 0, 0, np.zeros(1, dtype=int), 0)
    on_all = fair_kmedian(everyone, WeakStrongOracle(X, random_state=1), 4, fair=False, random_state=0)

    def full_cost(centres: np.ndarray) -> float:
        return fair_assignment_cost(np.linalg.norm(X[:, None] - X[centres][None], axis=-1), fair=False)

    assert full_cost(on_core.centers) <= 1.4 * full_cost(on_all.centers)
    assert on_core.n_strong == 0 and on_core.n_point > 0  # revealed points: exact distances for free
    assert np.unique(on_core.centers).size == 4


def test_fair_local_search_runs_the_lp() -> None:
    X, g = blobs(600, seed=6)
    o = WeakStrongOracle(X, random_state=2)
    cs = weak_strong_coreset(o, 2, eps=0.3, groups=g, random_state=0)
    kw = {"alpha": [0.45, 0.45], "beta": [0.55, 0.55]}
    res = fair_kmedian(cs, o, 2, n_swaps=4, random_state=0, **kw)
    D = np.linalg.norm(X[cs.indices][:, None] - X[res.centers][None], axis=-1)
    assert res.cost == pytest.approx(fair_assignment_cost(D, cs.weights, cs.groups, **kw))
    assert res.cost >= fair_assignment_cost(D, cs.weights, fair=False)
    with pytest.raises(ParameterError) as info:
        fair_kmedian(weak_strong_coreset(o, 2, random_state=0), o, 2)
    assert info.value.argument == "fair"
    with pytest.raises(ParameterError) as info:
        fair_kmedian(cs, o, 10_000)
    assert info.value.argument == "k"


def test_fair_assignment_respects_the_bounds() -> None:
    D = np.array([[0.0, 3.0], [0.0, 3.0], [0.0, 3.0], [3.0, 0.0]])
    # each cluster must be half group 0, half group 1: the cheapest way moves one unit of weight
    assert fair_assignment_cost(D, groups=[0, 0, 1, 1], fair=False) == 0.0
    c = fair_assignment_cost(D, groups=[0, 0, 1, 1], alpha=[0.5, 0.5], beta=[0.5, 0.5])
    assert c == pytest.approx(3.0)  # one group-1 unit moves to centre 0 or group-0 to centre 1
    assert (
        fair_assignment_cost(D, groups=[0, 0, 0, 0], alpha=[1.0], beta=[1.0]) == 0.0
    )  # one group: no constraint
    assert math.isinf(fair_assignment_cost(D, groups=[0, 0, 1, 1], alpha=[0.8, 0.8], beta=[1.0, 1.0]))
    assert fair_assignment_cost(D, weights=[2, 0, 0, 1], fair=False, z=2) == 0.0


def test_bad_input_names_the_argument() -> None:
    X, g = blobs(100, seed=4)
    o = WeakStrongOracle(X, random_state=0)
    D = np.abs(np.random.default_rng(0).normal(size=(10, 2)))
    cases = [
        (lambda: weak_strong_coreset(o, 0), "k"),
        (lambda: weak_strong_coreset(o, 200), "k"),
        (lambda: weak_strong_coreset(o, 2, eps=1.5), "eps"),
        (lambda: weak_strong_coreset(o, 2, groups=g[:-1]), "groups"),
        (lambda: weak_strong_coreset(o, 2, groups=np.r_[g[:-1], np.nan]), "groups"),
        (lambda: weak_strong_coreset(X, 2), "oracle"),
        (lambda: WeakStrongOracle(X, corrupt_prob=1.0), "corrupt_prob"),
        (lambda: WeakStrongOracle(X, corruption="adversarial"), "corruption"),
        (lambda: WeakStrongOracle(), "X"),
        (lambda: fair_assignment_cost(D, groups=[0, 1] * 5, alpha=[0.5, 1.5]), "alpha"),
        (lambda: fair_assignment_cost(D, groups=[0, 1] * 5, beta=[-0.1, 1.0]), "beta"),
        (lambda: fair_assignment_cost(D, groups=[0, 1] * 5, alpha=[0.6, 0.0], beta=[0.5, 1.0]), "alpha"),
        (lambda: fair_assignment_cost(D, weights=[-1.0] * 10), "weights"),
        (lambda: fair_assignment_cost(D[:, :0]), "distances"),
        (lambda: fair_assignment_cost(-D), "distances"),
    ]
    for call, argument in cases:
        with pytest.raises(TrustlabError) as info:
            call()
        assert info.value.argument == argument, (argument, str(info.value))
    with pytest.raises(ParameterError, match="k"):
        weak_strong_coreset(o, 0)
    with pytest.raises(DataError):
        o.strong(0, [100])


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 80),
    k=st.integers(1, 4),
    p=st.sampled_from([0.0, 1 / 3, 0.9]),
    seed=st.integers(0, 2**20),
)
def test_fuzz_coreset_weights_and_costs(n: int, k: int, p: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.choice([0.0, 1.0, rng.normal()], size=(n, 2))  # many duplicate points
    g = rng.integers(0, 2, n)
    k = min(k, n)
    cs = weak_strong_coreset(
        WeakStrongOracle(X, corrupt_prob=p, random_state=seed), k, groups=g, random_state=seed
    )
    assert cs.weights.sum() == pytest.approx(n) and np.all(cs.weights > 0)
    centres = X[:k]
    D = np.linalg.norm(X[cs.indices][:, None] - centres[None], axis=-1)
    free = fair_assignment_cost(D, cs.weights, cs.groups, fair=False)
    n_present = np.unique(cs.groups).size
    fair = fair_assignment_cost(D, cs.weights, cs.groups, alpha=[0.2] * n_present, beta=[0.8] * n_present)
    assert fair >= free - 1e-9
