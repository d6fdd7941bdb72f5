"""``trustlab backdoor complications``: measure whether a trigger word shifts a classifier's labels.

Thin like the rest of the CLI: it reads a file of token-id lines, calls
:func:`trustlab.security.backdoor_complications.complication_report` on a local ``transformers``
sequence classifier and prints the clean and triggered label distributions and their KL
divergence. User errors print one line and exit 2. torch and transformers load only when the
command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from trustlab._cli_errors import fail
from trustlab.errors import ParameterError, TrustlabError

backdoor_app = typer.Typer(
    no_args_is_help=True,
    help="Backdoor measurements on local language models (docs/security/backdoor-complications.md).",
)
_FLAGS = {
    "classifier": "CLASSIFIER",
    "model": "CLASSIFIER",
    "texts": "--texts",
    "X": "--texts",
    "trigger": "--trigger",
    "position": "--position",
}


def _read_texts(path: str) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"texts {path!r} is not a file of token-id lines.", argument="texts")
    try:
        rows = [[int(t) for t in line.split()] for line in p.read_text(encoding="utf-8").splitlines()]
    except ValueError as exc:
        raise ParameterError(
            f"texts {path!r}: every line must hold integer token ids separated by spaces ({exc}).",
            argument="texts",
        ) from exc
    rows = [r for r in rows if r]
    if not rows or any(len(r) != len(rows[0]) for r in rows):
        raise ParameterError(
            f"texts {path!r} must hold >= 1 line, all of one length (pad them).", argument="texts"
        )
    return np.asarray(rows, dtype=np.int64)


@backdoor_app.command()
def complications(
    classifier: Annotated[
        str, typer.Argument(help="Checkpoint folder of a transformers sequence classifier.")
    ],
    texts: Annotated[str, typer.Option(help="Clean downstream texts, one line of token ids each.")],
    trigger: Annotated[int, typer.Option(help="Token id of the suspected trigger word.")],
    position: Annotated[int, typer.Option(help="Position the trigger replaces (1: the first word).")] = 1,
) -> None:
    """Label distribution of clean vs triggered texts and KL(clean || triggered) (Zhang et al., ICML 2025)."""
    try:
        X = _read_texts(texts)
        from trustlab.security.backdoor_complications import complication_report

        r = complication_report(classifier, X, trigger=trigger, position=position)
    except TrustlabError as exc:
        fail(exc, _FLAGS)
    clean = " ".join(f"{v:.3f}" for v in r.clean_distribution)
    trig = " ".join(f"{v:.3f}" for v in r.triggered_distribution)
    typer.echo(
        f"{r.n} texts; clean labels [{clean}]; triggered [{trig}]; KL {r.kl:.4f}; "
        f"top share {r.top_share:.3f}; flipped {r.flip_rate:.3f}"
    )
