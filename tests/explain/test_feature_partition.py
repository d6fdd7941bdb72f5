"""Feature partitions with Laplacian smoothness (catalog row 003-08)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.manifold import SpectralEmbedding, trustworthiness
from sklearn.metrics import adjusted_rand_score

from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain.feature_partition import (
    FeaturePartition,
    _gaussian_rows,
    _scores,
    make_manifold_blocks,
)

N = 300
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def fits():
    out = []
    for seed in SEEDS:
        X, labels, clean = make_manifold_blocks(N, random_state=seed)
        fp = FeaturePartition(perplexity=10, n_restarts=2, random_state=seed).fit(X)
        out.append((X, labels, clean, fp))
    return out


@pytest.mark.claims
def test_claim_recovers_true_partition_and_embeds_better(fits) -> None:
    """The paper's simulation: the partition is recovered exactly (ARI 1) and each manifold's
    neighbourhoods survive its partition's embedding better than one embedding of all features.

    Trustworthiness (k = 10) is a mean over N points of a bounded per-point score, so its sampling
    spread is O(1/sqrt(N)); the mean gap over the two manifolds must exceed 3/sqrt(N) = 0.17 at
    N = 300 (the benchmark measures gaps of 0.09-0.30 at N = 1,000 and 10,000).
    """
    margin = 3 / np.sqrt(N)
    for X, labels, clean, fp in fits:
        assert adjusted_rand_score(labels, fp.labels_) == 1.0
        single = SpectralEmbedding(
            2, affinity="nearest_neighbors", n_neighbors=15, random_state=0
        ).fit_transform(X)
        per_partition = fp.embed(2)
        gaps = []
        for m in range(2):
            k = int(np.bincount(fp.labels_[labels == m], minlength=2).argmax())
            ours = trustworthiness(clean[m], per_partition[k], n_neighbors=10)
            theirs = trustworthiness(clean[m], single, n_neighbors=10)
            assert ours > 0.95
            gaps.append(ours - theirs)
        assert np.mean(gaps) > margin, gaps


def test_gaussian_rows_have_the_asked_perplexity() -> None:
    rng = np.random.default_rng(0)
    d = rng.exponential(size=(50, 30))
    p = _gaussian_rows(d, 7.0)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    entropy = -np.sum(p * np.log(p), axis=1)
    np.testing.assert_allclose(np.exp(entropy), 7.0, rtol=1e-4)
    # a closer point always gets more weight
    order = np.argsort(d, axis=1)
    assert np.all(np.diff(np.take_along_axis(p, order, axis=1), axis=1) <= 1e-12)


def test_scores_match_the_dense_laplacian_form() -> None:
    from scipy import sparse

    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 3))
    w = rng.random((12, 12)) * (rng.random((12, 12)) < 0.4)
    w /= np.maximum(w.sum(axis=1, keepdims=True), 1e-12)
    brute = np.array(
        [sum(w[i, j] * (x[i, d] - x[j, d]) ** 2 for i in range(12) for j in range(12)) for d in range(3)]
    )
    np.testing.assert_allclose(_scores(x, sparse.csr_matrix(w)), brute / 12)
    # the empty partition's uniform affinity: twice the variance
    np.testing.assert_allclose(_scores(x, None), 2 * x.var(axis=0))


def test_fitted_attributes_and_determinism(fits) -> None:
    fp = fits[0][3]
    assert fp.weights_.shape == (2, 6)
    assert set(np.unique(fp.weights_)) == {0.0, 1.0}
    assert sorted(np.concatenate(fp.partitions_).tolist()) == list(range(6))
    for w in fp.affinities_:
        np.testing.assert_allclose(np.asarray(w.sum(axis=1)).ravel(), 1.0)
    assert [e.shape for e in fp.embed(3)] == [(N, 3), (N, 3)]
    X, _, _ = make_manifold_blocks(80, random_state=5)
    small = FeaturePartition(perplexity=5, n_restarts=1, delta_steps=3, random_state=1)
    first, second = small.fit(X), clone(small).fit(X)
    np.testing.assert_array_equal(first.labels_, second.labels_)
    assert first.objective_ == pytest.approx(second.objective_)


@pytest.mark.slow  # four partitions over 12 features: about 10 s on two busy cores
def test_four_manifolds_four_partitions() -> None:
    """Two simulations side by side (12 features, 4 manifolds) split into the 4 groups of 3."""
    a, la, _ = make_manifold_blocks(150, random_state=3)
    b, lb, _ = make_manifold_blocks(150, random_state=4)
    X = np.hstack([a, b])
    truth = np.concatenate([la, lb + 2])
    fp = FeaturePartition(n_partitions=4, perplexity=10, n_restarts=2, random_state=0).fit(X)
    assert adjusted_rand_score(truth, fp.labels_) == 1.0


@pytest.mark.parametrize(
    ("X", "params", "error", "argument"),
    [
        (np.full((20, 4), np.nan), {}, DataError, "X"),
        (np.ones(20), {}, DataError, "X"),
        (np.ones((20, 3)), {"n_partitions": 4}, ParameterError, "n_partitions"),
        (np.random.default_rng(0).normal(size=(20, 4)), {"perplexity": 19}, ParameterError, "perplexity"),
        (np.ones((20, 3)), {"n_partitions": 1}, ParameterError, "n_partitions"),
        (np.ones((20, 3)), {"delta_decay": 1.0}, ParameterError, "delta_decay"),
    ],
)
def test_bad_input_names_the_argument(X, params, error, argument) -> None:
    with pytest.raises(error) as info:
        FeaturePartition(**params).fit(X)
    assert info.value.argument == argument


def test_embed_needs_fit_and_valid_components(fits) -> None:
    with pytest.raises(NotFittedError):
        FeaturePartition().embed()
    with pytest.raises(ParameterError) as info:
        fits[0][3].embed(N)
    assert info.value.argument == "n_components"


def test_make_manifold_blocks_rejects_bad_arguments() -> None:
    with pytest.raises(ParameterError):
        make_manifold_blocks(5)
    with pytest.raises(ParameterError):
        make_manifold_blocks(50, noise=-1.0)


def test_docs_example_runs(run_docs_example) -> None:
    from pathlib import Path

    run_docs_example(Path(__file__).resolve().parents[2] / "docs" / "explain" / "feature-partition.md")
