"""``trustlab unlearn saeuron``: remove digit concepts from the lab's conditional DDPM and judge it.

Thin like the rest of the CLI: it builds the shipped SAeUron fit
(:func:`trustlab.unlearning.saeuron.digits_saeuron`), generates a few prompts per digit with and
without the removal, judges them with a logistic regression trained on scikit-learn's digits
and prints the removed digits' generation rate and the other digits' accuracy (``--block``:
the shipped fit at ``mid``, the default, or ``down2``). ``--out``
writes the edited images (``.npz``); ``--save DIR`` writes the SAeUron used
(:meth:`~trustlab.unlearning.saeuron.SAeUron.save`), ``--load DIR`` uses a saved one (fitted on
the same DDPM, e.g. at another block) instead of the shipped fit. User errors print one line
and exit 2. torch loads only when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from trustlab._cli_errors import fail
from trustlab.errors import ParameterError, TrustlabError

unlearn_app = typer.Typer(
    no_args_is_help=True,
    help="Concept unlearning at generation time (docs/unlearning/saeuron.md).",
)
_FLAGS = {
    "unlearn": "--remove",
    "percentile": "--percentile",
    "multiplier": "--multiplier",
    "score_against": "--score-against",
    "n_per_digit": "--per-digit",
    "out": "--out",
    "block": "--block",
    "load": "--load",
    "save": "--save",
}


def _digits(text: str) -> list[int]:
    try:
        out = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        out = []
    if not out or any(not 0 <= d <= 9 for d in out) or len(set(out)) != len(out) or len(out) > 9:
        raise ParameterError(
            f"unlearn must be 1-9 distinct digits 0-9 separated by commas, e.g. 1,3; got {text!r}.",
            argument="unlearn",
        )
    return out


def _load(cls: Any, folder: str, model: Any) -> Any:
    """``cls.load`` with the error naming ``--load``."""
    try:
        return cls.load(folder, model)
    except TrustlabError as exc:
        raise ParameterError(str(exc), argument="load") from exc


@unlearn_app.command()
def saeuron(
    remove: Annotated[str, typer.Option(help="Digits to remove, comma-separated (e.g. 1,3).")],
    per_digit: Annotated[int, typer.Option(help="Prompts generated per digit (1-200).")] = 10,
    seed: Annotated[int, typer.Option(help="Seed of the starting noise.")] = 1,
    percentile: Annotated[
        float | None, typer.Option(help="Feature percentile for every digit (default: per-digit sweep).")
    ] = None,
    multiplier: Annotated[
        float | None, typer.Option(help="Negative multiplier for every digit (default: per-digit sweep).")
    ] = None,
    score_against: Annotated[str, typer.Option(help="all (the paper) or retained.")] = "all",
    out: Annotated[str | None, typer.Option(help="Write the edited images and prompts to this .npz.")] = None,
    block: Annotated[str, typer.Option(help="Block of the shipped fit: mid or down2.")] = "mid",
    load: Annotated[
        str | None, typer.Option(help="Folder of a saved SAeUron (SAeUron.save) on the lab's DDPM.")
    ] = None,
    save: Annotated[str | None, typer.Option(help="Write the SAeUron used into this folder.")] = None,
) -> None:
    """Remove digits from the lab's class-conditional DDPM with SAeUron (Cywinski and Deja, ICML 2025)."""
    try:
        digits = _digits(remove)
        if not 1 <= per_digit <= 200:
            raise ParameterError(f"n_per_digit must lie in 1..200; got {per_digit}.", argument="n_per_digit")
        if out is not None and (not out.endswith(".npz") or not Path(out).resolve().parent.is_dir()):
            raise ParameterError(
                f"out must be a .npz path in an existing folder; got {out!r}.", argument="out"
            )
        if block not in ("mid", "down2"):
            raise ParameterError(
                f"block must be mid or down2 (the shipped fits); got {block!r}.", argument="block"
            )
        if save is not None and (Path(save).is_file() or not Path(save).resolve().parent.is_dir()):
            raise ParameterError(
                f"save must be a folder (new or existing) in an existing folder; got {save!r}.",
                argument="save",
            )
        if percentile is not None and not 0 <= percentile < 100:
            raise ParameterError(f"percentile must lie in [0, 100); got {percentile}.", argument="percentile")
        if multiplier is not None and not np.isfinite(multiplier):
            raise ParameterError(
                f"multiplier must be a finite number; got {multiplier}.", argument="multiplier"
            )
        if score_against not in ("all", "retained"):
            raise ParameterError(
                f"score_against must be 'all' or 'retained'; got {score_against!r}.", argument="score_against"
            )
        from sklearn.datasets import load_digits
        from sklearn.linear_model import LogisticRegression

        from trustlab.unlearning.saeuron import SAeUron, digits_saeuron
        from trustlab.unlearning.saeuron_eval import unlearning_rates
        from trustlab.vision.diffusion_conditional import digits_conditional_ddpm

        su = digits_saeuron(hook=block) if load is None else _load(SAeUron, load, digits_conditional_ddpm())
        su.set_params(score_against=score_against)
        y = np.repeat(np.arange(10), per_digit)
        X = np.random.default_rng(seed).standard_normal((len(y), 1, 8, 8))
        before = su.generate(X, y)
        after = su.generate(X, y, unlearn=digits, percentile=percentile, multiplier=multiplier)
    except TrustlabError as exc:
        fail(exc, _FLAGS)
    from threadpoolctl import threadpool_limits

    data = load_digits()
    with threadpool_limits(1):  # BLAS threads only cost on a problem this small
        judge = LogisticRegression(max_iter=500).fit(data.data / 16.0, data.target)
    rb = unlearning_rates(y, judge.predict(before.reshape(len(y), -1)), digits)
    ra = unlearning_rates(y, judge.predict(after.reshape(len(y), -1)), digits)
    if out is not None:
        np.savez_compressed(out, images=after, prompts=y, removed=np.asarray(digits))
    if save is not None:
        try:
            su.save(save)
        except TrustlabError as exc:
            fail(ParameterError(str(exc), argument="save"), _FLAGS)
    typer.echo(
        f"removed {','.join(map(str, digits))}: generated {rb.removed_rate:.2f} -> {ra.removed_rate:.2f}; "
        f"other digits correct {rb.retained_accuracy:.2f} -> {ra.retained_accuracy:.2f} "
        f"({per_digit} prompts per digit, seed {seed})"
    )
