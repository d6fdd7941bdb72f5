"""FDGen fair graph generation and the graph fairness/quality measures (row 003-04).

The claim (Wang & Zhang, ICML 2025): trained with its feature-bias and structural-bias terms,
the generator's graphs have lower feature and structural disparity than the unconstrained
generator's, at comparable degree / clustering / spectral MMD to the real graph. Fast profile:
an SBM with planted homophily and feature bias (120 nodes) and Zachary's karate club, one seed
each, 120 Adam steps; three seeds at 150 nodes with the defaults are `slow`.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from trustlab.errors import DataError, NotFittedError, ParameterError, TrustlabError
from trustlab.fairness import (
    BENEFITS_GRAPH_FEATURES,
    FDGen,
    feature_disparity,
    graph_mmd,
    graph_statistic,
    load_benefits_graph,
    load_karate_fairness,
    make_biased_sbm,
    structural_disparity,
)

N_SAMPLES = 8
FAST = {"n_epochs": 120, "learning_rate": 0.1}
# Seed-to-seed spread of the unconstrained generator's MMDs on the 120-node SBM (seeds 0-2):
# degree 0.30-0.52, clustering 0.03-0.21, spectral 0.011-0.020. A gap below 0.1 is inside it.
MMD_TOL = 0.1


def _evaluate(a, x, s, weight, seed=0, **params):
    gen = FDGen(feature_weight=weight, structure_weight=weight, random_state=seed, **params).fit(a, x, s)
    graphs = gen.sample(N_SAMPLES, random_state=seed + 1)
    # pooled over the samples: the noise floor of the group-mean gap falls as 1/sqrt(N_SAMPLES)
    fd = feature_disparity(np.vstack([g.features for g in graphs]), np.tile(s, N_SAMPLES))
    sd = float(np.mean([structural_disparity(g.adjacency, s) for g in graphs]))
    mmd = {k: graph_mmd(a, [g.adjacency for g in graphs], k) for k in ("degree", "clustering", "spectral")}
    return {"feature": fd, "structural": sd, "mmd": mmd, "model": gen}


@pytest.fixture(scope="module")
def sbm_runs():
    a, x, s = make_biased_sbm(120, random_state=0)
    return {w: _evaluate(a, x, s, w, **FAST) for w in (0.0, 10.0)}, (a, x, s)


@pytest.fixture(scope="module")
def karate_runs():
    a, x, s = load_karate_fairness()
    return {w: _evaluate(a, x, s, w, **FAST) for w in (0.0, 10.0)}, (a, x, s)


def _group_mean_degrees(adjacency, s):
    deg = np.asarray(adjacency.sum(axis=1)).ravel()
    return np.array([deg[s == k].mean() for k in (0, 1)])


@pytest.mark.claims
def test_claim_sbm_fairer_at_comparable_quality(sbm_runs):
    runs, (a, _, s) = sbm_runs
    plain, fair = runs[0.0], runs[10.0]
    # the unconstrained generator keeps the planted biases (measured: feature 0.47, structural 1.35)
    assert plain["feature"] > 0.35 and plain["structural"] > 1.0
    # FDGen: the pooled group-mean gap's noise floor is ~0.05 (SE 0.055 per feature at 960 rows)
    assert fair["feature"] < 0.5 * plain["feature"] and fair["feature"] < 0.25
    # one sample's structural disparity has SE ~0.1 at ~400 edges
    assert fair["structural"] < 0.3 * plain["structural"] and fair["structural"] < 0.3
    for k in ("clustering", "spectral"):
        assert fair["mmd"][k] <= plain["mmd"][k] + MMD_TOL, k
    # Degree MMD is not kept at 120 nodes (0.36 vs 0.15): equal in- and out-group link rates
    # force equal group mean degrees (the planted SBM's are 20% apart), which FDGen's graphs show
    g = runs[10.0]["model"].sample(8, random_state=3)
    fair_deg = np.mean([_group_mean_degrees(x.adjacency, s) for x in g], axis=0)
    real_deg = _group_mean_degrees(a, s)
    assert abs(fair_deg[0] - fair_deg[1]) < 0.5 * abs(real_deg[0] - real_deg[1])


@pytest.mark.claims
def test_claim_karate_fairer_costs_the_communities(karate_runs):
    """On the karate club both disparities fall, and the cost is the faction = community link.

    The unconstrained generator reproduces the 34-node club almost exactly (every MMD < 0.01),
    so every MMD of a debiased generator is worse: clustering 1.07, spectral 0.28, degree 0.32.
    With the faction labels permuted (a group attribute that is not the communities), the same
    FDGen keeps every MMD below 0.15: the cost comes from the factions being the communities
    (docs/fairness/fdgen.md).
    """
    runs, (a, x, s) = karate_runs
    plain, fair = runs[0.0], runs[10.0]
    assert plain["feature"] > 0.5 and plain["structural"] > 1.0
    assert fair["feature"] < 0.5 * plain["feature"]
    assert fair["structural"] < 0.35 * plain["structural"]
    assert fair["mmd"]["clustering"] > 0.5 and plain["mmd"]["clustering"] < 0.1
    perm = np.random.default_rng(0).permutation(s)
    control = _evaluate(a, x, perm, 10.0, **FAST)
    for k in ("degree", "clustering", "spectral"):
        assert control["mmd"][k] < 0.2, k


@pytest.mark.slow  # reason: six fits of 300 steps on 150-node graphs, ~20 s
@pytest.mark.claims
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_claim_sbm_defaults_three_seeds(seed):
    a, x, s = make_biased_sbm(150, random_state=seed)
    plain, fair = _evaluate(a, x, s, 0.0, seed), _evaluate(a, x, s, 10.0, seed)
    assert fair["feature"] < 0.4 * plain["feature"]
    assert fair["structural"] < 0.2 * plain["structural"]
    for k in ("clustering", "spectral"):
        assert fair["mmd"][k] <= plain["mmd"][k] + MMD_TOL, k


@pytest.fixture(scope="module")
def benefits_runs():
    a, x, s = load_benefits_graph()
    runs = {w: [_evaluate(a, x, s, w, seed) for seed in (0, 1, 2)] for w in (0.0, 3.0, 10.0)}
    # what a second real graph differs by: the same construction on 8 other 300-worker samples
    others = [load_benefits_graph(random_state=r)[0] for r in range(1, 9)]
    ref = {k: graph_mmd(a, others, k) for k in ("degree", "clustering", "spectral")}
    return runs, ref


def _mean(runs, key, mmd=None):
    return float(np.mean([r["mmd"][mmd] if mmd else r[key] for r in runs]))


@pytest.mark.slow  # reason: nine fits of 300 steps on the 300-node benefits graph, ~15 s
@pytest.mark.claims
def test_claim_benefits_graph_fairer(benefits_runs):
    """The NIFTY-style benefits graph (sex): both disparities fall at the default weights.

    Measured (3 seeds): feature 0.284 -> 0.035, structural 1.316 -> 0.077. The pooled
    group-mean gap's noise floor at 8 x 300 rows (67 women) is ~0.04.
    """
    runs, _ = benefits_runs
    plain, fair = runs[0.0], runs[10.0]
    assert _mean(plain, "feature") > 0.2 and _mean(plain, "structural") > 1.0
    assert _mean(fair, "feature") < 0.1 and _mean(fair, "feature") < 0.5 * _mean(plain, "feature")
    assert _mean(fair, "structural") < 0.2 * _mean(plain, "structural")


@pytest.mark.slow  # reason: shares the benefits fixture (nine fits)
@pytest.mark.claims
def test_claim_benefits_graph_quality_comparable_at_weight_three(benefits_runs):
    """Comparable quality = MMD within the unconstrained one plus the MMD of a second real graph.

    The tolerance ``ref`` is the MMD between the graph and 8 graphs built the same way from
    other samples of 300 workers (degree 0.55, clustering 0.10, spectral 0.03). At weight 3
    (both terms; the trade-off curve's knee) every MMD is inside it while the disparities fall
    to 0.07 and 0.09. At the default 10 the clustering MMD is not (0.26 vs 0.03 + 0.10). This
    holds for this graph (sample 0) only: on samples 1-3 the references are smaller and the
    clustering (0.10-0.12) or spectral MMD at weight 3 is outside (docs/fairness/fdgen.md).
    """
    runs, ref = benefits_runs
    plain, mid, fair = runs[0.0], runs[3.0], runs[10.0]
    assert _mean(mid, "feature") < 0.5 * _mean(plain, "feature")
    assert _mean(mid, "structural") < 0.2 * _mean(plain, "structural")
    for k in ("degree", "clustering", "spectral"):
        assert _mean(mid, None, k) <= _mean(plain, None, k) + ref[k], k
    for k in ("degree", "spectral"):
        assert _mean(fair, None, k) <= _mean(plain, None, k) + ref[k], k


@pytest.mark.slow  # reason: six fits of 300 steps on 300-node graphs, ~6 s
@pytest.mark.claims
@pytest.mark.parametrize("graph_seed", [1, 2])
def test_claim_benefits_other_samples_fairer(graph_seed):
    """On graphs built from other 300-worker samples both disparities still fall at weight 3.

    Measured (samples 1-3): feature 0.21-0.23 -> 0.06-0.07, structural 0.81-1.07 -> 0.08-0.11.
    """
    a, x, s = load_benefits_graph(random_state=graph_seed)
    plain, mid = _evaluate(a, x, s, 0.0), _evaluate(a, x, s, 3.0)
    assert mid["feature"] < 0.5 * plain["feature"]
    assert mid["structural"] < 0.2 * plain["structural"]


def test_benefits_graph_construction():
    a, x, s = load_benefits_graph(60, sensitive="nwhite", threshold=0.8, random_state=0)
    again = load_benefits_graph(60, sensitive="nwhite", threshold=0.8, random_state=0)
    assert (a != again[0]).nnz == 0 and np.array_equal(x, again[1]) and np.array_equal(s, again[2])
    assert a.shape == (60, 60) and x.shape == (60, len(BENEFITS_GRAPH_FEATURES))
    assert (a != a.T).nnz == 0 and a.diagonal().sum() == 0
    assert (np.asarray(a.sum(axis=1)).ravel() >= 1).all()  # each worker links its most similar one
    np.testing.assert_allclose(x.mean(axis=0), 0, atol=1e-9)
    # NIFTY's rule by hand: i -- j when sim(i, j) > 0.8 * max_l sim(i, l), for i or for j
    d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    sim = 1 / (1 + d)
    np.fill_diagonal(sim, -1)
    rule = sim > 0.8 * sim.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(a.toarray() > 0, rule | rule.T)
    assert set(np.unique(s)) == {0, 1}
    lower = load_benefits_graph(60, threshold=0.6, random_state=0)[0]
    assert lower.nnz > a.nnz
    with pytest.raises(ParameterError, match="sensitive"):
        load_benefits_graph(60, sensitive="age")
    with pytest.raises(ParameterError, match="threshold"):
        load_benefits_graph(60, threshold=1.0)
    with pytest.raises(ParameterError, match="n_nodes"):
        load_benefits_graph(5000)


def test_training_terms_fall_with_the_weights(sbm_runs):
    runs, _ = sbm_runs
    plain, fair = runs[0.0]["model"], runs[10.0]["model"]
    assert fair.feature_bias_ < 0.1 * plain.feature_bias_
    assert fair.structural_bias_ < 0.1 * plain.structural_bias_
    assert fair.loss_curve_[-1] < fair.loss_curve_[0]


def test_samples_are_simple_graphs_and_reproducible(sbm_runs):
    runs, (a, x, s) = sbm_runs
    gen = runs[10.0]["model"]
    g1, g2 = gen.sample(2, random_state=5)
    again = gen.sample(2, random_state=5)[0]
    for g in (g1, g2):
        assert g.adjacency.shape == a.shape and (g.adjacency != g.adjacency.T).nnz == 0
        assert g.adjacency.diagonal().sum() == 0 and set(np.unique(g.adjacency.data)) <= {1.0}
        assert g.features.shape == x.shape and np.array_equal(g.sensitive, s)
    assert (g1.adjacency != again.adjacency).nnz == 0 and np.array_equal(g1.features, again.features)
    assert (g1.adjacency != g2.adjacency).nnz > 0
    # expected edge count = fitted probabilities; the unconstrained fit keeps the density
    plain = runs[0.0]["model"]
    assert abs(plain.edge_probabilities_.sum() / 2 - a.nnz / 2) < 0.05 * a.nnz / 2


def test_structure_only_and_three_groups():
    rng = np.random.default_rng(0)
    g = nx.stochastic_block_model(
        [20, 20, 20], [[0.3, 0.05, 0.05], [0.05, 0.3, 0.05], [0.05, 0.05, 0.3]], seed=1
    )
    s = np.repeat(["a", "b", "c"], 20)
    gen = FDGen(n_epochs=50, learning_rate=0.1, random_state=0).fit(g, None, s)
    out = gen.sample(4, random_state=rng)
    assert out[0].features is None and list(gen.groups_) == ["a", "b", "c"]
    before = structural_disparity(g, s)
    after = np.mean([structural_disparity(o.adjacency, s) for o in out])
    assert before > 2 and after < 0.5 * before


def test_structural_disparity_matches_the_block_model():
    a, _, s = make_biased_sbm(400, p_within=0.1, p_between=0.02, random_state=3)
    n1 = s.sum()
    n0 = len(s) - n1
    pairs = len(s) * (len(s) - 1) / 2
    rho = (0.1 * (n0 * (n0 - 1) + n1 * (n1 - 1)) / 2 + 0.02 * n0 * n1) / pairs
    expected = (0.1 - 0.02) / rho
    # density estimates from ~4,000 edges: relative SE ~3%
    assert structural_disparity(a, s) == pytest.approx(expected, rel=0.1)
    assert structural_disparity(a, 1 - s) == pytest.approx(structural_disparity(a, s))


def test_feature_disparity_values():
    x = np.array([[0.0, 5.0], [0.0, 5.0], [2.0, 5.0], [2.0, 5.0]])
    assert feature_disparity(x, [0, 0, 1, 1]) == pytest.approx(
        1.0
    )  # 2 / sd 1 on one feature, 0 on the constant
    assert feature_disparity(x, [0, 1, 0, 1]) == 0.0


def test_graph_statistics_and_mmd():
    triangle_plus = np.array([[0, 1, 1, 0], [1, 0, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0]])
    clus = graph_statistic(triangle_plus, "clustering")
    assert (
        clus[-1] == pytest.approx(0.5) and clus[0] == pytest.approx(0.25) and clus[33] == pytest.approx(0.25)
    )
    spec = graph_statistic(triangle_plus, "spectral")
    assert spec.sum() == pytest.approx(1.0) and spec[0] == pytest.approx(0.25)  # one zero eigenvalue
    ring = nx.cycle_graph(12)
    star = nx.star_graph(11)
    assert graph_mmd(ring, [ring], "spectral") == 0.0
    for k in ("degree", "clustering", "spectral"):
        assert graph_mmd(ring, [star, star], k) >= 0.0
    assert graph_mmd(ring, [star], "degree") > 0.5
    assert graph_mmd(ring, [ring, star], "degree") < graph_mmd(ring, [star, star], "degree")


def _path(n=6):
    return nx.to_numpy_array(nx.path_graph(n))


@pytest.mark.parametrize(
    ("adjacency", "features", "sensitive", "argument"),
    [
        (_path() + np.eye(6), None, [0, 0, 0, 1, 1, 1], "adjacency"),  # self-loops
        (np.triu(_path()), None, [0, 0, 0, 1, 1, 1], "adjacency"),  # directed
        (np.zeros((6, 6)), None, [0, 0, 0, 1, 1, 1], "adjacency"),  # no edges
        (2 * _path(), None, [0, 0, 0, 1, 1, 1], "adjacency"),  # weighted
        (np.ones((6, 5)), None, [0, 0, 0, 1, 1, 1], "adjacency"),  # not square
        (_path(3), None, [0, 0, 1], "adjacency"),  # too small
        (nx.DiGraph(nx.path_graph(6)), None, [0, 0, 0, 1, 1, 1], "adjacency"),
        (_path(), np.full((6, 2), np.nan), [0, 0, 0, 1, 1, 1], "features"),
        (_path(), np.ones((5, 2)), [0, 0, 0, 1, 1, 1], "features"),  # mismatched node count
        (_path(), np.ones((6, 0)), [0, 0, 0, 1, 1, 1], "features"),
        (_path(), None, [0, 0, 0, 1, 1], "sensitive"),  # mismatched node count
        (_path(), None, [0] * 6, "sensitive"),  # one group
        (_path(), None, [0, 0, 0, 0, 0, 1], "sensitive"),  # a group of one node
        (_path(), None, [0.0, 0, 0, 1, 1, np.nan], "sensitive"),
    ],
)
def test_bad_input_names_the_argument(adjacency, features, sensitive, argument):
    with pytest.raises(TrustlabError) as info:
        FDGen(n_epochs=1).fit(adjacency, features, sensitive)
    assert info.value.argument == argument


def test_disconnected_graph_is_accepted():
    a = sparse.block_diag([_path(4), _path(4)]).tocsr()
    gen = FDGen(n_epochs=5, random_state=0).fit(a, np.arange(8.0)[:, None], [0, 1] * 4)
    assert gen.sample()[0].adjacency.shape == (8, 8)


def test_bad_parameters_and_misuse():
    with pytest.raises(ParameterError) as info:
        FDGen(feature_weight=-1.0).fit(_path(), None, [0, 0, 0, 1, 1, 1])
    assert info.value.argument == "feature_weight"
    with pytest.raises(NotFittedError):
        FDGen().sample()
    gen = FDGen(n_epochs=2, random_state=0).fit(_path(), None, [0, 0, 0, 1, 1, 1])
    with pytest.raises(ParameterError) as info:
        gen.sample(0)
    assert info.value.argument == "n_samples"
    with pytest.raises(ParameterError) as info:
        graph_mmd(_path(), [_path()], "triangles")
    assert info.value.argument == "statistic"
    with pytest.raises(DataError) as info:
        graph_mmd(_path(), _path())
    assert info.value.argument == "generated"
    with pytest.raises(ParameterError) as info:
        make_biased_sbm(20, n_features=2, n_biased=3)
    assert info.value.argument == "n_biased"


@settings(max_examples=25, deadline=None)
@given(st.integers(4, 9), st.integers(0, 2**16), st.integers(0, 8))
def test_any_self_loop_is_rejected_by_name(n, seed, where):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < 0.5, k=1)
    a = (upper | upper.T).astype(float)
    a[0, 1] = a[1, 0] = 1.0
    a[where % n, where % n] = 1.0
    with pytest.raises(DataError) as info:
        structural_disparity(a, [0, 1] * (n // 2) + [0] * (n % 2))
    assert info.value.argument == "adjacency"
