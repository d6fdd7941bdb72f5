"""Named training recipes (model + data + schedule) and the cache the shipped models train into.

A recipe is plain data: a :class:`~trustlab.lm.ModelConfig`, a data spec (``{"kind": ...}``)
and a :class:`~trustlab.lm.TrainConfig`. ``trustlab lm train CONFIG`` takes a recipe's name or
a JSON file with the same three entries. The shipped models (:func:`shipped_models`) are the
named recipes; :func:`load_shipped` trains one into a cache directory on first use (seconds to
about a minute on a laptop CPU, see docs/lm-lab.md) and loads it from there afterwards.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import cache_root, publish, spec_digest, staging_dir
from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import ParameterError
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
from trustlab.lm.models import ModelConfig, build_model, load_model, load_tokenizer, save_model
from trustlab.lm.training import TrainConfig, TrainResult, train_model

__all__ = [
    "RECIPES",
    "Recipe",
    "get_recipe",
    "lcg_split",
    "load_shipped",
    "make_data",
    "shipped_models",
    "train_recipe",
]

DATA_KINDS = ("lcg", "incontext", "sorting", "english")


@dataclass(frozen=True)
class Recipe:
    """A model, the data it trains on, and the schedule.

    Attributes
    ----------
    name : str
        The recipe's name (``"custom"`` for one read from a file).
    model : ModelConfig
        The architecture; its ``vocab_size`` is overridden by the data's tokenizer.
    data : dict
        ``{"kind": "lcg" | "incontext" | "sorting" | "english", ...}`` and the generator's arguments.
    train : TrainConfig
        Optimiser and schedule.
    description : str
        One line.

    Examples
    --------
    >>> get_recipe("tiny-gpt2-lcg").model.arch
    'gpt2'
    """

    name: str
    model: ModelConfig
    data: dict[str, Any]
    train: TrainConfig
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The recipe as JSON-ready data (the format ``trustlab lm train`` reads).

        Returns
        -------
        dict
            ``{"name", "model", "data", "train", "description"}``.
        """
        return {
            "name": self.name,
            "model": self.model.to_dict(),
            "data": dict(self.data),
            "train": self.train.to_dict(),
            "description": self.description,
        }

    def fingerprint(self) -> str:
        """A short hash of the recipe (names its cache folder, so an edited recipe retrains).

        Returns
        -------
        str
            12 hex digits.
        """
        return spec_digest(self.to_dict())


def _r(name: str, model: dict[str, Any], data: dict[str, Any], train: dict[str, Any], text: str) -> Recipe:
    return Recipe(name, ModelConfig(vocab_size=2, **model), data, TrainConfig(**train), text)


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        _r(
            "micro-llama-sorting",
            {"arch": "llama", "d_model": 32, "n_layers": 2, "n_heads": 2, "max_len": 32},
            {"kind": "sorting", "n_sequences": 2000, "n_items": 6, "n_values": 12},
            {"steps": 60, "batch_size": 32, "lr": 1e-2, "warmup": 5},
            "Llama (RoPE), 2 blocks of width 32, sorting 6 values: trains in seconds (the tests' model).",
        ),
        _r(
            "tiny-gpt2-lcg",
            {"arch": "gpt2", "d_model": 64, "n_layers": 2, "n_heads": 4, "max_len": 64},
            {"kind": "lcg", "modulus": 64, "length": 32, "n_per_param": 8, "test_fraction": 0.25},
            {"steps": 600, "batch_size": 32, "lr": 3e-3, "warmup": 30},
            "GPT-2 (learned positions), LCG sequences mod 64, 3/4 of the full-period (a, c) pairs.",
        ),
        _r(
            "tiny-llama-lcg",
            {"arch": "llama", "d_model": 64, "n_layers": 2, "n_heads": 4, "max_len": 64},
            {"kind": "lcg", "modulus": 64, "length": 32, "n_per_param": 8, "test_fraction": 0.25},
            {"steps": 600, "batch_size": 32, "lr": 3e-3, "warmup": 30},
            "Llama (RoPE), LCG sequences mod 64, 3/4 of the full-period (a, c) pairs.",
        ),
        _r(
            "tiny-mixtral-incontext",
            {"arch": "mixtral", "d_model": 48, "n_layers": 2, "n_heads": 4, "max_len": 64, "n_experts": 4},
            {"kind": "incontext", "n_sequences": 8000, "n_pairs": 12, "n_tasks": 8, "n_values": 16},
            {"steps": 400, "batch_size": 32, "lr": 3e-3, "warmup": 20},
            "Mixtral-style MoE (4 experts, top-2), in-context affine maps mod 16 with 8 latent tasks.",
        ),
        _r(
            "small-llama-english",
            {"arch": "llama", "d_model": 96, "n_layers": 4, "n_heads": 4, "max_len": 64},
            {"kind": "english", "vocab_size": 1024, "length": 64},
            {"steps": 500, "batch_size": 24, "lr": 3e-3, "warmup": 30},
            "Llama (RoPE), 4 blocks of width 96, on CPython's pydoc topic texts (byte-level BPE, 1024).",
        ),
    )
}


def get_recipe(spec: str | dict[str, Any]) -> Recipe:
    """A recipe by name, or from a mapping with ``"model"``, ``"data"`` and ``"train"`` entries.

    Parameters
    ----------
    spec : str or dict
        A name of :data:`RECIPES`, or the data of a JSON recipe file.

    Returns
    -------
    Recipe
        The validated recipe.

    Examples
    --------
    >>> get_recipe({"model": {"arch": "llama", "vocab_size": 2}, "data": {"kind": "sorting"},
    ...             "train": {"steps": 3}}).train.steps
    3
    """
    if isinstance(spec, str):
        if spec not in RECIPES:
            raise ParameterError(
                f"config: unknown recipe {spec!r}; known: {', '.join(RECIPES)} (or give a JSON file).",
                argument="config",
            )
        return RECIPES[spec]
    if not isinstance(spec, dict) or not {"model", "data", "train"} <= set(spec):
        raise ParameterError(
            'config must be a recipe name or a JSON object with "model", "data" and "train" entries.',
            argument="config",
        )
    model = dict(spec["model"])
    model.setdefault("vocab_size", 2)
    data = dict(spec["data"])
    if data.get("kind") not in DATA_KINDS:
        raise ParameterError(
            f"config: data kind must be one of {', '.join(DATA_KINDS)}, got {data.get('kind')!r}.",
            argument="config",
        )
    return Recipe(
        str(spec.get("name", "custom")),
        ModelConfig.from_dict(model),
        data,
        TrainConfig.from_dict(dict(spec["train"])),
        str(spec.get("description", "")),
    )


@validate_params(
    {
        "modulus": [Interval(numbers.Integral, 2, None, closed="left")],
        "test_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "seed": ["random_state"],
    }
)
def lcg_split(modulus: int, test_fraction: float = 0.25, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Full-period ``(a, c)`` pairs of a modulus, split into train and held-out test pairs.

    Parameters
    ----------
    modulus : int
        The modulus.
    test_fraction : float, default=0.25
        Share of the pairs held out (at least one each side).
    seed : int, default=0
        Seeds the split.

    Returns
    -------
    train, test : ndarray of int64, shape (n, 2)
        Disjoint sets of pairs.

    Examples
    --------
    >>> tr, te = lcg_split(16, 0.25); len(tr), len(te)
    (24, 8)
    """
    pairs = lcg_parameters(modulus)
    if not 0 < test_fraction < 1 or len(pairs) < 2:
        raise ParameterError(
            f"test_fraction must lie in (0, 1) with at least 2 pairs, got {test_fraction}.",
            argument="test_fraction",
        )
    order = np.random.default_rng(seed).permutation(len(pairs))
    n_test = min(len(pairs) - 1, max(1, round(test_fraction * len(pairs))))
    return pairs[np.sort(order[n_test:])], pairs[np.sort(order[:n_test])]


@validate_params(
    {
        "recipe": [Recipe],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
        "split": [Options({"train", "test"})],
    }
)
def make_data(recipe: Recipe, *, seed: int = 0, split: str = "train") -> tuple[TokenData, Any]:
    """A recipe's data (its train or held-out test split) and tokenizer.

    Parameters
    ----------
    recipe : Recipe
        The recipe.
    seed : int, default=0
        Seeds the generator (the train split uses ``seed``, the test split ``seed + 1``).
    split : {"train", "test"}, default="train"
        For ``lcg``, the test split uses the held-out ``(a, c)`` pairs; for the others, fresh draws
        (for ``english``, the last tenth of the topics).

    Returns
    -------
    data : TokenData
        The sequences.
    tokenizer : transformers.PreTrainedTokenizerFast
        The tokenizer to save beside the model.

    Examples
    --------
    >>> data, tok = make_data(get_recipe("micro-llama-sorting"))
    >>> data.tokens.shape
    (2000, 13)
    """
    if split not in ("train", "test"):
        raise ParameterError(f"split must be 'train' or 'test', got {split!r}.", argument="split")
    spec = {k: v for k, v in recipe.data.items() if k != "kind"}
    kind = recipe.data["kind"]
    s = seed if split == "train" else seed + 1
    if kind == "lcg":
        m = int(spec.get("modulus", 64))
        train, test = lcg_split(m, float(spec.get("test_fraction", 0.25)), seed=seed)
        data = lcg_sequences(
            train if split == "train" else test,
            m,
            int(spec.get("length", 32)),
            n_per_param=int(spec.get("n_per_param", 8)),
            seed=s,
        )
        return data, number_tokenizer(m)
    if kind == "incontext":
        n_values = int(spec.get("n_values", 16))
        args = {k: spec[k] for k in ("n_sequences", "n_pairs", "n_tasks") if k in spec}
        args.setdefault("n_sequences", 4000)
        args.setdefault("n_pairs", 8)
        args.setdefault("n_tasks", 4)
        tasks = incontext_tasks(**args, n_values=n_values, seed=seed)  # the task table: from seed
        if split == "test":
            fresh = incontext_tasks(**args, n_values=n_values, seed=seed)
            rng = np.random.default_rng(s)
            xs = rng.integers(0, n_values, size=fresh.tokens[:, 0::2].shape)
            ys = (fresh.latent["k"][:, None] * xs + fresh.latent["b"][:, None]) % n_values
            tokens = np.stack([xs, ys], axis=2).reshape(fresh.tokens.shape)
            tasks = TokenData(tokens, fresh.loss_mask, n_values, fresh.latent)
        return tasks, number_tokenizer(n_values)
    if kind == "sorting":
        n_values = int(spec.get("n_values", 16))
        data = sorting_task(
            int(spec.get("n_sequences", 2000)), int(spec.get("n_items", 6)), n_values=n_values, seed=s
        )
        return data, number_tokenizer(n_values + 1)
    texts = english_corpus()
    cut = len(texts) - max(1, len(texts) // 10)
    tokenizer = train_tokenizer(texts[:cut], int(spec.get("vocab_size", 1024)))
    part = texts[:cut] if split == "train" else texts[cut:]
    return encode_texts(tokenizer, part, int(spec.get("length", 64))), tokenizer


@validate_params(
    {
        "recipe": [Recipe],
        "seed": [Interval(numbers.Integral, 0, None, closed="left"), None],
        "callback": [callable, None],
    }
)
def train_recipe(
    recipe: Recipe, *, seed: int | None = None, callback: Callable[[int, float], None] | None = None
) -> tuple[Any, Any, TrainResult]:
    """Build and train a recipe's model (deterministic for the seed).

    Parameters
    ----------
    recipe : Recipe
        The recipe.
    seed : int, optional
        Overrides the recipe's ``train.seed`` (weights, data and batch order).
    callback : callable, optional
        ``callback(step, loss)`` after each step.

    Returns
    -------
    model, tokenizer, result
        The trained model (eval mode), its tokenizer and the :class:`TrainResult`.

    Examples
    --------
    >>> model, tok, res = train_recipe(get_recipe("micro-llama-sorting"))  # doctest: +SKIP
    >>> res.losses[-1] < res.losses[0]  # doctest: +SKIP
    True
    """
    if not isinstance(recipe, Recipe):
        raise ParameterError(f"recipe must be a Recipe, got {type(recipe).__name__}.", argument="recipe")
    seed = recipe.train.seed if seed is None else int(seed)
    data, tokenizer = make_data(recipe, seed=seed)
    cfg = ModelConfig.from_dict({**recipe.model.to_dict(), "vocab_size": len(tokenizer)})
    model = build_model(cfg, seed=seed)
    train_cfg = TrainConfig.from_dict({**recipe.train.to_dict(), "seed": seed})
    result = train_model(model, data, train_cfg, callback=callback)
    return model, tokenizer, result


def shipped_models() -> list[str]:
    """The names of the models trustlab provides (trained into a cache on first use).

    Returns
    -------
    list of str
        The names of :data:`RECIPES`.

    Examples
    --------
    >>> "tiny-llama-lcg" in shipped_models()
    True
    """
    return list(RECIPES)


def load_shipped(
    name: str, *, cache_dir: str | Path | None = None, callback: Callable[[int, float], None] | None = None
) -> tuple[Any, Any, Path]:
    """A shipped model and its tokenizer, trained into the cache on first use.

    Parameters
    ----------
    name : str
        One of :func:`shipped_models`.
    cache_dir : str or Path, optional
        Where the checkpoints live; default ``$TRUSTLAB_CACHE/lm`` or ``~/.cache/trustlab/lm``.
    callback : callable, optional
        ``callback(step, loss)`` while training (first use only).

    Returns
    -------
    model, tokenizer, path
        The model (eval mode), its tokenizer and its checkpoint folder
        (``{cache}/{name}-{fingerprint}``, with ``training.json``).

    Examples
    --------
    >>> model, tokenizer, path = load_shipped("tiny-llama-lcg")  # doctest: +SKIP
    >>> (path / "training.json").is_file()  # doctest: +SKIP
    True
    """
    if name not in RECIPES:
        raise ParameterError(
            f"name: unknown model {name!r}; shipped models: {', '.join(RECIPES)}.", argument="name"
        )
    recipe = RECIPES[name]
    path = cache_root(cache_dir, "lm") / f"{name}-{recipe.fingerprint()}"
    if not (path / "training.json").is_file():
        model, tokenizer, result = train_recipe(recipe, callback=callback)
        tmp = staging_dir(path)
        save_model(model, tmp, tokenizer)
        info = {
            "recipe": recipe.to_dict(),
            "final_loss": float(np.mean(result.losses[-20:])),
            "tokens": result.tokens,
        }
        (tmp / "training.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
        publish(tmp, path)
        return model, tokenizer, path
    return load_model(path), load_tokenizer(path), path
