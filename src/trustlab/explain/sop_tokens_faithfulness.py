"""Faithfulness and per-token baselines for Sum-of-Parts on token ids (row 002-18, text).

- :func:`token_insertion_deletion`: the authors' text insertion and deletion
  (``sop/metrics/text_ins_del.py``, ``get_k_pred_text``) for any per-token attribution: at each
  share ``k`` of a text's real tokens (0.1, 0.2, ..., 1.0) insertion keeps the top
  ``max(1, int(k * n_real))`` tokens and deletion keeps the bottom ones; the rest are masked as
  SOP masks them (the mask token's word embedding). The score is the mean over the grid of the
  probability of the class predicted on the full text.
- :func:`sop_insertion_over_k`: the paper's variant for SOP itself, which varies SOP's group
  fraction ``k`` (groups of the top, or for deletion the bottom, ``k`` share of each attention
  row) and records SOP's probability on the same grid.
- :func:`token_gradient_x_input` and :func:`token_occlusion`: post-hoc per-token baselines on
  the backbone.

References
----------
.. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
   End-to-End Learning of Feature Groups". ICML 2025.
.. [2] Petsiuk, Das, Saenko. "RISE: Randomized Input Sampling for Explanation of Black-box
   Models". BMVC 2018.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.errors import DataError
from trustlab.explain._hierarchy_core import softmax
from trustlab.explain.sop_tokens import SumOfPartsTokens, TokenBackbone, check_token_batch

__all__ = [
    "SOPInsertionOverK",
    "TokenInsertionDeletion",
    "sop_insertion_over_k",
    "token_gradient_x_input",
    "token_insertion_deletion",
    "token_occlusion",
]

FRACTIONS = tuple(np.round(np.linspace(0.1, 1.0, 10), 2))


def _fractions(fractions: Any) -> np.ndarray:
    f = np.asarray(FRACTIONS if fractions is None else fractions, dtype=float)
    if f.ndim != 1 or len(f) == 0 or np.any(f <= 0) or np.any(f > 1):
        raise DataError(
            f"fractions must be a 1-D grid of shares in (0, 1]; got {fractions!r}.", argument="fractions"
        )
    return f


def _target(target: Any, logits: np.ndarray) -> np.ndarray:
    if target is None:
        return logits.argmax(1)
    t = np.broadcast_to(np.asarray(target), (len(logits),)).astype(np.int64)
    if t.min() < 0 or t.max() >= logits.shape[1]:
        raise DataError(
            f"target must hold classes in [0, {logits.shape[1] - 1}]; got {target!r}.", argument="target"
        )
    return t


def _proba(model: Any, ids: np.ndarray, mask: np.ndarray, keep: np.ndarray, mask_token_id: int) -> np.ndarray:
    if isinstance(model, SumOfPartsTokens):
        return softmax(model.decision_function(ids, attention_mask=mask, keep=keep))
    bb = TokenBackbone(model, None, mask_token_id)
    with torch.no_grad():
        z, _ = bb.run(torch.as_tensor(ids), torch.as_tensor(mask), torch.as_tensor(keep))
    return softmax(z.numpy().astype(np.float64))


def token_gradient_x_input(
    backbone: Any, input_ids: Any, *, attention_mask: Any = None, target: Any = None
) -> np.ndarray:
    """Gradient x input per token: ``sum_d e_td * d logit_target / d e_td`` over word embeddings.

    Parameters
    ----------
    backbone : transformers sequence classifier or fitted LMSequenceClassifier
    input_ids : array-like of int, shape (n, T)
    attention_mask : array-like of 0/1, shape (n, T), optional
    target : int or array-like of shape (n,), optional
        Class per row; ``None``: the backbone's prediction.

    Returns
    -------
    ndarray of shape (n, T)
        0 on padding.

    References
    ----------
    .. [1] Shrikumar, Greenside, Kundaje. "Learning Important Features Through Propagating
       Activation Differences". ICML 2017.

    Examples
    --------
    >>> import torch, transformers
    >>> cfg = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=8)
    >>> bert = transformers.BertForSequenceClassification(cfg)
    >>> token_gradient_x_input(bert, [[1, 2, 3, 0]], attention_mask=[[1, 1, 1, 0]]).shape
    (1, 4)
    """
    bb = TokenBackbone(backbone, None, 0)
    ids, mask = check_token_batch(input_ids, attention_mask, bb.vocab)
    It, Mt = torch.as_tensor(ids), torch.as_tensor(mask)
    with torch.no_grad():
        z, _ = bb.run(It, Mt)
    t = torch.as_tensor(_target(target, z.numpy()))
    out = []
    for s in range(0, len(ids), 256):
        e, g = bb.embedding_gradients(It[s : s + 256], Mt[s : s + 256], t[s : s + 256])
        out.append((e * g).sum(-1))
    return (torch.cat(out).numpy() * mask).astype(np.float64)


def token_occlusion(
    backbone: Any, input_ids: Any, *, attention_mask: Any = None, target: Any = None, mask_token_id: int = 0
) -> np.ndarray:
    """Leave-one-token-out: drop of the target logit when one real token is masked.

    Parameters
    ----------
    backbone : transformers sequence classifier or fitted LMSequenceClassifier
    input_ids : array-like of int, shape (n, T)
    attention_mask : array-like of 0/1, shape (n, T), optional
    target : int or array-like of shape (n,), optional
        Class per row; ``None``: the backbone's prediction.
    mask_token_id : int, default=0
        Token whose word embedding replaces the masked one (as SOP masks).

    Returns
    -------
    ndarray of shape (n, T)
        0 on padding.

    References
    ----------
    .. [1] Zeiler, Fergus. "Visualizing and Understanding Convolutional Networks". ECCV 2014.

    Examples
    --------
    >>> import torch, transformers
    >>> cfg = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=8)
    >>> bert = transformers.BertForSequenceClassification(cfg)
    >>> token_occlusion(bert, [[1, 2, 3]]).shape
    (1, 3)
    """
    bb = TokenBackbone(backbone, None, mask_token_id)
    ids, mask = check_token_batch(input_ids, attention_mask, bb.vocab)
    n, T = ids.shape
    It, Mt = torch.as_tensor(ids), torch.as_tensor(mask)
    with torch.no_grad():
        z, _ = bb.run(It, Mt)
        t = _target(target, z.numpy())
        keep = 1 - torch.eye(T, dtype=torch.int64).repeat(n, 1)  # (n T, T): token j masked in row j
        zo, _ = bb.run(It.repeat_interleave(T, 0), Mt.repeat_interleave(T, 0), keep)
    full = z.numpy()[np.arange(n), t]
    drop = full[:, None] - zo.numpy().reshape(n, T, -1)[np.arange(n), :, t]
    return (drop * mask).astype(np.float64)


@dataclass(frozen=True)
class TokenInsertionDeletion:
    """Insertion and deletion curves over shares of real tokens (see :func:`token_insertion_deletion`).

    Attributes
    ----------
    fractions : ndarray of shape (s,)
    insertion_curve, deletion_curve : ndarray of shape (n, s)
        Probability of the class predicted on the full text with the top (insertion) or the
        bottom (deletion) share of the real tokens kept.
    insertion, deletion : ndarray of shape (n,)
        Means over the grid (the authors' scores): higher insertion, lower deletion = more faithful.

    See Also
    --------
    token_insertion_deletion : builds it.
    """

    fractions: np.ndarray
    insertion_curve: np.ndarray
    deletion_curve: np.ndarray
    insertion: np.ndarray
    deletion: np.ndarray


def token_insertion_deletion(
    model: Any,
    input_ids: Any,
    attributions: Any,
    *,
    attention_mask: Any = None,
    fractions: Any = None,
    mask_token_id: int = 0,
) -> TokenInsertionDeletion:
    """Insertion and deletion of per-token attributions, as the authors score text (``get_k_pred_text``).

    Parameters
    ----------
    model : fitted SumOfPartsTokens, transformers sequence classifier or fitted LMSequenceClassifier
        The model the attributions explain.
    input_ids : array-like of int, shape (n, T)
    attributions : array-like of shape (n, T)
        One score per token; padding is never ranked.
    attention_mask : array-like of 0/1, shape (n, T), optional
    fractions : array-like, optional
        Shares of the real tokens; default ``0.1, 0.2, ..., 1.0`` (the authors' grid).
    mask_token_id : int, default=0
        Word embedding of a removed token (for a SumOfPartsTokens model, its own).

    Returns
    -------
    TokenInsertionDeletion

    Examples
    --------
    >>> import torch, transformers
    >>> cfg = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=8)
    >>> bert = transformers.BertForSequenceClassification(cfg)
    >>> ids = [[1, 2, 3, 4]]
    >>> r = token_insertion_deletion(bert, ids, token_occlusion(bert, ids))
    >>> r.insertion_curve.shape, bool(np.isclose(r.insertion_curve[0, -1], r.deletion_curve[0, -1]))
    ((1, 10), True)
    """
    vocab = None if isinstance(model, SumOfPartsTokens) else TokenBackbone(model, None, mask_token_id).vocab
    ids, mask = check_token_batch(input_ids, attention_mask, vocab)
    A = np.asarray(attributions, dtype=float)
    if A.shape != ids.shape or not np.all(np.isfinite(A)):
        raise DataError(
            f"attributions must be finite, of the shape of input_ids {ids.shape}; got {A.shape}.",
            argument="attributions",
        )
    f = _fractions(fractions)
    n, T = ids.shape
    n_real = mask.sum(1)
    rank_ins = np.argsort(np.argsort(np.where(mask > 0, -A, np.inf), axis=1, kind="stable"), axis=1)
    rank_del = np.argsort(np.argsort(np.where(mask > 0, A, np.inf), axis=1, kind="stable"), axis=1)
    sizes = np.maximum(1, (n_real[None, :] * f[:, None]).astype(int))  # (s, n), the authors' int(k * n)
    keep_ins = (rank_ins[None] < sizes[..., None]).astype(np.int64) * mask  # (s, n, T)
    keep_del = (rank_del[None] < sizes[..., None]).astype(np.int64) * mask
    full = _proba(model, ids, mask, mask, mask_token_id)
    t = full.argmax(1)
    rep_ids, rep_mask = np.tile(ids, (len(f), 1)), np.tile(mask, (len(f), 1))
    p_ins = _proba(model, rep_ids, rep_mask, keep_ins.reshape(-1, T), mask_token_id).reshape(len(f), n, -1)
    p_del = _proba(model, rep_ids, rep_mask, keep_del.reshape(-1, T), mask_token_id).reshape(len(f), n, -1)
    ins, dele = p_ins[:, np.arange(n), t].T, p_del[:, np.arange(n), t].T
    return TokenInsertionDeletion(f, ins, dele, ins.mean(1), dele.mean(1))


@dataclass(frozen=True)
class SOPInsertionOverK:
    """SOP's probability as its group fraction ``k`` grows (see :func:`sop_insertion_over_k`).

    Attributes
    ----------
    fractions : ndarray of shape (s,)
    insertion_curve, deletion_curve : ndarray of shape (n, s)
        Probability of the class SOP predicts at its fitted ``k``, with groups of the top
        (insertion) or bottom (deletion) share ``k`` of each attention row.
    insertion_curve_current, deletion_curve_current : ndarray of shape (n, s)
        Probability of the class SOP predicts *at that* ``k`` (what the authors' code records).
    insertion, deletion, insertion_current, deletion_current : ndarray of shape (n,)
        Means over the grid.

    See Also
    --------
    sop_insertion_over_k : builds it.
    """

    fractions: np.ndarray
    insertion_curve: np.ndarray
    deletion_curve: np.ndarray
    insertion_curve_current: np.ndarray
    deletion_curve_current: np.ndarray
    insertion: np.ndarray
    deletion: np.ndarray
    insertion_current: np.ndarray
    deletion_current: np.ndarray


def sop_insertion_over_k(
    sop: SumOfPartsTokens, input_ids: Any, *, attention_mask: Any = None, fractions: Any = None
) -> SOPInsertionOverK:
    """The authors' insertion for SOP: rerun SOP with group fraction ``k`` on a grid.

    At each ``k`` the generator keeps the top ``max(1, int(k * n_real))`` tokens of each
    attention row (deletion: the bottom ones) and SOP predicts from those groups; nothing is
    retrained. The authors record the probability of the class SOP predicts at each ``k``
    (``*_current`` here); the plain curves follow the class predicted at the fitted ``k``, as
    :func:`token_insertion_deletion` does for attributions.

    Parameters
    ----------
    sop : fitted SumOfPartsTokens
    input_ids : array-like of int, shape (n, T)
    attention_mask : array-like of 0/1, shape (n, T), optional
    fractions : array-like, optional
        Default ``0.1, 0.2, ..., 1.0`` (the authors' grid).

    Returns
    -------
    SOPInsertionOverK

    Examples
    --------
    >>> import torch, transformers
    >>> cfg = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=8)
    >>> bert = transformers.BertForSequenceClassification(cfg)
    >>> ids = np.random.default_rng(0).integers(1, 20, size=(8, 6))
    >>> sop = SumOfPartsTokens(bert, n_groups=3, n_epochs=1).fit(ids, ids[:, 0] % 2)
    >>> sop_insertion_over_k(sop, ids[:2], fractions=[0.5, 1.0]).insertion_curve.shape
    (2, 2)
    """
    if not isinstance(sop, SumOfPartsTokens):
        raise DataError(f"sop must be a fitted SumOfPartsTokens; got {type(sop).__name__}.", argument="sop")
    f = _fractions(fractions)
    z0 = sop.decision_function(input_ids, attention_mask=attention_mask)
    t = z0.argmax(1)
    ids, mask = sop._checked(input_ids, attention_mask)
    curves: dict[bool, list[np.ndarray]] = {False: [], True: []}
    for deletion in (False, True):
        for k in f:
            parts = sop._batched(ids, mask, fraction=float(k), deletion=deletion)
            curves[deletion].append(softmax(torch.cat([p[-1] for p in parts]).numpy().astype(np.float64)))
    n = len(t)
    P_ins, P_del = np.stack(curves[False], 1), np.stack(curves[True], 1)  # (n, s, C)
    ins, dele = P_ins[np.arange(n), :, t], P_del[np.arange(n), :, t]
    ins_c, del_c = P_ins.max(-1), P_del.max(-1)
    return SOPInsertionOverK(
        f, ins, dele, ins_c, del_c, ins.mean(1), dele.mean(1), ins_c.mean(1), del_c.mean(1)
    )
