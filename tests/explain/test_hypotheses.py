"""HypotheSAEs (explain/hypotheses.py): unit tests, bad input, the docs page's example.

Claims are in test_hypotheses_claims.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ParameterError  # noqa: E402
from trustlab.explain._hypo_stats import joint_test, separation  # noqa: E402
from trustlab.explain._hypo_text import f1_binary  # noqa: E402
from trustlab.explain.hypotheses import (  # noqa: E402
    HypotheSAEs,
    make_planted_corpus,
    select_latents,
    word_vector_encoder,
)
from trustlab.explain.sae import SparseAutoencoder  # noqa: E402

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "hypothesaes.md"


def _sae() -> SparseAutoencoder:
    return SparseAutoencoder(
        24, architecture="topk", k=3, batch_size=150, n_steps=80, learning_rate=1e-2, random_state=0
    )


@pytest.fixture(scope="module")
def small():
    corpus = make_planted_corpus(600, random_state=1)
    emb = corpus.embeddings(24, random_state=1)
    model = HypotheSAEs(_sae(), n_hypotheses=4).fit(corpus.texts[:400], corpus.y[:400], embeddings=emb[:400])
    return corpus, emb, model


def test_planted_corpus_is_deterministic_and_planted() -> None:
    a, b = make_planted_corpus(200, random_state=3), make_planted_corpus(200, random_state=3)
    assert a.texts == b.texts and np.array_equal(a.y, b.y)
    assert all(len(t.split()) == 14 for t in a.texts)
    clean = make_planted_corpus(400, label_noise=0.0, random_state=3)
    assert np.array_equal(clean.y, np.isin(clean.topic, clean.planted).astype(int))
    words = set(clean.topic_words[clean.planted[0]])
    docs = [set(t.split()) for t, k in zip(clean.texts, clean.topic, strict=True) if k == clean.planted[0]]
    assert all(d & words for d in docs)  # every document of a topic carries its words


def test_select_latents_methods_find_the_driving_latents() -> None:
    rng = np.random.default_rng(0)
    Z = np.maximum(rng.normal(size=(400, 12)), 0)
    y = 2 * Z[:, 3] - 1.5 * Z[:, 7] + 0.2 * rng.normal(size=400)
    for method in ("lasso", "correlation", "separation"):
        idx, scores = select_latents(Z, y, 2, method=method)
        assert sorted(idx.tolist()) == [3, 7], method
        assert np.sign(scores[idx.tolist().index(7)]) == -1
    yb = (y > np.median(y)).astype(int)
    assert sorted(select_latents(Z, yb, 2)[0].tolist()) == [3, 7]  # L1 logistic
    Z[:, 5] = 0.0  # a dead latent is never selected
    assert 5 not in select_latents(Z, y, 12, method="correlation")[0]


def test_lasso_selects_exactly_the_requested_number() -> None:
    rng = np.random.default_rng(1)
    Z = np.maximum(rng.normal(size=(300, 20)), 0)
    y = Z @ rng.normal(size=20) + rng.normal(size=300)
    for n in (1, 4, 9):
        assert len(select_latents(Z, y, n)[0]) == n


def test_fit_labels_latents_with_distinguishing_ngrams(small) -> None:
    corpus, _, model = small
    assert len(model.hypotheses_) == 4 and model.classification_
    vocab = set(model.vectorizer_.get_feature_names_out())
    for h in model.hypotheses_:
        assert h.terms and set(h.terms) <= vocab and "the" not in h.terms  # stop words dropped
        assert h.label.startswith("mentions ") and 0 <= h.fidelity <= 1
        assert len(h.top_texts) == 3
    # the strongest hypothesis names words of a planted topic
    planted_words = {w for t in corpus.planted for w in corpus.topic_words[t]}
    assert set(model.hypotheses_[0].terms[0].split()) & planted_words


def test_annotate_is_ngram_presence(small) -> None:
    corpus, _, model = small
    texts = corpus.texts[400:]
    A = model.annotate(texts)
    assert A.shape == (200, 4) and set(np.unique(A)) <= {0, 1}
    h = model.hypotheses_[0]
    by_hand = [int(any(re.search(rf"\b{re.escape(t)}\b", x) for t in h.terms)) for x in texts]
    assert A[:, 0].tolist() == by_hand
    assert np.array_equal(model.transform(texts), A)


def test_score_hypotheses_table(small) -> None:
    corpus, emb, model = small
    res = model.score_hypotheses(corpus.texts[400:], corpus.y[400:], embeddings=emb[400:])
    t = res.table
    assert list(t.columns) == [
        "latent", "label", "coef", "p_value", "significant", "separation", "separation_p",
        "prevalence", "fidelity",
    ]  # fmt: skip
    assert res.threshold == pytest.approx(0.1 / 4) and res.model in ("logit", "ols")
    assert res.n_significant == int((t["p_value"] < res.threshold).sum()) >= 1
    assert t["fidelity"].between(0, 1).all()


def test_joint_test_matches_ols_and_drops_collinear_columns() -> None:
    rng = np.random.default_rng(0)
    A = (rng.random((500, 3)) < 0.3).astype(float)
    y = 1.0 + 2.0 * A[:, 0] + rng.normal(size=500)
    A4 = np.column_stack([A, A[:, 0], np.ones(500)])  # a duplicate and a constant column
    coef, pval, r2, model = joint_test(A4, y, classification=False)
    X = np.column_stack([np.ones(500), A])
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    assert model == "ols" and np.allclose(coef[:3], beta[1:])
    assert np.isnan(coef[3:]).all() and np.isnan(pval[3:]).all()
    assert pval[0] < 1e-10 and pval[1] > 1e-3 and 0 < r2 < 1
    yb = (y > 2).astype(float)
    coef, pval, _, model = joint_test(A, yb, classification=True)
    assert model == "logit" and coef[0] > 0 and pval[0] < 1e-6
    eff, p = separation(A[:, 0], y)
    assert eff == pytest.approx(y[A[:, 0] == 1].mean() - y[A[:, 0] == 0].mean()) and p < 1e-10


def test_custom_interpreter_and_annotator(small) -> None:
    corpus, emb, _ = small
    seen = {}

    def interpreter(top, contrast):
        seen["n"] = (len(top), len(contrast))
        return "about baking"

    def annotator(label, texts):
        return np.array([int("oven" in t or "flour" in t) for t in texts])

    model = HypotheSAEs(_sae(), n_hypotheses=2, n_examples=20, interpreter=interpreter, annotator=annotator)
    model.fit(corpus.texts[:400], corpus.y[:400], embeddings=emb[:400])
    assert seen["n"] == (10, 10)  # the paper's 10 top-activating and 10 silent texts
    assert [h.label for h in model.hypotheses_] == ["about baking"] * 2
    assert model.annotate(corpus.texts[:5]).shape == (5, 2)


def test_encoder_is_used_without_embeddings() -> None:
    corpus = make_planted_corpus(300, random_state=2)
    model = HypotheSAEs(_sae(), n_hypotheses=2, encoder=word_vector_encoder(16)).fit(corpus.texts, corpus.y)
    assert model.sae_.n_features_in_ == 16
    enc = word_vector_encoder(8)
    assert np.array_equal(enc(["a cat"]), enc(["A cat"])) and enc(["cat dog"]).shape == (1, 8)


def test_f1_binary() -> None:
    a = np.array([1, 1, 0, 0], dtype=bool)
    assert f1_binary(a, np.array([1, 0, 1, 0], dtype=bool)) == pytest.approx(0.5)
    assert f1_binary(~a & a, ~a & a) == 0.0


# ------------------------------------------------------------------ bad input
def test_bad_input_names_the_argument(small) -> None:
    corpus, emb, model = small
    texts, y = corpus.texts[:100], corpus.y[:100]
    cases = [
        (lambda: HypotheSAEs(_sae()).fit(texts, np.ones(100), embeddings=emb[:100]), "y"),
        (lambda: HypotheSAEs(_sae()).fit(texts, y), "embeddings"),
        (lambda: HypotheSAEs(_sae()).fit(texts, y, embeddings=emb[:99]), "embeddings"),
        (lambda: HypotheSAEs(_sae()).fit(["!! ? a", *texts[1:]], y, embeddings=emb[:100]), "texts"),
        (lambda: HypotheSAEs(_sae()).fit("one text", y, embeddings=emb[:100]), "texts"),
        (lambda: HypotheSAEs(_sae()).fit(texts, y[:50], embeddings=emb[:100]), "y"),
        (lambda: HypotheSAEs(_sae(), ngram_range=(2, 1)).fit(texts, y, embeddings=emb[:100]), "ngram_range"),
        (lambda: HypotheSAEs(_sae(), interpreter=str).fit(texts, y, embeddings=emb[:100]), "annotator"),
        (lambda: HypotheSAEs(_sae(), selection="ols").fit(texts, y, embeddings=emb[:100]), "selection"),
        (lambda: HypotheSAEs(_sae(), stop_words="german").fit(texts, y, embeddings=emb[:100]), "stop_words"),
        (lambda: model.score_hypotheses(texts, y, alpha=1.5), "alpha"),
        (lambda: model.score_hypotheses(texts, np.zeros(100)), "y"),
        (lambda: make_planted_corpus(100, planted=["cooking"]), "planted"),
    ]
    for call, argument in cases:
        with pytest.raises((DataError, ParameterError)) as err:
            call()
            pytest.fail(f"no error for {argument}")
        assert err.value.argument == argument, (argument, str(err.value))
    nan = emb[:100].copy()
    nan[3, 2] = np.nan
    with pytest.raises(DataError, match="NaN"):
        HypotheSAEs(_sae()).fit(texts, y, embeddings=nan)
    with pytest.raises(ParameterError, match="k must lie"):
        HypotheSAEs(SparseAutoencoder(4, architecture="topk", k=9)).fit(texts, y, embeddings=emb[:100])


@settings(max_examples=10, deadline=None)
@given(n=st.integers(-2, 30), method=st.sampled_from(["lasso", "correlation", "separation", "x"]))
def test_select_latents_rejects_bad_arguments(n: int, method: str) -> None:
    Z = np.maximum(np.random.default_rng(0).normal(size=(40, 5)), 0)
    y = Z[:, 0]
    if n < 1 or method == "x":
        with pytest.raises(ParameterError):
            select_latents(Z, y, n, method=method)
    else:
        idx, _ = select_latents(Z, y, n, method=method)
        assert 1 <= len(idx) <= min(n, 5)


# ------------------------------------------------------------------ docs page
def test_docs_example_runs(docs_printout) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        docs_printout(PAGE)
    finally:
        torch.set_num_threads(threads)


# ------------------------------------------------------------------------ CLI
def test_cli_explain_hypotheses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    from trustlab.cli import main

    corpus = make_planted_corpus(300, random_state=4)
    path = tmp_path / "docs.csv"
    pd.DataFrame(
        {
            "text": corpus.texts,
            "label": np.where(corpus.y == 1, "yes", "no"),
            "same": 1,  # a target with one value
            "marks": ["-- !", *corpus.texts[1:]],  # one text empty after tokenisation
        }
    ).to_csv(path, index=False)
    args = ["explain", "hypotheses", str(path), "--text-column", "text", "--target", "label"]
    fast = ["--encoder", "words", "--n-hypotheses", "3", "--latents", "24", "--k", "3", "--steps", "30"]
    with pytest.raises(SystemExit) as stop:
        main([*args, *fast])
    out = capsys.readouterr().out.splitlines()
    assert stop.value.code in (0, None) and len(out) == 4
    assert out[-1].startswith(("0 of 3", "1 of 3", "2 of 3", "3 of 3")) and "held-out 90 of 300" in out[-1]
    assert all("mentions" in line for line in out[:3])
    for bad, flag in (
        (["--target", "nope"], "--target"),
        (["--holdout", "1.5"], "--holdout"),
        (["--encoder", "bert"], "--encoder"),
        (["--k", "99"], "--k"),
        (["--k", "0"], "--k"),
        (["--latents", "0"], "--latents"),
        (["--target", "same"], "--target"),
        (["--text-column", "marks"], "--text-column"),
    ):
        with pytest.raises(SystemExit) as stop:
            main([*args, *fast, *bad])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1 and err[0].startswith(f"error ({flag})"), err
