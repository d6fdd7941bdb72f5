"""Keyword-anchored LDA topic inference with guarantees: E-LDA (catalog row 004-11).

Breuer, "E-LDA: Toward Interpretable LDA Topic Models with Strong Guarantees in Logarithmic
Parallel Time", ICML 2025. :class:`ExemplarLDA` infers which topics each document uses and which
topic produced each word, with every candidate topic tied to a known keyword, by maximising a
monotone submodular objective (greedy: ``1 - 1/e``; descending thresholds: ``1 - 1/e - eps`` in
few adaptive rounds); :func:`make_anchored_lda_corpus` generates a corpus from a known LDA model
with one anchor word per topic. See docs/explain/topics.md.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_array

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, DataTypeError, NotFittedError, ParameterError
from trustlab.explain._topics_core import doc_topic_fractions, greedy, per_document, threshold

__all__ = ["AnchoredCorpus", "ExemplarLDA", "make_anchored_lda_corpus"]

GENERATORS = ("raw_umass", "umass", "cooccurrence")


def _check_counts(X: Any, name: str = "X") -> tuple[sparse.csr_matrix, list[str] | None]:
    """X as CSR float counts (non-negative, finite) and its column names (DataFrame input)."""
    columns = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    try:
        arr = check_array(X, accept_sparse="csr", dtype=float, input_name=name)
    except (TypeError, ValueError) as exc:
        error = DataTypeError if isinstance(exc, TypeError) else DataError
        raise error(
            f"{name}: {exc} Pass a 2-d (documents x words) array of word counts.", argument=name
        ) from None
    x = sparse.csr_matrix(arr)
    if np.any(x.data < 0):
        raise DataError(f"Negative values in data passed to {name}: word counts must be >= 0.", argument=name)
    x.eliminate_zeros()
    x.sort_indices()
    return x, columns


def _generate(x: sparse.csr_matrix, topics: np.ndarray, generator: str, smoothing: float) -> np.ndarray:
    """Log topic-word matrix of the exemplar topics from document co-occurrence."""
    b = x.copy()
    b.data[:] = 1.0
    co = np.asarray((b[:, topics].T @ b).todense())  # (n_topics, n_words): docs holding t and v
    if generator == "raw_umass":
        phi = co + smoothing
        return np.log(phi / phi.sum(axis=1, keepdims=True))
    if generator == "cooccurrence":
        # the paper's Co-occurrence generator phi_t(v) ∝ exp(|D_tv| + eps), in the author's code
        # (FREQSCALE_DOTPROD) without the per-topic normaliser: log weights are the counts themselves
        return co + smoothing
    return np.log(co + smoothing) - np.log(co[np.arange(topics.size), topics])[:, None]


class ExemplarLDA(ParamsValidationMixin, TransformerMixin, BaseEstimator):
    """LDA topic inference over keyword-anchored exemplar topics with a submodular guarantee.

    Each candidate topic is tied to one keyword (``keywords``, or every word occurring in at least
    ``min_df`` documents) and built from the corpus by ``topic_generator`` (or given as
    ``topic_word``). Inference picks ``round(topics_per_document * n_documents)`` (document,
    topic) edges maximising the log-probability of each word under the best topic its document
    uses; each word is then assigned to that topic.

    Parameters
    ----------
    keywords : sequence of str or int, or None, default None
        The anchor words (names, resolved through ``vocabulary`` or DataFrame columns, or
        column indices), one topic each; None: every word with document frequency >= ``min_df``.
    topics_per_document : float, default 2.0
        Mean topics per document (the paper's kappa), in ``[1, n_candidate_topics]``.
    topic_generator : {"raw_umass", "umass", "cooccurrence"}, default "raw_umass"
        How a keyword's topic is built from document co-occurrence (docs/explain/topics.md):
        ``"raw_umass"`` the normalised co-occurrence profile (the author's ``LOG_DOTPROD``, the
        formula of the paper's Exp-UMass), ``"umass"`` the UMass conditional, ``"cooccurrence"``
        the paper's Co-occurrence weights ``exp(|D_tv| + eps)`` left unnormalised as in the
        author's code.
    topic_word : array-like of shape (n_topics, n_words) or None, default None
        Known topics (log-probabilities) instead of a generator: one row per keyword, or, with
        ``keywords=None``, any number of rows (named ``topic0``, ``topic1``, ...), e.g. the topics
        of a fitted LDA model (the paper's experiment with fixed topics).
    algorithm : {"greedy", "threshold"}, default "greedy"
        Lazy greedy (``1 - 1/e``) or parallel descending thresholds (``1 - 1/e - eps``).
    eps : float, default 0.1
        Threshold decay for ``algorithm="threshold"``.
    min_df : int, default 2
        Document frequency a word needs to be a candidate when ``keywords`` is None.
    smoothing : float, default 1e-5
        Added to co-occurrence counts before the log.
    vocabulary : sequence of str or None, default None
        Names of the columns of ``X`` (else DataFrame columns are used).

    Attributes
    ----------
    topic_names_ : list of str
        The keyword of each candidate topic.
    topic_word_ : ndarray of shape (n_topics, n_words)
        Log topic-word probabilities used.
    edges_ : ndarray of shape (n_edges, 2)
        (document, topic) pairs in the order they were added.
    doc_topic_ : ndarray of shape (n_documents, n_topics)
        Fraction of each document's words assigned to each topic.
    objective_ : float
        The objective ``f`` of the solution: the sum over tokens of the log-probability of each
        token under its assigned topic (the paper's log posterior with the topics fixed).
    n_rounds_ : int
        Adaptive rounds used (sequential steps whose queries depend on earlier answers).

    Examples
    --------
    >>> corpus = make_anchored_lda_corpus(n_documents=200, n_topics=4, random_state=0)
    >>> model = ExemplarLDA(keywords=corpus.anchors, topics_per_document=1.5,
    ...                     vocabulary=corpus.vocabulary).fit(corpus.counts)
    >>> model.topic_names_
    ['anchor0', 'anchor1', 'anchor2', 'anchor3']
    >>> bool((model.doc_topic_.argmax(1) == corpus.doc_topic.argmax(1)).mean() > 0.9)
    True

    References
    ----------
    .. [1] A. Breuer, "E-LDA: Toward Interpretable LDA Topic Models with Strong Guarantees in
       Logarithmic Parallel Time", ICML 2025 (arXiv 2506.07747).
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "keywords": [list, tuple, np.ndarray, None],
        "topics_per_document": [Interval(numbers.Real, 1, None, closed="left")],
        "topic_generator": [Options(set(GENERATORS))],
        "topic_word": ["array-like", None],
        "algorithm": [Options({"greedy", "threshold"})],
        "eps": [Interval(numbers.Real, 0, None, closed="neither")],
        "min_df": [Interval(numbers.Integral, 1, None, closed="left")],
        "smoothing": [Interval(numbers.Real, 0, None, closed="neither")],
        "vocabulary": [list, tuple, np.ndarray, None],
    }

    def __init__(
        self,
        keywords: Sequence[str | int] | None = None,
        topics_per_document: float = 2.0,
        topic_generator: str = "raw_umass",
        topic_word: Any = None,
        algorithm: str = "greedy",
        eps: float = 0.1,
        min_df: int = 2,
        smoothing: float = 1e-5,
        vocabulary: Sequence[str] | None = None,
    ) -> None:
        self.keywords = keywords
        self.topics_per_document = topics_per_document
        self.topic_generator = topic_generator
        self.topic_word = topic_word
        self.algorithm = algorithm
        self.eps = eps
        self.min_df = min_df
        self.smoothing = smoothing
        self.vocabulary = vocabulary

    def __sklearn_tags__(self) -> Any:
        """Word counts: non-negative input (scikit-learn's ``requires_positive_X``), sparse accepted."""
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        return tags

    def _topic_ids(self, x: sparse.csr_matrix, names: list[str]) -> np.ndarray:
        n_words = x.shape[1]
        if self.keywords is None:
            df = np.diff(sparse.csc_matrix(x).indptr)
            frequent = np.flatnonzero(df >= self.min_df)
            if frequent.size == 0:
                raise DataError(
                    f"no word occurs in min_df={self.min_df} documents; lower min_df or pass keywords.",
                    argument="min_df",
                )
            return frequent
        index = {w: i for i, w in enumerate(names)}
        ids: list[int] = []
        for k in self.keywords:
            if isinstance(k, numbers.Integral) and not isinstance(k, bool) and 0 <= k < n_words:
                ids.append(int(k))
            elif isinstance(k, str) and k in index:
                ids.append(index[k])
            else:
                raise DataError(
                    f"keyword {k!r} is not in the vocabulary ({n_words} words); pass words of `vocabulary` "
                    "(or DataFrame columns) or column indices.",
                    argument="keywords",
                )
        if len(ids) == 0:
            raise DataError(
                "keywords is empty; pass at least one anchor word (or None).", argument="keywords"
            )
        if len(set(ids)) != len(ids):
            raise DataError("keywords holds the same word twice; pass each anchor once.", argument="keywords")
        return np.array(ids)

    def fit(self, X: Any, y: Any = None) -> ExemplarLDA:
        """Build the exemplar topics from ``X`` and infer each document's topics.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_documents, n_words)
            Word counts (an empty document gets no topic: a zero row of ``doc_topic_``).
        y : None
            Ignored.

        Returns
        -------
        ExemplarLDA
        """
        self._validate_params()
        x, columns = _check_counts(X)
        names = [str(v) for v in self.vocabulary] if self.vocabulary is not None else columns
        if names is not None and len(names) != x.shape[1]:
            raise DataError(
                f"vocabulary has {len(names)} words but X has {x.shape[1]} columns; pass one name each.",
                argument="vocabulary",
            )
        names = names if names is not None else [str(i) for i in range(x.shape[1])]
        unanchored = self.topic_word is not None and self.keywords is None
        shape = np.shape(self.topic_word)
        n_rows = shape[0] if len(shape) == 2 and shape[0] > 0 else 1  # else the shape check fails
        ids = np.full(n_rows, -1) if unanchored else self._topic_ids(x, names)
        absent = ids[np.diff(sparse.csc_matrix(x).indptr)[ids] == 0]
        if absent.size and self.topic_word is None:
            raise DataError(
                f"keyword {names[int(absent[0])]!r} occurs in no document, so its topic cannot be built; "
                "drop it or pass topic_word.",
                argument="keywords",
            )
        if self.topic_word is not None:
            logphi = np.asarray(self.topic_word, dtype=float)
            if (
                logphi.shape != (ids.size, x.shape[1])
                or not np.all(logphi < np.inf)
                or np.isnan(logphi).any()
            ):
                raise DataError(
                    f"topic_word must be ({ids.size}, {x.shape[1]}) log-probabilities (one row per "
                    f"{'topic' if unanchored else 'keyword'}, one column per word, no NaN or +inf); got "
                    f"shape {logphi.shape}.",
                    argument="topic_word",
                )
            logphi = np.maximum(logphi, np.log(1e-99))
        else:
            logphi = _generate(x, ids, self.topic_generator, self.smoothing)
        self.topic_ids_ = ids
        self.topic_names_ = [f"topic{i}" for i in range(ids.size)] if unanchored else [names[i] for i in ids]
        self.topic_word_ = logphi
        self.n_features_in_ = x.shape[1]
        self._infer_into_self(x)
        return self

    def _budget(self, n_docs: int) -> int:
        if self.topics_per_document > self.topic_word_.shape[0]:
            raise ParameterError(
                f"topics_per_document={self.topics_per_document} exceeds the {self.topic_word_.shape[0]} "
                "candidate topics; lower it or pass more keywords.",
                argument="topics_per_document",
            )
        return max(n_docs, round(self.topics_per_document * n_docs))

    def _infer_into_self(self, x: sparse.csr_matrix) -> None:
        rows = np.flatnonzero(np.diff(x.indptr) > 0)  # empty documents get no topic
        self.doc_topic_ = np.zeros((x.shape[0], self.topic_word_.shape[0]))
        self.edges_ = np.zeros((0, 2), dtype=np.int64)
        self.objective_, self.n_rounds_ = 0.0, 0
        if rows.size == 0:
            return
        sub = x[rows]
        budget = self._budget(rows.size)
        if self.algorithm == "greedy":
            sol = greedy(sub, self.topic_word_, budget)
        else:
            sol = threshold(sub, self.topic_word_, budget, float(self.eps))
        self.edges_ = np.column_stack([rows[sol.edges[:, 0]], sol.edges[:, 1]])
        self.objective_ = sol.objective
        self.n_rounds_ = sol.rounds
        self.doc_topic_[rows] = doc_topic_fractions(sub, sol.best_topic, self.topic_word_.shape[0])

    def transform(self, X: Any) -> np.ndarray:
        """Infer the topic fractions of new documents with the fitted topics, one document at a time.

        Each document takes its greedy best ``round(topics_per_document)`` topics (at least one)
        on its own, so its result does not depend on the other rows of ``X`` (the independence
        that using topics as treatments in causal inference needs).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_documents, n_words)
            Word counts over the fitted vocabulary.

        Returns
        -------
        ndarray of shape (n_documents, n_topics)
        """
        if not hasattr(self, "topic_word_"):
            raise NotFittedError("ExemplarLDA is not fitted; call fit(X) first.", argument="self")
        x, _ = _check_counts(X)
        if x.shape[1] != self.n_features_in_:
            raise DataError(
                f"X has {x.shape[1]} features, but ExemplarLDA is expecting {self.n_features_in_} features "
                "as input (one column per word of the fitted vocabulary).",
                argument="X",
            )
        out = np.zeros((x.shape[0], self.topic_word_.shape[0]))
        rows = np.flatnonzero(np.diff(x.indptr) > 0)
        if rows.size:
            sol = per_document(x[rows], self.topic_word_, max(1, round(self.topics_per_document)))
            out[rows] = doc_topic_fractions(x[rows], sol.best_topic, self.topic_word_.shape[0])
        return out


@dataclass(frozen=True)
class AnchoredCorpus:
    """A corpus drawn from a known LDA model with one anchor word per topic.

    Made by :func:`make_anchored_lda_corpus`.

    Parameters
    ----------
    counts : ndarray of shape (n_documents, vocabulary_size)
        Word counts.
    vocabulary : list of str
        Word names; the first ``n_topics`` are the anchors.
    anchors : list of str
        The anchor word of each topic, in topic order.
    topic_word : ndarray of shape (n_topics, vocabulary_size)
        The true topic-word probabilities.
    theta : ndarray of shape (n_documents, n_topics)
        The Dirichlet draws of the documents' topic proportions.
    doc_topic : ndarray of shape (n_documents, n_topics)
        The realised fraction of each document's words drawn from each topic.
    topic_counts : tuple of scipy.sparse.csr_matrix
        Per topic, the (n_documents, vocabulary_size) counts it produced (token-level truth).

    Examples
    --------
    >>> c = make_anchored_lda_corpus(4, 2, vocabulary_size=10, random_state=0)
    >>> int(sum(t.sum() for t in c.topic_counts)) == int(c.counts.sum())
    True
    """

    counts: np.ndarray
    vocabulary: list[str]
    anchors: list[str]
    topic_word: np.ndarray
    theta: np.ndarray
    doc_topic: np.ndarray
    topic_counts: tuple[sparse.csr_matrix, ...]


@validate_params(
    {
        "n_documents": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_topics": [Interval(numbers.Integral, 1, None, closed="left")],
        "vocabulary_size": [Interval(numbers.Integral, 2, None, closed="left")],
        "document_length": [Interval(numbers.Integral, 1, None, closed="left")],
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "beta": [Interval(numbers.Real, 0, None, closed="neither")],
        "anchor_mass": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }
)
def make_anchored_lda_corpus(
    n_documents: int = 1000,
    n_topics: int = 10,
    *,
    vocabulary_size: int = 500,
    document_length: int = 80,
    alpha: float = 0.1,
    beta: float = 0.05,
    anchor_mass: float = 0.05,
    random_state: Any = None,
) -> AnchoredCorpus:
    """Draw documents from an LDA model whose every topic has an anchor word.

    Topic ``k`` puts mass ``anchor_mass`` on its anchor word ``anchor{k}`` (word ``k``), which no
    other topic uses, and spreads ``1 - anchor_mass`` over the non-anchor words by a
    ``Dirichlet(beta)`` draw. Document ``d``: ``theta_d ~ Dirichlet(alpha)``, length
    ``max(1, Poisson(document_length))``, each word's topic from ``theta_d`` and the word from
    that topic.

    Parameters
    ----------
    n_documents, n_topics : int
        Corpus size and number of topics.
    vocabulary_size : int, default 500
        Words (more than ``n_topics``).
    document_length : int, default 80
        Mean words per document.
    alpha, beta : float
        Dirichlet concentrations of documents and topics.
    anchor_mass : float, default 0.05
        Probability of the anchor word within its topic.
    random_state : int, Generator or None, default None
        Drives every draw.

    Returns
    -------
    AnchoredCorpus

    Examples
    --------
    >>> c = make_anchored_lda_corpus(5, 3, vocabulary_size=20, random_state=0)
    >>> c.counts.shape, c.anchors
    ((5, 20), ['anchor0', 'anchor1', 'anchor2'])
    """
    if vocabulary_size <= n_topics:
        raise ParameterError(
            f"vocabulary_size={vocabulary_size} must exceed n_topics={n_topics} (one anchor per topic "
            "plus shared words).",
            argument="vocabulary_size",
        )
    rng = make_generator(random_state)
    phi = np.zeros((n_topics, vocabulary_size))
    phi[np.arange(n_topics), np.arange(n_topics)] = anchor_mass
    phi[:, n_topics:] = (1 - anchor_mass) * rng.dirichlet(np.full(vocabulary_size - n_topics, beta), n_topics)
    theta = rng.dirichlet(np.full(n_topics, alpha), n_documents)
    lengths = np.maximum(1, rng.poisson(document_length, n_documents))
    per_topic = np.array([rng.multinomial(n, p) for n, p in zip(lengths, theta, strict=True)])
    counts = np.zeros((n_documents, vocabulary_size), dtype=np.int64)
    by_topic = []
    for k in range(n_topics):
        drawn = rng.multinomial(per_topic[:, k], phi[k])
        counts += drawn
        by_topic.append(sparse.csr_matrix(drawn))
    vocabulary = [f"anchor{k}" for k in range(n_topics)] + [f"w{i}" for i in range(n_topics, vocabulary_size)]
    return AnchoredCorpus(
        counts=counts,
        vocabulary=vocabulary,
        anchors=vocabulary[:n_topics],
        topic_word=phi,
        theta=theta,
        doc_topic=per_topic / lengths[:, None],
        topic_counts=tuple(by_topic),
    )
