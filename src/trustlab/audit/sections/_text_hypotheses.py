"""Hypotheses about the target from a free-text column (HypotheSAEs), for the Explain section.

A column is read as free text when the schema declares it (``"text": true``: whatever its
word count; it is no model feature), or when the column screening left it out of the model as
free text or as a row identifier and its values are text of several words (median at least
:data:`MIN_WORDS` words); the report says which. For each such column (at most
:data:`MAX_COLUMNS`, declared ones first), HypotheSAEs [1]_ trains a
TopK sparse autoencoder on the training rows' text embeddings, selects the latents that
predict the target, labels each by the n-grams that distinguish its top texts, and tests
every label on the held-out rows in one joint regression (Bonferroni at 0.1). Embeddings
come from all-MiniLM-L6-v2 when ``trustlab[text]`` is installed, else from fixed random word
vectors (a bag-of-words stand-in), and the report says which.

References
----------
.. [1] Movva, Peng, Garg, Kleinberg, Pierson. "Sparse Autoencoders for Hypothesis
   Generation". ICML 2025.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from trustlab.errors import MissingDependencyError, TrustlabError

if TYPE_CHECKING:
    from trustlab.audit.section import AuditContext

__all__ = ["MAX_COLUMNS", "MIN_WORDS", "SOURCES", "text_columns", "text_hypotheses"]

MIN_WORDS = 3
"""Median words per value from which a screened-out text column is read as free text."""
MAX_COLUMNS = 2
"""Free-text columns analysed at most (declared ones first, each kind in the data's column order)."""
SOURCES = {
    "declared": "declared as text in the schema",
    "detected": "detected as free text by the column screening",
}
"""How a column came to be read as text, in the report's words."""
_MAX_TRAIN, _MAX_TEST = 4000, 2000
_N_HYPOTHESES = 10
_ALPHA = 0.1


def text_columns(ctx: AuditContext) -> list[tuple[str, float, str]]:
    """The columns read as free text, with their median word count and how they were found.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context (its ``schema``, ``column_flags`` and ``data``).

    Returns
    -------
    list of (str, float, str)
        At most :data:`MAX_COLUMNS` columns (never the target or a sensitive column), each
        with the median words of its text values and ``"declared"`` or ``"detected"``
        (:data:`SOURCES`): first the columns the schema declares as text that hold some
        text (whatever their word count; cells that are not strings are not read), then
        the columns flagged ``free_text`` or ``row_id`` whose values are all strings with a
        median of at least :data:`MIN_WORDS` words.
    """
    schema = getattr(ctx, "schema", None)
    declared = [str(c) for c in ctx.data.columns if schema is not None and schema.kind(str(c)) == "text"]
    flagged = [f["column"] for f in ctx.column_flags if f.get("kind") in ("free_text", "row_id")]
    out: list[tuple[str, float, str]] = []
    for col, source in [(c, "declared") for c in declared] + [(c, "detected") for c in flagged]:
        if col not in ctx.data.columns or col in (ctx.target, *ctx.sensitive) or col in [o[0] for o in out]:
            continue
        values = ctx.data[col].dropna()
        strings = values.map(lambda v: isinstance(v, str)).astype(bool)
        if source == "detected" and not strings.all():
            continue
        values = values[strings].astype(str)
        if values.empty:
            continue
        words = float(np.median(values.str.split().str.len()))
        if source == "declared" or words >= MIN_WORDS:
            out.append((str(col), words, source))
    return out[:MAX_COLUMNS]


def _encoder(encoder: Any, seed: int) -> tuple[Any, str]:
    from trustlab.explain.hypotheses import minilm_encoder, word_vector_encoder

    if encoder is not None:
        return encoder, f"the encoder passed ({getattr(encoder, '__name__', type(encoder).__name__)})"
    try:
        return minilm_encoder(), "all-MiniLM-L6-v2 sentence embeddings"
    except MissingDependencyError:
        return word_vector_encoder(64, random_state=seed), (
            'fixed random word vectors (a bag-of-words stand-in: pip install "trustlab[text]" for '
            "MiniLM sentence embeddings)"
        )


def _rows(index: np.ndarray, keep: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    rows = index[keep[index]]
    return np.sort(rng.choice(rows, cap, replace=False)) if rows.size > cap else rows


def text_hypotheses(ctx: AuditContext, encoder: Any = None) -> tuple[list[dict[str, Any]], list[str]]:
    """HypotheSAEs on each free-text column: hypotheses about the target, tested on held-out rows.

    The autoencoder has the authors' sizes (64 latents, ``k = 4`` below 10,000 training texts;
    256 and 8 from there) and trains for about 100 passes over the texts (200 to 2,000 steps of
    512), the number of passes of the authors' default (2,000 steps for about 10,000 texts).

    Parameters
    ----------
    ctx : AuditContext
        The audit's context (raw mode: the rows are read).
    encoder : callable, optional
        ``encoder(texts) -> ndarray (n, d)``; default: MiniLM when installed, else fixed random
        word vectors.

    Returns
    -------
    (list of dict, list of str)
        One entry per analysed column (``column``, ``source``: ``"declared"`` or ``"detected"``,
        ``median_words``, ``encoder``, ``n_train``, ``n_test``,
        ``threshold``, ``hypotheses``: label, coefficient, p-value, significant, prevalence),
        and the notes: which columns were read as text and why any was not analysed.
    """
    from trustlab.explain.hypotheses import HypotheSAEs, authors_sae

    columns = text_columns(ctx)
    if not columns:
        return [], []
    rng = np.random.default_rng(ctx.random_state)
    encode, encoder_name = _encoder(encoder, ctx.random_state)
    y = np.asarray(ctx.y, dtype=float)  # the outcome as 0/1
    results: list[dict[str, Any]] = []
    notes = []
    for col, words, source in columns:
        texts = ctx.data[col]
        keep = texts.map(lambda v: isinstance(v, str) and bool(v.strip())).to_numpy(dtype=bool)
        tr = _rows(ctx.train_index, keep, _MAX_TRAIN, rng)
        te = _rows(ctx.test_index, keep, _MAX_TEST, rng)
        small = tr.size < 10_000  # the authors' sizes: 64 latents, k 4 for ~1k texts; 256, 8 for ~10k
        steps = int(np.clip(100 * tr.size / 512, 200, 2000))
        sae = authors_sae(64 if small else 256, 4 if small else 8, steps, ctx.random_state)
        model = HypotheSAEs(sae, n_hypotheses=_N_HYPOTHESES, random_state=ctx.random_state)
        try:
            train_texts = texts.iloc[tr].astype(str).tolist()
            test_texts = texts.iloc[te].astype(str).tolist()
            model.fit(train_texts, y[tr], embeddings=encode(train_texts))
            test = model.score_hypotheses(test_texts, y[te], alpha=_ALPHA)
        except TrustlabError as exc:
            notes.append(f"Column {col!r} ({SOURCES[source]}) holds text, but no hypotheses about it: {exc}")
            continue
        table = test.table
        hyps = [
            {"label": str(label), "coef": float(c), "p_value": float(p), "significant": bool(sig),
             "prevalence": float(prev)}
            for label, c, p, sig, prev in zip(
                table["label"], table["coef"], table["p_value"], table["significant"], table["prevalence"],
                strict=True,
            )
        ]  # fmt: skip
        results.append(
            {
                "column": col,
                "source": source,
                "median_words": words,
                "encoder": encoder_name,
                "n_train": int(tr.size),
                "n_test": int(te.size),
                "threshold": float(test.threshold),
                "model": test.model,
                "hypotheses": hyps,
            }
        )
        used = "kept as a model feature as asked" if col in ctx.features else "left out of the model"
        unit = "word" if words == 1 else "words"
        notes.append(
            f"Column {col!r} was {SOURCES[source]} ({used}; median {words:.0f} {unit} per value): "
            f"HypotheSAEs (Movva et al., ICML 2025) found {test.n_significant} of {len(hyps)} hypotheses "
            f"about {ctx.target} significant on {te.size:,} held-out rows "
            f"({test.model}, Bonferroni {test.threshold:.3g}); embeddings: {encoder_name}. Labels are the "
            "n-grams that distinguish each latent's top texts (no language model offline): a hypothesis "
            "is an association in these rows, not a cause."
        )
    return results, notes
