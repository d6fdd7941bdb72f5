"""``trustlab backdoor``: backdoor measurements from the command line.

``complications`` measures whether a trigger word shifts a classifier's labels: it reads a file
of token-id lines, calls :func:`trustlab.security.backdoor_complications.complication_report` on
a local ``transformers`` sequence classifier and prints the clean and triggered label
distributions and their KL divergence. ``mixbridge`` scores the lab's single backdoored bridge
and MixBridge (:func:`trustlab.security.mixbridge_lab.compare_digits_models`). Thin like the rest
of the CLI: user errors print one line and exit 2; torch and transformers load only when a
command runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from trustlab._cli_errors import fail
from trustlab.errors import ParameterError, TrustlabError

backdoor_app = typer.Typer(
    no_args_is_help=True,
    help="Backdoor measurements (docs/security/backdoor-complications.md, docs/security/mixbridge.md).",
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


_MIX_FLAGS = {
    "n": "--n",
    "task": "--task",
    "nfe": "--nfe",
    "random_state": "--seed",
    "cache_dir": "--cache-dir",
}
_TASK_LINE = {"sr": "2x super-resolution", "inpaint": "inpainting of free-form holes (20-30%)"}


@backdoor_app.command()
def mixbridge(
    n: Annotated[int, typer.Option(help="Held-out digits per task (2-540).")] = 150,
    task: Annotated[
        str, typer.Option(help="Benign task: sr (2x super-resolution) or inpaint (free-form holes, 20-30%).")
    ] = "sr",
    nfe: Annotated[int, typer.Option(help="Bridge sampling steps.")] = 5,
    seed: Annotated[int, typer.Option(help="Sampler seed.")] = 0,
    cache_dir: Annotated[
        str | None,
        typer.Option(help="Train the shipped recipe into this cache (minutes, once) instead of loading it."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
) -> None:
    """Single backdoored bridge vs MixBridge on the lab's digits (Qin et al., ICML 2025).

    The benign task is 2x super-resolution (``--task sr``) or inpainting (``--task inpaint``).

    Prints per-trigger ASR and backdoor MSE, benign MSE, the FID-like distance, the target
    similarity and the router entropy of each model.
    """
    try:
        from trustlab.security.mixbridge_lab import compare_digits_models

        reports = compare_digits_models(n, task=task, nfe=nfe, random_state=seed, cache_dir=cache_dir)
    except TrustlabError as exc:
        fail(exc, _MIX_FLAGS)
    if as_json:
        rows = {
            name: {
                "n": r.n,
                "attack_success": list(r.attack_success),
                "backdoor_mse": list(r.backdoor_mse),
                "benign_mse": r.benign_mse,
                "benign_fid_like": r.benign_fid,
                "target_similarity": list(r.target_similarity or ()),
                "router_entropy": None if r.router_entropy is None else list(r.router_entropy),
            }
            for name, r in reports.items()
        }
        typer.echo(json.dumps({"n": n, "task": task, "nfe": nfe, "seed": seed, "models": rows}, indent=2))
        return

    def cells(values: tuple[float, ...] | None, fmt: str = ".2f") -> str:
        return "-" if values is None else "/".join(f"{v:{fmt}}" for v in values)

    typer.echo(
        f"{n} held-out digits per task, {_TASK_LINE[task]}, nfe {nfe}; "
        "triggers: zeros / inverted threes / diamonds"
    )
    typer.echo(
        f"{'model':<14} {'ASR':<15} {'backdoor MSE':<18} {'benign MSE':>10} {'FID-like':>9} "
        f"{'target sim':<17} router entropy"
    )
    for name, r in reports.items():
        typer.echo(
            f"{name:<14} {cells(r.attack_success):<15} {cells(r.backdoor_mse, '.3f'):<18} "
            f"{r.benign_mse:>10.4f} {r.benign_fid:>9.3f} {cells(r.target_similarity, '.3f'):<17} "
            f"{cells(r.router_entropy)}"
        )
