"""Input checks and the export of a learned neologism into a resized copy of the model."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from trustlab.errors import DataError, ModelError


def embedding_layer(model: Any) -> Any:
    get = getattr(model, "get_input_embeddings", None)
    layer = None
    if callable(get):
        try:
            layer = get()
        except NotImplementedError:
            layer = None
    weight = getattr(layer, "weight", None)
    if not isinstance(model, torch.nn.Module) or not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise ModelError(
            f"model must be a transformers causal LM with input embeddings (get_input_embeddings() "
            f"returning an embedding layer); got {type(model).__name__} without one.",
            argument="model",
        )
    return layer


def texts(values: Any, name: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence | np.ndarray | pd.Series):
        raise DataError(f"{name} must be a list of strings, got {type(values).__name__}.", argument=name)
    out = list(values)
    if not out:
        raise DataError(f"{name} is empty: give at least one preference pair.", argument=name)
    bad = [i for i, v in enumerate(out) if not isinstance(v, str) or not v.strip()]
    if bad:
        raise DataError(f"{name}[{bad[0]}] is not a non-empty string.", argument=name)
    return out


def export_model(model: Any, token_id: int, vector: np.ndarray) -> Any:
    """A deep copy of ``model`` whose input embeddings gain row ``token_id`` = ``vector``.

    The output layer is untied from the input embeddings first (so the original's stays as it
    was) and the new output row is suppressed in ``generation_config`` (the model reads the
    word, it never writes it). The original model is not touched.
    """
    out = copy.deepcopy(model)
    layer = out.get_input_embeddings()
    head = out.get_output_embeddings()
    if head is not None and head.weight is layer.weight:
        head.weight = torch.nn.Parameter(head.weight.detach().clone())
        out.config.tie_word_embeddings = False
        text = getattr(out.config, "get_text_config", None)
        if callable(text):
            text().tie_word_embeddings = False
    old = int(layer.weight.shape[0])
    out.resize_token_embeddings(max(old, token_id + 1), mean_resizing=False)
    with torch.no_grad():
        out.get_input_embeddings().weight[token_id] = torch.as_tensor(vector, dtype=layer.weight.dtype)
        head = out.get_output_embeddings()
        if head is not None and head.weight.shape[0] > token_id:
            head.weight[token_id] = 0.0
    if getattr(out, "generation_config", None) is not None:
        out.generation_config.suppress_tokens = [int(token_id)]
    return out.eval()
