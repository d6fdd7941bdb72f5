"""Measurements of a causal LM's internals, from the hook points: the inputs of ``trustlab lm report``.

- **Massive values in Q and K** (Jin et al. 2025 [1]_): for each block, head and dimension ``d``
  of the query, key and value projections, ``M[h, d] = ||X[:, h, :, d]||_2`` over all tokens;
  a dimension is *massive* when ``M[h, d] > lam * mean_d M[h, d]`` (the paper's ``lam = 5``). The
  paper finds them concentrated in Q and K (not V) of RoPE models. Q and K are taken before RoPE
  (the projections' outputs, as the authors' code reads them).
- **Top-k saturation** (Lioubashevski et al. 2025 [2]_): with the logit lens, the saturation layer
  of the final top-``r`` token is the first block from which the lens ranks it ``r`` at every later
  block. The paper's finding: top-1 saturates first, then top-2, ... (events in rank order).
- **Early exit**: stop at the first block whose lens top-1 equals the previous block's, and use
  it (a stability rule, not the paper's learned criterion); report the blocks saved and the
  change in next-token accuracy (and agreement with the full model), against the oracle exit at
  the top-1 saturation layer.
- **Attention summary**: per block and head, mean entropy of the attention rows (nats), the
  mean weight on the first token (an attention sink), on the previous token and on itself.

References
----------
.. [1] Jin, Mei, Xu, Sun, Tang, Du, Liu, Zhang. "Massive Values in Self-Attention Modules are the
   Key to Contextual Knowledge Understanding". ICML 2025.
.. [2] Lioubashevski, Schlank, Stanovsky, Goldstein. "Looking Beyond the Top-1: Transformers
   Determine Top Tokens in Order". ICML 2025 (PMLR 267); arXiv:2410.20210. The paper's learned
   exit criterion (a task-index probe) is in :mod:`trustlab.lm.saturation_probe`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.errors import DataError, ParameterError
from trustlab.lm.hooks import HOOK_KINDS, hook_points, run_with_hooks

__all__ = [
    "AttentionSummary",
    "EarlyExit",
    "MassiveValues",
    "Saturation",
    "attention_summary",
    "early_exit",
    "massive_values",
    "saturation_layers",
]


@dataclass(frozen=True)
class MassiveValues:
    """Per-dimension magnitudes of Q, K and V and the massive dimensions.

    Attributes
    ----------
    norms : dict of str to ndarray, shape (n_layers, n_heads, d_head)
        ``"q"``, ``"k"``, ``"v"``: ``M[l, h, d]``, the L2 norm over all tokens.
    massive : dict of str to ndarray of bool, same shapes
        ``M > lam * mean_d M``.
    lam : float
        The threshold factor.

    See Also
    --------
    massive_values
    """

    norms: dict[str, np.ndarray]
    massive: dict[str, np.ndarray]
    lam: float

    def counts(self) -> dict[str, np.ndarray]:
        """Massive dimensions per block and head, for ``q``, ``k`` and ``v``.

        Returns
        -------
        dict of str to ndarray of int, shape (n_layers, n_heads)
            The counts.
        """
        return {k: v.sum(axis=-1) for k, v in self.massive.items()}

    def concentration(self) -> dict[str, np.ndarray]:
        """``max_d M / mean_d M`` per block and head: how peaked the magnitudes are.

        Returns
        -------
        dict of str to ndarray, shape (n_layers, n_heads)
            The ratios (1 for perfectly flat).
        """
        return {k: v.max(axis=-1) / np.maximum(v.mean(axis=-1), 1e-30) for k, v in self.norms.items()}


def _ids2d(input_ids: Any) -> torch.Tensor:
    ids = torch.as_tensor(np.asarray(input_ids))
    return ids[None] if ids.ndim == 1 else ids


def _n_layers(model: Any) -> int:
    return len(hook_points(model)) // len(HOOK_KINDS)


def massive_values(model: Any, input_ids: Any, *, lam: float = 5.0) -> MassiveValues:
    """Massive values of Q, K and V per block, head and dimension (Jin et al. 2025).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any decoder-only causal LM with separate or fused q/k/v projections.
    input_ids : array-like of int, shape (batch, seq)
        Token ids (e.g. a held-out text).
    lam : float, default=5.0
        Threshold factor over the per-head mean norm (the paper's ``lambda = 5``).

    Returns
    -------
    MassiveValues
        Norms and massive masks.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=16, n_layers=2, n_heads=2))
    >>> mv = massive_values(m, [[1, 2, 3, 4]])
    >>> mv.norms["q"].shape
    (2, 2, 8)
    """
    if not isinstance(lam, int | float) or not lam > 1:
        raise ParameterError(f"lam must be a number above 1, got {lam!r}.", argument="lam")
    n = _n_layers(model)
    names = [f"blocks.{i}.attn.{x}" for i in range(n) for x in "qkv"]
    out = run_with_hooks(model, input_ids, names)
    norms: dict[str, np.ndarray] = {}
    for x in "qkv":
        per_layer = []
        for i in range(n):
            t = out[f"blocks.{i}.attn.{x}"].float()  # (batch, heads, seq, d_head)
            per_layer.append(torch.linalg.vector_norm(t, dim=(0, 2)).cpu().numpy())
        norms[x] = np.stack(per_layer)
    massive = {x: v > lam * v.mean(axis=-1, keepdims=True) for x, v in norms.items()}
    return MassiveValues(norms, massive, float(lam))


@dataclass(frozen=True)
class Saturation:
    """Saturation layers of the final top-k tokens, per position.

    Attributes
    ----------
    layers : ndarray of int, shape (n_positions, k)
        ``layers[p, r]``: the first block (0-based) from which the lens ranks the final rank-``r``
        token at rank ``r`` in every later block; ``n_layers - 1`` when only the last block does.
    n_layers : int
        Blocks of the model.

    See Also
    --------
    saturation_layers
    """

    layers: np.ndarray
    n_layers: int

    def in_order_rate(self) -> float:
        """Share of positions whose saturation layers are non-decreasing in rank (top-1 first).

        Returns
        -------
        float
            In ``[0, 1]``.
        """
        return float(np.mean(np.all(np.diff(self.layers, axis=1) >= 0, axis=1)))

    def mean_layers(self) -> np.ndarray:
        """Mean saturation layer of each rank.

        Returns
        -------
        ndarray, shape (k,)
            One mean per rank.
        """
        return self.layers.mean(axis=0)


def _lens(model: Any, input_ids: Any) -> tuple[torch.Tensor, torch.Tensor]:
    n = _n_layers(model)
    out = run_with_hooks(model, input_ids, [f"blocks.{i}.logit_lens" for i in range(n)])
    lens = torch.stack([out[f"blocks.{i}.logit_lens"].float() for i in range(n)])  # (L, batch, seq, V)
    return lens, out["logits"].float()


def saturation_layers(model: Any, input_ids: Any, *, k: int = 3) -> Saturation:
    """The block at which each of the final top-k tokens settles at its rank (Lioubashevski et al.).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM.
    input_ids : array-like of int, shape (batch, seq)
        Token ids; every position counts.
    k : int, default=3
        Ranks followed.

    Returns
    -------
    Saturation
        Per-position saturation layers.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("gpt2", vocab_size=10, d_model=16, n_layers=3, n_heads=2))
    >>> saturation_layers(m, [[1, 2, 3]], k=2).layers.shape
    (3, 2)
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ParameterError(f"k must be a positive integer, got {k!r}.", argument="k")
    lens, logits = _lens(model, input_ids)
    n_layers, vocab = lens.shape[0], lens.shape[-1]
    if k > vocab:
        raise ParameterError(f"k ({k}) exceeds the vocabulary ({vocab}).", argument="k")
    lens = lens.reshape(n_layers, -1, vocab)
    final = logits.reshape(-1, vocab).topk(k, dim=-1).indices  # (P, k)
    ranks_at = lens.topk(k, dim=-1).indices  # (L, P, k)
    match = (ranks_at == final[None]).cpu().numpy()  # (L, P, k): rank r holds the final rank-r token
    return Saturation(_settled(match), int(n_layers))


def _settled(match: np.ndarray) -> np.ndarray:
    """First layer from which ``match`` (layers first) holds at every later layer; the last if none."""
    n_layers = match.shape[0]
    suffix_all = np.flip(np.logical_and.accumulate(np.flip(match, axis=0), axis=0), axis=0)
    return np.where(suffix_all.any(axis=0), suffix_all.argmax(axis=0), n_layers - 1).astype(np.int64)


@dataclass(frozen=True)
class EarlyExit:
    """What exiting early would have saved and cost.

    Attributes
    ----------
    mean_exit_layer : float
        Mean block (0-based) at which the stability rule exits.
    layers_saved : float
        Mean share of blocks skipped, ``1 - (exit + 1) / n_layers``.
    agreement : float
        Share of positions where the early prediction equals the full model's top-1.
    accuracy_full, accuracy_exit : float
        Next-token accuracy of the full model and of the early exit (``nan`` without targets).
    oracle_layers_saved : float
        Share saved by exiting at the top-1 saturation layer (agreement 1 by construction).

    See Also
    --------
    early_exit
    """

    mean_exit_layer: float
    layers_saved: float
    agreement: float
    accuracy_full: float
    accuracy_exit: float
    oracle_layers_saved: float


def early_exit(model: Any, input_ids: Any, *, patience: int = 1) -> EarlyExit:
    """Savings and cost of exiting when the lens top-1 stops changing.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM.
    input_ids : array-like of int, shape (batch, seq)
        Token ids; accuracy is on the next token of positions ``0 .. seq-2``.
    patience : int, default=1
        Exit at the first block whose top-1 equals that of the ``patience`` blocks before it.

    Returns
    -------
    EarlyExit
        Savings, agreement and accuracies.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=16, n_layers=3, n_heads=2))
    >>> 0 <= early_exit(m, [[1, 2, 3, 4]]).layers_saved < 1
    True
    """
    if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
        raise ParameterError(f"patience must be a positive integer, got {patience!r}.", argument="patience")
    ids = _ids2d(input_ids)
    if ids.shape[1] < 2:
        raise DataError(
            "input_ids need at least 2 tokens per sequence (a next token to score).", argument="input_ids"
        )
    lens, logits = _lens(model, ids)
    n_layers = lens.shape[0]
    top = lens[:, :, :-1].argmax(-1).reshape(n_layers, -1).cpu().numpy()  # (L, P)
    full = logits[:, :-1].argmax(-1).reshape(-1).cpu().numpy()
    target = ids[:, 1:].reshape(-1).cpu().numpy()
    sat = _settled(top == full[None])  # the top-1 saturation block of each scored position
    return _exit_summary(_stability_exits(top, patience), top, full, target, sat)


def _stability_exits(top: np.ndarray, patience: int) -> np.ndarray:
    """Exit block per position: the first whose lens top-1 equals that of the ``patience`` before it."""
    n_layers = top.shape[0]
    exit_at = np.full(top.shape[1], n_layers - 1)
    done = np.zeros(top.shape[1], dtype=bool)
    for layer in range(patience, n_layers):
        stable = np.all(top[layer - patience : layer] == top[layer], axis=0) & ~done
        exit_at[stable] = layer
        done |= stable
    return exit_at


def _exit_summary(
    exit_at: np.ndarray, top: np.ndarray, full: np.ndarray, target: np.ndarray, sat: np.ndarray
) -> EarlyExit:
    """Savings, agreement and accuracies of exiting at ``exit_at`` (``top``: lens top-1, layers first)."""
    n_layers = top.shape[0]
    pred = top[exit_at, np.arange(top.shape[1])]
    return EarlyExit(
        mean_exit_layer=float(exit_at.mean()),
        layers_saved=float(np.mean(1 - (exit_at + 1) / n_layers)),
        agreement=float(np.mean(pred == full)),
        accuracy_full=float(np.mean(full == target)),
        accuracy_exit=float(np.mean(pred == target)),
        oracle_layers_saved=float(np.mean(1 - (sat + 1) / n_layers)),
    )


@dataclass(frozen=True)
class AttentionSummary:
    """Per block and head statistics of the attention patterns.

    Attributes
    ----------
    entropy : ndarray, shape (n_layers, n_heads)
        Mean entropy (nats) of the attention rows (from the second query on).
    first_token, previous_token, self_token : ndarray, shape (n_layers, n_heads)
        Mean weight on key 0, on the key just before the query, and on the query itself.

    See Also
    --------
    attention_summary
    """

    entropy: np.ndarray
    first_token: np.ndarray
    previous_token: np.ndarray
    self_token: np.ndarray


def attention_summary(model: Any, input_ids: Any) -> AttentionSummary:
    """Entropy, sink, previous-token and self weights of every head.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM.
    input_ids : array-like of int, shape (batch, seq)
        At least 2 tokens per sequence.

    Returns
    -------
    AttentionSummary
        The statistics.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("gpt2", vocab_size=10, d_model=16, n_layers=1, n_heads=2))
    >>> attention_summary(m, [[1, 2, 3]]).entropy.shape
    (1, 2)
    """
    ids = _ids2d(input_ids)
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise DataError("input_ids need at least 2 tokens per sequence.", argument="input_ids")
    n = _n_layers(model)
    out = run_with_hooks(model, ids, [f"blocks.{i}.attn.pattern" for i in range(n)])
    ent, first, prev, self_ = [], [], [], []
    for i in range(n):
        p = out[f"blocks.{i}.attn.pattern"].float()[:, :, 1:, :]  # queries 1..T-1: (B, H, T-1, T)
        ent.append((-(p * torch.log(p.clamp_min(1e-12))).sum(-1)).mean(dim=(0, 2)))
        first.append(p[..., 0].mean(dim=(0, 2)))
        q = torch.arange(1, ids.shape[1])
        prev.append(p[:, :, q - 1, q - 1].mean(dim=(0, 2)))
        self_.append(p[:, :, q - 1, q].mean(dim=(0, 2)))
    stack = [torch.stack(v).cpu().numpy() for v in (ent, first, prev, self_)]
    return AttentionSummary(*stack)
