"""Fuzzy-boundary graph contrastive learning vs GRACE (row 004-06): unit, bad-input and claim tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from trustlab.errors import DataError, NotFittedError, ParameterError, TrustlabError
from trustlab.explain import (
    FuzzyBoundaryGCL,
    cluster_quality,
    load_karate_communities,
    make_community_graph,
)

SMALL = {"n_epochs": 8, "warmup": 3, "n_components": 8, "hidden_dim": 16, "projection_dim": 8}


@pytest.fixture(scope="module")
def tiny():
    return make_community_graph(30, 2, p_within=0.3, p_between=0.05, n_features=4, random_state=0)


@pytest.fixture(scope="module")
def sbm_pair():
    """GRACE and the fuzzy-boundary model on one SBM (n = 100, 3 communities), same seed and loop."""
    a, x, y = make_community_graph(100, 3, random_state=0)
    fits = {
        fuzzy: FuzzyBoundaryGCL(n_clusters=3, fuzzy=fuzzy, n_epochs=80, warmup=25, random_state=0).fit(a, x)
        for fuzzy in (False, True)
    }
    return a, x, y, fits


def test_fuzzy_terms_at_zero_weight_are_grace_step_for_step(tiny) -> None:
    a, x, _ = tiny
    grace = FuzzyBoundaryGCL(fuzzy=False, random_state=3, **SMALL).fit(a, x)
    off = FuzzyBoundaryGCL(construction_weight=0, contraction_weight=0, random_state=3, **SMALL).fit(a, x)
    on = FuzzyBoundaryGCL(random_state=3, **SMALL).fit(a, x)
    np.testing.assert_array_equal(grace.embedding_, off.embedding_)
    np.testing.assert_array_equal(grace.loss_curve_[:3], on.loss_curve_[:3])  # the warm-up is GRACE
    assert not np.array_equal(grace.embedding_, on.embedding_)
    assert grace.membership_ is None and grace.cluster_centers_ is None and grace.labels_ is None


def test_fitted_state_and_transform(sbm_pair) -> None:
    a, x, _, fits = sbm_pair
    gcl = fits[True]
    assert gcl.embedding_.shape == (100, 32)
    np.testing.assert_allclose(gcl.membership_.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(gcl.labels_, gcl.membership_.argmax(axis=1))
    np.testing.assert_allclose(np.linalg.norm(gcl.cluster_centers_, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(gcl.transform(), gcl.embedding_)
    np.testing.assert_allclose(gcl.transform(a, x), gcl.embedding_, atol=1e-6)
    assert fits[False].loss_curve_[-10:].mean() < fits[False].loss_curve_[:10].mean()


def test_fuzzy_memberships_are_fuzzy_c_means() -> None:
    import torch

    from trustlab.explain._gcl_train import fuzzy_memberships

    z = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    c = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    u = fuzzy_memberships(z, c, 2.0).numpy()
    d = np.linalg.norm(z.numpy()[:, None, :] - c.numpy()[None], axis=2)
    ref = 1 / ((d[1, :, None] / d[1, None, :]) ** 2).sum(axis=1)  # m = 2: exponent 2/(m-1) = 2
    np.testing.assert_allclose(u[1], ref, rtol=1e-5)
    assert u[0, 0] > 0.999  # a node on its centre belongs to it


def test_sparse_propagation_equals_dense_and_fits_are_reproducible(tiny, monkeypatch) -> None:
    from trustlab.explain import _gcl_train

    a, x, _ = tiny
    first = FuzzyBoundaryGCL(random_state=5, **SMALL).fit(a, x)
    again = FuzzyBoundaryGCL(random_state=5, **SMALL).fit(a, x)
    np.testing.assert_array_equal(first.embedding_, again.embedding_)
    monkeypatch.setattr(_gcl_train, "_DENSE_MAX", 0)  # graphs above 1,000 nodes take the sparse path
    sparse_fit = FuzzyBoundaryGCL(random_state=5, **SMALL).fit(a, x)
    np.testing.assert_allclose(sparse_fit.embedding_, first.embedding_, atol=1e-4)
    np.testing.assert_allclose(sparse_fit.loss_curve_, first.loss_curve_, rtol=1e-4)
    ka, kx, _ = load_karate_communities()  # identity features: 3 % non-zero, kept sparse above the limit
    sparse_x = FuzzyBoundaryGCL(random_state=5, **SMALL).fit(ka, kx)
    monkeypatch.setattr(_gcl_train, "_DENSE_MAX", 3000)
    dense_x = FuzzyBoundaryGCL(random_state=5, **SMALL).fit(ka, kx)
    np.testing.assert_allclose(sparse_x.embedding_, dense_x.embedding_, atol=1e-4)


def test_identity_features_and_networkx_input() -> None:
    import networkx as nx

    g = nx.karate_club_graph()
    gcl = FuzzyBoundaryGCL(random_state=0, **SMALL).fit(g)
    assert gcl.n_features_in_ == 34 and gcl.transform(g).shape == (34, 8)


def test_cluster_quality_on_known_geometry() -> None:
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 20)
    tight = np.eye(3)[y] + 0.01 * rng.standard_normal((60, 3))
    loose = np.eye(3)[y] + 0.4 * rng.standard_normal((60, 3))
    qt, ql = cluster_quality(tight, y), cluster_quality(loose, y)
    assert qt.nmi == pytest.approx(1.0) and qt.ari == pytest.approx(1.0) and qt.probe_accuracy == 1.0
    assert qt.separation == pytest.approx(np.sqrt(2), abs=0.01)
    assert qt.compactness_ratio < ql.compactness_ratio and qt.silhouette > ql.silhouette
    assert qt.local_groups == 1.0
    split = tight.copy()
    split[:10] = np.array([0.0, -1.0, 0.0]) + 0.01 * rng.standard_normal((10, 3))  # class 0 in two groups
    assert cluster_quality(split, y).local_groups == pytest.approx(4 / 3)


def _bad(a, x):
    return lambda **kw: FuzzyBoundaryGCL(**{**SMALL, **kw}).fit(a, x)


@pytest.mark.parametrize(
    ("case", "argument"),
    [
        ("self_loop", "adjacency"),
        ("no_edges", "adjacency"),
        ("directed", "adjacency"),
        ("weighted", "adjacency"),
        ("nan_features", "features"),
        ("rows", "features"),
        ("clusters", "n_clusters"),
        ("warmup", "warmup"),
        ("drop", "drop_edge"),
        ("mask", "mask_feature"),
        ("alpha", "alpha"),
    ],
)
def test_bad_input_names_the_argument(tiny, case, argument) -> None:
    a, x, _ = tiny
    dense = a.toarray()
    kw: dict = {}
    if case == "self_loop":
        dense[0, 0] = 1
    elif case == "no_edges":
        dense[:] = 0
    elif case == "directed":
        dense[0, 5], dense[5, 0] = 1, 0
    elif case == "weighted":
        dense[dense > 0] = 2.0
    elif case == "nan_features":
        x = x.copy()
        x[3, 1] = np.nan
    elif case == "rows":
        x = x[:-1]
    elif case == "clusters":
        kw = {"n_clusters": 31}
    elif case == "warmup":
        kw = {"warmup": 8}
    elif case == "drop":
        kw = {"drop_edge": (0.2, 1.0)}
    elif case == "mask":
        kw = {"mask_feature": (0.3,)}
    elif case == "alpha":
        kw = {"alpha": 1.0}
    with pytest.raises(TrustlabError) as err:
        _bad(dense, x)(**kw)
    assert err.value.argument == argument


def test_transform_checks_its_inputs(tiny) -> None:
    a, x, _ = tiny
    with pytest.raises(NotFittedError):
        FuzzyBoundaryGCL().transform()
    gcl = FuzzyBoundaryGCL(random_state=0, **SMALL).fit(a, x)
    with pytest.raises(DataError, match="columns") as err:
        gcl.transform(a, x[:, :3])
    assert err.value.argument == "features"
    with pytest.raises(DataError) as err:
        gcl.transform(a)
    assert err.value.argument == "features"
    with pytest.raises(ParameterError):
        gcl.transform(None, x)
    with pytest.raises(DataError) as err:
        cluster_quality(gcl.embedding_, np.zeros(30))
    assert err.value.argument == "labels"


@settings(max_examples=10, deadline=None)
@given(st.tuples(st.floats(-1, 2), st.floats(-1, 2)))
def test_view_probabilities_validated(pair) -> None:
    ok = all(0 <= p < 1 for p in pair)
    a, x, _ = make_community_graph(12, 2, p_within=0.5, n_features=2, random_state=0)
    kw = {**SMALL, "n_epochs": 2, "warmup": 1, "drop_edge": pair}
    if ok:
        FuzzyBoundaryGCL(random_state=0, **kw).fit(a, x)
    else:
        with pytest.raises(ParameterError):
            FuzzyBoundaryGCL(random_state=0, **kw).fit(a, x)


@pytest.mark.claims
def test_claim_fuzzy_boundary_more_compact_and_separated_on_sbm(sbm_pair) -> None:
    """SBM n = 100, 3 planted communities, one seed: the fuzzy boundary tightens the clusters.

    Compactness/separation and the silhouette of the true communities improve by a wide margin
    (measured 0.44 -> 0.26 and 0.42 -> 0.59), and each community falls into fewer small groups
    at radius 0.3 (local cohesion, the paper's DBSCAN analysis: 11.0 -> 4.7 groups). k-means NMI
    and the linear probe do not get worse beyond a few nodes' worth (NMI moves ~0.015-0.02 per
    misplaced node here, the probe 1/100; measured NMI 0.768 -> 0.765, probe 0.95 both: not
    better at this size and training length).
    """
    _, _, y, fits = sbm_pair
    grace, fuzzy = (cluster_quality(fits[f].embedding_, y) for f in (False, True))
    assert fuzzy.compactness_ratio < 0.85 * grace.compactness_ratio
    assert fuzzy.silhouette > grace.silhouette + 0.05
    assert fuzzy.local_groups < 0.75 * grace.local_groups  # fewer small groups per class
    assert fuzzy.nmi >= grace.nmi - 0.05
    assert fuzzy.probe_accuracy >= grace.probe_accuracy - 3 / 100


@pytest.mark.claims
def test_claim_fuzzy_boundary_on_karate_club() -> None:
    """Zachary's karate club (ships with networkx), factions as clusters, identity features."""
    a, x, y = load_karate_communities()
    q = {
        fuzzy: cluster_quality(
            FuzzyBoundaryGCL(fuzzy=fuzzy, n_epochs=30, warmup=10, random_state=0).fit_transform(a, x), y
        )
        for fuzzy in (False, True)
    }
    assert q[True].compactness_ratio < 0.5 * q[False].compactness_ratio  # measured 0.59 -> 0.25
    assert q[True].silhouette > q[False].silhouette + 0.2  # measured 0.37 -> 0.63
    assert q[True].local_groups < 0.75 * q[False].local_groups  # measured 5.0 -> 1.5 groups per faction
    assert q[True].nmi >= q[False].nmi - 1e-9  # the same k-means partition (measured 0.837 both)
    assert q[True].probe_accuracy >= q[False].probe_accuracy - 1 / 34  # one member (0.97 both)


@pytest.mark.claims
@pytest.mark.slow  # reason: ten 200-epoch fits on n = 200 (about 25 s of CPU)
def test_claim_fuzzy_boundary_sbm_five_seeds() -> None:
    """SBM n = 200, 4 communities, the defaults, five graphs and seeds: paired comparison."""
    rows = []
    for seed in range(5):
        a, x, y = make_community_graph(200, 4, random_state=100 + seed)
        rows.append(
            [
                cluster_quality(
                    FuzzyBoundaryGCL(n_clusters=4, fuzzy=f, random_state=seed).fit_transform(a, x), y
                )
                for f in (False, True)
            ]
        )
    assert all(fz.compactness_ratio < g.compactness_ratio for g, fz in rows)
    assert all(fz.silhouette > g.silhouette for g, fz in rows)
    assert all(fz.local_groups < g.local_groups for g, fz in rows)
    assert np.mean([fz.nmi - g.nmi for g, fz in rows]) >= -0.02
    assert np.mean([fz.probe_accuracy - g.probe_accuracy for g, fz in rows]) >= -0.01


CORA = {  # GRACE's Cora configuration at half its 200 epochs (benchmarks/explain_graph_contrastive.py)
    "n_clusters": 7,
    "n_components": 128,
    "hidden_dim": 256,
    "projection_dim": 128,
    "temperature": 0.4,
    "learning_rate": 5e-4,
    "n_epochs": 100,
    "warmup": 50,
}


@pytest.mark.claims
@pytest.mark.slow  # reason: two 100-epoch fits on Cora (2,708 nodes): about 90 s of CPU, 165 s wall when busy
def test_claim_fuzzy_boundary_tightens_cora_classes_slow() -> None:
    """Cora (2,708 papers, 1,433 word features, 7 topics), seed 0, fuzzifier 1.5.

    With the default m = 2 no membership reaches alpha on Cora's 128-d embeddings (largest
    membership ~1/7), so the fuzzy terms vanish; m = 1.5 puts ~92 % of the nodes in a fuzzy
    boundary. Then the paper's quantitative claim holds on a real graph: measured
    compactness/separation 1.024 -> 0.688, silhouette 0.085 -> 0.159, small groups per topic
    136 -> 52 (three seeds: -0.352 +- 0.014, +0.092 +- 0.011, -85 +- 4, paired SE). The accuracy
    gain does not: the 5-fold probe drops (0.858 -> 0.831; three seeds -0.022 +- 0.005) and the
    public-split test accuracy and NMI stay within noise; the guard below only rules out a
    collapse of the embedding (a probe loss over 5 points, seven times the fold SE). Margins: the
    thresholds sit 10, 3 and 7 paired SEs (three seeds) inside the measured gaps.
    """
    from trustlab.datasets import load_cora

    cora = load_cora()
    q = {
        m: cluster_quality(
            FuzzyBoundaryGCL(fuzzy=m is not None, fuzzifier=m or 2.0, random_state=0, **CORA).fit_transform(
                cora.adjacency, cora.features
            ),
            cora.labels,
        )
        for m in (None, 1.5)
    }
    grace, fuzzy = q[None], q[1.5]
    assert fuzzy.compactness_ratio < 0.8 * grace.compactness_ratio
    assert fuzzy.silhouette > grace.silhouette + 0.04
    assert fuzzy.local_groups < 0.6 * grace.local_groups
    assert fuzzy.probe_accuracy > grace.probe_accuracy - 0.05


CITESEER = {  # GRACE's CiteSeer configuration (ReLU for its PReLU) at half its 200 epochs
    "n_clusters": 6,
    "n_components": 256,
    "hidden_dim": 512,
    "projection_dim": 256,
    "temperature": 0.9,
    "learning_rate": 1e-3,
    "drop_edge": (0.2, 0.0),
    "mask_feature": (0.3, 0.2),
    "n_epochs": 100,
    "warmup": 50,
}


@pytest.mark.claims
@pytest.mark.slow  # reason: two 100-epoch fits on CiteSeer (3,327 nodes): about 320 s of CPU
def test_claim_fuzzy_boundary_tightens_citeseer_classes_slow() -> None:
    """CiteSeer (3,327 papers, 3,703 word features, 6 topics), seed 0, fuzzifier 1.5.

    Measured (seed 0): compactness/separation 1.92 -> 0.66, silhouette 0.039 -> 0.170, small
    groups per topic 258 -> 12, 5-fold probe 0.745 -> 0.697; three seeds, paired SE:
    -1.07 +- 0.18, +0.127 +- 0.023, -190 +- 47, -0.029 +- 0.012. NMI (+0.035 +- 0.021) and the
    public-split accuracy (+0.019 +- 0.013) rise but under two SE: not asserted. The thresholds
    hold on each of the three seeds (worst seed: ratio 0.64x, silhouette +0.08, groups 0.62x);
    the probe guard only rules out a collapse. The 15 padded nodes (label -1) are left out.
    """
    from trustlab.datasets import load_citeseer

    data = load_citeseer()
    known = data.labels >= 0
    q = {
        m: cluster_quality(
            FuzzyBoundaryGCL(
                fuzzy=m is not None, fuzzifier=m or 2.0, random_state=0, **CITESEER
            ).fit_transform(data.adjacency, data.features)[known],
            data.labels[known],
        )
        for m in (None, 1.5)
    }
    grace, fuzzy = q[None], q[1.5]
    assert fuzzy.compactness_ratio < 0.8 * grace.compactness_ratio
    assert fuzzy.silhouette > grace.silhouette + 0.04
    assert fuzzy.local_groups < 0.8 * grace.local_groups
    assert fuzzy.probe_accuracy > grace.probe_accuracy - 0.08


def test_docs_example_runs(run_docs_example) -> None:
    run_docs_example(Path(__file__).resolve().parents[2] / "docs" / "explain" / "fuzzy-boundary-gcl.md")
