"""SAEBench's RAVEL metric (row 002-19): the entity-attribute lab and the interchange metric."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trustlab.errors import DataError, ParameterError  # noqa: E402
from trustlab.explain.ravel_lab import AttributeDictionary, make_entity_corpus  # noqa: E402
from trustlab.explain.sae_ravel import RandomBasisControl, _Intervention, ravel  # noqa: E402
from trustlab.lm import ModelConfig, build_model, run_with_hooks  # noqa: E402


def test_entity_corpus_follows_its_generative_process() -> None:
    c = make_entity_corpus(32, seed=3)
    v = c.values
    assert np.array_equal(v["continent"], v["country"] // 2)  # determined by the country
    assert np.bincount(v["country"]).tolist() == [4] * 8  # balanced
    official = (v["language"] == v["country"] % 6).mean()
    assert 0.3 < official < 0.95  # correlated (p_official = 0.6), not determined
    assert c.prompts.shape == (32 * 16 * 3, 6)
    rows = np.arange(len(c.prompts))
    assert np.array_equal(c.prompts[rows, c.entity_pos], c.entity_tokens[c.entity])
    for a in ("country", "continent", "language"):
        m = c.attribute == a
        assert np.array_equal(c.answer[m], c.value_tokens[a][v[a][c.entity[m]]])
        assert sorted(set(c.template[m & c.heldout])) == [12, 13, 14, 15]
    data = c.training_data()
    assert data.tokens.shape == ((~c.heldout).sum(), 7) and data.loss_mask[:, -1].all()
    with pytest.raises(ParameterError, match="n_countries"):
        make_entity_corpus(16, n_countries=7)


@pytest.fixture(scope="module")
def tiny():
    c = make_entity_corpus(8, n_countries=4, n_languages=3, n_templates=4, n_heldout=1, seed=0)
    model = build_model(
        ModelConfig("gpt2", vocab_size=c.vocab_size, d_model=16, n_layers=2, n_heads=2, max_len=8), seed=0
    )
    hp = "blocks.0.resid_post"
    acts = run_with_hooks(model, c.prompts, [hp])[hp]
    X = acts[torch.arange(len(c.prompts)), torch.as_tensor(c.entity_pos)].double().numpy()
    return model, c, hp, X


def test_interchange_matches_direct_activation_patching(tiny) -> None:
    model, c, hp, X = tiny
    ctl = RandomBasisControl(X, random_state=1)
    run = _Intervention(model, hp, c.prompts, c.entity_pos, ctl.transform(X), ctl, X, add_error=False)
    base, source = np.arange(10), np.arange(10, 20)
    pos = torch.as_tensor(c.entity_pos)
    with torch.no_grad():
        full = run.logits(base, source, torch.ones(2 * X.shape[1], dtype=torch.float32))
        none = run.logits(base, source, torch.zeros(2 * X.shape[1], dtype=torch.float32))
    new = torch.as_tensor(X[source], dtype=torch.float32)

    def patch(x):
        x = x.clone()
        x[torch.arange(10), pos[base]] = new
        return x

    direct = run_with_hooks(model, c.prompts[base], [], edits={hp: patch})["logits"][:, -1]
    clean = run_with_hooks(model, c.prompts[base], [])["logits"][:, -1]
    assert torch.allclose(full, direct, atol=1e-4) and torch.allclose(none, clean, atol=1e-4)


def test_ravel_scores_and_errors(tiny) -> None:
    model, c, hp, X = tiny
    ans = run_with_hooks(model, c.prompts, [])["logits"][:, -1].argmax(-1).numpy()  # "known" = own answers
    ctl = RandomBasisControl(X)
    r = ravel(model, ctl, hp, c.prompts, ans, c.attribute, c.entity_pos, n_pairs=40, batch_size=16, epochs=1)
    assert list(r.scores.index) == ["country", "continent", "language"] and r.n_known == len(c.prompts)
    assert np.allclose(r.scores["disentanglement"], (r.scores["cause"] + r.scores["isolation"]) / 2)
    assert 0 <= r.score <= 1 and r.masks["country"].shape == (32,)
    assert all(r.correct[a].shape == r.is_cause[a].shape for a in r.masks)
    args = (c.prompts, ans, c.attribute, c.entity_pos)
    with pytest.raises(ParameterError, match="sae"):
        ravel(model, object(), hp, *args)
    with pytest.raises(ParameterError, match="hook_point"):
        ravel(model, ctl, "blocks.0.attn.q", *args)
    with pytest.raises(ParameterError, match="hook_point"):
        ravel(model, ctl, "blocks.7.resid_post", *args)
    with pytest.raises(DataError, match="entity_pos"):
        ravel(model, ctl, hp, c.prompts, ans, c.attribute, c.entity_pos + 6)
    with pytest.raises(DataError, match="attribute"):
        ravel(model, ctl, hp, c.prompts, ans, np.full(len(ans), "country"), c.entity_pos)
    with pytest.raises(DataError, match="prompts"):
        ravel(model, ctl, hp, c.prompts.astype(float), ans, c.attribute, c.entity_pos)
    with pytest.raises(ParameterError, match="temperature"):
        ravel(model, ctl, hp, *args, temperature=(1.0, 0.0))


def test_attribute_dictionary_codes_the_planted_attributes(tiny) -> None:
    model, c, _, _ = tiny
    ref = AttributeDictionary(model, c)
    E = model.get_input_embeddings().weight.detach().double().numpy()[c.entity_tokens]
    Z = ref.transform(E)
    assert np.allclose(Z @ ref.W_dec_ + ref.b_dec_, E)  # exact decoding
    assert np.array_equal(Z[:, :4].argmax(1), c.values["country"])  # one-hot country, then language
    assert np.array_equal(Z[:, 4:7].argmax(1), c.values["language"])
    assert 0 <= ref.r2_ <= 1
