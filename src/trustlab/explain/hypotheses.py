"""HypotheSAEs: hypotheses about what in a text predicts a target, from a sparse autoencoder.

The method of Movva et al. (ICML 2025) in three steps, then a held-out test:

1. **Feature generation**: a TopK sparse autoencoder (:class:`trustlab.explain.sae.SparseAutoencoder`)
   is trained on text embeddings, so each text gets a few non-negative latents.
2. **Feature selection**: the ``n_hypotheses`` latents that best predict the target, by default with
   an L1-penalised regression (Lasso; L1 logistic regression for a binary target) whose penalty is
   searched until exactly that many latents are non-zero (the paper's rule); Pearson correlation
   and the separation score are the alternatives of the authors' code.
3. **Interpretation**: each selected latent is labelled by its top-activating texts against texts
   where it is silent. The paper asks an LLM for a natural-language concept; no LLM is available
   offline, so the default interpreter names the n-grams that best distinguish the two groups
   (log-odds ratio with an informative Dirichlet prior) and keeps the prefix of that list whose
   annotation best matches the latent (the paper's F1 *fidelity*). Pass ``interpreter`` (and
   ``annotator``) to use an LLM or any other labeller.
4. **Validation** (:meth:`HypotheSAEs.score_hypotheses`): every hypothesis is annotated on held-out
   texts and the target is regressed on all annotations at once (OLS; logistic regression for a
   binary target); a hypothesis is *significant* when its coefficient's p-value is below
   ``alpha / n_hypotheses`` (Bonferroni).

See docs/explain/hypothesaes.md.

References
----------
.. [1] Movva, Peng, Garg, Kleinberg, Pierson. "Sparse Autoencoders for Hypothesis Generation".
   ICML 2025.
.. [2] Gao et al. "Scaling and evaluating sparse autoencoders". ICLR 2025 (TopK SAE).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.explain._hypo_stats import SELECTION_METHODS, joint_test, select_latents, separation
from trustlab.explain._hypo_text import (
    PlantedCorpus,
    annotate_terms,
    check_texts,
    f1_binary,
    label_latent,
    make_vectorizer,
    minilm_encoder,
    module_encoder,
    planted_corpus,
    topic_names,
    word_vector_encoder,
)
from trustlab.explain.sae import SparseAutoencoder

__all__ = [
    "SELECTION_METHODS",
    "HypotheSAEs",
    "Hypothesis",
    "HypothesisTest",
    "PlantedCorpus",
    "make_planted_corpus",
    "minilm_encoder",
    "module_encoder",
    "recovery_f1",
    "select_latents",
    "word_vector_encoder",
]


# ------------------------------------------------------------------- results
@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis: a selected latent and its interpretation.

    Attributes
    ----------
    latent : int
        The SAE latent.
    label : str
        The interpretation (with the default interpreter: ``"mentions 'a', 'b' or 'c'"``).
    terms : tuple of str
        The n-grams of the default interpreter (empty for a custom one).
    score : float
        Selection score (signed Lasso coefficient, correlation or separation score).
    fidelity : float
        F1 between the label's annotation and the latent firing, on the training texts.
    top_texts : tuple of str
        The three texts on which the latent fires most.

    See Also
    --------
    HypotheSAEs.fit : builds them (``hypotheses_``; the class example shows one).
    """

    latent: int
    label: str
    terms: tuple[str, ...]
    score: float
    fidelity: float
    top_texts: tuple[str, ...]


@dataclass(frozen=True)
class HypothesisTest:
    """Held-out validation of the hypotheses (HypotheSAEs' evaluation on real data).

    Attributes
    ----------
    table : pandas.DataFrame
        One row per hypothesis: ``latent``, ``label``, ``coef`` and ``p_value`` (joint regression;
        NaN when the annotation was constant or collinear), ``significant``, ``separation`` and
        ``separation_p`` (univariate), ``prevalence`` (share of held-out texts annotated) and
        ``fidelity`` (held-out F1 against the latent, when embeddings were given).
    alpha : float
        Family-wise level.
    threshold : float
        Bonferroni per-test level ``alpha / n_hypotheses``.
    model : str
        ``"logit"`` or ``"ols"`` (OLS also when the logistic fit fails to converge).
    r2 : float
        Held-out R^2 (OLS) or McFadden's pseudo-R^2 (logit) of the joint regression.

    See Also
    --------
    HypotheSAEs.score_hypotheses : builds it.
    """

    table: pd.DataFrame
    alpha: float
    threshold: float
    model: str
    r2: float

    @property
    def n_significant(self) -> int:
        """Number of hypotheses significant after the Bonferroni correction."""
        return int(self.table["significant"].sum())


# ----------------------------------------------------------------- estimator
def authors_sae(n_latents: int, k: int, n_steps: int, random_state: Any) -> SparseAutoencoder:
    """An unfitted TopK SAE with the HypotheSAEs authors' optimiser settings (batch 512, rate 5e-4)."""
    return SparseAutoencoder(
        n_latents,
        architecture="topk",
        k=k,
        batch_size=512,
        n_steps=n_steps,
        learning_rate=5e-4,
        random_state=random_state,
    )


class HypotheSAEs(ParamsValidationMixin, BaseEstimator):
    """Generate and test hypotheses about a target from text with a sparse autoencoder.

    Parameters
    ----------
    sae : SparseAutoencoder, optional
        Unfitted autoencoder to train on the embeddings (cloned). Default: a TopK SAE with
        ``n_latents=256, k=8`` (the authors' setting for about 10,000 texts; they advise
        ``64, 4`` for about 1,000), batch 512, learning rate ``5e-4``, 2,000 steps.
    n_hypotheses : int, default=20
        Latents to select and interpret (the paper's ``H``).
    selection : {"lasso", "correlation", "separation"}, default="lasso"
        See :func:`select_latents`; Lasso is the paper's.
    n_examples : int, default=100
        Texts shown to the interpreter: the ``n_examples // 2`` top-activating ones and as many
        drawn among those where the latent is silent. The paper's LLM reads 20 and its fidelity is
        scored on 100; n-gram statistics need more than 20, so 100 it is.
    n_terms : int, default=5
        Most n-grams in a default label.
    ngram_range : tuple of int, default=(1, 2)
        n-gram lengths the default interpreter considers.
    stop_words : "english", list of str or None, default="english"
        Words the default interpreter ignores (scikit-learn's list by default).
    interpreter : callable, optional
        ``interpreter(top_texts, contrast_texts) -> str``: a label for a latent (e.g. an LLM
        call). Needs ``annotator`` as well, for the held-out test.
    annotator : callable, optional
        ``annotator(label, texts) -> array of 0/1``: whether each text shows the concept.
    encoder : callable, optional
        ``encoder(texts) -> ndarray (n, d)``; used when ``embeddings`` is not passed
        (e.g. :func:`minilm_encoder`, or :func:`module_encoder` for a user's own model).
    random_state : int, Generator or None, default=0
        Seeds the default SAE and the interpreter's random contrast texts.

    Attributes
    ----------
    sae_ : SparseAutoencoder
        The fitted autoencoder.
    hypotheses_ : list of Hypothesis
        By decreasing ``|score|``.
    classification_ : bool
        Whether the target is binary.
    vectorizer_ : sklearn.feature_extraction.text.CountVectorizer
        The n-gram vocabulary of the training texts.

    References
    ----------
    .. [1] Movva, Peng, Garg, Kleinberg, Pierson. "Sparse Autoencoders for Hypothesis
       Generation". ICML 2025.

    Examples
    --------
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> corpus = make_planted_corpus(400, random_state=0)
    >>> emb = corpus.embeddings(16)
    >>> sae = SparseAutoencoder(16, architecture="topk", k=2, batch_size=100, n_steps=40,
    ...                         learning_rate=1e-2)
    >>> hs = HypotheSAEs(sae, n_hypotheses=4).fit(corpus.texts, corpus.y, embeddings=emb)
    >>> len(hs.hypotheses_), hs.hypotheses_[0].label.startswith("mentions")
    (4, True)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "sae": [None, SparseAutoencoder],
        "n_hypotheses": [Interval(numbers.Integral, 1, None, closed="left")],
        "selection": [Options(set(SELECTION_METHODS))],
        "n_examples": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_terms": [Interval(numbers.Integral, 1, None, closed="left")],
        "ngram_range": ["array-like"],
        "stop_words": [None, Options({"english"}), list],
        "interpreter": [None, callable],
        "annotator": [None, callable],
        "encoder": [None, callable],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        sae: SparseAutoencoder | None = None,
        *,
        n_hypotheses: int = 20,
        selection: str = "lasso",
        n_examples: int = 100,
        n_terms: int = 5,
        ngram_range: tuple[int, int] = (1, 2),
        stop_words: Any = "english",
        interpreter: Callable[[list[str], list[str]], str] | None = None,
        annotator: Callable[[str, list[str]], Any] | None = None,
        encoder: Callable[[Sequence[str]], Any] | None = None,
        random_state: Any = 0,
    ) -> None:
        self.sae = sae
        self.n_hypotheses = n_hypotheses
        self.selection = selection
        self.n_examples = n_examples
        self.n_terms = n_terms
        self.ngram_range = ngram_range
        self.stop_words = stop_words
        self.interpreter = interpreter
        self.annotator = annotator
        self.encoder = encoder
        self.random_state = random_state

    # ---------------------------------------------------------------- inputs
    def _check_ngram_range(self) -> tuple[int, int]:
        try:
            lo, hi = (int(v) for v in self.ngram_range)
        except (TypeError, ValueError):
            lo, hi = 0, -1
        if not 1 <= lo <= hi:
            raise ParameterError(
                f"ngram_range must be two ints 1 <= low <= high, got {self.ngram_range!r}; e.g. (1, 2).",
                argument="ngram_range",
            )
        return lo, hi

    def _embed(self, texts: list[str], embeddings: Any, name: str = "embeddings") -> np.ndarray:
        if embeddings is None:
            if self.encoder is None:
                raise ParameterError(
                    "pass embeddings= (one row per text) or set encoder= (e.g. minilm_encoder()).",
                    argument=name,
                )
            embeddings = self.encoder(texts)
        E = check_numeric_array(embeddings, name, ndim=2)
        if E.shape[0] != len(texts):
            raise DataError(
                f"{name} has {E.shape[0]} rows but there are {len(texts)} texts; give one row per text.",
                argument=name,
            )
        return E

    # ------------------------------------------------------------------- fit
    def fit(self, texts: Any, y: Any, embeddings: Any = None) -> HypotheSAEs:
        """Train the SAE, select latents against ``y`` and interpret them.

        Parameters
        ----------
        texts : sequence of str
            The documents (none empty after tokenisation).
        y : array-like of shape (n_samples,)
            The target (numeric; binary targets use logistic selection and tests).
        embeddings : array-like of shape (n_samples, d), optional
            Text embeddings; default ``encoder(texts)``.

        Returns
        -------
        HypotheSAEs
            ``self``, fitted.
        """
        self._validate_params()
        ngram_range = self._check_ngram_range()
        if self.interpreter is not None and self.annotator is None:
            raise ParameterError(
                "a custom interpreter needs an annotator(label, texts) too, to test its labels.",
                argument="annotator",
            )
        texts = check_texts(texts)
        y = check_numeric_array(y, "y", ndim=1)
        if y.shape[0] != len(texts):
            raise DataError(f"y has {y.shape[0]} values but there are {len(texts)} texts.", argument="y")
        if np.unique(y).size < 2:
            raise DataError("y has a single value; pass a target that varies.", argument="y")
        E = self._embed(texts, embeddings)
        rng = make_generator(self.random_state)
        self.classification_ = bool(np.unique(y).size == 2)
        self.vectorizer_ = make_vectorizer(ngram_range, self.stop_words)
        try:
            D = self.vectorizer_.fit_transform(texts).tocsc()
        except ValueError:
            raise DataError(
                "texts share no n-gram (each must occur in 2 texts, stop words aside); pass more texts.",
                argument="texts",
            ) from None
        if self.sae is None:
            sae = authors_sae(256, 8, 2000, int(rng.integers(2**31 - 1)))
        else:
            sae = clone(self.sae)
        self.sae_ = sae.fit(E)
        Z = self.sae_.transform(E)
        idx, scores = select_latents(Z, y, self.n_hypotheses, method=self.selection)
        vocab = self.vectorizer_.get_feature_names_out()
        hyps = []
        for j, s in zip(idx, scores, strict=True):
            label, top, contrast = label_latent(
                D, vocab, Z[:, j], n_examples=self.n_examples, n_terms=self.n_terms, rng=rng
            )
            text, terms, fid = (
                label.text if label.terms else "(no distinguishing n-gram)",
                label.terms,
                label.fidelity,
            )
            if self.interpreter is not None:
                text = str(self.interpreter([texts[i] for i in top], [texts[i] for i in contrast]))
                terms = ()
                ann = self._annotate_one(text, terms, texts)
                fid = f1_binary(ann.astype(bool), Z[:, j] > 0)
            hyps.append(
                Hypothesis(int(j), text, terms, float(s), float(fid), tuple(texts[i] for i in top[:3]))
            )
        self.hypotheses_ = hyps
        return self

    # -------------------------------------------------------------- annotate
    def _annotate_one(self, label: str, terms: tuple[str, ...], texts: list[str]) -> np.ndarray:
        if self.annotator is None:
            return annotate_terms(self.vectorizer_, [terms], texts)[:, 0]
        a = check_numeric_array(self.annotator(label, texts), "annotator output", ndim=1)
        if a.shape[0] != len(texts) or not np.isin(a, (0, 1)).all():
            raise DataError(
                "annotator must return one 0/1 value per text.",
                argument="annotator",
            )
        return a.astype(np.int64)

    def annotate(self, texts: Any) -> np.ndarray:
        """Annotate texts with every hypothesis (the paper's LLM annotation step).

        Parameters
        ----------
        texts : sequence of str

        Returns
        -------
        ndarray of int, shape (n_texts, n_hypotheses)
            1 where the text shows the hypothesis's concept (default: contains one of its n-grams).
        """
        check_is_fitted(self, "hypotheses_")
        texts = check_texts(texts)
        if self.annotator is None:
            return annotate_terms(self.vectorizer_, [h.terms for h in self.hypotheses_], texts)
        cols = [self._annotate_one(h.label, h.terms, texts) for h in self.hypotheses_]
        return np.column_stack(cols) if cols else np.zeros((len(texts), 0), dtype=np.int64)

    def transform(self, texts: Any) -> np.ndarray:
        """Alias of :meth:`annotate` (hypotheses as binary features).

        Parameters
        ----------
        texts : sequence of str
            Documents to annotate.

        Returns
        -------
        numpy.ndarray of int64, shape (n_texts, n_hypotheses)
            1 where the hypothesis holds for the text.
        """
        return self.annotate(texts)

    # -------------------------------------------------------------- validate
    def score_hypotheses(
        self, texts: Any, y: Any, *, embeddings: Any = None, alpha: float = 0.1
    ) -> HypothesisTest:
        """Test the hypotheses on held-out texts (HypotheSAEs' validation).

        Parameters
        ----------
        texts : sequence of str
            Held-out documents (not used in ``fit``).
        y : array-like of shape (n_texts,)
            Their target.
        embeddings : array-like of shape (n_texts, d), optional
            Their embeddings, to report each label's held-out fidelity to its latent.
        alpha : float, default=0.1
            Family-wise level; a hypothesis is significant when its joint-regression p-value is
            below ``alpha / n_hypotheses`` (the authors' code uses 0.1 by default).

        Returns
        -------
        HypothesisTest
        """
        check_is_fitted(self, "hypotheses_")
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
            raise ParameterError(f"alpha must lie in (0, 1), got {alpha!r}.", argument="alpha")
        texts = check_texts(texts)
        y = check_numeric_array(y, "y", ndim=1)
        if y.shape[0] != len(texts):
            raise DataError(f"y has {y.shape[0]} values but there are {len(texts)} texts.", argument="y")
        if np.unique(y).size < 2:
            raise DataError(
                "y has a single value on the held-out texts; a test needs variation.", argument="y"
            )
        if self.classification_:
            values = np.unique(y)
            if values.size != 2:
                raise DataError("the model was fitted on a binary target; pass a binary y.", argument="y")
            y = (y == values[1]).astype(float)
        A = self.annotate(texts)
        H = A.shape[1]
        coef, pval, r2, model = joint_test(A, y, self.classification_)
        fidelity = np.full(H, np.nan)
        if embeddings is not None or self.encoder is not None:
            Z = self.sae_.transform(self._embed(texts, embeddings))
            fidelity = np.array(
                [f1_binary(A[:, i].astype(bool), Z[:, h.latent] > 0) for i, h in enumerate(self.hypotheses_)]
            )
        threshold = alpha / max(H, 1)
        seps = [separation(A[:, i], y) for i in range(H)]
        table = pd.DataFrame(
            {
                "latent": [h.latent for h in self.hypotheses_],
                "label": [h.label for h in self.hypotheses_],
                "coef": coef,
                "p_value": pval,
                "significant": np.nan_to_num(pval, nan=1.0) < threshold,
                "separation": [s[0] for s in seps],
                "separation_p": [s[1] for s in seps],
                "prevalence": A.mean(0) if H else np.zeros(0),
                "fidelity": fidelity,
            }
        )
        return HypothesisTest(table, float(alpha), float(threshold), model, float(r2))


def recovery_f1(annotations: Any, references: Any) -> np.ndarray:
    """How well hypotheses recover reference hypotheses: best-match F1 per reference.

    The paper's synthetic benchmarks score a method by whether each reference hypothesis is
    found; here each reference's true 0/1 annotation is compared with every hypothesis's
    annotation on the same texts and the best F1 is kept.

    Parameters
    ----------
    annotations : array-like of 0/1, shape (n_texts, n_hypotheses)
        E.g. :meth:`HypotheSAEs.annotate` on held-out texts.
    references : array-like of 0/1, shape (n_texts, n_references)
        E.g. ``PlantedCorpus.concept(t)`` for each planted topic, stacked as columns.

    Returns
    -------
    ndarray of shape (n_references,)

    Examples
    --------
    >>> recovery_f1([[1, 0], [1, 1], [0, 0]], [[1], [0], [0]]).round(2).tolist()
    [0.67]
    """
    A = check_numeric_array(annotations, "annotations", ndim=2) > 0
    R = check_numeric_array(references, "references", ndim=2) > 0
    if A.shape[0] != R.shape[0]:
        raise DataError(
            f"annotations cover {A.shape[0]} texts but references {R.shape[0]}; use the same texts.",
            argument="references",
        )
    return np.array(
        [
            max((f1_binary(A[:, h], R[:, r]) for h in range(A.shape[1])), default=0.0)
            for r in range(R.shape[1])
        ]
    )


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 20, None, closed="left")],
        "planted": [None, "array-like"],
        "length": [Interval(numbers.Integral, 6, None, closed="left")],
        "label_noise": [Interval(numbers.Real, 0, 0.5, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_planted_corpus(
    n_samples: int = 2000,
    *,
    planted: Sequence[str] | None = None,
    length: int = 14,
    label_noise: float = 0.1,
    random_state: Any = 0,
) -> PlantedCorpus:
    """A text corpus whose binary target is planted on known topics (reference hypotheses).

    As in the paper's synthetic benchmarks (Wiki, Bills: documents of a few fine topics are
    labelled 1, all others 0), each document belongs to one of 16 fine topics in 4 domains
    (Zipf-like frequencies); it draws about 40% of its words from its topic's six specific words,
    15% from its domain's three shared words, a quarter of the documents one stray word of a
    random topic, and the rest from function words. ``y`` is 1 for the planted topics, flipped
    with probability ``label_noise``.

    Parameters
    ----------
    n_samples : int, default=2000
        Documents (at least 20).
    planted : list of str, optional
        Topic names driving the target; default ``["baking", "tennis", "banking"]``.
    length : int, default=14
        Words per document (at least 6).
    label_noise : float, default=0.1
        Probability of flipping each label, in ``[0, 0.5)``.
    random_state : int, Generator or None, default=0

    Returns
    -------
    PlantedCorpus

    Examples
    --------
    >>> c = make_planted_corpus(50, random_state=0)
    >>> len(c.texts), [c.topic_names[t] for t in c.planted]
    (50, ['baking', 'tennis', 'banking'])
    """
    names = topic_names()
    chosen = ["baking", "tennis", "banking"] if planted is None else [str(p) for p in planted]
    bad = [p for p in chosen if p not in names]
    if bad or not chosen or len(set(chosen)) != len(chosen):
        raise ParameterError(
            f"planted must be distinct topic names among {names}, got {planted!r}.", argument="planted"
        )
    return planted_corpus(
        n_samples, chosen, length=length, label_noise=float(label_noise), random_state=random_state
    )
