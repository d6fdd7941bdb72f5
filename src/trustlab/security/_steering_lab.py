"""The lab models of the steering-transfer claims: a larger aligned target and a jailbroken source.

Beside :func:`~trustlab.security.safety_data.load_instruction_lab`'s aligned 2-block, width-32
Llama (the *source*), two models on the same vocabulary of the synthetic instruction set:

- the *target*: a 4-block, width-64 Llama trained the same way (same data and schedule, another
  seed), so it refuses harmful instructions and answers benign ones like the source;
- the *jailbroken source*: the source fine-tuned for a few steps to answer every instruction
  (a harmful fine-tuning attack), the "fine-tuned" side of the paper's base/fine-tuned switch.

Trained on first use (about 10 s of CPU) into ``$TRUSTLAB_CACHE/lm`` or ``~/.cache/trustlab/lm``
under a folder named by a hash of the recipe, and loaded from there afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

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


def _root(cache_dir: str | Path | None) -> Path:
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("TRUSTLAB_CACHE")
    return Path(env) / "lm" if env else Path.home() / ".cache" / "trustlab" / "lm"


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
    """
    from trustlab.lm import ModelConfig, TrainConfig, build_model, load_model, save_model, train_model

    source, _ = load_instruction_lab(cache_dir=cache_dir)
    digest = hashlib.sha256(json.dumps(_SPEC, sort_keys=True).encode()).hexdigest()[:12]
    path = _root(cache_dir) / f"steering-transfer-{digest}"
    if (path / "done").is_file():
        return source, load_model(path / "target"), load_model(path / "jailbroken")
    spec = dict(_SPEC["target"])
    seed = spec.pop("seed")
    target = build_model(ModelConfig(vocab_size=InstructionVocab().size, **spec), seed=seed)
    train_model(target, instruction_lm_data(**_SPEC["target_data"]), TrainConfig(**_SPEC["target_train"]))
    jail, _ = load_instruction_lab(cache_dir=cache_dir)
    train_model(jail, _jailbreak_data(**_SPEC["jailbreak_data"]), TrainConfig(**_SPEC["jailbreak_train"]))
    tmp = path.parent / f".{path.name}-{os.getpid()}"
    save_model(target, tmp / "target")
    save_model(jail, tmp / "jailbroken")
    (tmp / "recipe.json").write_text(json.dumps(_SPEC, indent=1))
    (tmp / "done").write_text("ok\n")
    try:
        os.replace(tmp, path)
    except OSError:  # another process wrote it first: keep ours in memory
        shutil.rmtree(tmp, ignore_errors=True)
    return source, target.eval(), jail.eval()
