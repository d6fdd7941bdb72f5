"""trustlab.lm.models: models built from configs, saved and loaded offline; bad checkpoints rejected."""

from __future__ import annotations

import json

import pytest
import torch

from trustlab.errors import ModelError, ParameterError, TrustlabError
from trustlab.lm import ModelConfig, build_model, load_model, load_tokenizer, number_tokenizer, save_model


@pytest.mark.parametrize(
    ("arch", "cls", "has_positions"),
    [
        ("gpt2", "GPT2LMHeadModel", True),
        ("llama", "LlamaForCausalLM", False),
        ("mixtral", "MixtralForCausalLM", False),
    ],
)
def test_each_architecture_is_a_transformers_model(tiny_models, arch, cls, has_positions):
    m = tiny_models[arch]
    assert type(m).__name__ == cls
    names = [n for n, _ in m.named_parameters()]
    assert any(n.endswith("wpe.weight") for n in names) is has_positions  # learned positions only in GPT-2
    assert (getattr(m.config, "num_local_experts", None) == 4) is (arch == "mixtral")
    logits = m(torch.tensor([[1, 2, 3]])).logits
    assert logits.shape == (1, 3, 20)


def test_same_seed_same_weights_other_seed_other_weights():
    cfg = ModelConfig("llama", vocab_size=12, d_model=16, n_layers=1, n_heads=2)
    a, b, c = build_model(cfg, seed=3), build_model(cfg, seed=3), build_model(cfg, seed=4)
    wa, wb, wc = (m.model.embed_tokens.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_save_load_roundtrip_offline_with_tokenizer(tmp_path, tiny_models):
    m = tiny_models["mixtral"]
    save_model(m, tmp_path, number_tokenizer(19))
    assert (tmp_path / "model.safetensors").is_file()
    loaded = load_model(tmp_path)
    ids = torch.tensor([[0, 5, 19, 7]])
    assert torch.allclose(loaded(ids).logits, m(ids).logits, atol=1e-6)
    tok = load_tokenizer(tmp_path)
    assert tok("4 19 2")["input_ids"] == [4, 19, 2]
    assert load_tokenizer(tmp_path / "..") is None


def test_not_a_causal_lm_is_a_trustlab_error(tmp_path):
    with pytest.raises(ModelError, match="not a directory"):
        load_model(tmp_path / "missing")
    with pytest.raises(ModelError, match=r"no config\.json"):
        load_model(tmp_path)
    for cfg in ({"model_type": "vit"}, {"model_type": "bert", "architectures": ["BertForMaskedLM"]}):
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        with pytest.raises(ModelError, match="not a causal language model") as info:
            load_model(tmp_path)
        assert info.value.argument == "path"
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    with pytest.raises(TrustlabError, match="could not be loaded"):  # config but no weights
        load_model(tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"arch": "bert", "vocab_size": 5}, "arch"),
        ({"arch": "llama", "vocab_size": 0}, "vocab_size"),
        ({"arch": "llama", "vocab_size": 5, "d_model": 10, "n_heads": 4}, "n_heads"),
        ({"arch": "mixtral", "vocab_size": 5, "n_experts": 2, "top_k": 3}, "top_k"),
        ({"arch": "gpt2", "vocab_size": 5, "d_ff": 0}, "d_ff"),
    ],
)
def test_bad_config_names_the_field(kwargs, argument):
    with pytest.raises(ParameterError) as info:
        ModelConfig(**kwargs)
    assert info.value.argument == argument


def test_from_dict_rejects_unknown_keys_and_build_rejects_other_configs():
    with pytest.raises(ParameterError, match="unknown model field"):
        ModelConfig.from_dict({"arch": "llama", "vocab_size": 5, "layers": 3})
    with pytest.raises(ParameterError):
        build_model({"arch": "llama"})  # type: ignore[arg-type]
    with pytest.raises(ModelError):
        save_model(object(), "unused")
