"""Masking-aware fine-tuning of a text classifier before Sum-of-Parts (row 002-18, text).

:func:`finetune_with_token_masking` continues training a fitted
:class:`~trustlab.security.backdoor_complications.LMSequenceClassifier` on copies of its texts
in which a random share of the real tokens gets the mask token's word embedding, the masking
:class:`~trustlab.explain.sop_tokens.SumOfPartsTokens` applies to its groups.
"""

from __future__ import annotations

import copy
import numbers
from typing import Any

import numpy as np

from trustlab._validation import make_generator
from trustlab.errors import DataError, ModelError, ParameterError

__all__ = ["finetune_with_token_masking"]


def _check(
    value: Any, name: str, kind: type, low: float, high: float | None, closed_low: bool = True
) -> None:
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if ok:
        ok = (value >= low if closed_low else value > low) and (high is None or value <= high)
    if not ok:
        rng = f"{'[' if closed_low else '('}{low}, {'inf)' if high is None else f'{high}]'}"
        raise ParameterError(f"{name} must be a number in {rng}; got {value!r}.", argument=name)


def finetune_with_token_masking(
    classifier: Any,
    input_ids: Any,
    y: Any,
    *,
    attention_mask: Any = None,
    mask_token_id: int = 0,
    max_fraction: float = 0.8,
    steps: int = 300,
    batch_size: int = 32,
    learning_rate: float = 1e-4,
    random_state: int = 0,
) -> Any:
    """Fine-tune a copy of a fitted ``LMSequenceClassifier`` (backbone and head) on masked texts.

    Each step draws a batch, a share ``u ~ U(0, max_fraction)`` per text, and replaces the word
    embedding of each real token with probability ``u`` by the embedding of ``mask_token_id``
    (ids, positions and attention mask unchanged: the masking of Sum-of-Parts' groups, as the
    authors' ``SOPText`` does); labels stay. Not part of the paper: its backbones are frozen
    and fine-tuned on clean text only. Measured on the lab's planted-pair task
    (docs/explain/sum-of-parts.md) it does not help Sum-of-Parts: SOP accuracy 0.560 vs 0.675
    with the clean backbone.

    Parameters
    ----------
    classifier : fitted LMSequenceClassifier
        Not changed; a copy is trained.
    input_ids : array-like of int, shape (n, T)
        Training texts.
    y : array-like of int, shape (n,)
        Labels (values from ``classifier.classes_``).
    attention_mask : array-like of 0/1, shape (n, T), optional
        1 on real tokens; default all ones.
    mask_token_id : int, default=0
        Token whose word embedding a masked token gets (as ``SumOfPartsTokens``).
    max_fraction : float, default=0.8
        Largest share of masked tokens (Sum-of-Parts keeps 20% of the tokens per group).
    steps, batch_size : int, default=300, 32
        AdamW steps and texts per step.
    learning_rate : float, default=1e-4
        AdamW learning rate (constant).
    random_state : int, default=0
        Seeds batches and masks.

    Returns
    -------
    LMSequenceClassifier
        The fine-tuned copy (``losses_`` holds the losses of these steps).

    References
    ----------
    You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with End-to-End
    Learning of Feature Groups". ICML 2025 (arXiv:2310.16316).

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, TrainConfig, build_model
    >>> from trustlab.security.backdoor_complications import LMSequenceClassifier
    >>> lm = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=1, n_heads=2))
    >>> X = np.array([[1, 2, 3], [1, 4, 5]] * 8); y = np.array([0, 1] * 8)
    >>> clf = LMSequenceClassifier(lm, train=TrainConfig(steps=5, batch_size=8)).fit(X, y)
    >>> tuned = finetune_with_token_masking(clf, X, y, steps=5, batch_size=8)
    >>> tuned.losses_.shape
    (5,)
    """
    import torch

    from trustlab.explain.sop_tokens import TokenBackbone, check_token_batch

    if not hasattr(classifier, "net_") or not hasattr(classifier.net_, "heads"):
        raise ModelError(
            "classifier must be a fitted trustlab LMSequenceClassifier (call fit first); got "
            f"{type(classifier).__name__}.",
            argument="classifier",
        )
    _check(max_fraction, "max_fraction", numbers.Real, 0.0, 1.0, closed_low=False)
    for name, v in (("steps", steps), ("batch_size", batch_size)):
        _check(v, name, numbers.Integral, 1, None)
    _check(learning_rate, "learning_rate", numbers.Real, 0.0, None, closed_low=False)
    bb = TokenBackbone(classifier, None, mask_token_id)
    ids, mask = check_token_batch(input_ids, attention_mask, bb.vocab)
    yv = np.asarray(y)
    if yv.shape != (len(ids),) or not np.isin(yv, classifier.classes_).all():
        raise DataError(
            f"y must hold {len(ids)} labels from classifier.classes_ {list(classifier.classes_)}; "
            f"got shape {yv.shape}.",
            argument="y",
        )
    codes = torch.as_tensor(np.searchsorted(classifier.classes_, yv))
    out = copy.deepcopy(classifier)
    bb = TokenBackbone(out, None, mask_token_id)
    net = out.net_
    params = list(net.parameters())
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=float(learning_rate))
    rng = make_generator(random_state)
    ids_t, mask_t = torch.as_tensor(ids), torch.as_tensor(mask)
    losses = np.empty(int(steps))
    for step in range(int(steps)):
        idx = rng.integers(0, len(ids), size=int(batch_size))
        share = rng.uniform(0.0, float(max_fraction), size=(len(idx), 1))
        keep = (rng.random((len(idx), ids.shape[1])) >= share) | (mask[idx] == 0)
        logits, _ = bb.run(ids_t[idx], mask_t[idx], torch.as_tensor(keep.astype(np.int64)), grad=True)
        loss = torch.nn.functional.cross_entropy(logits, codes[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses[step] = float(loss.detach())
    net.eval()
    out.losses_ = losses
    return out
