"""Sparse autoencoders (explain/sae.py) and their activations (explain/sae_data.py): unit tests,
bad input, the docs page's example. Claims are in test_sae_claims.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, ParameterError  # noqa: E402
from trustlab.explain.sae import SparseAutoencoder, default_prefixes  # noqa: E402
from trustlab.explain.sae_data import collect_activations, make_hierarchical_activations  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "matryoshka-sae.md"
FAST = {"batch_size": 128, "n_steps": 40, "learning_rate": 1e-2}


@pytest.fixture(scope="module")
def data():
    return make_hierarchical_activations(1200, n_parents=3, n_children=2, d=12, random_state=0)


@pytest.fixture(scope="module")
def fitted(data):
    return {
        arch: SparseAutoencoder(12, architecture=arch, k=2, random_state=0, **FAST).fit(data.X)
        for arch in ("matryoshka", "batchtopk", "topk", "relu")
    }


def test_default_prefixes_are_the_papers_groups() -> None:
    assert default_prefixes(65536) == [2048, 6144, 14336, 30720, 65536]
    assert default_prefixes(12) == [1, 3, 6, 12]
    assert default_prefixes(1) == [1]


def test_planted_data_follows_its_tree(data) -> None:
    on = data.features > 0
    for child, parent in enumerate(data.parent):
        if parent >= 0:
            assert not np.any(on[:, child] & ~on[:, parent])  # a child never fires without its parent
    kids = on[:, 3:].reshape(len(on), 3, 2).sum(2)
    assert kids.max() <= 1  # exclusive children
    np.testing.assert_allclose(data.directions @ data.directions.T, np.eye(9), atol=1e-12)
    np.testing.assert_allclose(data.X, data.features @ data.directions)


def test_topk_keeps_k_per_row_and_batchtopk_averages_k(fitted, data) -> None:
    Z = fitted["topk"].transform(data.X)
    assert ((Z > 0).sum(1) <= 2).all() and ((Z > 0).sum(1) == 2).mean() > 0.9
    for arch in ("batchtopk", "matryoshka"):
        l0 = (fitted[arch].transform(data.X) > 0).sum(1).mean()
        assert l0 <= 2.0 and l0 > 2.0 - 0.05  # threshold calibrated to mean L0 = k on the training rows


def test_matryoshka_prefix_order_and_metrics(fitted, data) -> None:
    sae = fitted["matryoshka"]
    np.testing.assert_array_equal(sae.order_, np.arange(12))
    table = sae.prefix_metrics(data.X)
    assert table["size"].tolist() == sae.prefixes_
    assert np.all(np.diff(table["l0"]) >= 0)
    full = sae.reconstruct(data.X)
    np.testing.assert_allclose(full, sae.inverse_transform(sae.transform(data.X)))
    np.testing.assert_allclose(sae.reconstruct(data.X, n_prefix=12), full)


def test_same_seed_same_model_and_scale_is_folded(data) -> None:
    a = SparseAutoencoder(8, architecture="topk", k=2, random_state=3, **FAST).fit(data.X)
    b = SparseAutoencoder(8, architecture="topk", k=2, random_state=3, **FAST).fit(data.X)
    np.testing.assert_array_equal(a.W_dec_, b.W_dec_)
    c = SparseAutoencoder(8, architecture="topk", k=2, random_state=3, **FAST).fit(10 * data.X)
    np.testing.assert_allclose(c.transform(10 * data.X), a.transform(data.X), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(c.reconstruct(10 * data.X), 10 * a.reconstruct(data.X), rtol=1e-3, atol=1e-3)


def test_relu_l1_trades_sparsity(data) -> None:
    l0 = [
        (SparseAutoencoder(12, architecture="relu", l1_coefficient=c, random_state=0, **FAST).fit(data.X))
        .transform(data.X)
        .astype(bool)
        .sum(1)
        .mean()
        for c in (0.0, 20.0)
    ]
    assert l0[1] < l0[0]


@pytest.mark.parametrize(
    ("params", "argument"),
    [
        ({"n_latents": 0}, "n_latents"),
        ({"k": 0}, "k"),
        ({"k": 13}, "k"),
        ({"architecture": "jumprelu"}, "architecture"),
        ({"prefixes": [4, 2, 12]}, "prefixes"),
        ({"prefixes": [2, 6]}, "prefixes"),
        ({"learning_rate": -1.0}, "learning_rate"),
    ],
)
def test_bad_parameters_name_the_argument(data, params, argument) -> None:
    kwargs = {"n_latents": 12, **FAST, "n_steps": 1, **params}
    with pytest.raises(ParameterError) as info:
        SparseAutoencoder(**kwargs).fit(data.X)
    assert info.value.argument == argument


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 6), k=st.integers(-3, 10))
def test_k_outside_one_to_n_latents_is_refused(n: int, k: int) -> None:
    X = np.random.default_rng(0).normal(size=(20, 3))
    sae = SparseAutoencoder(n, k=k, batch_size=10, n_steps=1)
    if 1 <= k <= n:
        sae.fit(X)
    else:
        with pytest.raises(ParameterError, match="k"):
            sae.fit(X)


def test_bad_activations(fitted, data) -> None:
    X = data.X.copy()
    X[3, 1] = np.nan
    with pytest.raises(DataError) as info:
        SparseAutoencoder(4, k=1, **FAST).fit(X)
    assert info.value.argument == "X" and "NaN" in str(info.value)
    with pytest.raises(DataError, match="columns"):
        fitted["topk"].transform(data.X[:, :5])
    with pytest.raises(ParameterError) as info:
        fitted["topk"].reconstruct(data.X, n_prefix=99)
    assert info.value.argument == "n_prefix"


@pytest.fixture(scope="module")
def tiny_lm():
    pytest.importorskip("transformers")
    from trustlab.lm import ModelConfig, build_model

    return build_model(ModelConfig("llama", vocab_size=20, d_model=16, n_layers=2, n_heads=2, max_len=16))


def test_collect_activations_from_a_lab_model_and_any_module(tiny_lm) -> None:
    from trustlab.lm import run_with_hooks

    ids = np.random.default_rng(0).integers(0, 20, (5, 7))
    acts = collect_activations(tiny_lm, ids, "blocks.1.resid_post", batch_size=2)
    ref = run_with_hooks(tiny_lm, ids, ["blocks.1.resid_post"])["blocks.1.resid_post"]
    np.testing.assert_allclose(acts, ref.reshape(-1, 16).numpy(), atol=1e-5)
    sub = collect_activations(tiny_lm, ids, "model.layers.1", attention_mask=np.tri(5, 7, 2))
    np.testing.assert_allclose(sub, ref.numpy()[np.tri(5, 7, 2).astype(bool)], atol=1e-5)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    out = collect_activations(net, {"input": torch.ones(6, 3)}, "0")
    assert out.shape == (6, 4)


def test_collect_activations_bad_input(tiny_lm) -> None:
    with pytest.raises(ParameterError) as info:
        collect_activations(tiny_lm, [[1, 2]], "blocks.7.resid_post")
    assert info.value.argument == "hook_point" and "blocks.0.resid_pre" in str(info.value)
    with pytest.raises(ModelError):
        collect_activations("not a model", [[1]], "x")


def test_docs_example_runs(docs_printout) -> None:
    docs_printout(PAGE)
