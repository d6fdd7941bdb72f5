"""Torch side of backdoor complications: the user's model as a multi-head text classifier.

Any Hugging Face ``transformers`` model (a causal LM, a sequence classifier, an encoder) is
read through its ``base_model`` (the transformer without its head); one linear head per task
reads the pooled last hidden state. :func:`train_heads` is the one training loop, for the plain
classifier (one task), the backdoor injection and the paper's multi-task complication reduction
(several tasks, one weighted loss).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trustlab._validation import check_token_ids, context_length
from trustlab.errors import DataError, ModelError

POOLINGS = ("last", "first", "mean")


def resolve_model(model: Any) -> Any:
    """A ``transformers`` model from an object or a local checkpoint folder (offline)."""
    if isinstance(model, str | Path):
        path = Path(model)
        cfg = path / "config.json"
        if not cfg.is_file():
            raise ModelError(
                f"model {str(path)!r} is not a transformers checkpoint folder (no config.json); give the "
                "folder that save_pretrained wrote, or the model object.",
                argument="model",
            )
        archs = json.loads(cfg.read_text(encoding="utf-8")).get("architectures") or []
        if any("SequenceClassification" in str(a) for a in archs):
            from transformers import AutoModelForSequenceClassification

            try:
                obj = AutoModelForSequenceClassification.from_pretrained(str(path), local_files_only=True)
            except Exception as exc:  # transformers raises many types
                raise ModelError(
                    f"model {str(path)!r} could not be loaded ({' '.join(str(exc).split())[:200]}).",
                    argument="model",
                ) from exc
            return obj.eval()
        from trustlab.lm import load_model

        return load_model(path)
    if (
        not isinstance(model, torch.nn.Module)
        or not hasattr(model, "base_model")
        or not hasattr(model, "config")
    ):
        raise ModelError(
            f"model must be a transformers model (causal LM or sequence classifier) or a checkpoint folder, "
            f"got {type(model).__name__}.",
            argument="model",
        )
    return model


def vocab_size(model: Any) -> int:
    emb: Any = model.get_input_embeddings()
    return int(emb.num_embeddings)


def hidden_size(model: Any) -> int:
    value = getattr(model.config, "hidden_size", None) or getattr(model.config, "n_embd", None)
    if value is None:
        raise ModelError("model's config has no hidden_size; pass a transformers model.", argument="model")
    return int(value)


def check_tokens(X: Any, name: str, model: Any, *, min_len: int = 1) -> np.ndarray:
    """Token ids as an int64 (n, length) array inside the model's vocabulary and context."""
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists
        raise DataError(f"{name} must be a rectangular array of token ids ({exc}).", argument=name) from exc
    if arr.dtype == object or arr.ndim != 2:
        raise DataError(
            f"{name} must be a 2-D array (n_texts, length) of token ids, got shape {arr.shape}; pad the "
            "texts to one length.",
            argument=name,
        )
    if arr.shape[0] == 0 or arr.shape[1] < min_len:
        raise DataError(
            f"{name} is empty or too short: shape {arr.shape}, need >= 1 text of >= {min_len} tokens.",
            argument=name,
        )
    if not np.issubdtype(arr.dtype, np.integer):
        if (
            not np.issubdtype(arr.dtype, np.number)
            or not np.all(np.isfinite(arr))
            or np.any(arr != np.round(arr))
        ):
            raise DataError(f"{name} must hold integer token ids (no NaN, no fractions).", argument=name)
    arr = check_token_ids(arr.astype(np.int64), name, vocab=vocab_size(model))
    ctx = context_length(model)
    if ctx is not None and arr.shape[1] > ctx:
        raise DataError(
            f"{name} has {arr.shape[1]} tokens per text, longer than the model's context ({ctx}); cut them.",
            argument=name,
        )
    return arr


def check_labels(y: Any, name: str, n: int) -> np.ndarray:
    arr = np.asarray(y)
    if arr.ndim != 1 or len(arr) != n:
        raise DataError(
            f"{name} must be 1-D with one label per text ({n}), got shape {arr.shape}.", argument=name
        )
    if not np.issubdtype(arr.dtype, np.integer):
        if (
            not np.issubdtype(arr.dtype, np.number)
            or not np.all(np.isfinite(arr))
            or np.any(arr != np.round(arr))
        ):
            raise DataError(f"{name} must hold integer class labels 0..k-1.", argument=name)
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        raise DataError(f"{name} must hold class labels 0..k-1, got {int(arr.min())}.", argument=name)
    if len(np.unique(arr)) < 2:
        raise DataError(f"{name} holds a single class; a classification task needs >= 2.", argument=name)
    return arr


class MultiHead(torch.nn.Module):
    """A ``transformers`` model's backbone with one linear head per task (pooled last hidden state)."""

    def __init__(self, model: Any, n_classes: list[int], *, pooling: str, pad_id: int | None, seed: int):
        super().__init__()
        self.lm = model
        self.pooling = pooling
        self.pad_id = pad_id
        width = hidden_size(model)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.heads = torch.nn.ModuleList([torch.nn.Linear(width, k) for k in n_classes])

    def features(self, ids: torch.Tensor) -> torch.Tensor:
        mask = None if self.pad_id is None else (ids != self.pad_id).long()
        out = self.lm.base_model(input_ids=ids, attention_mask=mask)
        h = out[0] if isinstance(out, tuple) else out.last_hidden_state
        if self.pooling == "first":
            return h[:, 0]
        if self.pooling == "final":  # the final position, padding or not (pads masked as keys)
            return h[:, -1]
        if mask is None:
            return h[:, -1] if self.pooling == "last" else h.mean(1)
        m = mask.to(h.dtype)
        if self.pooling == "mean":
            return (h * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)
        last = (torch.arange(ids.shape[1]) * mask).argmax(1)  # last real token (right padding)
        return h[torch.arange(len(ids)), last]

    def forward(self, ids: torch.Tensor, head: int = 0) -> torch.Tensor:
        return self.heads[head](self.features(ids))


@dataclass(frozen=True)
class Task:
    """One task of :func:`train_heads`: token ids, labels, its loss weight and head index."""

    X: np.ndarray
    y: np.ndarray
    weight: float
    head: int


@contextmanager
def small_threads(net: torch.nn.Module) -> Iterator[None]:
    """One torch thread for a small model (under a million parameters), the caller's setting after.

    Torch's thread pool costs more than it gains on the lab's tiny models and oversubscribes a
    shared machine; a user's large model keeps every thread.
    """
    if sum(p.numel() for p in net.parameters()) >= 1_000_000:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_heads(net: MultiHead, tasks: list[Task], config: Any) -> np.ndarray:
    """AdamW on ``sum_t weight_t * CE_t`` (one batch per task per step); returns per-step losses.

    ``config`` is a :class:`trustlab.lm.TrainConfig` (steps, batch size, lr with warm-up and cosine
    decay, weight decay, clipping, seed). Deterministic for ``config.seed`` on a CPU.
    """
    with small_threads(net):
        return _train(net, tasks, config)


def _train(net: MultiHead, tasks: list[Task], config: Any) -> np.ndarray:
    rng = np.random.default_rng(config.seed)
    params = [p for p in net.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
    )
    data = [(torch.as_tensor(t.X), torch.as_tensor(t.y)) for t in tasks]
    losses = np.empty(config.steps)
    net.train()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            for step in range(config.steps):
                for group in opt.param_groups:
                    group["lr"] = config.lr_at(step)
                total = torch.zeros(())
                for task, (X, y) in zip(tasks, data, strict=True):
                    idx = torch.as_tensor(rng.integers(0, len(X), size=config.batch_size))
                    ce = torch.nn.functional.cross_entropy(net(X[idx], task.head), y[idx])
                    total = total + task.weight * ce
                if not torch.isfinite(total):
                    raise DataError(
                        f"the training loss became {float(total.detach())} at step {step}: lower lr.",
                        argument="train",
                    )
                opt.zero_grad(set_to_none=True)
                total.backward()
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                opt.step()
                losses[step] = float(total.detach())
    finally:
        net.eval()
    return losses


@torch.no_grad()
def predict_logits(net: MultiHead, X: np.ndarray, head: int = 0, batch_size: int = 256) -> np.ndarray:
    net.eval()
    ids = torch.as_tensor(X)
    with small_threads(net):
        out = [net(ids[i : i + batch_size], head).float() for i in range(0, len(ids), batch_size)]
    return torch.cat(out).numpy()


def fresh_copy(model: Any) -> Any:
    """A deep copy the training may change (the caller's model stays as it was)."""
    return copy.deepcopy(model)
