"""Session fixtures of the language-model lab's tests: one tiny model trained once per test run."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def sorting_model():
    """The ``micro-llama-sorting`` recipe trained once (about 3 s): (model, tokenizer, result)."""
    from trustlab.lm import get_recipe, train_recipe

    return train_recipe(get_recipe("micro-llama-sorting"))


@pytest.fixture(scope="session")
def tiny_models():
    """One untrained model per architecture (seconds to build), keyed by arch."""
    from trustlab.lm import ARCHITECTURES, ModelConfig, build_model

    return {
        arch: build_model(ModelConfig(arch, vocab_size=20, d_model=16, n_layers=2, n_heads=2, max_len=16))
        for arch in ARCHITECTURES
    }
