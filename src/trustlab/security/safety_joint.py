"""Joint fine-tuning of a causal LM and its ``[CLS]`` safety head (``L_sft + lambda * L_cls``).

Li & Kim, "Safety Alignment Can Be Not Superficial With Explicit Safety Signals", ICML 2025
(arXiv:2505.17072), alignment phase: the model is fine-tuned on instruction-response pairs
(refusals to harmful ones) with its language-model loss, plus ``lambda`` times the binary
cross-entropy of the ``[CLS]`` safety classifier read from the model's own states, so that the
states the LM loss shapes also carry the safety decision explicitly (the paper's
``lambda = 0.1``). :class:`~trustlab.security.safety_decoding.SafetyHead` alone keeps the model
frozen; :func:`joint_safety_finetune` trains the model's weights (all, or the last blocks) with
the head. See docs/security/safety-decoding.md for what was read and what is reconstructed.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_token_ids
from trustlab.errors import DataError, ParameterError
from trustlab.security._safety_visible import split_points, visible_forward
from trustlab.security.safety_decoding import SafetyHead, _check_model, _out_cache

__all__ = ["JointFinetune", "joint_safety_finetune"]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]
_POS_REAL = [Interval(numbers.Real, 0, None, closed="neither")]


@dataclass(frozen=True)
class JointFinetune:
    """What :func:`joint_safety_finetune` returns.

    Attributes
    ----------
    model : transformers causal LM
        The fine-tuned model (a copy unless ``inplace=True``), in eval mode.
    head : SafetyHead
        The head trained with it, bound to ``model``.
    lm_losses : ndarray of float, shape (steps,)
        Masked language-model loss of each step's batch.
    cls_losses : ndarray of float, shape (steps,)
        Binary cross-entropy of the head on each step's batch of windows.

    Examples
    --------
    >>> r = JointFinetune(None, None, np.array([2.0, 1.0]), np.array([0.7, 0.2]))
    >>> float(r.cls_losses[-1])
    0.2
    """

    model: Any
    head: SafetyHead
    lm_losses: np.ndarray
    cls_losses: np.ndarray


def _blocks(model: Any) -> Any:
    """The model's list of decoder blocks (Llama ``model.layers``, GPT-2 ``transformer.h``, ...)."""
    import torch

    n = getattr(model.config, "num_hidden_layers", None)
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    raise ParameterError(
        "train_blocks needs the model's decoder blocks, and no ModuleList of config.num_hidden_layers "
        "modules was found; use train_blocks=None (full fine-tuning).",
        argument="train_blocks",
    )


def _windows(windows: Any, vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not isinstance(windows, (tuple, list)) or len(windows) != 3:
        raise DataError(
            "windows must be (sequences, key_mask, y), e.g. head_training_windows(instruction_set(...)).",
            argument="windows",
        )
    ids = check_token_ids(windows[0], "windows", vocab=vocab)
    km, y = np.asarray(windows[1]), np.asarray(windows[2])
    if km.shape != ids.shape or km.dtype != bool or not km.any(axis=1).all():
        raise DataError(
            f"windows' key_mask must be a boolean array of the sequences' shape {ids.shape} with at "
            "least one position per row.",
            argument="windows",
        )
    if y.shape != (ids.shape[0],) or not np.isin(y, (0, 1)).all() or np.unique(y).size < 2:
        raise DataError(
            f"windows' labels must be {ids.shape[0]} values in {{0, 1}}, both classes present.",
            argument="windows",
        )
    return ids, km, y


@validate_params(
    {
        "lam": [Interval(numbers.Real, 0, None, closed="left")],
        "steps": _POS_INT,
        "lr": _POS_REAL,
        "head_lr": [*_POS_REAL, None],
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "batch_size": _POS_INT,
        "head_batch_size": _POS_INT,
        "train_blocks": [*_POS_INT, None],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
        "inplace": ["boolean"],
        "cls_visible": ["boolean"],
    }
)
def joint_safety_finetune(
    model: Any,
    head: SafetyHead,
    lm_data: Any,
    windows: Any,
    *,
    lam: float = 0.1,
    steps: int = 200,
    lr: float = 2e-5,
    head_lr: float | None = None,
    weight_decay: float = 0.1,
    batch_size: int = 32,
    head_batch_size: int = 64,
    train_blocks: int | None = None,
    random_state: int = 0,
    inplace: bool = False,
    cls_visible: bool = False,
    skip_ids: Any = (),
) -> JointFinetune:
    """Fine-tune a causal LM and its ``[CLS]`` safety head together: ``L_sft + lam * L_cls``.

    Each AdamW step draws ``batch_size`` sequences of ``lm_data`` (the masked next-token loss:
    instruction-response pairs, the harmful ones answered with a refusal) and
    ``head_batch_size`` labelled windows (the head's binary cross-entropy on the ``[CLS]`` token
    appended to the window, which attends to the window's ``key_mask`` positions). Both losses
    back-propagate into the model's weights, so the states the decoder uses to answer are
    trained to carry the head's decision (the paper's joint training). The head's ``[CLS]``
    embedding and logistic weights start from ``head`` if it is fitted, else from the mean
    token embedding and zeros.

    Parameters
    ----------
    model : transformers causal LM
        Any local Hugging Face causal LM (``inputs_embeds``, ``position_ids`` and a KV cache).
    head : SafetyHead
        Gives ``layer`` and ``pad_id`` (and the starting weights if fitted).
    lm_data : trustlab.lm.TokenData
        Token ids and the loss mask of the language-model loss (e.g. ``instruction_lm_data()``).
    windows : tuple (sequences, key_mask, y)
        Left-padded head windows, the positions ``[CLS]`` attends to, 0/1 labels (1 = malicious),
        e.g. ``head_training_windows(instruction_set(...))``.
    lam : float, default=0.1
        Weight of the head's loss (the paper's alignment-phase ``lambda``: 0.1 or 0.01).
    steps : int, default=200
        Optimiser steps.
    lr : float, default=2e-5
        AdamW learning rate of the model's weights (the authors' 7B script's value; a model of a
        few thousand weights needs about 1e-3).
    head_lr : float, optional
        Learning rate of the ``[CLS]`` embedding and the head; default ``lr``.
    weight_decay : float, default=0.1
        AdamW weight decay of the model's weights (the authors' script's value); none on the head.
    batch_size : int, default=32
        Sequences of ``lm_data`` per step.
    head_batch_size : int, default=64
        Windows per step.
    train_blocks : int, optional
        Fine-tune only the last ``train_blocks`` decoder blocks; default all weights.
    random_state : int, default=0
        Seeds the batches (the result is deterministic on CPU).
    inplace : bool, default=False
        Train ``model`` itself instead of a copy.
    cls_visible : bool, default=False
        The paper's implicit channel: a persistent ``[CLS]`` sits before each ``lm_data`` row's
        end-of-query token (the token before the first counted target), reads the query (minus
        ``skip_ids``) and is attended to by the end marker and the response, so the language-model
        loss trains the model to use it. Rows whose loss starts at the first target (documents)
        see none. The returned head has ``cls_visible_ = True`` and :func:`safe_generate` then
        decodes with the same ``[CLS]`` in the cache.
    skip_ids : array-like of int, default=()
        Token ids the persistent ``[CLS]`` does not read (Rule 4: BOS, template tokens).

    Returns
    -------
    JointFinetune

    References
    ----------
    Li, Kim. "Safety Alignment Can Be Not Superficial With Explicit Safety Signals". ICML 2025.

    Examples
    --------
    >>> import torch
    >>> from trustlab.lm import ModelConfig, TokenData, build_model
    >>> model = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=1, n_heads=2))
    >>> g = torch.Generator().manual_seed(0)
    >>> _ = [p.data.normal_(0, 0.5, generator=g) for p in model.parameters() if p.ndim == 2]
    >>> x = np.array([[1, 2, 3], [1, 5, 3]] * 8); y = np.array([0, 1] * 8)
    >>> lm = TokenData(np.array([[1, 2, 3, 6], [1, 5, 3, 7]] * 8), np.ones((16, 4), bool), 8)
    >>> r = joint_safety_finetune(model, SafetyHead(model), lm, (x, np.ones(x.shape, bool), y),
    ...                           steps=40, lr=0.01)
    >>> r.head.predict(x[:2]).tolist(), bool(r.lm_losses[-1] < r.lm_losses[0])
    ([0, 1], True)
    """
    import torch

    from trustlab.lm import TokenData

    _check_model(model)
    if not isinstance(head, SafetyHead):
        raise ParameterError(
            f"head must be a SafetyHead (fitted or not), got {type(head).__name__}.", argument="head"
        )
    vocab = int(model.get_input_embeddings().num_embeddings)
    if not isinstance(lm_data, TokenData):
        raise DataError(
            f"lm_data must be a trustlab.lm.TokenData, got {type(lm_data).__name__}; e.g. "
            "instruction_lm_data().",
            argument="lm_data",
        )
    tokens = check_token_ids(lm_data.tokens, "lm_data", vocab=vocab)
    loss_mask = np.asarray(lm_data.loss_mask, dtype=bool)
    if loss_mask.shape != tokens.shape or not loss_mask[:, 1:].any():
        raise DataError("lm_data's loss_mask must match its tokens and count some token.", argument="lm_data")
    ids, key_mask, labels = _windows(windows, vocab)
    split = split_points(loss_mask)
    if cls_visible and not (split >= 1).any():
        raise DataError(
            "cls_visible needs lm_data rows with a query before the first counted target (a loss_mask "
            "that starts after position 1), e.g. instruction_lm_data().",
            argument="lm_data",
        )
    skip = tuple(check_token_ids(skip_ids, "skip_ids", vocab=vocab)[0].tolist()) if np.size(skip_ids) else ()
    key_ok = ~np.isin(tokens, skip)
    n_blocks = len(_blocks(model)) if train_blocks is not None else 0
    if train_blocks is not None and train_blocks > n_blocks:
        raise ParameterError(
            f"train_blocks={train_blocks} exceeds the model's {n_blocks} blocks.", argument="train_blocks"
        )

    net = model if inplace else copy.deepcopy(model)
    device = next(net.parameters()).device
    new = SafetyHead(net, **{k: getattr(head, k) for k in SafetyHead._parameter_constraints})
    new._validate_params()
    if hasattr(head, "coef_"):
        cls0, coef0, b0 = head.cls_embedding_, head.coef_, head.intercept_
    else:
        emb = net.get_input_embeddings().weight.detach()
        hidden = int(getattr(net.config, "hidden_size", emb.shape[1]))
        cls0, coef0, b0 = emb.float().mean(0), torch.zeros(hidden), torch.zeros(())
    new.cls_embedding_, new.coef_, new.intercept_ = (
        t.detach().float().clone().to(device).requires_grad_(True) for t in (cls0, coef0, b0)
    )
    if train_blocks is not None:
        chosen = {id(p) for b in list(_blocks(net))[-train_blocks:] for p in b.parameters()}
    else:
        chosen = {id(p) for p in net.parameters()}
    flags = [(p, p.requires_grad) for p in net.parameters()]
    trainable = [p for p in net.parameters() if id(p) in chosen]
    opt = torch.optim.AdamW(
        [
            {"params": trainable, "lr": float(lr), "weight_decay": float(weight_decay)},
            {
                "params": [new.cls_embedding_, new.coef_, new.intercept_],
                "lr": float(lr if head_lr is None else head_lr),
                "weight_decay": 0.0,
            },
        ]
    )
    real = np.cumsum(ids != new.pad_id, axis=1) > 0 if new.pad_id is not None else np.ones(ids.shape, bool)
    pos = np.clip(np.cumsum(real, axis=1) - 1, 0, None)
    t_ids, t_real, t_pos = (torch.as_tensor(a, device=device) for a in (ids, real.astype(np.int64), pos))
    t_km = torch.as_tensor(key_mask & real, device=device)
    t_len = torch.as_tensor(real.sum(axis=1), device=device)
    t_y = torch.as_tensor(labels, dtype=torch.float32, device=device)
    t_tok, t_mask = torch.as_tensor(tokens, device=device), torch.as_tensor(loss_mask[:, 1:], device=device)
    rng = np.random.default_rng(random_state)
    lm_losses, cls_losses = np.empty(steps), np.empty(steps)
    was_training = net.training
    try:
        for p, _ in flags:
            p.requires_grad_(id(p) in chosen)
        net.train()
        for step in range(steps):
            bn = rng.integers(0, len(tokens), size=min(batch_size, len(tokens)))
            b = torch.as_tensor(bn)
            if cls_visible:
                logits = visible_forward(net, new, t_tok[b], split[bn], key_ok[bn])[0][:, :-1].float()
            else:
                logits = net(input_ids=t_tok[b]).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), t_tok[b, 1:].reshape(-1), reduction="none"
            )
            m = t_mask[b].reshape(-1)
            lm = (nll * m).sum() / m.sum().clamp(min=1)
            w = torch.as_tensor(rng.integers(0, len(ids), size=min(head_batch_size, len(ids))))
            out = net(input_ids=t_ids[w], attention_mask=t_real[w], position_ids=t_pos[w], use_cache=True)
            z = new.cls_logits(_out_cache(out), t_km[w], t_len[w])
            cls = torch.nn.functional.binary_cross_entropy_with_logits(z, t_y[w])
            opt.zero_grad(set_to_none=True)
            (lm + float(lam) * cls).backward()
            opt.step()
            lm_losses[step], cls_losses[step] = float(lm.detach()), float(cls.detach())
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        net.train(was_training)
    net.eval()
    for t in (new.cls_embedding_, new.coef_, new.intercept_):
        t.requires_grad_(False)
    new.losses_ = cls_losses
    new.cls_visible_, new.cls_skip_ids_ = bool(cls_visible), skip
    return JointFinetune(net, new, lm_losses, cls_losses)
