"""``trustlab overlap``: n-gram overlap of a test set with training files (registered by trustlab.cli).

Thin: hands the paths to :func:`trustlab.evaluation.train_test_overlap`, which reads the training
files incrementally (text files, JSON lines, ``.gz``, folders), and prints the statistics to
publish as JSON; ``--out`` also writes the per-instance metrics as CSV. User errors print one line
and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trustlab._cli_errors import fail
from trustlab.errors import DataError, TrustlabError

_FLAGS = {"train": "TRAIN", "test": "--test", "n": "--n", "max_frequency": "--max-frequency", "out": "--out"}


def overlap(
    train: Annotated[
        list[Path],
        typer.Argument(help="Training files or folders: UTF-8 text (one document each) or .jsonl (.gz)."),
    ],
    test: Annotated[
        Path, typer.Option(help='Test instances: .jsonl, one {"text": ...} or JSON string per line.')
    ],
    n: Annotated[int, typer.Option("--n", help="n-gram length in tokens (13: GPT-3, HELM).")] = 13,
    max_frequency: Annotated[
        int, typer.Option(help="HELM's frequency filter for --out's metrics (0: none; HELM also uses 10).")
    ] = 0,
    out: Annotated[Path | None, typer.Option(help="CSV file for the per-instance metrics.")] = None,
) -> None:
    """Overlap of the test set with TRAIN, read as a stream (docs/evaluation/overlap.md)."""
    from trustlab.evaluation import train_test_overlap

    try:
        if out is not None and not out.parent.is_dir():
            raise DataError(f"out: no folder {out.parent}; create it or pick another path.", argument="out")
        report = train_test_overlap(train, test, n=n)
        metrics = report.metrics(max_frequency=max_frequency)
    except TrustlabError as exc:
        fail(exc, _FLAGS)
    if out is not None:
        metrics.insert(0, "n_ngrams", report.n_ngrams)
        metrics.insert(1, "n_overlapping", report.n_overlapping)
        metrics.to_csv(out, index_label="instance")
    typer.echo(json.dumps(report.summary(), indent=2))
