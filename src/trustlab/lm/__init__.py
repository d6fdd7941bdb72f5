"""The language-model lab: tiny ``transformers`` models built from configs, corpora, one training loop, hooks.

Needs the ``lm`` extra (``pip install trustlab[lm]``: torch, transformers, tokenizers,
safetensors). Importing :mod:`trustlab` does not import this package; methods that study
model internals import it. See docs/lm-lab.md.
"""

from __future__ import annotations

try:
    import tokenizers  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401
except ImportError as exc:  # pragma: no cover - the lm extra is part of dev
    from trustlab.errors import MissingDependencyError

    raise MissingDependencyError(
        f"trustlab.lm needs torch, transformers and tokenizers ({exc.name} is missing); "
        "install them with `pip install trustlab[lm]`.",
        argument=exc.name,
    ) from exc

from trustlab.lm.corpora import (
    TokenData,
    encode_texts,
    english_corpus,
    incontext_tasks,
    lcg_parameters,
    lcg_sequences,
    number_tokenizer,
    sorting_task,
    train_tokenizer,
)
from trustlab.lm.hooks import HOOK_KINDS, hook_points, run_with_hooks
from trustlab.lm.models import ARCHITECTURES, ModelConfig, build_model, load_model, load_tokenizer, save_model
from trustlab.lm.recipes import (
    RECIPES,
    Recipe,
    get_recipe,
    lcg_split,
    load_shipped,
    make_data,
    shipped_models,
    train_recipe,
)
from trustlab.lm.training import TrainConfig, TrainResult, evaluate_loss, train_model

__all__ = [
    "ARCHITECTURES",
    "HOOK_KINDS",
    "RECIPES",
    "ModelConfig",
    "Recipe",
    "TokenData",
    "TrainConfig",
    "TrainResult",
    "build_model",
    "encode_texts",
    "english_corpus",
    "evaluate_loss",
    "get_recipe",
    "hook_points",
    "incontext_tasks",
    "lcg_parameters",
    "lcg_sequences",
    "lcg_split",
    "load_model",
    "load_shipped",
    "load_tokenizer",
    "make_data",
    "number_tokenizer",
    "run_with_hooks",
    "save_model",
    "shipped_models",
    "sorting_task",
    "train_model",
    "train_recipe",
    "train_tokenizer",
]
