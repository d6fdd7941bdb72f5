"""E-LDA's per-document topic recovery beside Gibbs (tomotopy) and online VB (gensim) LDA (row 004-11).

Issue 30: "per-document topic recovery at least as good as tomotopy/gensim LDA". What holds
(benchmarks/explain_topics_docs.py, 10,000 documents, 3 seeds): the dominant topic of each
document, and its topic set when E-LDA's budget is Gibbs's sparsity. What does not: the topic
set at the default budget, and the proportions and tokens, against seeded Gibbs LDA
(docs/explain/topics.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from trustlab.explain.topics import ExemplarLDA, make_anchored_lda_corpus

D, K = 1000, 8


@pytest.fixture(scope="module")
def corpus():
    return make_anchored_lda_corpus(D, K, vocabulary_size=400, random_state=0)


def _aligned(topic_word: np.ndarray, theta: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Proportions with the model's topics renamed to the true ones (Hungarian, word-distribution L1)."""
    p = topic_word / topic_word.sum(1, keepdims=True)
    rows, cols = linear_sum_assignment(np.abs(p[:, None, :] - truth[None]).sum(-1))
    out = np.zeros_like(theta)
    out[:, cols] = theta[:, rows]
    return out


def _tomotopy(corpus, seeded: bool) -> np.ndarray:
    tp = pytest.importorskip("tomotopy")
    model = tp.LDAModel(k=K, alpha=0.1, eta=0.01, seed=0)
    if seeded:
        for k, word in enumerate(corpus.anchors):
            model.set_word_prior(word, [1.0 if j == k else 0.0 for j in range(K)])
    for row in corpus.counts:
        model.add_doc([corpus.vocabulary[w] for w in np.repeat(np.arange(row.size), row)])
    model.train(100, workers=1)
    theta = np.array([doc.get_topic_dist() for doc in model.docs])
    if seeded:
        return theta
    index = {w: i for i, w in enumerate(corpus.vocabulary)}
    phi = np.full((K, corpus.counts.shape[1]), 1e-12)
    phi[:, [index[v] for v in model.used_vocabs]] = [model.get_topic_word_dist(k) for k in range(K)]
    return _aligned(phi, theta, corpus.topic_word)


def _gensim(corpus) -> np.ndarray:
    gensim_models = pytest.importorskip("gensim.models")
    bow = [[(int(w), int(row[w])) for w in np.flatnonzero(row)] for row in corpus.counts]
    model = gensim_models.LdaModel(
        bow,
        num_topics=K,
        id2word=dict(enumerate(corpus.vocabulary)),
        alpha=np.full(K, 0.1),
        eta=0.01,
        passes=5,
        chunksize=2000,
        random_state=0,
    )
    gamma, _ = model.inference(bow)
    return _aligned(model.get_topics(), gamma / gamma.sum(1, keepdims=True), corpus.topic_word)


@pytest.fixture(scope="module")
def peers(corpus) -> dict[str, np.ndarray]:
    """Topic proportions of the LDA peers, topics named as the true ones."""
    return {
        "tomotopy": _tomotopy(corpus, seeded=False),
        "tomotopy seeded": _tomotopy(corpus, seeded=True),
        "gensim": _gensim(corpus),
    }


def _paired_se(diff: np.ndarray) -> float:
    return float(max(diff.std(ddof=1), 1.0 / D) / np.sqrt(D))


@pytest.mark.claims
@pytest.mark.slow
def test_claim_dominant_topic_at_least_as_good_as_gibbs_and_online_vb(corpus, peers) -> None:
    """Each document's dominant topic: E-LDA (anchored, 2 topics a document, threshold
    algorithm, no matching) is right at least as often as tomotopy Gibbs LDA (plain, aligned by
    the Hungarian method; and seeded with the anchors) and gensim online VB LDA, within three
    standard errors of the paired per-document difference."""
    elda = ExemplarLDA(keywords=corpus.anchors, vocabulary=corpus.vocabulary, algorithm="threshold")
    truth = corpus.doc_topic.argmax(1)
    ours = elda.fit(corpus.counts).doc_topic_.argmax(1) == truth
    for name, theta in peers.items():
        diff = ours.astype(float) - (theta.argmax(1) == truth)
        assert diff.mean() >= -3 * _paired_se(diff), (name, ours.mean(), diff.mean())


@pytest.mark.claims
@pytest.mark.slow
def test_claim_topic_sets_as_good_as_gibbs_at_its_sparsity(corpus, peers) -> None:
    """Each document's set of topics (those producing >= 10% of its words): with the budget
    kappa taken from seeded Gibbs LDA's sparsity (its mean number of topics with proportion >=
    10%), as the paper's Experiment 1 takes kappa from Gibbs, the Jaccard overlap of E-LDA's
    linked topics with the true set is within three paired standard errors of Gibbs's (measured
    here: kappa 2.01, Jaccard 0.947 vs 0.958, difference -0.011 +- 0.005; on the benchmark's
    corpus, with 2.18 true topics a document, the default kappa 2 misses more, see the docs)."""
    true = corpus.doc_topic >= 0.1
    gibbs = peers["tomotopy seeded"] >= 0.1
    kappa = float(gibbs.sum(1).mean())
    elda = ExemplarLDA(
        keywords=corpus.anchors,
        vocabulary=corpus.vocabulary,
        algorithm="threshold",
        topics_per_document=kappa,
    ).fit(corpus.counts)
    linked = np.zeros_like(true)
    linked[elda.edges_[:, 0], elda.edges_[:, 1]] = True

    def jaccard(sets: np.ndarray) -> np.ndarray:
        return (sets & true).sum(1) / (sets | true).sum(1)

    diff = jaccard(linked) - jaccard(gibbs)
    assert diff.mean() >= -3 * _paired_se(diff), (jaccard(linked).mean(), jaccard(gibbs).mean())
