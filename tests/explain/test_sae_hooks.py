"""SAE tools on a user's own model (issue 28): an encoder's submodules, the activation cache, splicing."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from trustlab.errors import ParameterError  # noqa: E402
from trustlab.explain.sae_data import collect_activations  # noqa: E402
from trustlab.explain.sae_metrics import embedding_recovered, loss_recovered  # noqa: E402


class LinearSAE:
    """f(x) = x @ E, x_hat = f @ W_dec_ (an exact or a null reconstruction)."""

    def __init__(self, E: np.ndarray, D: np.ndarray) -> None:
        self.E, self.W_dec_, self.b_dec_ = E, D, np.zeros(D.shape[1])

    def transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=float) @ self.E


@pytest.fixture(scope="module")
def encoder():
    """A randomly initialised BERT encoder (MiniLM's architecture, 1 layer of width 16): no download."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=16,
    )  # fmt: skip
    ids = torch.randint(0, 30, (6, 8), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(6, 8, dtype=torch.long)
    mask[:, 5:] = 0
    return transformers.BertModel(cfg).eval(), {"input_ids": ids, "attention_mask": mask}


def test_collect_activations_from_a_transformers_encoder(encoder) -> None:
    model, inputs = encoder
    acts = collect_activations(model, inputs, "encoder.layer.0", batch_size=4)
    with torch.no_grad():
        ref = model(**inputs).last_hidden_state  # the last layer's output is the model's output
    np.testing.assert_allclose(acts, ref[inputs["attention_mask"].bool()].numpy(), atol=1e-5)
    assert acts.shape == (30, 16) and acts.dtype == np.float32


def test_activation_cache_is_a_memmap_keyed_by_weights_and_inputs(encoder, tmp_path) -> None:
    model, inputs = encoder
    fresh = collect_activations(model, inputs, "encoder.layer.0.attention")
    cached = collect_activations(model, inputs, "encoder.layer.0.attention", batch_size=4, cache_dir=tmp_path)
    (path,) = tmp_path.glob("*.npy")
    assert isinstance(cached, np.memmap) and not cached.flags.writeable
    np.testing.assert_array_equal(cached, fresh)
    stamp = path.stat().st_mtime_ns
    again = collect_activations(model, inputs, "encoder.layer.0.attention", cache_dir=tmp_path)
    assert path.stat().st_mtime_ns == stamp and np.array_equal(again, fresh)  # read, not recomputed
    other = {**inputs, "input_ids": inputs["input_ids"].roll(1, dims=1)}
    collect_activations(model, other, "encoder.layer.0.attention", cache_dir=tmp_path)
    tokens = collect_activations(model, inputs["input_ids"], "pooler", cache_dir=tmp_path)  # one row each
    assert len(list(tmp_path.glob("*.npy"))) == 3 and tokens.shape == (6, 16)
    assert not list(tmp_path.glob(".*"))  # no staging file left behind


def test_embedding_recovered_is_one_for_an_exact_and_zero_for_a_null_reconstruction(encoder) -> None:
    model, inputs = encoder
    exact = embedding_recovered(
        model, inputs, "encoder.layer.0.intermediate", LinearSAE(np.eye(32), np.eye(32))
    )
    assert exact["score"] == pytest.approx(1.0, abs=1e-6) and exact["cosine_sae"] == pytest.approx(1.0)
    null = embedding_recovered(
        model, inputs, "encoder.layer.0.intermediate", LinearSAE(np.eye(32), 0 * np.eye(32))
    )
    assert null["score"] == pytest.approx(0.0, abs=1e-6) and null["mse_zero"] > 0


def test_loss_recovered_at_a_submodule_equals_the_hook_point() -> None:
    from trustlab.lm import ModelConfig, build_model

    model = build_model(ModelConfig("llama", vocab_size=12, d_model=8, n_layers=1, n_heads=2, max_len=8))
    ids = np.random.default_rng(0).integers(0, 12, (4, 8))
    half = LinearSAE(np.eye(8), 0.5 * np.eye(8))
    by_name = loss_recovered(model, ids, "blocks.0.resid_post", half)
    by_module = loss_recovered(model, ids, "model.layers.0", half)  # the block's output is resid_post
    assert by_module == pytest.approx(by_name, abs=1e-5)
    with pytest.raises(ParameterError) as info:
        loss_recovered(model, ids, "blocks.3.resid_post", half)
    assert info.value.argument == "hook_point" and "blocks.0.resid_pre" in str(info.value)


@settings(max_examples=6, deadline=None)
@given(name=st.text(min_size=0, max_size=12))
def test_a_hook_point_the_model_lacks_names_hook_point(encoder, name: str) -> None:
    model, inputs = encoder
    if name in dict(model.named_modules()) and name:
        return
    for call in (collect_activations, embedding_recovered):
        args = (
            (model, inputs, name)
            if call is collect_activations
            else (model, inputs, name, LinearSAE(np.eye(16), np.eye(16)))
        )
        with pytest.raises(ParameterError) as info:
            call(*args)
        assert info.value.argument == "hook_point" and "named_modules" in str(info.value)


def _word_ids(texts, padding=True, truncation=True, max_length=16, return_tensors="pt"):
    """A toy tokenizer for the random BERT: word -> id by CRC32 (1..29), padded with 0."""
    import zlib

    rows = [[1 + zlib.crc32(w.encode()) % 29 for w in t.split()][:max_length] for t in texts]
    n = max(map(len, rows))
    ids = torch.tensor([r + [0] * (n - len(r)) for r in rows])
    return {"input_ids": ids, "attention_mask": (ids > 0).long()}


def test_hypothesaes_reads_a_users_model_at_a_hook_point(encoder) -> None:
    from trustlab.explain.hypotheses import HypotheSAEs, make_planted_corpus, module_encoder
    from trustlab.explain.sae import SparseAutoencoder

    model, _ = encoder
    encode = module_encoder(model, _word_ids, "encoder.layer.0")
    texts = ["oven flour bake", "racket serve", "bank loan rate interest"]
    enc = _word_ids(texts)
    with torch.no_grad():
        out = model(**enc).last_hidden_state
    mean = (out * enc["attention_mask"][..., None]).sum(1) / enc["attention_mask"].sum(1, keepdim=True)
    np.testing.assert_allclose(encode(texts), (mean / mean.norm(dim=1, keepdim=True)).numpy(), atol=1e-5)
    corpus = make_planted_corpus(200, random_state=0)
    sae = SparseAutoencoder(16, architecture="topk", k=2, batch_size=50, n_steps=20, learning_rate=1e-2)
    hs = HypotheSAEs(sae, n_hypotheses=2, encoder=encode).fit(corpus.texts, corpus.y)
    assert len(hs.hypotheses_) == 2 and hs.sae_.n_features_in_ == 16
