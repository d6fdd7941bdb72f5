"""The ``trustlab`` command line: thin, it parses, calls the library, prints.

Exit codes: 0 ok, 2 bad input (the message names the flag or column and the fix),
1 internal error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from trustlab.errors import TrustlabError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="trustlab: audits of privacy, explanations, fairness and calibration.",
)
err = Console(stderr=True)


@app.callback()
def _root() -> None:
    """trustlab: trustworthy-ML audits."""


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []


@app.command()
def audit(
    data: Annotated[
        Path | None,
        typer.Argument(help="CSV or Parquet file; the embedded Benefits data when omitted."),
    ] = None,
    target: Annotated[str | None, typer.Option(help="Binary outcome column.")] = None,
    sensitive: Annotated[str | None, typer.Option(help="Sensitive column(s), comma-separated.")] = None,
    model: Annotated[str, typer.Option(help="hgb | xgboost | lightgbm | logistic | PATH.pkl")] = "hgb",
    out: Annotated[Path, typer.Option(help="Output folder for report.html and report.json.")] = Path(
        "trustlab-report"
    ),
    private: Annotated[
        bool, typer.Option("--private", help="Release every figure with differential privacy.")
    ] = False,
    epsilon: Annotated[float | None, typer.Option(help="Total privacy budget (with --private).")] = None,
    schema: Annotated[
        Path | None,
        typer.Option(
            help="JSON file of public bounds and categories (needed with --private on your own data)."
        ),
    ] = None,
    positive: Annotated[str | None, typer.Option(help="Positive label of the target.")] = None,
    ignore: Annotated[str | None, typer.Option(help="Columns to leave out, comma-separated.")] = None,
    use_sensitive: Annotated[
        bool,
        typer.Option("--use-sensitive", help="Let the model use the sensitive columns as features."),
    ] = False,
    test_size: Annotated[float, typer.Option(help="Held-out share for evaluation.")] = 0.3,
    seed: Annotated[int, typer.Option(help="Seed of the split, model and bootstrap.")] = 0,
) -> None:
    """Audit a table and a model; write DIR/report.html and DIR/report.json."""
    from trustlab.audit import Audit
    from trustlab.datasets import Schema, load_default, load_table

    try:
        if data is None:
            frame, info, default_schema = load_default()
            name = f"{info.name} (embedded: Ecdat Benefits)"
            target = target or info.target
            sens = _split(sensitive) or list(info.sensitive)
            the_schema: Schema | None = Schema.from_json(schema) if schema else default_schema
        else:
            frame = load_table(data)
            name = data.name
            if not target:
                raise TrustlabError(
                    "--target is required with your own DATA: name the binary outcome column.",
                    argument="--target",
                )
            sens = _split(sensitive)
            if not sens:
                raise TrustlabError(
                    "--sensitive is required with your own DATA: name one or more columns, comma-separated.",
                    argument="--sensitive",
                )
            the_schema = Schema.from_json(schema) if schema else None
        runner = Audit(
            model=model,
            private=private,
            epsilon=epsilon,
            schema=the_schema,
            positive=positive,
            ignore=_split(ignore),
            use_sensitive=use_sensitive,
            test_size=test_size,
            random_state=seed,
        )
        with Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as progress:
            task = progress.add_task("auditing", total=None)
            report = runner.run(
                frame,
                target=target,
                sensitive=sens,
                dataset_name=name,
                progress=lambda msg: progress.update(task, description=msg),
            )
            progress.update(task, description="writing report")
            html_path, json_path = report.save(out)
    except TrustlabError as exc:
        flag = f" ({exc.argument})" if exc.argument else ""
        err.print(f"[bold red]error{escape(flag)}:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    status = str(report.meta.get("model_status", ""))
    if "constant 0.5" in status:
        err.print(f"[yellow]note:[/] {escape(status)}", highlight=False, soft_wrap=True)
    counts = report.status_counts
    mode = f"differentially private, epsilon={epsilon:g}" if private else "raw statistics"
    typer.echo(
        f"report written: {html_path} and {json_path} ({mode}); checks: {counts['pass']} passed, "
        f"{counts['fail']} failed, {counts['inconclusive']} inconclusive, "
        f"{counts['not_evaluable']} not evaluable"
    )


def main() -> None:
    """Entry point of the ``trustlab`` console script."""
    try:
        app()
    except SystemExit:
        raise
    except Exception as exc:
        err.print_exception()
        err.print(f"[bold red]internal error:[/] {exc}. Please report it.")
        sys.exit(1)


if __name__ == "__main__":
    main()
