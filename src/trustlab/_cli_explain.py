"""``trustlab explain hypotheses``: HypotheSAEs on a CSV's text column (registered by trustlab.cli).

Thin: reads the table, embeds the text column (MiniLM offline, or the dependency-free word-vector
encoder), fits :class:`trustlab.explain.hypotheses.HypotheSAEs` on a training split, tests the
hypotheses on the held-out rest and prints one line per hypothesis. User errors print one line
and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from trustlab._cli_errors import fail, stderr
from trustlab.errors import DataError, ParameterError, TrustlabError

explain_app = typer.Typer(no_args_is_help=True, help="Explanations from the command line (docs/explain/).")
_err = stderr
_FLAGS = {
    "texts": "--text-column",
    "embeddings": "--encoder",
    "y": "--target",
    "n_hypotheses": "--n-hypotheses",
    "holdout": "--holdout",
    "n_latents": "--latents",
    "k": "--k",
    "n_steps": "--steps",
    "data": "DATA",
}


def _fail(exc: TrustlabError) -> NoReturn:
    fail(exc, _FLAGS)


@explain_app.command("hypotheses")
def hypotheses(
    data: Annotated[Path, typer.Argument(help="CSV file with a text column and a target column.")],
    text_column: Annotated[str, typer.Option(help="Column holding the texts.")],
    target: Annotated[str, typer.Option(help="Numeric or binary target column.")],
    encoder: Annotated[
        str, typer.Option(help="'minilm' (all-MiniLM-L6-v2, offline) or 'words' (random word vectors).")
    ] = "minilm",
    n_hypotheses: Annotated[int, typer.Option(help="Latents to select and label (the paper's H).")] = 10,
    latents: Annotated[int, typer.Option(help="SAE dictionary size M (authors: 64 for ~1k texts).")] = 64,
    k: Annotated[int, typer.Option(help="Active latents per text K (authors: 4 for ~1k texts).")] = 4,
    steps: Annotated[int, typer.Option(help="SAE training steps.")] = 1000,
    holdout: Annotated[float, typer.Option(help="Share of rows held out to test the hypotheses.")] = 0.3,
    seed: Annotated[int, typer.Option(help="Seeds the split, the SAE and the labeller.")] = 0,
) -> None:
    """Hypotheses about TARGET from TEXT_COLUMN (HypotheSAEs, docs/explain/hypothesaes.md).

    Labels are distinguishing n-grams (no LLM offline); significance is the held-out joint
    regression with a Bonferroni correction at 0.1.
    """
    import numpy as np
    import pandas as pd

    from trustlab.explain.hypotheses import HypotheSAEs, authors_sae, minilm_encoder, word_vector_encoder

    try:
        if not data.is_file():
            raise DataError(f"no file at {data}; pass a CSV path.", argument="data")
        frame = pd.read_csv(data)
        for col, flag in ((text_column, "texts"), (target, "y")):
            if col not in frame.columns:
                raise DataError(f"column {col!r} is not in {list(frame.columns)[:10]}.", argument=flag)
        if not 0 < holdout < 1:
            raise ParameterError(f"holdout must lie in (0, 1), got {holdout}.", argument="holdout")
        if encoder not in ("minilm", "words"):
            raise ParameterError(
                f"encoder must be 'minilm' or 'words', got {encoder!r}.", argument="embeddings"
            )
        frame = frame.dropna(subset=[text_column, target])
        texts = frame[text_column].astype(str).tolist()
        y = pd.to_numeric(frame[target], errors="coerce")
        if y.isna().any():
            y = pd.Series(pd.factorize(frame[target], sort=True)[0], index=frame.index).astype(float)
        order = np.random.default_rng(seed).permutation(len(texts))
        cut = round((1 - holdout) * len(texts))
        tr, te = order[:cut], order[cut:]
        encode = minilm_encoder() if encoder == "minilm" else word_vector_encoder(64, random_state=seed)
        emb = np.asarray(encode(texts))
        sae = authors_sae(latents, k, steps, seed)
        model = HypotheSAEs(sae, n_hypotheses=n_hypotheses, random_state=seed)
        model.fit([texts[i] for i in tr], y.to_numpy()[tr], embeddings=emb[tr])
        res = model.score_hypotheses([texts[i] for i in te], y.to_numpy()[te], embeddings=emb[te])
    except TrustlabError as exc:
        _fail(exc)
    for row in res.table.itertuples():
        mark = "*" if row.significant else " "
        typer.echo(f"{mark} {row.coef:+7.2f}  p={row.p_value:.2g}  {row.label}")
    typer.echo(
        f"{res.n_significant} of {len(res.table)} hypotheses significant at Bonferroni {res.threshold:.3g} "
        f"({res.model}, held-out {len(te)} of {len(texts)} rows)"
    )


_CBM_FLAGS = {
    "C": "--concepts",
    "y": "--target",
    "X": "DATA",
    "data": "DATA",
    "concept_loss": "--loss",
    "training": "--training",
    "n_epochs": "--epochs",
    "holdout": "--holdout",
}


@explain_app.command("cbm")
def cbm(
    data: Annotated[Path, typer.Argument(help="CSV file with feature, concept and target columns.")],
    concepts: Annotated[str, typer.Option(help="Comma-separated 0/1 concept columns.")],
    target: Annotated[str, typer.Option(help="Task label column.")],
    loss: Annotated[str, typer.Option(help="Concept loss: 'cpo' (noise-robust) or 'bce'.")] = "cpo",
    training: Annotated[str, typer.Option(help="'sequential', 'joint' or 'independent'.")] = "sequential",
    epochs: Annotated[int, typer.Option(help="Passes over the data per stage.")] = 30,
    holdout: Annotated[float, typer.Option(help="Share of rows held out for the accuracies.")] = 0.3,
    seed: Annotated[int, typer.Option(help="Seeds the split and the model.")] = 0,
) -> None:
    """Concept bottleneck model on a CSV: every other numeric column is an input (docs/explain/cbm.md).

    Prints the held-out accuracy of each concept, the mean concept accuracy and the task accuracy.
    """
    import numpy as np
    import pandas as pd

    from trustlab.explain.cbm import ConceptBottleneckModel

    try:
        if not data.is_file():
            raise DataError(f"no file at {data}; pass a CSV path.", argument="data")
        frame = pd.read_csv(data)
        names = [c.strip() for c in concepts.split(",") if c.strip()]
        for col, arg in [*((c, "C") for c in names), (target, "y")]:
            if col not in frame.columns:
                raise DataError(f"column {col!r} is not in {list(frame.columns)[:10]}.", argument=arg)
        if not 0 < holdout < 1:
            raise ParameterError(f"holdout must lie in (0, 1), got {holdout}.", argument="holdout")
        inputs = [c for c in frame.select_dtypes("number").columns if c not in {*names, target}]
        if not inputs:
            raise DataError(
                "no numeric input column is left besides the concepts and the target.", argument="X"
            )
        order = np.random.default_rng(seed).permutation(len(frame))
        cut = round((1 - holdout) * len(frame))
        tr, te = order[:cut], order[cut:]
        X = frame[inputs].to_numpy(dtype=float)
        mu, sd = X[tr].mean(0), X[tr].std(0)  # standardised on the training rows
        X = (X - mu) / np.where(sd > 0, sd, 1.0)
        C, y = frame[names].to_numpy(), frame[target].to_numpy()
        model = ConceptBottleneckModel(
            concept_loss=loss, training=training, n_epochs=epochs, random_state=seed
        )
        model.fit(X[tr], C[tr], y[tr])
        per_concept = (model.predict_concepts(X[te]) == C[te]).mean(0)
        task = model.score(X[te], y[te])
    except TrustlabError as exc:
        fail(exc, _CBM_FLAGS)
    for name, acc in zip(names, per_concept, strict=True):
        typer.echo(f"{acc:.3f}  {name}")
    typer.echo(
        f"concept accuracy {per_concept.mean():.3f}, task accuracy {task:.3f} "
        f"({loss.upper()} CBM, {len(inputs)} inputs, held-out {len(te)} of {len(frame)} rows)"
    )
