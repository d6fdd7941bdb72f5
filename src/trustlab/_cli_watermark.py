"""``trustlab watermark embed|detect``: BiMark on the command line (registered by trustlab.cli).

Thin like the rest of the CLI: it parses, calls :mod:`trustlab.security.watermark`, writes the
file it was asked for and prints one line. User errors print one line and exit 2. torch and
transformers load only when ``embed`` runs (``detect`` on a JSON file needs neither).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from trustlab._cli_errors import fail, stderr
from trustlab.errors import DataError, ParameterError, TrustlabError

watermark_app = typer.Typer(
    no_args_is_help=True,
    help="BiMark multi-bit watermark: embed a message while sampling from a local causal LM, "
    "read it back with the key alone (docs/security/watermark.md).",
)
_err = stderr
_FLAGS = {
    "path": "NAME_OR_DIR",
    "name": "NAME_OR_DIR",
    "input": "INPUT",
    "token_ids": "INPUT",
    "out": "--out",
    "key": "--key",
    "message": "--message",
    "prompt": "--prompt",
    "model": "--model",
    "n_bits": "--n-bits",
    "n_layers": "--n-layers",
    "delta": "--delta",
    "window": "--window",
    "max_new_tokens": "--max-new-tokens",
    "vocab_size": "--model",
}
_KEY_HELP = "The secret key (a string); or set TRUSTLAB_WATERMARK_KEY to keep it out of shell history."


def _fail(exc: TrustlabError) -> NoReturn:
    fail(exc, _FLAGS)


def _tokenizer_and_vocab(name_or_dir: str) -> tuple[Any, int]:
    """The tokenizer of a shipped model or checkpoint folder and the model's vocabulary size."""
    from trustlab.lm import load_shipped, load_tokenizer, shipped_models

    if name_or_dir in shipped_models():
        model, tokenizer, _ = load_shipped(name_or_dir)
        return tokenizer, int(model.config.vocab_size)
    folder = Path(name_or_dir)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        vocab = int(config["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ParameterError(
            f"NAME_OR_DIR {name_or_dir!r} is neither a shipped model ({', '.join(shipped_models())}) nor "
            f"a checkpoint folder with a config.json giving vocab_size ({type(exc).__name__}).",
            argument="path",
        ) from exc
    tokenizer = load_tokenizer(folder)
    if tokenizer is None:
        raise ParameterError(
            f"NAME_OR_DIR {name_or_dir!r} has no tokenizer.json beside the model, so text cannot be "
            "tokenized; save the tokenizer with the model (save_model(model, path, tokenizer)).",
            argument="path",
        )
    return tokenizer, vocab


def _watermark(vocab: int, key: str | None, n_bits: int, n_layers: int, delta: float, window: int) -> Any:
    from trustlab.security.watermark import BiMark

    if not key:
        raise ParameterError(
            "--key is missing or empty; pass --key SECRET or set TRUSTLAB_WATERMARK_KEY.", argument="key"
        )
    return BiMark(vocab, key=key, n_bits=n_bits, n_layers=n_layers, delta=delta, window=window)


@watermark_app.command()
def embed(
    name_or_dir: Annotated[str, typer.Argument(help="A shipped model name or a local causal-LM folder.")],
    prompt: Annotated[str, typer.Option(help="The prompt text (tokenized with the model's tokenizer).")],
    message: Annotated[str, typer.Option(help="The message bits, e.g. 10110010 (n-bits of them).")],
    key: Annotated[str | None, typer.Option(envvar="TRUSTLAB_WATERMARK_KEY", help=_KEY_HELP)] = None,
    out: Annotated[str, typer.Option(help="JSON file for the text and its token ids.")] = "watermarked.json",
    max_new_tokens: Annotated[int, typer.Option(help="Tokens to generate.")] = 50,
    seed: Annotated[int, typer.Option(help="Seeds the sampling.")] = 0,
    n_layers: Annotated[int, typer.Option(help="BiMark reweighting layers.")] = 10,
    delta: Annotated[float, typer.Option(help="Scaling factor in (0, 1].")] = 1.0,
    window: Annotated[int, typer.Option(help="Context tokens that seed each step.")] = 2,
) -> None:
    """Sample a continuation of --prompt with the --message bits embedded; write INPUT for `detect`."""
    try:
        path = Path(out)
        if not out.strip() or path.is_dir():
            raise ParameterError(f"--out must name a file, got {out!r}.", argument="out")
        from trustlab._cli_lm import load_any

        model, tokenizer, label = load_any(name_or_dir)
        if tokenizer is None:
            raise ParameterError(
                f"NAME_OR_DIR {name_or_dir!r} has no tokenizer.json beside the model, so --prompt cannot be "
                "tokenized; save the tokenizer with the model (save_model(model, path, tokenizer)).",
                argument="path",
            )
        vocab = int(model.config.vocab_size)
        if not 1 <= len(message) <= 256 or set(message) - {"0", "1"}:
            raise ParameterError(
                f"--message must be 1-256 characters 0/1 (e.g. 10110010), got {message!r}.",
                argument="message",
            )
        wm = _watermark(vocab, key, len(message), n_layers, delta, window)
        ids = tokenizer(prompt)["input_ids"]
        if len(ids) < wm.window:
            raise ParameterError(
                f"--prompt gives {len(ids)} tokens; the watermark needs at least --window={wm.window}: "
                "give a longer prompt.",
                argument="prompt",
            )
        import numpy as np

        from trustlab.security.watermark import generate_watermarked

        tokens = generate_watermarked(
            model, np.asarray([ids]), wm, message, max_new_tokens=max_new_tokens, seed=seed
        )[0]
        record = {
            "text": tokenizer.decode(tokens.tolist()),
            "token_ids": tokens.tolist(),
            "start": len(ids),
            "vocab_size": vocab,
            "n_bits": wm.n_bits,
            "n_layers": wm.n_layers,
            "delta": wm.delta,
            "window": wm.window,
            "model": label,
        }
        try:
            path.write_text(json.dumps(record, indent=2), encoding="utf-8")
        except OSError as exc:
            raise ParameterError(f"--out {out!r} cannot be written ({exc}).", argument="out") from exc
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(f"embedded a {wm.n_bits}-bit message in {max_new_tokens} tokens; written to {path}")


def _read_input(source: Path, model: str | None) -> tuple[list[int], int, int, dict[str, Any]]:
    """Token ids, first generated position, vocab size and the file's watermark settings."""
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(
            f"INPUT {str(source)!r} cannot be read as UTF-8 text ({exc}).", argument="input"
        ) from exc
    if source.suffix == ".json":
        try:
            record = json.loads(text)
            ids, start = [int(i) for i in record["token_ids"]], int(record.get("start", 0))
            vocab = int(record["vocab_size"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DataError(
                f"INPUT {str(source)!r} is not a `trustlab watermark embed` file "
                f"({type(exc).__name__}: {exc}); give that JSON file or a plain text file with --model.",
                argument="input",
            ) from exc
        return ids, start, vocab, record
    if model is None:
        raise ParameterError(
            "a plain text INPUT needs --model NAME_OR_DIR (its tokenizer and vocabulary size; the model "
            "itself is not run).",
            argument="model",
        )
    tokenizer, vocab = _tokenizer_and_vocab(model)
    return list(tokenizer(text)["input_ids"]), 0, vocab, {}


@watermark_app.command()
def detect(
    source: Annotated[
        Path, typer.Argument(metavar="INPUT", help="An `embed` JSON file, or a text file (needs --model).")
    ],
    key: Annotated[str | None, typer.Option(envvar="TRUSTLAB_WATERMARK_KEY", help=_KEY_HELP)] = None,
    model: Annotated[
        str | None, typer.Option(help="Shipped model or folder whose tokenizer encodes a text INPUT.")
    ] = None,
    n_bits: Annotated[int | None, typer.Option(help="Message length (default: the file's, else 8).")] = None,
    n_layers: Annotated[int | None, typer.Option(help="Layers (default: the file's, else 10).")] = None,
    window: Annotated[int | None, typer.Option(help="Context window (default: the file's, else 2).")] = None,
) -> None:
    """Read the message back with the key alone; prints it (or "undecidable") and its p-value."""
    try:
        ids, start, vocab, record = _read_input(source, model)

        def pick(given: int | None, name: str, default: int) -> int:
            value = record.get(name, default) if given is None else given
            return value if isinstance(value, int) and not isinstance(value, bool) else -1

        wm = _watermark(
            vocab,
            key,
            pick(n_bits, "n_bits", 8),
            pick(n_layers, "n_layers", 10),
            1.0,
            pick(window, "window", 2),
        )
        found = wm.extract(ids, start=start)
    except TrustlabError as exc:
        _fail(exc)
    bits = "".join("?" if b < 0 else str(int(b)) for b in found.bits)
    head = f"message {found.message}" if found.decided else f"undecidable (bits {bits}: text too short)"
    typer.echo(f"{head}; p = {found.p_value:.3g} ({found.n_scored} positions scored, {wm.n_bits} bits)")
