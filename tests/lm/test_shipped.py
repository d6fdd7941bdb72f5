"""trustlab.lm shipped models: trained into the cache once, identical to a fresh training, reloaded after."""

from __future__ import annotations

import pytest
import torch

from trustlab.errors import ParameterError
from trustlab.lm import get_recipe, load_shipped, shipped_models


def test_shipped_model_trains_once_into_the_cache_and_reloads(sorting_model, tmp_path):
    assert {"micro-llama-sorting", "tiny-llama-lcg", "tiny-gpt2-lcg", "tiny-mixtral-incontext"} <= set(
        shipped_models()
    )
    model, _tok, path = load_shipped("micro-llama-sorting", cache_dir=tmp_path)
    assert path.name == f"micro-llama-sorting-{get_recipe('micro-llama-sorting').fingerprint()}"
    assert (path / "model.safetensors").is_file() and (path / "training.json").is_file()
    # deterministic: the same weights as the session fixture's training of the same recipe
    assert torch.equal(model.lm_head.weight, sorting_model[0].lm_head.weight)
    again, tok2, path2 = load_shipped("micro-llama-sorting", cache_dir=tmp_path)
    assert path2 == path and torch.equal(again.lm_head.weight, model.lm_head.weight)
    assert tok2("3 11")["input_ids"] == [3, 11]
    with pytest.raises(ParameterError, match="shipped models"):
        load_shipped("gpt-5", cache_dir=tmp_path)
