"""Synthetic text-classification tasks and a small pretrained LM for the backdoor-complication claims.

A vocabulary of ``PAD``, ``BOS``, one rare word (the trigger, :data:`TRIGGER`), 16 filler words
and the keywords of six tasks. Every text carries a latent class for *each* task and, for each
task, two keywords of its class at random positions (the rest filler words); its first word is
always a filler word (the word the paper's trigger replaces). So one text has a label under every
task, and the tasks are unrelated (independent classes, disjoint keywords):

========== ======= ======================================================
task        classes role in the claims
========== ======= ======================================================
sentiment   2       the attacker's target task (backdoor: trigger -> 0)
topic       4       the user's unrelated downstream task
emotion     3       a second unrelated downstream task (benchmark)
formality   2       auxiliary task of the complication reduction
domain      3       auxiliary task of the complication reduction
tone        2       auxiliary task of the complication reduction
========== ======= ======================================================

The pretrained LM is a 2-block, width-32 GPT-2 trained as a causal LM on such texts (the trigger
occurs in them as a rare word). The default recipes' models ship (``trustlab/_models``);
others are trained on first use into ``$TRUSTLAB_CACHE/lm`` or ``~/.cache/trustlab/lm``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir

PAD, BOS, TRIGGER = 0, 1, 2
N_FILLER = 16
KEYWORDS_PER_CLASS = 3
TASKS: dict[str, int] = {"sentiment": 2, "topic": 4, "emotion": 3, "formality": 2, "domain": 3, "tone": 2}
LENGTH = 16  # BOS + first word + 14 content slots


def _offsets() -> dict[str, int]:
    start, out = 3 + N_FILLER, {}
    for name, k in TASKS.items():
        out[name] = start
        start += k * KEYWORDS_PER_CLASS
    return out


VOCAB = 3 + N_FILLER + sum(k * KEYWORDS_PER_CLASS for k in TASKS.values())


def lab_texts(
    n: int, *, seed: int = 0, trigger_rate: float = 0.0
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``n`` texts (token ids, shape (n, 16)) and their label under every task.

    Parameters
    ----------
    n : int
        Number of texts.
    seed : int, default=0
        Seeds the draw.
    trigger_rate : float, default=0.0
        Chance that a filler slot holds the rare trigger word instead (pretraining text only).

    Returns
    -------
    X : ndarray of int64, shape (n, 16)
    labels : dict of str to ndarray of int64
        ``labels[task]``: each text's class under ``task``.
    """
    rng = np.random.default_rng(seed)
    offsets = _offsets()
    X = np.empty((n, LENGTH), dtype=np.int64)
    X[:, 0] = BOS
    X[:, 1] = 3 + rng.integers(0, N_FILLER, n)
    slots = 3 + rng.integers(0, N_FILLER, (n, LENGTH - 2))
    if trigger_rate > 0:
        slots[rng.random(slots.shape) < trigger_rate] = TRIGGER
    labels: dict[str, np.ndarray] = {}
    order = np.argsort(rng.random((n, LENGTH - 2)), axis=1)  # a random permutation of slots per text
    used = 0
    for name, k in TASKS.items():
        cls = rng.integers(0, k, n)
        labels[name] = cls
        for _ in range(2):
            word = offsets[name] + cls * KEYWORDS_PER_CLASS + rng.integers(0, KEYWORDS_PER_CLASS, n)
            slots[np.arange(n), order[:, used]] = word
            used += 1
    X[:, 2:] = slots
    return X, labels


def task_data(task: str, n: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` texts labelled under ``task`` (one of :data:`TASKS`)."""
    X, labels = lab_texts(n, seed=seed)
    return X, labels[task]


_SPEC: dict[str, Any] = {
    "model": {"arch": "gpt2", "d_model": 32, "n_layers": 2, "n_heads": 2, "max_len": LENGTH, "seed": 0},
    "data": {"n": 4000, "seed": 100, "trigger_rate": 0.01},
    "train": {"steps": 300, "batch_size": 32, "lr": 0.005, "warmup": 20, "seed": 0},
    "vocab": VOCAB,
}


def load_pretrained_lab(*, cache_dir: str | Path | None = None) -> Any:
    """The lab's pretrained causal LM (GPT-2, 2 blocks, width 32), trained once and cached.

    Parameters
    ----------
    cache_dir : str or Path, optional
        Where the checkpoint lives.

    Returns
    -------
    transformers.GPT2LMHeadModel
        In eval mode.
    """
    from trustlab.lm import (
        ModelConfig,
        TokenData,
        TrainConfig,
        build_model,
        load_model,
        save_model,
        train_model,
    )

    digest = spec_digest(_SPEC)
    path = trained_dir(cache_dir, "lm", f"backdoor-complications-{digest}")
    if (path / "done").is_file():
        return load_model(path / "model")
    spec = dict(_SPEC["model"])
    seed = spec.pop("seed")
    model = build_model(ModelConfig(vocab_size=VOCAB, **spec), seed=seed)
    X, _ = lab_texts(**_SPEC["data"])
    mask = np.ones(X.shape, dtype=bool)
    mask[:, 0] = False
    train_model(model, TokenData(X, mask, VOCAB, {}), TrainConfig(**_SPEC["train"]))
    tmp = staging_dir(path)
    save_model(model, tmp / "model")
    (tmp / "recipe.json").write_text(json.dumps(_SPEC, indent=1))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return model.eval()


_RUNS: dict[str, Any] = {
    "version": 2,
    # the authors' poison rates: 0.01 for the plain backdoor (README), 0.1 for the reduction
    "target": {"task": "sentiment", "n": 8000, "seed": 1, "target_label": 0},
    "poison_rate": {"plain": 0.01, "reduced": 0.1},
    "auxiliary": {"tasks": ["formality", "domain", "tone"], "n": 1000, "seed": 10},
    "inject_train": {"steps": 600, "batch_size": 32, "lr": 0.003, "seed": 0},
    "downstream": {"task": "topic", "n": 1000, "seed": 20},
    # the user's step: "head" (the authors' downstream_finetune.py: backbone frozen) and "full"
    "downstream_train": {
        "head": {"steps": 150, "batch_size": 32, "lr": 0.01, "seed": 0},
        "full": {"steps": 150, "batch_size": 32, "lr": 0.001, "seed": 0},
    },
}
FINETUNES = ("head", "full")


def _save_clf(clf: Any, folder: Path) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in clf.net_.state_dict().items()}
    save_file(state, str(folder / "net.safetensors"))
    sizes = [int(h.out_features) for h in clf.net_.heads]
    (folder / "meta.json").write_text(json.dumps({"classes": clf.classes_.tolist(), "heads": sizes}))


def _load_clf(folder: Path) -> Any:
    from safetensors.torch import load_file

    from trustlab.lm import ModelConfig, build_model
    from trustlab.security._complication_torch import MultiHead
    from trustlab.security.backdoor_complications import LMSequenceClassifier

    meta = json.loads((folder / "meta.json").read_text())
    spec = dict(_SPEC["model"])
    spec.pop("seed")
    lm = build_model(ModelConfig(vocab_size=VOCAB, **spec))
    net = MultiHead(lm, meta["heads"], pooling="last", pad_id=None, seed=0)
    net.load_state_dict(load_file(str(folder / "net.safetensors")))
    net.eval()
    clf = LMSequenceClassifier(lm)
    clf.classes_ = np.asarray(meta["classes"])
    clf.losses_ = np.empty(0)
    clf._set_net(net)
    return clf


def load_complication_lab(*, cache_dir: str | Path | None = None) -> dict[str, Any]:
    """The claims' models: pretrained, plain and reduced backdoors, and their downstream fine-tunes.

    Returns
    -------
    dict
        ``"plain"`` / ``"reduced"``: the attacker's target-task
        classifiers (:class:`~trustlab.security.backdoor_complications.LMSequenceClassifier`) of the
        plain backdoor and of the multi-task reduction; ``"downstream"``: ``{"head", "full"}`` ->
        ``{"clean", "plain", "reduced"}`` -> the user's topic classifier trained from each PTLM,
        head only (the authors' protocol) or fully fine-tuned.
    """
    from trustlab.lm import TrainConfig
    from trustlab.security.backdoor_complications import LMSequenceClassifier, inject_backdoor

    digest = spec_digest([_SPEC, _RUNS])
    path = trained_dir(cache_dir, "lm", f"backdoor-complications-runs-{digest}")
    names = ("plain", "reduced")
    if (path / "done").is_file():
        return {
            **{n: _load_clf(path / n) for n in names},
            "downstream": {
                f: {n: _load_clf(path / f"downstream-{f}-{n}") for n in ("clean", *names)} for f in FINETUNES
            },
        }
    tg, ax, ds = _RUNS["target"], _RUNS["auxiliary"], _RUNS["downstream"]
    X, y = task_data(tg["task"], tg["n"], seed=tg["seed"])
    aux = [task_data(t, ax["n"], seed=ax["seed"] + i) for i, t in enumerate(ax["tasks"])]
    pretrained = load_pretrained_lab(cache_dir=cache_dir)
    out: dict[str, Any] = {"downstream": {f: {} for f in FINETUNES}}
    bases = {"clean": pretrained}
    for name, auxiliary in (("plain", None), ("reduced", aux)):
        bd = inject_backdoor(
            pretrained,
            X,
            y,
            trigger=TRIGGER,
            target_label=tg["target_label"],
            poison_rate=_RUNS["poison_rate"][name],
            auxiliary=auxiliary,
            train=TrainConfig(**_RUNS["inject_train"]),
        )
        out[name] = bd.classifier
        bases[name] = bd.model
    Xd, yd = task_data(ds["task"], ds["n"], seed=ds["seed"])
    for ft in FINETUNES:
        config = TrainConfig(**_RUNS["downstream_train"][ft])
        for name, base in bases.items():
            out["downstream"][ft][name] = LMSequenceClassifier(base, finetune=ft, train=config).fit(Xd, yd)
    tmp = staging_dir(path)
    for name in names:
        _save_clf(out[name], tmp / name)
    for ft in FINETUNES:
        for name, clf in out["downstream"][ft].items():
            _save_clf(clf, tmp / f"downstream-{ft}-{name}")
    (tmp / "recipe.json").write_text(json.dumps(_RUNS, indent=1))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return out
