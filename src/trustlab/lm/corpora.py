"""Token data for the lab: synthetic task generators, one offline English corpus, tokenizers.

Generators return a :class:`TokenData`: integer token ids (one row per sequence), the mask of
positions whose *next* token the training loss counts, and the generator's latent variables
(LCG parameters, task ids). The synthetic tasks:

- linear congruential sequences ``x[t+1] = (a x[t] + c) mod m`` [1]_, with ``(a, c)`` drawn
  from the full-period (Hull-Dobell) set so that train and test parameters can be split;
- in-context tasks with a latent task id: each sequence is ``x1 y1 x2 y2 ...`` with
  ``y = (k_t x + b_t) mod V`` for the sequence's task ``t`` [2]_;
- sorting, an algorithmic task: ``values SEP sorted(values)``.

The English corpus is CPython's own ``pydoc_data.topics`` (the help texts of ``pydoc``:
79 topics, about 465,000 characters; PSF licence, see docs/data-card.md); it ships with
Python, so it is always offline.

References
----------
.. [1] Tao, Doshi, Gromov et al. "(How) Can Transformers Predict Pseudo-Random Numbers?".
   ICML 2025.
.. [2] Garg, Tsipras, Liang, Valiant. "What Can Transformers Learn In-Context? A Case Study of
   Simple Function Classes". NeurIPS 2022.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ParameterError

__all__ = [
    "TokenData",
    "encode_texts",
    "english_corpus",
    "incontext_tasks",
    "lcg_parameters",
    "lcg_sequences",
    "number_tokenizer",
    "sorting_task",
    "train_tokenizer",
]


@dataclass(frozen=True)
class TokenData:
    """Sequences of token ids for training or evaluating a causal LM.

    Attributes
    ----------
    tokens : ndarray of int64, shape (n_sequences, length)
        Token ids.
    loss_mask : ndarray of bool, shape (n_sequences, length)
        ``loss_mask[i, t]``: the loss counts the prediction of ``tokens[i, t]`` (from the
        tokens before it). Position 0 is never counted.
    vocab_size : int
        Number of distinct token ids the task uses.
    latent : dict
        The generator's hidden variables, one array per name (e.g. ``"a"``, ``"c"``,
        ``"task"``), one entry per sequence.

    See Also
    --------
    lcg_sequences, incontext_tasks, sorting_task, encode_texts
    """

    tokens: np.ndarray
    loss_mask: np.ndarray
    vocab_size: int
    latent: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


def _positive(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}.", argument=name)
    return int(value)


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    return out + ([n] if n > 1 else [])


@validate_params({"modulus": [Interval(numbers.Integral, 2, None, closed="left")]})
def lcg_parameters(modulus: int) -> np.ndarray:
    """Every full-period ``(a, c)`` of a modulus (Hull-Dobell theorem).

    ``c`` coprime to ``m``; ``a - 1`` divisible by every prime factor of ``m``, and by 4
    when ``4 | m``; ``a`` in ``[1, m)`` and ``c`` in ``[1, m)``.

    Parameters
    ----------
    modulus : int
        The modulus ``m >= 2``.

    Returns
    -------
    ndarray of int64, shape (n_pairs, 2)
        The pairs ``(a, c)``, sorted.

    Examples
    --------
    >>> lcg_parameters(8).tolist()
    [[1, 1], [1, 3], [1, 5], [1, 7], [5, 1], [5, 3], [5, 5], [5, 7]]
    """
    m = _positive("modulus", modulus, 2)
    a_values, c_values = _hull_dobell_multipliers(m), _coprime_increments(m)
    return np.array([(a, c) for a in a_values for c in c_values], dtype=np.int64).reshape(-1, 2)


def _hull_dobell_multipliers(m: int) -> list[int]:
    """Hull-Dobell's multipliers: ``a - 1`` divisible by every prime factor of ``m`` (and 4 if ``4 | m``)."""
    step = math.prod(_prime_factors(m))
    if m % 4 == 0 and step % 4:
        step *= 2
    return list(range(1, m, step))


def _coprime_increments(m: int) -> list[int]:
    """The increments ``c`` in ``[1, m)`` coprime to ``m`` (Hull-Dobell's other condition)."""
    return [c for c in range(1, m) if math.gcd(c, m) == 1]


@validate_params(
    {
        "params": ["array-like"],
        "modulus": [Interval(numbers.Integral, 2, None, closed="left")],
        "length": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_per_param": [Interval(numbers.Integral, 1, None, closed="left")],
        "seed": ["random_state"],
    }
)
def lcg_sequences(
    params: np.ndarray, modulus: int, length: int, *, n_per_param: int = 1, seed: int = 0
) -> TokenData:
    """Linear congruential sequences, one token per residue, random seeds ``x0``.

    Parameters
    ----------
    params : array-like of int, shape (n_pairs, 2)
        The ``(a, c)`` pairs (e.g. a train or test split of :func:`lcg_parameters`).
    modulus : int
        The modulus ``m``; tokens are ``0 .. m-1``.
    length : int
        Tokens per sequence.
    n_per_param : int, default=1
        Sequences per pair (each from its own random ``x0``).
    seed : int, default=0
        Seeds the draw of ``x0``.

    Returns
    -------
    TokenData
        Loss on every position but the first; latent ``"a"``, ``"c"``, ``"x0"``.

    Examples
    --------
    >>> d = lcg_sequences([[5, 3]], 8, 6, seed=1)
    >>> x = d.tokens[0]; bool(((5 * x[:-1] + 3) % 8 == x[1:]).all())
    True
    """
    m = _positive("modulus", modulus, 2)
    length = _positive("length", length, 2)
    reps = _positive("n_per_param", n_per_param)
    p = np.asarray(params, dtype=np.int64)
    if p.ndim != 2 or p.shape[1] != 2 or len(p) == 0:
        raise DataError(
            f"params must have shape (n_pairs, 2) with n_pairs >= 1, got {p.shape}.", argument="params"
        )
    p = np.repeat(p, reps, axis=0)
    rng = np.random.default_rng(seed)
    x = np.empty((len(p), length), dtype=np.int64)
    x[:, 0] = rng.integers(0, m, size=len(p))
    for t in range(1, length):
        x[:, t] = (p[:, 0] * x[:, t - 1] + p[:, 1]) % m
    mask = np.ones_like(x, dtype=bool)
    mask[:, 0] = False
    return TokenData(x, mask, m, {"a": p[:, 0].copy(), "c": p[:, 1].copy(), "x0": x[:, 0].copy()})


@validate_params(
    {
        "n_sequences": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_pairs": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_tasks": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_values": [Interval(numbers.Integral, 2, None, closed="left")],
        "seed": ["random_state"],
    }
)
def incontext_tasks(
    n_sequences: int, n_pairs: int, n_tasks: int, *, n_values: int = 16, seed: int = 0
) -> TokenData:
    """In-context tasks with a latent task id: ``x1 y1 x2 y2 ...`` with ``y = (k x + b) mod V``.

    Task ``t`` has a multiplier ``k_t`` coprime to ``V`` and an offset ``b_t`` (distinct
    pairs, drawn once from ``seed``); each sequence draws its task uniformly and its ``x`` values
    uniformly. Only the ``y`` positions count in the loss: the model must infer the task from the
    pairs before.

    Parameters
    ----------
    n_sequences : int
        Number of sequences.
    n_pairs : int
        ``(x, y)`` pairs per sequence (length ``2 * n_pairs``).
    n_tasks : int
        Number of latent tasks.
    n_values : int, default=16
        ``V``: tokens are ``0 .. V-1``.
    seed : int, default=0
        Seeds the tasks and the sequences.

    Returns
    -------
    TokenData
        Latent ``"task"`` (the id), ``"k"`` and ``"b"`` per sequence.

    Examples
    --------
    >>> d = incontext_tasks(4, 3, 2, n_values=7, seed=0)
    >>> d.tokens.shape, d.loss_mask[0].tolist()
    ((4, 6), [False, True, False, True, False, True])
    """
    n = _positive("n_sequences", n_sequences)
    pairs = _positive("n_pairs", n_pairs)
    v = _positive("n_values", n_values, 2)
    n_tasks = _positive("n_tasks", n_tasks)
    choices = [(k, b) for k in range(1, v) if math.gcd(k, v) == 1 for b in range(v)]
    if n_tasks > len(choices):
        raise ParameterError(
            f"n_tasks must be at most {len(choices)} for n_values={v}, got {n_tasks}.", argument="n_tasks"
        )
    rng = np.random.default_rng(seed)
    table = np.array(choices, dtype=np.int64)[rng.choice(len(choices), size=n_tasks, replace=False)]
    task = rng.integers(0, n_tasks, size=n)
    xs = rng.integers(0, v, size=(n, pairs))
    ys = (table[task, 0:1] * xs + table[task, 1:2]) % v
    tokens = np.stack([xs, ys], axis=2).reshape(n, 2 * pairs)
    mask = np.zeros_like(tokens, dtype=bool)
    mask[:, 1::2] = True
    return TokenData(tokens, mask, v, {"task": task, "k": table[task, 0], "b": table[task, 1]})


@validate_params(
    {
        "n_sequences": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_items": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_values": [Interval(numbers.Integral, 2, None, closed="left")],
        "seed": ["random_state"],
    }
)
def sorting_task(n_sequences: int, n_items: int, *, n_values: int = 16, seed: int = 0) -> TokenData:
    """Sorting: ``v1 .. vn SEP sorted(v)``; the loss counts the sorted half.

    Parameters
    ----------
    n_sequences : int
        Number of sequences.
    n_items : int
        Values per sequence (length ``2 * n_items + 1``).
    n_values : int, default=16
        Values are ``0 .. n_values-1``; the separator is token ``n_values``.
    seed : int, default=0
        Seeds the values.

    Returns
    -------
    TokenData
        ``vocab_size = n_values + 1``.

    Examples
    --------
    >>> sorting_task(1, 3, n_values=5, seed=2).tokens.shape
    (1, 7)
    """
    n = _positive("n_sequences", n_sequences)
    k = _positive("n_items", n_items)
    v = _positive("n_values", n_values, 2)
    rng = np.random.default_rng(seed)
    values = rng.integers(0, v, size=(n, k))
    tokens = np.concatenate([values, np.full((n, 1), v), np.sort(values, axis=1)], axis=1).astype(np.int64)
    mask = np.zeros_like(tokens, dtype=bool)
    mask[:, k + 1 :] = True
    return TokenData(tokens, mask, v + 1)


def english_corpus() -> list[str]:
    """CPython's ``pydoc`` topic texts (``pydoc_data.topics``), one string per topic, sorted by name.

    Returns
    -------
    list of str
        79 texts, about 465,000 characters in all (Python 3.11); PSF licence.

    Examples
    --------
    >>> texts = english_corpus(); len(texts) > 50 and "lambda" in " ".join(texts)
    True
    """
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


@validate_params({"vocab_size": [Interval(numbers.Integral, 2, None, closed="left")]})
def number_tokenizer(vocab_size: int) -> Any:
    """A word-level tokenizer whose token ``"i"`` has id ``i`` (the synthetic tasks' vocabulary).

    Built with ``tokenizers`` (whitespace-split words), so it saves beside the model like any other.

    Parameters
    ----------
    vocab_size : int
        Ids ``0 .. vocab_size-1`` (the text ``"0"`` ... ``"{vocab_size-1}"``).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        ``tok("3 1 4")["input_ids"] == [3, 1, 4]``.

    Examples
    --------
    >>> number_tokenizer(10)("3 1 4")["input_ids"]
    [3, 1, 4]
    """
    v = _positive("vocab_size", vocab_size, 2)
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {str(i): i for i in range(v)}
    vocab["<unk>"] = v
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>")


@validate_params({"texts": [list], "vocab_size": [Interval(numbers.Integral, 257, None, closed="left")]})
def train_tokenizer(texts: list[str], vocab_size: int = 512) -> Any:
    """A byte-level BPE tokenizer trained on ``texts`` with ``tokenizers``.

    Parameters
    ----------
    texts : list of str
        The training corpus (not empty).
    vocab_size : int, default=512
        Target vocabulary size (at least 257: the 256 bytes and ``<|endoftext|>``).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        With ``<|endoftext|>`` as its end-of-text token.

    Examples
    --------
    >>> tok = train_tokenizer(["the cat sat on the mat"] * 5, vocab_size=260)
    >>> tok.decode(tok("the mat")["input_ids"])
    'the mat'
    """
    if isinstance(texts, str) or not isinstance(texts, list | tuple):
        raise DataError("texts must be a list of strings.", argument="texts")
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise DataError("texts is empty: give at least one non-blank string to train on.", argument="texts")
    v = _positive("vocab_size", vocab_size, 257)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=v,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


@validate_params({"texts": [list], "length": [Interval(numbers.Integral, 2, None, closed="left")]})
def encode_texts(tokenizer: Any, texts: list[str], length: int) -> TokenData:
    """Texts joined by the end-of-text token and cut into blocks of ``length`` tokens.

    Parameters
    ----------
    tokenizer : transformers.PreTrainedTokenizerFast
        E.g. from :func:`train_tokenizer`.
    texts : list of str
        The corpus.
    length : int
        Tokens per block; a last partial block is dropped.

    Returns
    -------
    TokenData
        Loss on every position but the first.

    Examples
    --------
    >>> tok = train_tokenizer(["abc def"] * 3, vocab_size=260)
    >>> encode_texts(tok, ["abc def abc def"] * 4, 4).tokens.shape[1]
    4
    """
    length = _positive("length", length, 2)
    if (
        isinstance(texts, str)
        or not isinstance(texts, list | tuple)
        or not any(isinstance(t, str) and t.strip() for t in texts)
    ):
        raise DataError("texts is empty: give a list with at least one non-blank string.", argument="texts")
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text)["input_ids"])
        if eos is not None:
            ids.append(eos)
    n = len(ids) // length
    if n == 0:
        raise DataError(
            f"texts hold {len(ids)} tokens, fewer than one block of length {length}; give more text.",
            argument="texts",
        )
    tokens = np.asarray(ids[: n * length], dtype=np.int64).reshape(n, length)
    mask = np.ones_like(tokens, dtype=bool)
    mask[:, 0] = False
    return TokenData(tokens, mask, len(tokenizer))
