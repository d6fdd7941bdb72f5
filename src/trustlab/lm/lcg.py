"""In-context prediction of linear congruential sequences with unseen ``(a, c)`` [1]_.

The paper's fixed-modulus setting: a causal transformer trains on sequences
``x[t+1] = (a x[t] + c) mod m`` for some full-period pairs ``(a, c)`` and is evaluated on
held-out pairs, so that predicting the next residue needs the pair inferred from the context.
:func:`lcg_data_scaling` trains one model per number of distinct training pairs (same
schedule, same total number of sequences) with the lab's training loop and measures greedy
next-token accuracy on the held-out pairs; :func:`residue_probe` measures how well the token
embeddings separate residues ``x mod q`` for the divisors ``q`` of ``m`` (the paper finds the
embeddings organised by residues / digits of the modulus' factorisation).

References
----------
.. [1] Tao, Doshi, Kalra, He, Barkeshli. "(How) Can Transformers Predict Pseudo-Random Numbers?".
   ICML 2025 (PMLR 267), arXiv:2502.10390.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ModelError, ParameterError
from trustlab.lm.corpora import TokenData, lcg_sequences
from trustlab.lm.models import ModelConfig, build_model
from trustlab.lm.recipes import lcg_split
from trustlab.lm.training import TrainConfig, train_model

__all__ = ["LCGScaling", "lcg_accuracy", "lcg_data_scaling", "residue_probe"]


@dataclass(frozen=True)
class LCGScaling:
    """Held-out in-context accuracy against the number of distinct training pairs.

    Attributes
    ----------
    n_pairs : ndarray of int, shape (k,)
        Distinct ``(a, c)`` pairs each model trained on.
    accuracy : ndarray of float, shape (k,)
        Greedy next-token accuracy on held-out pairs, positions ``>= min_position``.
    stderr : ndarray of float, shape (k,)
        Standard error of ``accuracy`` over the evaluated sequences (one mean per sequence).
    n_sequences : int
        Held-out sequences evaluated.
    chance : float
        ``1 / modulus``.

    See Also
    --------
    lcg_data_scaling
    """

    n_pairs: np.ndarray
    accuracy: np.ndarray
    stderr: np.ndarray
    n_sequences: int
    chance: float


@validate_params({"min_position": [Interval(numbers.Integral, 1, None, closed="left")]})
@torch.no_grad()
def lcg_accuracy(model: Any, data: TokenData, *, min_position: int = 1) -> np.ndarray:
    """Per-sequence greedy next-token accuracy from position ``min_position`` on.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM over the residues ``0 .. m-1``.
    data : TokenData
        LCG sequences (e.g. of held-out pairs) from :func:`~trustlab.lm.lcg_sequences`.
    min_position : int, default=1
        First predicted position counted (the context before it is ``min_position`` tokens).

    Returns
    -------
    ndarray of float, shape (n_sequences,)
        Share of correctly predicted tokens in each sequence.

    Examples
    --------
    >>> from trustlab.lm import lcg_sequences
    >>> model = build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_len=8))
    >>> lcg_accuracy(model, lcg_sequences([[5, 3]], 8, 6), min_position=2).shape
    (1,)
    """
    if not isinstance(data, TokenData):
        raise ParameterError(f"data must be a TokenData, got {type(data).__name__}.", argument="data")
    length = data.tokens.shape[1]
    if min_position >= length:
        raise ParameterError(
            f"min_position must be below the sequence length {length}, got {min_position}.",
            argument="min_position",
        )
    if not callable(model):
        raise ModelError(f"model must be a causal LM, got {type(model).__name__}.", argument="model")
    tokens = torch.as_tensor(data.tokens, dtype=torch.long)
    pred = model(input_ids=tokens).logits[:, :-1].argmax(-1).numpy()
    hit = pred == data.tokens[:, 1:]
    return np.asarray(hit[:, min_position - 1 :].mean(axis=1), dtype=float)


@validate_params(
    {
        "modulus": [Interval(numbers.Integral, 4, None, closed="left")],
        "n_pairs": ["array-like"],
        "length": [Interval(numbers.Integral, 4, None, closed="left")],
        "n_train_sequences": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_test_per_pair": [Interval(numbers.Integral, 1, None, closed="left")],
        "model_config": [ModelConfig, None],
        "train_config": [TrainConfig, None],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def lcg_data_scaling(
    modulus: int,
    n_pairs: Any,
    *,
    length: int = 12,
    n_train_sequences: int = 2048,
    n_test_per_pair: int = 16,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    seed: int = 0,
) -> LCGScaling:
    """Train one model per number of training pairs; held-out in-context accuracy of each.

    The full-period pairs of ``modulus`` are split 3:1 (:func:`~trustlab.lm.lcg_split`); a model
    trained on ``n`` of the training pairs sees ``n_train_sequences`` sequences in all (random
    ``x0``), so only the variety of pairs changes. Accuracy counts positions from ``length // 2``
    on, on ``n_test_per_pair`` sequences of every held-out pair.

    Parameters
    ----------
    modulus : int
        The fixed modulus ``m``.
    n_pairs : array-like of int
        Numbers of distinct training pairs, each in ``[1, n_train_pairs]``.
    length : int, default=12
        Tokens per sequence.
    n_train_sequences : int, default=2048
        Training sequences per model.
    n_test_per_pair : int, default=16
        Evaluated sequences per held-out pair.
    model_config : ModelConfig, optional
        Defaults to GPT-2, width 32, 2 blocks, 4 heads (``vocab_size`` and ``max_len`` are set
        from ``modulus`` and ``length``).
    train_config : TrainConfig, optional
        Defaults to 200 steps of 32 sequences, lr 3e-3, 10 warm-up steps.
    seed : int, default=0
        Seeds the split, the pair subsets, the sequences, the weights and the batch order.

    Returns
    -------
    LCGScaling
        Accuracy and its standard error per number of pairs.

    Examples
    --------
    >>> res = lcg_data_scaling(16, [1, 24])  # doctest: +SKIP
    >>> res.accuracy[1] > res.accuracy[0]  # doctest: +SKIP
    True
    """
    train, test = lcg_split(modulus, 0.25, seed=seed)
    counts = np.asarray(n_pairs).astype(int).ravel()
    if counts.size == 0 or counts.min() < 1 or counts.max() > len(train):
        raise ParameterError(
            f"n_pairs must lie in [1, {len(train)}] (the training pairs of modulus {modulus}), "
            f"got {counts.tolist()}.",
            argument="n_pairs",
        )
    base = model_config or ModelConfig("gpt2", vocab_size=modulus, d_model=32, n_layers=2, n_heads=4)
    cfg = ModelConfig.from_dict({**base.to_dict(), "vocab_size": modulus, "max_len": length})
    tcfg = train_config or TrainConfig(steps=200, batch_size=32, lr=3e-3, warmup=10, seed=seed)
    held_out = lcg_sequences(test, modulus, length, n_per_param=n_test_per_pair, seed=seed + 1)
    order = np.random.default_rng(seed).permutation(len(train))
    acc, err = [], []
    for n in counts:
        data = lcg_sequences(
            train[order[:n]], modulus, length, n_per_param=max(1, n_train_sequences // n), seed=seed + 2
        )
        model = build_model(cfg, seed=seed)
        train_model(model, data, tcfg)
        per_seq = lcg_accuracy(model, held_out, min_position=length // 2)
        acc.append(per_seq.mean())
        err.append(per_seq.std(ddof=1) / np.sqrt(len(per_seq)))
    return LCGScaling(counts, np.array(acc), np.array(err), len(held_out), 1.0 / modulus)


@validate_params({"modulus": [Interval(numbers.Integral, 2, None, closed="left")], "divisors": [list, None]})
def residue_probe(model: Any, modulus: int, divisors: list[int] | None = None) -> dict[int, float]:
    """Leave-one-out nearest-centroid accuracy of ``x mod q`` from the token embeddings.

    Each residue token ``x`` in ``0 .. m-1`` is classified by the nearest class centroid of the
    other tokens' (centred, unit-normalised) input embeddings; chance is about ``1 / q``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM whose first ``modulus`` token ids are the residues.
    modulus : int
        The modulus ``m``.
    divisors : list of int, optional
        The ``q`` to probe; default every divisor of ``m`` in ``(1, m)``.

    Returns
    -------
    dict
        ``{q: accuracy}``.

    Examples
    --------
    >>> model = build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2))
    >>> sorted(residue_probe(model, 8))
    [2, 4]
    """
    if not hasattr(model, "get_input_embeddings"):
        raise ModelError(f"model must be a causal LM, got {type(model).__name__}.", argument="model")
    weight = model.get_input_embeddings().weight.detach().float().numpy()
    if weight.shape[0] < modulus:
        raise ParameterError(
            f"modulus ({modulus}) exceeds the model's vocabulary ({weight.shape[0]}).", argument="modulus"
        )
    qs = [q for q in range(2, modulus) if modulus % q == 0] if divisors is None else list(divisors)
    if any(not isinstance(q, int) or not 2 <= q <= modulus // 2 for q in qs):
        raise ParameterError(
            f"divisors must be integers in [2, {modulus // 2}], got {qs}.", argument="divisors"
        )
    emb = weight[:modulus] - weight[:modulus].mean(axis=0)
    emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    x = np.arange(modulus)
    out: dict[int, float] = {}
    for q in qs:
        labels = x % q
        hits = 0
        for i in range(modulus):
            keep = np.arange(modulus) != i
            cents = np.stack([emb[keep & (labels == r)].mean(axis=0) for r in range(q)])
            hits += int(np.argmin(np.linalg.norm(cents - emb[i], axis=1)) == labels[i])
        out[q] = hits / modulus
    return out
