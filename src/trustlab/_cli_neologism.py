"""``trustlab explain neologism``: learn a new word for a local causal LM (registered by trustlab.cli).

Thin: loads the checkpoint and its tokenizer offline, reads the preference pairs (JSON lines with
``prompt``, ``chosen`` and ``rejected``), fits :class:`trustlab.explain.neologisms.NeologismLearner`
and writes the exported model (the word as a real vocabulary entry) with its tokenizer. User
errors print one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trustlab._cli_errors import fail
from trustlab.errors import DataError, ModelError, TrustlabError

_FLAGS = {
    "path": "MODEL_DIR",
    "model": "MODEL_DIR",
    "tokenizer": "MODEL_DIR",
    "pairs": "PAIRS",
    "prompts": "PAIRS",
    "chosen": "PAIRS",
    "rejected": "PAIRS",
    "token": "--token",
    "init": "--init",
    "loss": "--loss",
    "beta": "--beta",
    "lr": "--lr",
    "n_epochs": "--epochs",
}


def _pairs(path: Path) -> tuple[list[str], list[str], list[str]]:
    if not path.is_file():
        raise DataError(f"no file at {path}; pass a JSON-lines file of preference pairs.", argument="pairs")
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(f"line {i} of {path.name} is not JSON ({exc}).", argument="pairs") from exc
        if not isinstance(row, dict) or not {"prompt", "chosen", "rejected"} <= set(row):
            raise DataError(
                f'line {i} of {path.name} needs "prompt", "chosen" and "rejected" entries.', argument="pairs"
            )
        rows.append(row)
    if not rows:
        raise DataError(
            f"{path.name} holds no preference pairs; write one JSON object per line.", argument="pairs"
        )
    return [r["prompt"] for r in rows], [r["chosen"] for r in rows], [r["rejected"] for r in rows]


def neologism(
    model_dir: Annotated[
        Path, typer.Argument(help="A local causal-LM checkpoint folder with its tokenizer.")
    ],
    pairs: Annotated[
        Path, typer.Argument(help='JSON lines: {"prompt", "chosen", "rejected"}; prompts use TOKEN.')
    ],
    out: Annotated[Path, typer.Option(help="Folder for the model with the new word, and its tokenizer.")],
    token: Annotated[str, typer.Option(help="The new word (not in the vocabulary).")] = "<neo>",
    init: Annotated[
        str | None, typer.Option(help="Existing word whose embedding starts the new one.")
    ] = None,
    loss: Annotated[str, typer.Option(help="'apo-up' (the paper), 'dpo' or 'nll'.")] = "apo-up",
    beta: Annotated[float, typer.Option(help="Preference-loss beta.")] = 0.1,
    lr: Annotated[float, typer.Option(help="Adam's learning rate on the new embedding.")] = 1e-2,
    epochs: Annotated[int, typer.Option(help="Passes over the pairs.")] = 20,
    seed: Annotated[int, typer.Option(help="Seeds the initial draw and the batch order.")] = 0,
) -> None:
    """Learn TOKEN's embedding from PAIRS with the model frozen (docs/explain/neologisms.md)."""
    from trustlab.explain.neologisms import NeologismLearner
    from trustlab.lm import load_model, load_tokenizer, save_model

    try:
        prompts, chosen, rejected = _pairs(pairs)  # read first: a bad file fails before any loading
        model = load_model(model_dir)
        tokenizer = load_tokenizer(model_dir)
        if tokenizer is None:
            raise ModelError(
                f"{model_dir} has no tokenizer.json; save the tokenizer beside the model.",
                argument="tokenizer",
            )
        learner = NeologismLearner(
            model,
            tokenizer,
            token,
            init=init,
            loss=loss,
            beta=beta,
            lr=lr,
            n_epochs=epochs,
            random_state=seed,
        )
        learner.fit(prompts, chosen, rejected)
        grown, tok = learner.export()
        save_model(grown, out, tok)
    except TrustlabError as exc:
        fail(exc, _FLAGS)
    near = ", ".join(learner.nearest_tokens(3)["token"])
    typer.echo(
        f"learned {token} (id {learner.token_id_}, {learner.embedding_.size} weights), {len(prompts)} pairs: "
        f"loss {learner.loss_history_[0]:.3f} -> {learner.loss_history_[-1]:.3f}; nearest words: {near}"
    )
    typer.echo(f"saved the model with {token} to {out}")
