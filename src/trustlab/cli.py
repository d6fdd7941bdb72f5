"""The ``trustlab`` command line: thin, it parses, calls the library, prints.

Exit codes: 0 ok, 2 bad input (one line on stderr naming the flag or column and what is
allowed; never a traceback), 1 internal error (a bug: please report it), 130 interrupted
(Ctrl-C, at any moment: "aborted.", no traceback).
"""

from __future__ import annotations

import signal
import sys
from typing import Any


def _aborted_while_loading(signum: int, frame: Any) -> None:
    """Ctrl-C while the libraries load (seconds on a busy machine): one word and exit 130, no traceback."""
    sys.stderr.write("aborted.\n")
    raise SystemExit(130)


try:
    _previous_sigint: Any = signal.signal(signal.SIGINT, _aborted_while_loading)
except ValueError:  # imported outside the main thread: nothing to catch there
    _previous_sigint = None
try:
    import json
    import os
    import secrets
    import warnings
    from pathlib import Path
    from typing import Annotated, NoReturn

    import click
    import typer
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from trustlab._cli_backdoor import backdoor_app
    from trustlab._cli_dp_icl import dp_icl
    from trustlab._cli_errors import fail, one_line, stderr
    from trustlab._cli_explain import explain_app
    from trustlab._cli_lm import lm_app
    from trustlab._cli_neologism import neologism
    from trustlab._cli_overlap import overlap
    from trustlab._cli_secagg import secagg_app
    from trustlab._cli_steer import steering_app
    from trustlab._cli_text import perturb_prompt
    from trustlab._cli_unlearn import unlearn_app
    from trustlab._cli_watermark import watermark_app
    from trustlab.errors import ParameterError, TrustlabError
finally:
    if _previous_sigint is not None:
        signal.signal(signal.SIGINT, _previous_sigint)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="trustlab: audits of privacy, explanations, fairness and calibration.",
)
app.add_typer(secagg_app, name="secure-agg")
app.add_typer(lm_app, name="lm")
app.add_typer(explain_app, name="explain")
explain_app.command("neologism")(neologism)
app.add_typer(watermark_app, name="watermark")
app.add_typer(steering_app, name="steering")
app.add_typer(backdoor_app, name="backdoor")
app.add_typer(unlearn_app, name="unlearn")
app.command("perturb-prompt")(perturb_prompt)
app.command("overlap")(overlap)
app.command("dp-icl")(dp_icl)
err = stderr


@app.callback()
def _root() -> None:
    """trustlab: trustworthy-ML audits."""


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()] if value else []


# the library's argument names -> the flags a command-line user typed
_FLAGS = {
    "data": "DATA",
    "target": "--target",
    "sensitive": "--sensitive",
    "schema": "--schema",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "private": "--private",
    "test_size": "--test-size",
    "random_state": "--seed",
    "model": "--model",
    "ignore": "--ignore",
    "positive": "--positive",
    "out_dir": "--out",
    "out": "--out",
    "use_sensitive": "--use-sensitive",
    "categorical": "--categorical",
    "text": "--text",
    "alpha": "--alpha",
    "mitigate": "--mitigate",
    "dask": "--dask",
    "sample_rows": "--sample-rows",
    "proxy": "--proxy",
    "proxy_error": "--proxy-error",
    "group": "--group",
    "keep": "--keep",
}


# the help texts too long for their flag's line (`trustlab audit --help`, `trustlab schema --help`)
_HELP = {
    "audit_data": "CSV or Parquet file; the embedded Benefits data when omitted.",
    "audit_out": "Output folder for report.html and report.json.",
    "private": "Release every figure with differential privacy.",
    "audit_delta": "Delta of the model's DP-SGD training (with --private and no --model PATH).",
    "schema": "JSON file of public bounds and categories (needed with --private on your own data).",
    "use_sensitive": "Let the model use the sensitive columns as features.",
    "alpha": "Miscoverage of the Uncertainty section's conformal sets (0 < alpha < 1).",
    "mitigate": "Fairness post-processing to evaluate: "
    "equalized_odds, equal_opportunity or demographic_parity.",
    "proxy": "Column of proxy groups: bound the true multicalibration violation.",
    "proxy_error": "Public error rate of the --proxy column, P(true group != proxy).",
    "dask": "Run on Dask: a scheduler address (tcp://HOST:8786) or local / local:N worker processes. "
    "DATA is then a Parquet file or folder, read lazily (docs/scale.md).",
    "sample_rows": "Training rows sampled (a hash sample) to fit the default model; every held-out row is "
    "scored. In process, private mode trains on every training row; with --dask it samples at a rate "
    'from the schema\'s public "rows" (every training row when not declared).',
    "group": "Column identifying an entity on several rows (e.g. a person id in a panel): held-out rows "
    "never share an entity with training rows.",
    "keep": "Columns to keep as features although the audit flagged them, comma-separated.",
    "schema_epsilon": "Estimate bounds and categories from the rows under this privacy budget "
    "(default: estimate nothing, leave them for you to fill in).",
    "categorical": "Columns to treat as categorical whatever their type, comma-separated.",
    "text": "Columns of free text (notes), comma-separated: drafted as text, never read.",
}


def _spinner(err: Any) -> Progress:
    """A transient spinner on stderr (a log, not a terminal, gets only the result or one error)."""
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )


def _fail(exc: TrustlabError) -> NoReturn:
    fail(exc, _FLAGS)


def _audit_dask(
    data: Path | None,
    scheduler: str,
    target: str | None,
    sensitive: str | None,
    model: str,
    out: str,
    sample_rows: int,
    timeout: float,
    private: bool,
    epsilon: float | None,
    ignore: list[str],
    use_sensitive: bool,
    test_size: float,
    seed: int,
    positive: str | None,
    mitigate: str | None,
    proxy: str | None,
    schema: Path | None = None,
    delta: float = 1e-6,
) -> None:
    """``trustlab audit DATA --dask ...``: the Data, Performance and Fairness sections on a cluster.

    With ``--private`` (and ``--schema``): the Privacy section too, every figure released
    from merged exact statistics with the noise added once here (docs/scale.md).
    """
    from trustlab.audit import Audit
    from trustlab.audit.report import check_out_dir

    client = None
    try:
        check_out_dir(out)
        if data is None:
            raise TrustlabError(
                "--dask needs DATA: a Parquet file or a folder of Parquet files.", argument="data"
            )
        if not target or not _split(sensitive):
            raise TrustlabError(
                "--dask needs --target and --sensitive (the columns of your Parquet files).",
                argument="--target" if not target else "--sensitive",
            )
        if mitigate or proxy:
            raise TrustlabError(
                "--mitigate and --proxy read individual held-out rows; they are not available with "
                "--dask: drop them, or run in process.",
                argument="dask",
            )
        if sample_rows < 100:
            raise TrustlabError(
                f"--sample-rows must be at least 100, got {sample_rows}.", argument="sample_rows"
            )
        from trustlab.audit._scale import run_scaled
        from trustlab.compute.cluster import connect
        from trustlab.datasets.loaders import check_parquet_schemas, parquet_files

        # the files' footers first: a bad file fails before any cluster starts
        # private: the columns' names only (their types are the schema's; docs/scale.md)
        arrow, _ = check_parquet_schemas(
            parquet_files(data), required=(target, *_split(sensitive)), private=private
        )

        if not 0.0 < timeout <= 3600.0:
            raise TrustlabError(
                f"--dask-timeout must lie in (0, 3600] seconds, got {timeout}.", argument="dask"
            )
        from trustlab.datasets import Schema

        runner = Audit(
            model=model,
            private=private,
            epsilon=epsilon,
            schema=Schema.from_json(schema) if schema else None,
            delta=delta,
            positive=positive,
            ignore=ignore,
            use_sensitive=use_sensitive,
            test_size=test_size,
            random_state=seed,
        )
        if private:  # the schema's checks (public facts) before any cluster starts
            runner._prepare(arrow.empty_table().to_pandas(), target, _split(sensitive))
        with _spinner(err) as progress:
            task = progress.add_task(f"connecting to {scheduler}", total=None)
            client = connect(scheduler, timeout=timeout)
            report = run_scaled(
                runner,
                data,
                target=target,
                sensitive=_split(sensitive),
                client=client,
                sample_rows=sample_rows,
                dataset_name=data.name,
                progress=lambda msg: progress.update(task, description=msg),
            )
            progress.update(task, description="writing report")
            html_path, json_path = report.save(out)
    except TrustlabError as exc:
        _fail(exc)
    finally:
        if client is not None:
            cluster = getattr(client, "cluster", None)
            client.close()
            if cluster is not None:
                cluster.close()
    counts = report.status_counts
    scale = report.meta["scale"]
    if private:  # public figures only: the true row and sample counts are private
        typer.echo(
            f"report written: {html_path} and {json_path} (differentially private on Dask, epsilon="
            f"{epsilon:g}, delta={delta:g}: {scale['files']} files, {scale['workers']} workers; "
            f"DP model trained on {scale['sample_rows']}); checks: {counts['pass']} passed, "
            f"{counts['fail']} failed, {counts['inconclusive']} inconclusive, {counts['not_evaluable']} "
            "not evaluable"
        )
        if report.timings:  # the terminal only: wall-clock times depend on the rows
            typer.echo("wall-clock seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in report.timings.items()))
        return
    typer.echo(
        f"report written: {html_path} and {json_path} (raw statistics on Dask: {scale['rows']:,} rows, "
        f"{scale['partitions']} partitions, {scale['workers']} workers; model fitted on "
        f"{scale['sample_rows']:,} sampled rows); checks: {counts['pass']} passed, {counts['fail']} "
        f"failed, {counts['inconclusive']} inconclusive, {counts['not_evaluable']} not evaluable"
    )


@app.command()
def audit(
    data: Annotated[Path | None, typer.Argument(help=_HELP["audit_data"])] = None,
    target: Annotated[str | None, typer.Option(help="Binary outcome column.")] = None,
    sensitive: Annotated[str | None, typer.Option(help="Sensitive column(s), comma-separated.")] = None,
    model: Annotated[str, typer.Option(help="hgb | xgboost | lightgbm | logistic | PATH.pkl")] = "hgb",
    # text, not Path: typer reads "" as "." and --out "" must be refused
    out: Annotated[str, typer.Option(help=_HELP["audit_out"])] = "trustlab-report",
    private: Annotated[bool, typer.Option("--private", help=_HELP["private"])] = False,
    epsilon: Annotated[float | None, typer.Option(help="Total privacy budget (with --private).")] = None,
    delta: Annotated[float, typer.Option(help=_HELP["audit_delta"])] = 1e-6,
    schema: Annotated[Path | None, typer.Option(help=_HELP["schema"])] = None,
    positive: Annotated[str | None, typer.Option(help="Positive label of the target.")] = None,
    ignore: Annotated[str | None, typer.Option(help="Columns to leave out, comma-separated.")] = None,
    use_sensitive: Annotated[bool, typer.Option("--use-sensitive", help=_HELP["use_sensitive"])] = False,
    test_size: Annotated[float, typer.Option(help="Held-out share for evaluation.")] = 0.3,
    seed: Annotated[int, typer.Option(help="Seed of the split, model and bootstrap.")] = 0,
    alpha: Annotated[float, typer.Option(help=_HELP["alpha"])] = 0.1,
    mitigate: Annotated[str | None, typer.Option(help=_HELP["mitigate"])] = None,
    proxy: Annotated[str | None, typer.Option(help=_HELP["proxy"])] = None,
    proxy_error: Annotated[float | None, typer.Option(help=_HELP["proxy_error"])] = None,
    dask: Annotated[str | None, typer.Option(help=_HELP["dask"])] = None,
    sample_rows: Annotated[int, typer.Option(help=_HELP["sample_rows"])] = 200_000,
    dask_timeout: Annotated[
        float, typer.Option(help="With --dask: seconds to wait for the scheduler.")
    ] = 10.0,
    group: Annotated[str | None, typer.Option(help=_HELP["group"])] = None,
    keep: Annotated[str | None, typer.Option(help=_HELP["keep"])] = None,
) -> None:
    """Audit a table and a model; write DIR/report.html and DIR/report.json."""
    if dask is not None and (group or keep):
        _fail(
            TrustlabError(
                "--group and --keep are not available with --dask yet: run in process.", argument="dask"
            )
        )
    if dask is not None:
        _audit_dask(
            data,
            dask,
            target,
            sensitive,
            model,
            out,
            sample_rows,
            dask_timeout,
            private,
            epsilon,
            _split(ignore),
            use_sensitive,
            test_size,
            seed,
            positive,
            mitigate,
            proxy,
            schema,
            delta,
        )
        return
    from trustlab.audit import Audit, default_sections
    from trustlab.audit.report import check_out_dir
    from trustlab.datasets import Schema, load_default, load_table

    try:
        check_out_dir(out)  # before the (long) audit: a bad --out fails at once
        if data is None:
            frame, info, default_schema = load_default()
            name = f"{info.name} (embedded: Ecdat Benefits)"
            target = target or info.target
            sens = _split(sensitive) or list(info.sensitive)
            the_schema: Schema | None = Schema.from_json(schema) if schema else default_schema
        else:
            the_schema = Schema.from_json(schema) if schema else None
            # private: no rows must not fail, and the header and schema alone decide the columns
            frame = load_table(data, allow_empty=private, private=private, schema=the_schema)
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
        if not 0.0 < alpha < 1.0:  # NaN fails too
            raise TrustlabError(
                f"--alpha must lie strictly between 0 and 1 (e.g. 0.1 for 90% coverage), got {alpha}.",
                argument="--alpha",
            )
        if (proxy is None) != (proxy_error is None):
            raise TrustlabError(
                "--proxy and --proxy-error go together: name the column of proxy groups (--proxy COL) "
                "and its public error rate (--proxy-error 0.1), or neither.",
                argument="--proxy" if proxy is None else "--proxy-error",
            )
        from trustlab.audit.sections.fairness import FairnessSection

        fairness = FairnessSection(mitigate=mitigate, proxy=proxy, proxy_error=proxy_error)
        sections = [fairness if s.name == "fairness" else s for s in default_sections()]
        for section in sections:
            if section.name == "uncertainty":
                section.alpha = alpha  # type: ignore[attr-defined]
        runner = Audit(
            sections=sections,
            model=model,
            private=private,
            epsilon=epsilon,
            schema=the_schema,
            positive=positive,
            ignore=_split(ignore),
            use_sensitive=use_sensitive,
            test_size=test_size,
            random_state=seed,
            delta=delta,
            sample_rows=sample_rows,
            group=group,
            keep=_split(keep),
        )
        with _spinner(err) as progress:
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
        _fail(exc)
    status = str(report.meta.get("model_status", ""))
    if "constant 0.5" in status:
        err.print(f"[yellow]note:[/] {escape(status)}", highlight=False, soft_wrap=True)
    counts = report.status_counts
    mode = f"differentially private, epsilon={epsilon:g}" if private else "raw statistics"
    if private and report.meta.get("delta"):
        mode += f", delta={report.meta['delta']:g} (the model's DP-SGD training)"
    spent = report.meta.get("schema_privacy")
    if spent:
        mode += f" after epsilon={spent['epsilon']:g} spent drafting the schema"
    typer.echo(
        f"report written: {html_path} and {json_path} ({mode}); checks: {counts['pass']} passed, "
        f"{counts['fail']} failed, {counts['inconclusive']} inconclusive, "
        f"{counts['not_evaluable']} not evaluable"
    )


@app.command()
def schema(
    data: Annotated[Path, typer.Argument(help="CSV or Parquet file whose columns the schema describes.")],
    out: Annotated[Path, typer.Option(help="Where to write the draft (JSON).")] = Path("schema.json"),
    epsilon: Annotated[float | None, typer.Option(help=_HELP["schema_epsilon"])] = None,
    delta: Annotated[
        float, typer.Option(help="Total delta of the category discovery (with --epsilon).")
    ] = 1e-6,
    categorical: Annotated[str | None, typer.Option(help=_HELP["categorical"])] = None,
    text: Annotated[str | None, typer.Option(help=_HELP["text"])] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file.")] = False,
) -> None:
    """Draft the public schema a private audit needs (--schema); review and complete it by hand.

    Without --epsilon, nothing but the column names and types is read: bounds and categories
    are left null for you to fill from public knowledge. With --epsilon, they are estimated
    from the rows under differential privacy and every estimated entry is marked for review.
    See docs/schema.md.
    """
    from trustlab.datasets import draft_schema, load_table

    try:
        if out.exists() and (out.is_dir() or not force):
            raise ParameterError(
                f"out {str(out)!r} already exists; "
                + ("give a file path, not a folder." if out.is_dir() else "pass --force to replace it.")
                + " (A filled-in schema is work: trustlab does not overwrite it silently.)",
                argument="out",
            )
        # only names and kinds, or DP estimates (then the header alone decides the columns)
        frame = load_table(data, allow_empty=True, private=epsilon is not None)
        draft = draft_schema(
            frame,
            epsilon=epsilon,
            delta=delta,
            categorical=_split(categorical),
            text=_split(text),
            source=data.name,
        )
        _write_text_atomically(out, json.dumps(draft, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    except TrustlabError as exc:
        _fail(exc)
    cols = draft["columns"]
    empty = [name for name, e in cols.items() if e.get("bounds", 0) is None or e.get("categories", 0) is None]
    how = (
        "nothing estimated from the rows (column names and types only)"
        if epsilon is None
        else f"bounds and categories estimated under epsilon={epsilon:g}, delta={draft['privacy']['delta']:g}"
    )
    todo = f"; fill in the {len(empty)} null entries" if empty else ""
    typer.echo(
        f"draft schema written: {out} ({len(cols)} columns; {how}){todo}; review every 'review' note, "
        f"then pass it with --schema {out}"
    )


def _write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a hidden file next to ``path`` and rename it over ``path``."""
    tmp = path.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True) if tmp.parent.is_dir() else None
        raise ParameterError(
            f"out {str(path)!r} cannot be written: {exc.strerror or type(exc).__name__}; "
            "choose a path you can write to.",
            argument="out",
        ) from None


def _click_errors(name: str, *more: type[BaseException]) -> tuple[type[BaseException], ...]:
    """Click's exception class ``name`` and typer's vendored copy of it where typer has one, and ``more``."""
    found: list[type[BaseException]] = [getattr(click.exceptions, name), *more]
    try:
        from typer._click import exceptions as vendored  # typer >= 0.20 ships its own click
    except ImportError:
        return tuple(found)
    extra = getattr(vendored, name, None)
    if isinstance(extra, type) and issubclass(extra, BaseException) and extra not in found:
        found.append(extra)
    return tuple(found)


def _show_warnings(caught: list[warnings.WarningMessage]) -> None:
    """Library warnings of a run that succeeded, one line each (once per message); dropped after an error."""
    seen: set[str] = set()
    for w in caught:
        line = one_line(f"{w.category.__name__}: {w.message}")
        if line not in seen:
            seen.add(line)
            err.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``trustlab`` console script.

    Usage errors (an unknown flag, a value of the wrong type) print one line and exit 2,
    like every other user error; an unexpected exception is a bug: it prints its
    traceback and exits 1.
    """
    try:
        with warnings.catch_warnings(record=True) as caught:  # not mixed into the one error line
            warnings.simplefilter("default")
            command = typer.main.get_command(app)
            code = command.main(args=argv, prog_name="trustlab", standalone_mode=False)
        if code in (0, None):
            _show_warnings(caught)
    except _click_errors("NoArgsIsHelpError") as exc:
        ctx = getattr(exc, "ctx", None)
        typer.echo(ctx.get_help() if ctx is not None else str(exc))
        sys.exit(0)
    except _click_errors("UsageError") as exc:
        ctx = getattr(exc, "ctx", None)
        where = ctx.command_path if ctx is not None else "trustlab"
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(
            f"[bold red]error:[/] {escape(one_line(text))} (see `{escape(where)} --help`)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(2)
    except _click_errors("Abort", KeyboardInterrupt):
        err.print("aborted.")
        sys.exit(130)
    except Exception as exc:
        err.print_exception()
        err.print(f"[bold red]internal error:[/] {escape(one_line(exc))}. Please report it.")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
