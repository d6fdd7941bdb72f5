"""``trustlab explain hypotheses``: HypotheSAEs on a CSV's text column (registered by trustlab.cli).

Thin: reads the table, embeds the text column (MiniLM offline, or the dependency-free word-vector
encoder), fits :class:`trustlab.explain.hypotheses.HypotheSAEs` on a training split, tests the
hypotheses on the held-out rest and prints one line per hypothesis. ``trustlab explain cbm`` fits
a concept bottleneck model on a CSV; ``trustlab explain probe`` compares SAE probes with baseline
probes on a user's .npy activations (:func:`trustlab.explain.probing.compare_probes`). User errors
print one line and exit 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

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


_PROBE_FLAGS = {
    "activations": "ACTIVATIONS",
    "X": "ACTIVATIONS",
    "labels": "LABELS",
    "y": "LABELS",
    "sae_activations": "--sae-activations",
    "shift_activations": "--shift-activations",
    "X_shift": "--shift-activations",
    "y_shift": "--shift-labels",
    "regimes": "--regimes",
    "methods": "--methods",
    "sae_ks": "--sae-k",
    "sae_method": "--sae-k",
    "n_seeds": "--seeds",
    "n_train": "--train",
    "n_hparams": "--hparams",
    "test_size": "--test-size",
    "n_latents": "--latents",
    "k": "--active",
    "architecture": "--architecture",
    "n_steps": "--steps",
    "learning_rate": "--lr",
}


def _load_activations(path: Path, argument: str) -> Any:
    """A finite 2-D float array from a .npy file; DataError naming ``argument`` otherwise."""
    import numpy as np

    if not path.is_file():
        raise DataError(f"no file at {path}; pass a .npy array of shape (n, d).", argument=argument)
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(
            f"{path} is not a .npy array of numbers; write it with numpy.save (object arrays are refused).",
            argument=argument,
        ) from exc
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1 or arr.dtype.kind not in "biuf":
        raise DataError(
            f"{path} must hold a numeric (n, d) array, got dtype {arr.dtype} and shape {arr.shape}.",
            argument=argument,
        )
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        bad = int((~np.isfinite(arr)).any(1).sum())
        raise DataError(
            f"{path} holds NaN or infinite values in {bad} of {arr.shape[0]} rows; drop or repair them.",
            argument=argument,
        )
    return arr


def _load_labels(path: Path, n: int, argument: str) -> Any:
    """Binary labels from a .npy (n,) / (n, 1) array or a one-column CSV (header optional)."""
    import numpy as np
    import pandas as pd

    if not path.is_file():
        raise DataError(f"no file at {path}; pass a .npy or one-column .csv.", argument=argument)
    try:
        if path.suffix.lower() == ".npy":
            arr = np.load(path, allow_pickle=False)
        else:
            arr = pd.read_csv(path, header=None, dtype=str, skip_blank_lines=False).to_numpy()
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{path} cannot be read ({exc}).", argument=argument) from exc
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(f"{path} must hold one column of labels, got shape {arr.shape}.", argument=argument)
    values = pd.Series(arr)
    if values.isna().any():
        raise DataError(f"{int(values.isna().sum())} labels in {path} are missing.", argument=argument)
    if arr.dtype.kind in "OUS":
        values = values.astype(str).str.strip()
        if values.iloc[1:].nunique() == 2 and values.iloc[0] not in set(values.iloc[1:]):
            values = values.iloc[1:]  # a header line
        numeric = pd.to_numeric(values, errors="coerce")
        if not numeric.isna().any():
            values = numeric
    distinct = values.unique()
    if len(distinct) != 2:
        raise DataError(
            f"labels must take exactly two values (binary), got {len(distinct)} "
            f"({[str(v) for v in distinct[:5]]}).",
            argument=argument,
        )
    if len(values) != n:
        raise DataError(
            f"{path} has {len(values)} labels but the activations have {n} rows; pass one label per row.",
            argument=argument,
        )
    return values.to_numpy()


def _parse_regimes(spec: str) -> dict[str, Any]:
    """``"scarcity,noise=0.1/0.3"``: each regime with the paper's grid or the values after ``=``."""
    plan: dict[str, Any] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, _, vals = item.partition("=")
        try:
            values = [float(v) for v in vals.split("/")] if vals else None
        except ValueError as exc:
            raise ParameterError(
                f"regimes: values of {name!r} must be numbers separated by '/', got {vals!r}.",
                argument="regimes",
            ) from exc
        plan[name.strip()] = values
    if not plan:
        raise ParameterError("regimes must name at least one regime.", argument="regimes")
    return plan


class _LazySAE:
    """An SAE trained on ``X_sae`` at its first ``transform``, after compare_probes's checks.

    A bad flag is then reported at once rather than after the SAE's training.
    """

    def __init__(self, sae: Any, X_sae: Any) -> None:
        self.sae, self.X_sae, self.fitted = sae, X_sae, False

    def transform(self, X: Any) -> Any:
        if not self.fitted:
            self.sae.fit(self.X_sae)
            self.fitted = True
        return self.sae.transform(X)


@explain_app.command("probe")
def probe(
    activations: Annotated[Path, typer.Argument(help=".npy file: (n, d) float activations.")],
    labels: Annotated[Path, typer.Argument(help=".npy or one-column .csv: a binary label per row.")],
    sae_k: Annotated[
        str, typer.Option(help="Latents per SAE probe, comma-separated (the paper's k).")
    ] = "16,128",
    no_sae: Annotated[bool, typer.Option("--no-sae", help="Baselines only: train no SAE.")] = False,
    regimes: Annotated[
        str,
        typer.Option(
            help="Comma-separated scarcity, imbalance, noise, standard, shift; the paper's grid, or "
            "own values after '=' separated by '/' (scarcity=8/64,noise=0.3)."
        ),
    ] = "scarcity,imbalance,noise",
    methods: Annotated[str, typer.Option(help="Baselines: logreg, pca, knn, xgboost, mlp.")] = (
        "logreg,pca,knn,xgboost,mlp"
    ),
    seeds: Annotated[int, typer.Option(help="Repetitions of every regime cell.")] = 1,
    train: Annotated[int, typer.Option(help="Training rows outside the scarcity regime.")] = 1024,
    hparams: Annotated[int, typer.Option(help="Hyperparameter values tried per method.")] = 10,
    test_size: Annotated[float, typer.Option(help="Share of rows held out for the test AUC.")] = 0.2,
    latents: Annotated[int, typer.Option(help="SAE dictionary size.")] = 256,
    active: Annotated[int, typer.Option(help="SAE active latents per row (TopK k).")] = 16,
    architecture: Annotated[str, typer.Option(help="SAE: topk, batchtopk, matryoshka or relu.")] = "topk",
    steps: Annotated[int, typer.Option(help="SAE training steps.")] = 2000,
    lr: Annotated[float, typer.Option(help="SAE learning rate (Adam).")] = 3e-4,
    sae_activations: Annotated[
        Path | None,
        typer.Option(help="Unlabelled .npy activations to train the SAE on (default: ACTIVATIONS)."),
    ] = None,
    shift_activations: Annotated[
        Path | None, typer.Option(help=".npy covariate-shifted test activations (the shift regime).")
    ] = None,
    shift_labels: Annotated[Path | None, typer.Option(help="Labels of --shift-activations.")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the SAE, the splits and the probes.")] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
) -> None:
    """SAE probes vs baselines on ACTIVATIONS (Kantamneni et al., ICML 2025): docs/explain/sae-probing.md.

    Prints, per regime, the gain in test AUC of adding SAE probes (quiver of arrows; head to head
    against logistic regression under label noise and shift), its standard error over the cells and
    the SAE win rate, then each method's mean test AUC.
    """
    import json

    import numpy as np

    from trustlab.explain.probing import BASELINE_METHODS, compare_probes, summarize_probes
    from trustlab.explain.sae import SparseAutoencoder

    try:
        X = _load_activations(activations, "activations")
        y = _load_labels(labels, X.shape[0], "labels")
        plan = _parse_regimes(regimes)
        names = [m.strip() for m in methods.split(",") if m.strip()]
        try:
            ks = [int(k) for k in sae_k.split(",") if k.strip()]
        except ValueError as exc:
            raise ParameterError(
                f"sae_ks must be integers like 16,128, got {sae_k!r}.", argument="sae_ks"
            ) from exc
        unknown = [m for m in names if m not in BASELINE_METHODS]
        if unknown or not names:
            raise ParameterError(
                f"methods must be a non-empty list from {', '.join(BASELINE_METHODS)}, "
                f"got {unknown or methods!r}.",
                argument="methods",
            )
        if not no_sae and any(r in plan for r in ("noise", "shift")) and "logreg" not in names:
            raise ParameterError(
                "methods must include logreg when regimes has noise or shift (the SAE probe is compared "
                "head to head with logistic regression there).",
                argument="methods",
            )
        X_shift = y_shift = None
        if "shift" in plan:
            if shift_activations is None or shift_labels is None:
                raise ParameterError(
                    "regimes: shift needs --shift-activations and --shift-labels (a shifted test set).",
                    argument="regimes",
                )
            X_shift = _load_activations(shift_activations, "shift_activations")
            y_shift = _load_labels(shift_labels, X_shift.shape[0], "y_shift")
        sae = None
        if not no_sae:
            X_sae = X if sae_activations is None else _load_activations(sae_activations, "sae_activations")
            if X_sae.shape[1] != X.shape[1]:
                raise DataError(
                    f"sae_activations must have {X.shape[1]} columns like ACTIVATIONS, got {X_sae.shape[1]}.",
                    argument="sae_activations",
                )
            if architecture not in ("topk", "batchtopk", "matryoshka", "relu"):
                raise ParameterError(
                    f"architecture must be topk, batchtopk, matryoshka or relu, got {architecture!r}.",
                    argument="architecture",
                )
            sae = SparseAutoencoder(
                latents, architecture=architecture, k=active, batch_size=min(2048, X_sae.shape[0]),
                n_steps=steps, learning_rate=lr, random_state=seed,
            )  # fmt: skip
        table = compare_probes(
            X, y, None if sae is None else _LazySAE(sae, X_sae), regimes=plan, methods=names, sae_ks=ks,
            X_shift=X_shift, y_shift=y_shift,
            n_seeds=seeds, n_train=train, n_hparams=hparams, test_size=test_size, random_state=seed,
        )  # fmt: skip
        summary = None if sae is None else summarize_probes(table, by_value=False)
    except TrustlabError as exc:
        fail(exc, _PROBE_FLAGS)
    arms = table[table["family"] != "quiver"]
    mean_auc = {str(m): float(a) for m, a in arms.groupby("method", sort=False)["test_auc"].mean().items()}
    head = [int(k) for k in arms["k"].dropna()]
    big = f"sae_k{max(head)}" if head else None
    setup = {
        "rows": int(X.shape[0]),
        "dims": int(X.shape[1]),
        "sae": None
        if sae is None
        else {"architecture": architecture, "latents": latents, "active": active, "steps": steps,
              "trained_on_rows": int(X_sae.shape[0])},
    }  # fmt: skip

    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not np.isfinite(v) else v

    records = []
    if summary is not None:
        for row in summary.to_dict("records"):
            against = (
                "quiver" if row["regime"] in ("standard", "scarcity", "imbalance") else f"{big} vs logreg"
            )
            records.append({k: clean(v) for k, v in row.items()} | {"compared": against})
    if as_json:
        out = {"summary": records, "mean_test_auc": {k: clean(v) for k, v in mean_auc.items()}, **setup}
        typer.echo(json.dumps(out, indent=2))
        return
    if records:
        typer.echo(f"{'regime':<10} {'compared':<18} {'cells':>5} {'gain':>7} {'SE':>6} {'win':>5}")
        for r in records:
            se = "-" if r["se_gain"] is None else f"{r['se_gain']:.3f}"
            typer.echo(
                f"{r['regime']:<10} {r['compared']:<18} {r['n_cells']:>5} {r['mean_gain']:>+7.3f} "
                f"{se:>6} {r['win_rate']:>5.2f}"
            )
    typer.echo("mean test AUC: " + ", ".join(f"{m} {a:.3f}" for m, a in mean_auc.items()))
    what = "baselines only" if sae is None else f"{architecture} SAE, {latents} latents, k={active}"
    typer.echo(
        f"({what}; {X.shape[0]} rows x {X.shape[1]} dims; gain = SAE side - baseline side in test AUC)"
    )
