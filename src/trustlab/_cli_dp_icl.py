"""``trustlab dp-icl``: DP synthetic in-context demonstrations from private labelled texts.

Thin: reads a local Hugging Face causal LM folder and a CSV or JSON-lines file of private
``(text, label)`` pairs, hands them to :func:`trustlab.privacy.dp_icl_text.dp_text_demonstrations`
(PTA or Tang et al.'s baseline, the budget charged on an accountant), and prints the synthetic
demonstrations and the privacy spent (``--json``: one JSON object). User errors print one line
and exit 2 (registered by trustlab.cli).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from trustlab._cli_errors import fail
from trustlab.errors import DataError, TrustlabError

_FLAGS = {
    "path": "MODEL",
    "model": "MODEL",
    "data": "DATA",
    "texts": "DATA",
    "labels": "DATA",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "n_per_label": "--demonstrations",
    "n_demonstrations": "--demonstrations",
    "shots": "--shots",
    "max_tokens": "--max-tokens",
    "max_demo_tokens": "--max-tokens",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "base_probability": "--no-base-probability",
    "alpha": "--alpha",
    "method": "--method",
    "n_subsets": "--subsets",
}


def _read_pairs(path: Path) -> tuple[list[str], list[str]]:
    """``(texts, labels)`` from a CSV with ``text`` and ``label`` columns or JSON lines of such objects."""
    if not path.is_file():
        raise DataError(
            f"data: no file {path}; give a .csv or .jsonl file of text,label pairs.", argument="data"
        )
    try:
        raw = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        raise DataError(f"data: cannot read {path} as UTF-8 text ({exc}).", argument="data") from None
    rows: list[Any]
    if path.suffix.lower() in (".jsonl", ".json"):
        rows = []
        for n, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    raise DataError(f"data: line {n} of {path} is not JSON.", argument="data") from None
    else:
        rows = list(csv.DictReader(raw.splitlines()))
    texts, labels = [], []
    for n, row in enumerate(rows, 1):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("text"), str)
            or row.get("label") in (None, "")
        ):
            raise DataError(
                f"data: record {n} of {path} needs a string 'text' and a non-empty 'label'.", argument="data"
            )
        texts.append(row["text"])
        labels.append(str(row["label"]))
    if not texts:
        raise DataError(f"data: {path} holds no text,label pairs.", argument="data")
    return texts, labels


def dp_icl(
    model: Annotated[Path, typer.Argument(help="Folder of a Hugging Face causal LM and its tokenizer.")],
    data: Annotated[Path, typer.Argument(help="Private pairs: .csv with text,label columns or .jsonl.")],
    epsilon: Annotated[float, typer.Option(help="Total privacy budget of all demonstrations.")],
    delta: Annotated[float, typer.Option(help="Total delta (below 1 / number of texts).")],
    demonstrations: Annotated[int, typer.Option(help="Synthetic demonstrations per label.")] = 1,
    shots: Annotated[int, typer.Option(help="Private texts per subset (N).")] = 1,
    max_tokens: Annotated[int, typer.Option(help="Tokens generated per demonstration (T).")] = 16,
    top_k: Annotated[int, typer.Option(help="Public vocabulary size (Tang et al.'s eq. 1).")] = 50,
    top_p: Annotated[float, typer.Option(help="Top-p cut of the public vocabulary (1 = off).")] = 1.0,
    alpha: Annotated[float, typer.Option(help="PTA's amplification strength.")] = 1.0,
    method: Annotated[str, typer.Option(help="pta or baseline (Tang et al.).")] = "pta",
    base_probability: Annotated[
        bool,
        typer.Option("--base-probability/--no-base-probability", help="PTA's p_base (off: ablation PA3)."),
    ] = True,
    subsets: Annotated[
        int | None,
        typer.Option(help="Algorithm 3: M subsets drawn afresh per token (amplification by subsampling)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """DP synthetic demonstrations (PTA, ICML 2025; Tang et al., ICLR 2024): docs/privacy/dp-icl.md."""
    from trustlab.lm import load_model, load_tokenizer
    from trustlab.privacy import Accountant
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    try:
        texts, labels = _read_pairs(data)
        acc = Accountant(epsilon, delta, name="dp-icl")
        lm = load_model(model).eval()
        tokenizer = load_tokenizer(model)
        if tokenizer is None:
            raise DataError(
                f"MODEL: no tokenizer in {model}; save the tokenizer beside the model.", argument="model"
            )
        out = dp_text_demonstrations(
            lm,
            tokenizer,
            texts,
            labels,
            epsilon=epsilon,
            delta=delta,
            n_per_label=demonstrations,
            shots=shots,
            max_tokens=max_tokens,
            top_k=top_k,
            top_p=top_p,
            alpha=alpha,
            method=method,
            base_probability=base_probability,
            n_subsets=subsets,
            accountant=acc,
        )
    except TrustlabError as exc:
        fail(exc, _FLAGS)
    summary = out.to_dict()
    summary["privacy"]["spent_epsilon"] = acc.spent_epsilon
    summary["privacy"]["spent_delta"] = acc.spent_delta
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    for item in summary["demonstrations"]:
        typer.echo(f"{item['label']}: {item['text']}")
    typer.echo(
        f"privacy spent: epsilon={acc.spent_epsilon:g}, delta={acc.spent_delta:g} "
        f"({len(out.releases)} labels; {summary['privacy']['neighbouring']})"
    )
