"""Digit-wise (radix-``b``) tokenisation of linear congruential sequences for large moduli [1]_.

With one token per residue the vocabulary is the modulus, which is impossible past a few
thousand; the paper's large-modulus runs (``m = 2^16`` unseen, ``m = 2^32`` fixed) write each
number in base ``b`` with a fixed number of digits, **least significant digit first** (the
authors' ``decimal_to_base_b_reverse``: ``m = 2^32`` as 4 digits of base 256, ``m_test = 2^16``
as 2), so a sequence of ``L`` numbers becomes ``L x digits`` tokens over the vocabulary
``0 .. b-1``. The model is trained on every digit token; a number counts as predicted when all
its digits are (each digit predicted greedily from the true tokens before it, the authors'
teacher-forced metric).

:func:`radix_encode` turns number-level :class:`~trustlab.lm.corpora.TokenData` (e.g. from
:func:`~trustlab.lm.corpora.lcg_sequences` or
:func:`~trustlab.lm.lcg_moduli.unseen_moduli_task`) into digit tokens, :func:`radix_decode`
inverts it and :func:`radix_accuracy` scores a model trained on digit tokens, per number and
per digit.

Divergence: the authors' model adds a learned embedding of the number's index and one of the
digit's index within the number ("abacus" embeddings); the lab's models see only the token
positions (RoPE or learned), so the digit index must be inferred from the position modulo
``digits``.

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
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.lm.corpora import TokenData
from trustlab.lm.lcg_moduli import _band_accuracy

__all__ = ["RadixAccuracy", "radix_accuracy", "radix_decode", "radix_digits", "radix_encode"]

_BASE = Interval(numbers.Integral, 2, None, closed="left")
_DIGITS = Interval(numbers.Integral, 1, None, closed="left")


@validate_params({"max_value": [Interval(numbers.Integral, 0, None, closed="left")], "base": [_BASE]})
def radix_digits(max_value: int, base: int) -> int:
    """Digits of base ``base`` needed to write every number ``0 .. max_value``.

    Parameters
    ----------
    max_value : int
        The largest number (``m - 1`` for a modulus ``m``).
    base : int
        The radix ``b >= 2``.

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> radix_digits(2**32 - 1, 256), radix_digits(2**16 - 1, 256), radix_digits(0, 10)
    (4, 2, 1)
    """
    n, v = 1, int(max_value)
    while v >= base:
        v //= base
        n += 1
    return n


@validate_params({"data": [TokenData], "base": [_BASE], "n_digits": [_DIGITS, None]})
def radix_encode(data: TokenData, base: int, n_digits: int | None = None) -> TokenData:
    """Write every number of ``data`` as ``n_digits`` base-``base`` digit tokens, lowest first.

    Parameters
    ----------
    data : TokenData
        Number-level sequences (tokens ``0 .. vocab_size - 1``).
    base : int
        The radix; the new vocabulary is ``0 .. base - 1``.
    n_digits : int, optional
        Digits per number; default :func:`radix_digits` of ``data.vocab_size - 1``.

    Returns
    -------
    TokenData
        Tokens of shape ``(n_sequences, length * n_digits)``; a digit counts in the loss when
        its number does (so the first number's digits never do: their values are not predictable
        from the context). ``latent`` is kept, with ``"base"`` and ``"n_digits"`` added.

    Examples
    --------
    >>> d = TokenData(np.array([[5, 300]]), np.array([[False, True]]), 301)
    >>> enc = radix_encode(d, 16)
    >>> enc.tokens.tolist(), enc.loss_mask.astype(int).tolist(), enc.vocab_size
    ([[5, 0, 0, 12, 2, 1]], [[0, 0, 0, 1, 1, 1]], 16)
    """
    digits = radix_digits(max(int(data.vocab_size) - 1, 0), int(base)) if n_digits is None else int(n_digits)
    x = np.asarray(data.tokens, dtype=np.int64)
    if x.size and (x.min() < 0 or x.max() >= int(base) ** digits):
        raise DataError(
            f"numbers must lie in [0, base**n_digits = {int(base) ** digits}), got {x.min()}..{x.max()}; "
            "raise n_digits.",
            argument="n_digits",
        )
    powers = int(base) ** np.arange(digits, dtype=np.int64)
    tokens = (x[..., None] // powers) % int(base)
    mask = np.repeat(np.asarray(data.loss_mask, dtype=bool)[..., None], digits, axis=-1)
    latent = {**data.latent, "base": np.full(len(x), int(base)), "n_digits": np.full(len(x), digits)}
    return TokenData(tokens.reshape(len(x), -1), mask.reshape(len(x), -1), int(base), latent)


@validate_params({"tokens": ["array-like"], "base": [_BASE], "n_digits": [_DIGITS]})
def radix_decode(tokens: Any, base: int, n_digits: int) -> np.ndarray:
    """Numbers from their digit tokens (inverse of :func:`radix_encode`).

    Parameters
    ----------
    tokens : array-like of int, shape (..., length * n_digits)
        Digit tokens, lowest digit of each number first.
    base : int
        The radix.
    n_digits : int
        Digits per number.

    Returns
    -------
    ndarray of int64, shape (..., length)

    Examples
    --------
    >>> radix_decode([[5, 0, 0, 12, 2, 1]], 16, 3).tolist()
    [[5, 300]]
    """
    t = np.asarray(tokens, dtype=np.int64)
    if t.shape[-1] % int(n_digits):
        raise ParameterError(
            f"the token length ({t.shape[-1]}) must be a multiple of n_digits={n_digits}.",
            argument="n_digits",
        )
    powers = int(base) ** np.arange(int(n_digits), dtype=np.int64)
    return (t.reshape(*t.shape[:-1], -1, int(n_digits)) * powers).sum(axis=-1)


@dataclass(frozen=True)
class RadixAccuracy:
    """Teacher-forced accuracy of a digit-token model, per number and per digit.

    Number ``k`` (1-based, ``k >= 1``) is predicted from the numbers before it: each of its
    digits greedily from all true tokens before that digit.

    Attributes
    ----------
    hits : ndarray of bool, shape (n_sequences, length - 1)
        Number ``k`` right (all its digits).
    digit_hits : ndarray of bool, shape (n_sequences, length - 1, n_digits)
        Each digit right (digit 0 is the lowest).
    accuracy : ndarray of float, shape (length - 1,)
        ``hits.mean(axis=0)``.
    digit_accuracy : ndarray of float, shape (length - 1, n_digits)
        ``digit_hits.mean(axis=0)``.

    See Also
    --------
    radix_accuracy
    """

    hits: np.ndarray
    digit_hits: np.ndarray
    accuracy: np.ndarray
    digit_accuracy: np.ndarray

    def band(self, start: int, stop: int | None = None) -> tuple[float, float]:
        """Mean number accuracy over positions ``start .. stop - 1`` (1-based) and its standard error.

        Parameters
        ----------
        start : int
            First position counted (>= 1).
        stop : int, optional
            One past the last position; default the end.

        Returns
        -------
        mean, stderr : float
            The standard error is over sequences (each sequence's mean over the band).
        """
        return _band_accuracy(self.hits, start, stop)


@validate_params({"data": [TokenData], "n_digits": [_DIGITS]})
@torch.no_grad()
def radix_accuracy(model: Any, data: TokenData, n_digits: int, *, batch_size: int = 256) -> RadixAccuracy:
    """Number-level and digit-level next-number accuracy of a model trained on digit tokens.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM over the digit vocabulary (``data.vocab_size`` = the base).
    data : TokenData
        Digit tokens from :func:`radix_encode`.
    n_digits : int
        Digits per number (as encoded).
    batch_size : int, default=256
        Sequences per forward pass.

    Returns
    -------
    RadixAccuracy

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model, lcg_sequences
    >>> data = radix_encode(lcg_sequences([[5, 3], [9, 7]], 256, 6), 16)
    >>> cfg = ModelConfig("llama", vocab_size=16, d_model=16, n_layers=1, n_heads=2, max_len=12)
    >>> model = build_model(cfg)
    >>> res = radix_accuracy(model, data, 2)
    >>> res.hits.shape, res.digit_accuracy.shape
    ((2, 5), (5, 2))
    """
    if not callable(model) or not hasattr(model, "get_input_embeddings"):
        raise ModelError(f"model must be a causal LM, got {type(model).__name__}.", argument="model")
    if model.get_input_embeddings().weight.shape[0] < data.vocab_size:
        raise ModelError(
            f"the model's vocabulary is smaller than the base ({data.vocab_size}); "
            "train it on radix_encode data.",
            argument="model",
        )
    x = np.asarray(data.tokens, dtype=np.int64)
    d = int(n_digits)
    if x.shape[1] % d or x.shape[1] < 2 * d:
        raise ParameterError(
            f"the token length ({x.shape[1]}) must be a multiple of n_digits={d} "
            "holding at least two numbers.",
            argument="n_digits",
        )
    preds = []
    for i in range(0, len(x), batch_size):
        logits = model(input_ids=torch.as_tensor(x[i : i + batch_size])).logits
        preds.append(logits[:, :-1].argmax(-1).numpy())
    pred = np.concatenate(preds)  # pred[:, t] predicts token t + 1
    digit_hits = (pred[:, d - 1 :] == x[:, d:]).reshape(len(x), -1, d)
    hits = digit_hits.all(axis=-1)
    return RadixAccuracy(hits, digit_hits, hits.mean(axis=0), digit_hits.mean(axis=0))
