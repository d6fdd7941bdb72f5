"""``trustlab steering transfer``: carry a steering vector from one local causal LM to another.

Thin like the rest of the CLI: it reads token-id files, calls
:mod:`trustlab.security.steering_transfer`, writes the vectors it was asked for and prints one
summary line. User errors print one line and exit 2. torch and transformers load only when the
command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import numpy as np
import typer

from trustlab._cli_errors import fail
from trustlab.errors import ParameterError, TrustlabError

steering_app = typer.Typer(
    no_args_is_help=True,
    help="Steering vectors across models via a learned activation map (docs/security/steering-transfer.md).",
)
_FLAGS = {
    "path": "SOURCE/TARGET",
    "source": "SOURCE",
    "target": "TARGET",
    "source_hook": "--source-hook",
    "target_hook": "--target-hook",
    "hook": "--source-hook",
    "sequences": "--corpus",
    "kind": "--kind",
    "epochs": "--epochs",
    "lr": "--lr",
    "corpus": "--corpus",
    "undesired": "--undesired",
    "desired": "--desired",
    "out": "--out",
}


def _fail(exc: TrustlabError) -> NoReturn:
    fail(exc, _FLAGS)


def _read_ids(path: str, name: str, *, pad_id: int | None) -> np.ndarray:
    """One sequence per line, token ids separated by spaces; ragged lines right-padded with pad_id."""
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"{name} {path!r} is not a file of token-id lines.", argument=name)
    try:
        rows = [[int(t) for t in line.split()] for line in p.read_text(encoding="utf-8").splitlines()]
    except ValueError as exc:
        raise ParameterError(
            f"{name} {path!r}: every line must hold integer token ids separated by spaces ({exc}).",
            argument=name,
        ) from exc
    rows = [r for r in rows if r]
    if not rows:
        raise ParameterError(f"{name} {path!r} holds no sequence.", argument=name)
    width = max(map(len, rows))
    if any(len(r) != width for r in rows):
        if pad_id is None:
            raise ParameterError(
                f"{name} {path!r} has lines of unequal length; give --pad-id to right-pad the corpus "
                "(prompt files must have equal lengths).",
                argument=name,
            )
        rows = [r + [pad_id] * (width - len(r)) for r in rows]
    return np.asarray(rows, dtype=np.int64)


@steering_app.command()
def transfer(
    source: Annotated[str, typer.Argument(help="Checkpoint folder of the source (small) model.")],
    target: Annotated[str, typer.Argument(help="Checkpoint folder of the target model (same vocabulary).")],
    corpus: Annotated[str, typer.Option(help="Shared sequences, one line of token ids each.")],
    undesired: Annotated[str, typer.Option(help="Prompts of the behaviour to steer (token-id lines).")],
    desired: Annotated[str, typer.Option(help="Contrasting prompts (token-id lines, same length).")],
    source_hook: Annotated[str, typer.Option(help="e.g. blocks.0.resid_post")] = "blocks.0.resid_post",
    target_hook: Annotated[str, typer.Option(help="e.g. blocks.1.resid_post")] = "blocks.0.resid_post",
    kind: Annotated[str, typer.Option(help="autoencoder or affine")] = "autoencoder",
    epochs: Annotated[int, typer.Option(help="Mapper epochs.")] = 3,
    lr: Annotated[float, typer.Option(help="Mapper learning rate.")] = 1e-3,
    pad_id: Annotated[int | None, typer.Option(help="Padding id of the corpus.")] = None,
    out: Annotated[str, typer.Option(help="Where the mapped vector is written (.npy).")] = "mapped.npy",
) -> None:
    """Fit a mapper on paired activations and write the source's steering vector mapped to the target."""
    try:
        if not out.strip():
            raise ParameterError("--out must name a file, got an empty string.", argument="out")
        ids = _read_ids(corpus, "corpus", pad_id=pad_id)
        und = _read_ids(undesired, "undesired", pad_id=None)
        des = _read_ids(desired, "desired", pad_id=None)
        from trustlab.lm import load_model
        from trustlab.security.steering_transfer import (
            ActivationMapper,
            collect_activations,
            paired_activations,
        )

        src, tgt = load_model(source), load_model(target)
        x, y = paired_activations(
            src, tgt, ids, source_hook=source_hook, target_hook=target_hook, pad_id=pad_id
        )
        mapper = ActivationMapper(kind, epochs=epochs, lr=lr).fit(x, y)
        a = collect_activations(src, und, hook=source_hook)
        b = collect_activations(src, des, hook=source_hook)
        vector = mapper.map_vector(a, b)
        np.save(out, vector)
    except TrustlabError as exc:
        _fail(exc)
    q = mapper.validation_
    fvu = f"{q.fvu:.3f}" if q is not None else "n/a"
    typer.echo(
        f"{kind} mapper on {len(x)} paired activations (held-out FVU {fvu}); mapped vector of norm "
        f"{float(np.linalg.norm(vector)):.3g} (width {vector.size}) written to {out}"
    )
