"""``trustlab lm ...``: the language-model lab's commands (registered by trustlab.cli).

Thin like the rest of the CLI: it parses, calls :mod:`trustlab.lm`, writes the files it was
asked for and prints one summary line. User errors print one line and exit 2. torch and
transformers load only when a command runs, never when ``trustlab`` starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from trustlab._cli_errors import fail, stderr
from trustlab._validation import context_length
from trustlab.errors import ParameterError, TrustlabError

lm_app = typer.Typer(
    no_args_is_help=True,
    help="The language-model lab: train the small models, inspect any local causal LM (docs/lm-lab.md).",
)
_err = stderr
_FLAGS = {
    "config": "CONFIG",
    "out": "--out",
    "path": "NAME_OR_DIR",
    "name": "NAME_OR_DIR",
    "seed": "--seed",
    "seeds": "--seeds",
    "n_per_task": "--n-per-task",
    "steps": "--steps",
    "out_dir": "--out",
    "corpus": "--corpus",
    "texts": "--corpus",
    "sequences": "--sequences",
    "n": "--n",
    "schedule": "--schedule",
    "tau": "--tau",
    "pairs": "--pairs",
    "task": "--pairs",
    "method": "--methods",
    "heads": "--heads",
    "variants": "--variants",
}


def _fail(exc: TrustlabError) -> NoReturn:
    fail(exc, _FLAGS)


def _check_out(out: str) -> Path:
    if not out.strip():
        raise ParameterError("--out must name a folder, got an empty string.", argument="out")
    path = Path(out)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ParameterError(
            f"--out {out!r} exists and is not an empty folder; give a new or empty folder.", argument="out"
        )
    return path


def _read_config(config: str) -> Any:
    from trustlab.lm import RECIPES

    if config in RECIPES:
        return config
    path = Path(config)
    if not path.is_file():
        raise ParameterError(
            f"CONFIG {config!r} is neither a recipe ({', '.join(RECIPES)}) nor a JSON file.",
            argument="config",
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParameterError(f"CONFIG {config!r} is not valid JSON ({exc}).", argument="config") from exc


def _progress(label: str) -> Progress:
    return Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} loss {task.fields[loss]:.3f}"),
        TimeElapsedColumn(),
        console=_err,
        transient=True,
        disable=not _err.is_terminal,
    )


def load_any(name_or_dir: str) -> tuple[Any, Any, str]:
    """A shipped model by name (trained into the cache on first use) or a checkpoint folder.

    Parameters
    ----------
    name_or_dir : str
        A name of ``trustlab.lm.shipped_models()`` or a folder.

    Returns
    -------
    model, tokenizer, label
        ``tokenizer`` is ``None`` when the folder has none.
    """
    from trustlab.lm import load_model, load_shipped, load_tokenizer, shipped_models

    if name_or_dir in shipped_models():
        model, tokenizer, path = load_shipped(name_or_dir)
        return model, tokenizer, f"{name_or_dir} ({path})"
    if not Path(name_or_dir).exists():
        raise ParameterError(
            f"NAME_OR_DIR {name_or_dir!r} is neither a shipped model ({', '.join(shipped_models())}) "
            "nor a folder.",
            argument="path",
        )
    return load_model(name_or_dir), load_tokenizer(name_or_dir), name_or_dir


@lm_app.command("list")
def list_models() -> None:
    """List the shipped models (trained into ~/.cache/trustlab/lm on first use) and what they learn."""
    from trustlab.lm import RECIPES

    for name, recipe in RECIPES.items():
        typer.echo(f"{name}: {recipe.description}")


@lm_app.command()
def train(
    config: Annotated[str, typer.Argument(help="A recipe name (trustlab lm list) or a JSON recipe file.")],
    out: Annotated[
        str, typer.Option(help="New or empty folder for the checkpoint (safetensors).")
    ] = "lm-model",
    seed: Annotated[int | None, typer.Option(help="Overrides the recipe's seed.")] = None,
    steps: Annotated[int | None, typer.Option(help="Overrides the recipe's number of steps.")] = None,
) -> None:
    """Train a recipe's model and write it, its tokenizer and training.json to --out."""
    try:
        path = _check_out(out)
        spec = _read_config(config)
        from trustlab.lm import evaluate_loss, get_recipe, make_data, save_model, train_recipe

        recipe = get_recipe(spec)
        if steps is not None:
            if steps < 1:
                raise ParameterError(f"--steps must be at least 1, got {steps}.", argument="steps")
            warmup = min(recipe.train.warmup, steps - 1)
            recipe = get_recipe(
                {**recipe.to_dict(), "train": {**recipe.train.to_dict(), "steps": steps, "warmup": warmup}}
            )
        with _progress(f"training {recipe.name}") as bar:
            task = bar.add_task("train", total=recipe.train.steps, loss=float("nan"))
            model, tokenizer, result = train_recipe(
                recipe, seed=seed, callback=lambda step, loss: bar.update(task, completed=step + 1, loss=loss)
            )
        test, _ = make_data(recipe, seed=recipe.train.seed if seed is None else seed, split="test")
        test_loss = evaluate_loss(model, test)
        save_model(model, path, tokenizer)
        info = {
            "recipe": recipe.to_dict(),
            "seed": result.config.seed,
            "losses": [round(float(v), 5) for v in result.losses],
            "final_train_loss": float(result.losses[-min(20, len(result.losses)) :].mean()),
            "test_loss": test_loss,
            "tokens": result.tokens,
        }
        (path / "training.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(
        f"trained {recipe.name}: {recipe.train.steps} steps, train loss {info['final_train_loss']:.3f}, "
        f"held-out loss {test_loss:.3f} (nats/token); written to {path}"
    )


@lm_app.command()
def hooks(
    name_or_dir: Annotated[str, typer.Argument(help="A shipped model name or a checkpoint folder.")],
) -> None:
    """List the hook points of a model (blocks.{i}.{kind})."""
    try:
        from trustlab.lm import HOOK_KINDS, hook_points

        model, _, label = load_any(name_or_dir)
        n = len(hook_points(model)) // len(HOOK_KINDS)
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(f"{label}: {n} blocks; hook points blocks.{{0..{n - 1}}}.{{{','.join(HOOK_KINDS)}}}")


def _report_tokens(name_or_dir: str, tokenizer: Any, model: Any, corpus: Path | None, n_max: int) -> Any:
    from trustlab.lm import RECIPES, encode_texts, english_corpus, make_data

    context = context_length(model) or 64
    if corpus is None and name_or_dir in RECIPES:
        data, _ = make_data(RECIPES[name_or_dir], split="test")
        return data.tokens[:n_max]
    if tokenizer is None:
        raise ParameterError(
            f"NAME_OR_DIR {name_or_dir!r} has no tokenizer.json beside the model, so no text can be encoded; "
            "save the tokenizer with the model (save_model(model, path, tokenizer)).",
            argument="path",
        )
    if corpus is not None:
        try:
            texts = [corpus.read_text(encoding="utf-8")]
        except (OSError, UnicodeDecodeError) as exc:
            raise ParameterError(
                f"--corpus {str(corpus)!r} cannot be read as UTF-8 text ({exc}).", argument="corpus"
            ) from exc
    else:
        texts = english_corpus()[-8:]
    return encode_texts(tokenizer, texts, min(64, context)).tokens[:n_max]


@lm_app.command()
def report(
    name_or_dir: Annotated[str, typer.Argument(help="A shipped model name or a checkpoint folder.")],
    out: Annotated[str, typer.Option(help="Folder for report.html and report.json.")] = "lm-report",
    corpus: Annotated[
        Path | None,
        typer.Option(help="UTF-8 text file to measure on (default: the recipe's held-out data, or English)."),
    ] = None,
    sequences: Annotated[int, typer.Option(help="Sequences measured (at most).")] = 32,
) -> None:
    """Massive values per block and head, saturation layers, early-exit savings and attention summaries."""
    try:
        from trustlab.audit.report import check_out_dir

        check_out_dir(out)
        if sequences < 1:
            raise ParameterError(f"--sequences must be at least 1, got {sequences}.", argument="sequences")
        from trustlab.lm.report import inspect_model

        model, tokenizer, label = load_any(name_or_dir)
        ids = _report_tokens(name_or_dir, tokenizer, model, corpus, sequences)
        result = inspect_model(model, ids, label=label)
        html_path, _ = result.save(out)
    except TrustlabError as exc:
        _fail(exc)
    ex = result.early_exit
    typer.echo(
        f"report written: {html_path} ({result.n_layers} blocks, {result.n_tokens} tokens; top-k "
        f"saturation in order at {result.saturation['in_order_rate']:.0%} of positions; early exit saves "
        f"{ex['layers_saved']:.0%} of blocks at accuracy {ex['accuracy_exit']:.1%} "
        f"vs {ex['accuracy_full']:.1%})"
    )


def _jsonable(result: Any) -> dict[str, Any]:
    from dataclasses import asdict

    import numpy as np

    return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(result).items()}


@lm_app.command("task-vectors")
def task_vectors_cmd(
    out: Annotated[
        str, typer.Option(help="New or empty folder: checkpoints/ and formation.json.")
    ] = "task-vectors",
    steps: Annotated[int, typer.Option(help="Training steps (7 evenly spaced checkpoints).")] = 300,
    seed: Annotated[int, typer.Option(help="Seeds tasks, prompts, weights and batch order.")] = 0,
    n_per_task: Annotated[int, typer.Option(help="Evaluated prompts per task (the paper's 100).")] = 100,
) -> None:
    """Train a tiny LM on latent-task in-context maps; TD, accuracy and patching per checkpoint."""
    try:
        path = _check_out(out)
        if steps < 1:
            raise ParameterError(f"--steps must be at least 1, got {steps}.", argument="steps")
        import numpy as np

        from trustlab.lm import TrainConfig
        from trustlab.lm.task_vectors import task_vector_formation

        checkpoints = np.unique(np.linspace(0, steps, 7).round().astype(int))
        tcfg = TrainConfig(steps=steps, batch_size=32, lr=1e-2, warmup=min(10, steps - 1), seed=seed)
        res = task_vector_formation(
            4,
            8,
            6,
            checkpoints=checkpoints,
            n_per_task=n_per_task,
            train_config=tcfg,
            seed=seed,
            out_dir=path / "checkpoints",
        )
        (path / "formation.json").write_text(json.dumps(_jsonable(res), indent=2), encoding="utf-8")
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(
        f"task vectors: TD {res.td[0]:.2f} -> {res.td[-1]:.2f}, ICL accuracy {res.accuracy[0]:.2f} -> "
        f"{res.accuracy[-1]:.2f} over {len(res.steps)} checkpoints, correlation {res.correlation:.2f}; "
        f"written to {path}"
    )


@lm_app.command("moex")
def moex_cmd(
    out: Annotated[str, typer.Option(help="New or empty folder for comparison.json.")] = "moex",
    steps: Annotated[int, typer.Option(help="Training steps per model.")] = 300,
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds, one model per variant and seed.")] = "0",
    variants: Annotated[
        str,
        typer.Option(
            help="Comma-separated: moex, moe, dense, relu-moe (ReLU experts with a learned router, "
            "the paper's ablation)."
        ),
    ] = "moex,moe,dense",
) -> None:
    """Train MoE-X, a standard MoE and a dense MLP on in-context tasks; loss and BSP interpretability."""
    try:
        path = _check_out(out)
        if steps < 1:
            raise ParameterError(f"--steps must be at least 1, got {steps}.", argument="steps")
        try:
            seed_list = [int(s) for s in seeds.split(",")]
        except ValueError as exc:
            raise ParameterError(
                f"--seeds must be comma-separated integers, got {seeds!r}.", argument="seeds"
            ) from exc
        from trustlab.lm import TrainConfig
        from trustlab.lm.moex_compare import compare_moe_variants

        tcfg = TrainConfig(steps=steps, batch_size=32, lr=1e-2, warmup=min(10, steps - 1))
        variant_list = tuple(v.strip() for v in variants.split(",") if v.strip())
        res = compare_moe_variants(variant_list, seeds=seed_list, train_config=tcfg)
        path.mkdir(parents=True, exist_ok=True)
        (path / "comparison.json").write_text(json.dumps(_jsonable(res), indent=2), encoding="utf-8")
    except TrustlabError as exc:
        _fail(exc)
    parts = [
        f"{v} loss {res.loss[i].mean():.3f} coverage {res.coverage[i].mean():.3f} "
        f"reconstruction {res.reconstruction[i].mean():.3f}"
        for i, v in enumerate(res.variants)
    ]
    typer.echo("; ".join(parts) + f"; written to {path}")


def _circuit_pairs(pairs: Path | None, name_or_dir: str, n: int, seed: int) -> tuple[Any, Any]:
    from trustlab.lm import RECIPES
    from trustlab.lm.mib import PatchingTask, min_pairs

    if pairs is None:
        data = RECIPES[name_or_dir].data if name_or_dir in RECIPES else {}
        if data.get("kind") != "sorting":
            raise ParameterError(
                "--pairs is needed: a JSON file with clean, corrupted, answers, cf_answers (and optional "
                "positions); only the sorting models have built-in pairs.",
                argument="pairs",
            )
        kw = {"n_items": int(data.get("n_items", 6)), "n_values": int(data.get("n_values", 16))}
        return min_pairs(n, seed=seed, **kw), min_pairs(n, seed=seed + 1, **kw)
    try:
        spec = json.loads(pairs.read_text(encoding="utf-8"))
        task = PatchingTask(
            spec["clean"], spec["corrupted"], spec["answers"], spec["cf_answers"], spec.get("positions")
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ParameterError(
            f"--pairs {str(pairs)!r} must be a JSON object with clean, corrupted, answers and cf_answers "
            f"({exc}).",
            argument="pairs",
        ) from exc
    return task, task


@lm_app.command("circuit")
def circuit_cmd(
    name_or_dir: Annotated[str, typer.Argument(metavar="NAME_OR_DIR", help="Shipped model or checkpoint.")],
    pairs: Annotated[
        Path | None, typer.Option(help="JSON pairs file (default: a sorting model's built-in pairs).")
    ] = None,
    methods: Annotated[
        str,
        typer.Option(
            help="Comma-separated: activation-patching, eap, eap-ig, eap-ig-activations, "
            "information-flow-routes, edge-pruning, ugs, random."
        ),
    ] = "activation-patching,eap,eap-ig,random",
    ablation: Annotated[
        str, typer.Option(help="How edges off a circuit are ablated: patching, mean or optimal.")
    ] = "patching",
    n: Annotated[int, typer.Option(help="Built-in pairs: how many to score on (as many held out).")] = 32,
    seed: Annotated[int, typer.Option(help="Seeds the built-in pairs and the random baseline.")] = 10,
    out: Annotated[Path | None, typer.Option(help="Write the curves, CPR and CMD to this JSON file.")] = None,
) -> None:
    """MIB circuit localisation: edge scores per method, CPR and CMD over MIB's edge budgets (row 002-13)."""
    try:
        if n < 1:
            raise ParameterError(f"--n must be at least 1, got {n}.", argument="n")
        model, _, label = load_any(name_or_dir)
        from trustlab.lm.mib import circuit_localization, edge_scores

        task, held_out = _circuit_pairs(pairs, name_or_dir, n, seed)
        results, parts = {}, []
        for method in [m.strip() for m in methods.split(",") if m.strip()]:
            scores = edge_scores(model, task, method=method, random_state=seed, ablation=ablation)
            loc = circuit_localization(model, held_out, scores, ablation=ablation)
            results[method] = {"cpr": loc.cpr, "cmd": loc.cmd, "signed": _jsonable(loc.signed)}
            results[method]["absolute"] = _jsonable(loc.absolute)
            parts.append(f"{method} CPR {loc.cpr:.3f} CMD {loc.cmd:.3f}")
        if out is not None:
            out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    except TrustlabError as exc:
        _fail(exc)
    typer.echo(f"{label}, {scores.graph.n_edges} edges: " + "; ".join(parts))


def _head_sites(heads: str | None) -> str | list[tuple[int, int]] | None:
    """``--heads``: None, ``all`` or ``LAYER.HEAD`` pairs (range checks are the library's)."""
    if heads is None or heads.strip() == "all":
        return None if heads is None else "all"
    try:
        return [(int(a), int(b)) for a, b in (p.strip().split(".") for p in heads.split(",") if p.strip())]
    except ValueError as exc:
        raise ParameterError(
            f"--heads must be 'all' or comma-separated LAYER.HEAD pairs such as 0.1,1.0; got {heads!r}.",
            argument="heads",
        ) from exc


@lm_app.command("variable")
def variable_cmd(
    name_or_dir: Annotated[str, typer.Argument(metavar="NAME_OR_DIR", help="A sorting model.")],
    variable: Annotated[str, typer.Option(help="Causal variable: min, argmin or first.")] = "min",
    methods: Annotated[
        str, typer.Option(help="Comma-separated: full, das, dbm, dbm-pca, dbm-sae, random.")
    ] = "full,das,dbm,dbm-pca,dbm-sae,random",
    n: Annotated[int, typer.Option(help="Training pairs (as many test pairs).")] = 256,
    seed: Annotated[int, typer.Option(help="Seeds the pairs (test: seed + 1) and the featurizers.")] = 0,
    heads: Annotated[
        str | None,
        typer.Option(
            help="Attention-head sites instead of the residual stream: 'all', or comma-separated "
            "LAYER.HEAD pairs (e.g. 0.1,1.0)."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Write IIA per featurizer and site to this JSON file.")
    ] = None,
) -> None:
    """MIB causal-variable localisation: IIA per featurizer and site on a sorting model (row 002-13)."""
    try:
        from trustlab.lm import RECIPES

        if n < 2:
            raise ParameterError(f"--n must be at least 2, got {n}.", argument="n")
        data = RECIPES[name_or_dir].data if name_or_dir in RECIPES else {}
        if data.get("kind") != "sorting":
            raise ParameterError(
                f"NAME_OR_DIR must be a shipped sorting model (the causal model is the sorting task's), got "
                f"{name_or_dir!r}; from Python, causal_variable_localization takes any pairs.",
                argument="name",
            )
        from trustlab.lm.mib_causal import _methods, causal_variable_localization, sorting_pairs

        kw = {"n_items": int(data.get("n_items", 6)), "n_values": int(data.get("n_values", 16))}
        train = sorting_pairs(n, variable=variable, seed=seed, **kw)
        test = sorting_pairs(n, variable=variable, seed=seed + 1, **kw)
        method_list = _methods([m.strip() for m in methods.split(",") if m.strip()])
        model, _, label = load_any(name_or_dir)
        res = causal_variable_localization(
            model, train, test, methods=method_list, random_state=seed, heads=_head_sites(heads)
        )
        if out is not None:
            out.write_text(json.dumps(res.to_frame().to_dict(orient="records"), indent=2), encoding="utf-8")
    except TrustlabError as exc:
        _fail(exc)
    best = res.best()
    parts = [f"{m} {best[m]:.3f}" for m in res.methods]
    typer.echo(f"{label}, variable {variable}, best IIA over {len(res.layers)} sites: " + "; ".join(parts))


@lm_app.command("safety")
def safety_cmd(
    n: Annotated[int, typer.Option(help="Instructions drawn (about half harmful).")] = 200,
    seed: Annotated[int, typer.Option(help="Seeds the instructions.")] = 12,
    schedule: Annotated[str, typer.Option(help="annealing, every, periodic or first.")] = "annealing",
    tau: Annotated[int, typer.Option(help="Consecutive malicious verdicts that confirm a transition.")] = 3,
) -> None:
    """Safety-aware decoding on the lab's instruction model: refusal, base vs safety head (row 000-03)."""
    try:
        if n < 2:
            raise ParameterError(f"--n must be at least 2, got {n}.", argument="n")
        import numpy as np

        from trustlab.security.safety_data import (
            EOS,
            SURE,
            InstructionVocab,
            instruction_set,
            load_instruction_lab,
        )
        from trustlab.security.safety_decoding import safe_generate

        model, head = load_instruction_lab()
        vocab = InstructionVocab()
        s = instruction_set(n, seed=seed)
        kw: dict[str, Any] = {
            "refusal_ids": vocab.refusal_ids, "skip_ids": vocab.skip_ids, "eos_id": EOS,
            "max_new_tokens": 6, "schedule": schedule, "tau": tau,
        }  # fmt: skip
        parts = []
        for name, prompts, prefill in (
            ("harmful direct", s.prompts[s.harmful], None),
            ("harmful prefill", s.prompts[s.harmful], [SURE]),
            ("benign direct", s.prompts[~s.harmful], None),
        ):
            rates = []
            for h in (None, head):
                out = safe_generate(model, h, prompts, prefill_ids=prefill, **kw)
                resp = out.responses
                stop = np.where((resp == EOS).any(axis=1), (resp == EOS).argmax(axis=1), resp.shape[1])
                cut = np.arange(resp.shape[1])[None, :] < stop[:, None]
                rates.append(((resp == vocab.refusal_ids[0]) & cut).any(axis=1).mean())
            parts.append(f"{name} refused {rates[0]:.2f} -> {rates[1]:.2f}")
    except TrustlabError as exc:
        _fail(exc)
    typer.echo("; ".join(parts) + " (base -> safety head)")
