"""The lab's one training loop: AdamW, linear warm-up then cosine decay, gradient clipping.

Deterministic for a seed on a CPU: the seed fixes the batch order (a NumPy generator) and
torch's global generator is forked, not reset, so the caller's random state is untouched.
Batches draw sequences with replacement; the loss is next-token cross-entropy on the
positions of :attr:`TokenData.loss_mask`, plus the router's load-balancing loss for a
mixture-of-experts model [1]_. AdamW [2]_; cosine schedule with warm-up [3]_.

References
----------
.. [1] Fedus, Zoph, Shazeer. "Switch Transformers". JMLR 2022 (load-balancing loss).
.. [2] Loshchilov, Hutter. "Decoupled Weight Decay Regularization". ICLR 2019.
.. [3] Loshchilov, Hutter. "SGDR: Stochastic Gradient Descent with Warm Restarts". ICLR 2017.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import context_length
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.lm._fields import from_fields
from trustlab.lm.corpora import TokenData

__all__ = ["TrainConfig", "TrainResult", "evaluate_loss", "train_model"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser and schedule of :func:`train_model`.

    Attributes
    ----------
    steps : int
        Optimiser steps.
    batch_size : int
        Sequences per step.
    lr : float
        Peak learning rate.
    weight_decay : float
        AdamW's decoupled weight decay.
    warmup : int
        Steps of linear warm-up before the cosine decay to ``lr * min_lr_ratio``.
    min_lr_ratio : float
        Final learning rate as a fraction of ``lr``.
    grad_clip : float
        Maximum global gradient norm.
    seed : int
        Seeds the batch order (and dropout, where a model has it).

    Examples
    --------
    >>> TrainConfig(steps=10).warmup
    0
    """

    steps: int = 200
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: int = 0
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ParameterError(f"{name} must be a positive integer, got {v!r}.", argument=name)
        if (
            isinstance(self.warmup, bool)
            or not isinstance(self.warmup, int)
            or not 0 <= self.warmup < self.steps
        ):
            raise ParameterError(
                f"warmup must be an integer in [0, steps), got {self.warmup!r}.", argument="warmup"
            )
        for name, lo in (("lr", 0.0), ("grad_clip", 0.0)):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or v <= lo:
                raise ParameterError(f"{name} must be a positive number, got {v!r}.", argument=name)
        if not isinstance(self.weight_decay, int | float) or not 0 <= self.weight_decay < 1:
            raise ParameterError(
                f"weight_decay must lie in [0, 1), got {self.weight_decay!r}.", argument="weight_decay"
            )
        if not isinstance(self.min_lr_ratio, int | float) or not 0 <= self.min_lr_ratio <= 1:
            raise ParameterError(
                f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio!r}.", argument="min_lr_ratio"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """A config from a mapping; unknown keys are errors.

        Parameters
        ----------
        data : dict
            The fields of :class:`TrainConfig`.

        Returns
        -------
        TrainConfig
            The validated config.
        """
        return from_fields(cls, data, name="train")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict.

        Returns
        -------
        dict
            ``{field: value}``.
        """
        return asdict(self)

    def lr_at(self, step: int) -> float:
        """The learning rate of optimiser step ``step`` (0-based).

        Parameters
        ----------
        step : int
            The step.

        Returns
        -------
        float
            Linear warm-up to ``lr``, then cosine decay to ``lr * min_lr_ratio``.
        """
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        progress = (step - self.warmup) / max(1, self.steps - self.warmup - 1)
        floor = self.lr * self.min_lr_ratio
        return floor + 0.5 * (self.lr - floor) * (1.0 + math.cos(math.pi * min(1.0, progress)))


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train_model` did.

    Attributes
    ----------
    losses : ndarray of float, shape (steps,)
        Training loss (masked next-token cross-entropy) of each step's batch.
    lrs : ndarray of float, shape (steps,)
        Learning rate of each step.
    tokens : int
        Target tokens the loss counted, over all steps.
    config : TrainConfig
        The config used.

    See Also
    --------
    train_model
    """

    losses: np.ndarray
    lrs: np.ndarray
    tokens: int
    config: TrainConfig


def _check(model: Any, data: TokenData) -> None:
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config"):
        raise ModelError(
            f"model must be a transformers causal LM, got {type(model).__name__}.", argument="model"
        )
    if not isinstance(data, TokenData):
        raise DataError(f"data must be a trustlab.lm.TokenData, got {type(data).__name__}.", argument="data")
    if len(data) == 0 or not data.loss_mask[:, 1:].any():
        raise DataError("data is empty: no sequence, or no position in its loss_mask.", argument="data")
    embeddings: Any = getattr(model, "get_input_embeddings")()  # noqa: B009 (narrowed to Module above)
    vocab = int(embeddings.num_embeddings)
    if int(data.tokens.max()) >= vocab or int(data.tokens.min()) < 0:
        raise DataError(
            f"data holds token ids outside the model's vocabulary [0, {vocab}): the tokenizer does not match "
            "the model; build the model with vocab_size >= the data's vocab_size.",
            argument="data",
        )
    max_len = context_length(model)
    if max_len is not None and data.tokens.shape[1] > max_len:
        raise DataError(
            f"data sequences have {data.tokens.shape[1]} tokens, longer than the model's context "
            f"({max_len}); "
            "cut them or build the model with a larger max_len.",
            argument="data",
        )


def _masked_loss(model: Any, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, Any]:
    out = model(input_ids=tokens)
    logits = out.logits[:, :-1].float()
    target = tokens[:, 1:]
    m = mask[:, 1:]
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none"
    )
    loss = (nll * m.reshape(-1)).sum() / m.sum().clamp(min=1)
    return loss, out


@validate_params({"config": [TrainConfig, None], "callback": [callable, None], "loss_fn": [callable, None]})
def train_model(
    model: Any,
    data: TokenData,
    config: TrainConfig | None = None,
    *,
    callback: Callable[[int, float], None] | None = None,
    loss_fn: Callable[[Any, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> TrainResult:
    """Train a causal LM in place on token data; deterministic for ``config.seed``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM (e.g. from :func:`~trustlab.lm.build_model`); trained in place, left in eval mode.
    data : TokenData
        Training sequences and loss mask.
    config : TrainConfig, optional
        Defaults to ``TrainConfig()``.
    callback : callable, optional
        Called as ``callback(step, loss)`` after each step (the CLI's progress bar).
    loss_fn : callable, optional
        ``loss_fn(model, tokens, loss_mask) -> scalar tensor`` replaces the masked next-token
        cross-entropy (e.g. the label-smoothed loss
        :func:`trustlab.uncertainty.label_smoothing.smoothed_lm_loss`); a router's auxiliary
        loss is then not added.

    Returns
    -------
    TrainResult
        Per-step losses and learning rates.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model, sorting_task
    >>> data = sorting_task(64, 4, n_values=8)
    >>> model = build_model(ModelConfig("gpt2", vocab_size=9, d_model=16, n_layers=1, n_heads=2))
    >>> res = train_model(model, data, TrainConfig(steps=5, batch_size=8))
    >>> len(res.losses)
    5
    """
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise ParameterError(f"config must be a TrainConfig, got {type(config).__name__}.", argument="config")
    _check(model, data)
    rng = np.random.default_rng(config.seed)
    tokens = torch.as_tensor(data.tokens, dtype=torch.long)
    mask = torch.as_tensor(data.loss_mask, dtype=torch.float32)
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        betas=(0.9, 0.95),
    )
    aux_coef = float(getattr(model.config, "router_aux_loss_coef", 0.0) or 0.0)
    losses = np.empty(config.steps)
    lrs = np.empty(config.steps)
    counted = 0
    model.train()
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            for step in range(config.steps):
                lr = config.lr_at(step)
                for group in opt.param_groups:
                    group["lr"] = lr
                idx = torch.as_tensor(rng.integers(0, len(data), size=config.batch_size))
                if loss_fn is None:
                    loss, out = _masked_loss(model, tokens[idx], mask[idx])
                else:
                    loss, out = loss_fn(model, tokens[idx], mask[idx]), None
                total = loss
                aux = getattr(out, "aux_loss", None)
                if aux is not None and aux_coef:
                    total = total + aux_coef * aux
                if not torch.isfinite(total):
                    raise DataError(
                        f"the training loss became {float(total.detach())} at step {step}: lower lr "
                        "or check the data.",
                        argument="lr",
                    )
                opt.zero_grad(set_to_none=True)
                total.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                opt.step()
                losses[step] = float(loss.detach())
                lrs[step] = lr
                counted += int(mask[idx][:, 1:].sum())
                if callback is not None:
                    callback(step, float(losses[step]))
    finally:
        model.eval()
    return TrainResult(losses, lrs, counted, config)


@validate_params({"batch_size": [Interval(numbers.Integral, 1, None, closed="left")]})
@torch.no_grad()
def evaluate_loss(model: Any, data: TokenData, *, batch_size: int = 64) -> float:
    """Mean masked next-token cross-entropy (nats per counted token) of a model on data.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    data : TokenData
        Sequences and loss mask.
    batch_size : int, default=64
        Sequences per forward pass.

    Returns
    -------
    float
        The loss.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model, sorting_task
    >>> model = build_model(ModelConfig("llama", vocab_size=9, d_model=16, n_layers=1, n_heads=2))
    >>> 1.5 < evaluate_loss(model, sorting_task(16, 4, n_values=8)) < 3.0
    True
    """
    _check(model, data)
    tokens = torch.as_tensor(data.tokens, dtype=torch.long)
    mask = torch.as_tensor(data.loss_mask, dtype=torch.float32)
    total, count = 0.0, 0.0
    for start in range(0, len(data), batch_size):
        t, m = tokens[start : start + batch_size], mask[start : start + batch_size]
        loss, _ = _masked_loss(model, t, m)
        n = float(m[:, 1:].sum())
        total += float(loss) * n
        count += n
    return total / max(count, 1.0)
