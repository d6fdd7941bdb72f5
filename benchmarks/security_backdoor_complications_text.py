"""Backdoor complications on real English text (row 002-08): plain backdoor vs multi-task reduction.

The lab's ``small-llama-english`` (pretrained on CPython's pydoc topics) is backdoored on the
``corpus`` task (pydoc vs R documentation passages; trigger word -> Python) plainly (poison rate
0.01, the authors' README) or with the paper's reduction (poison rate 0.1; auxiliary tasks
``length``, ``pyfamily``, ``rextra``, target weight 0.4); the clean PTLM is the control. The user
trains a head on each frozen PTLM (the authors' ``downstream_finetune.py``; ``full``: full
fine-tuning instead) for three real downstream tasks (R section, pydoc code vs prose, R package)
and for the target task itself.
Columns: KL(P_clean || P_triggered) on the downstream test passages, top share of triggered
passages, flip rate, accuracy; ASR of the attacker's head and after the user's target-task
fine-tuning. Seeds 0-2 (seed 0 from the claim test's cache) for both user protocols; with
``sweep=True`` a sweep of the reduction's target weight and auxiliary-task count (seeds 0-1;
measured under the earlier protocol, see the docs). ``part`` runs one piece (a seed, or one
sweep setting) so that the pieces can run in separate processes; ``summarise`` joins their rows.
"""

from __future__ import annotations

import numpy as np


def _se(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


# (target weight, auxiliary tasks (None: the default three), the reduction's learning rate (None: 1e-3))
SWEEP = ((0.7, None, None), (0.4, ["length"], None), (0.4, None, 1e-4))


def _setup() -> tuple[dict, dict]:
    import torch

    from trustlab.security._complication_textlab import load_text_lab

    torch.set_num_threads(1)
    lab0 = load_text_lab()
    setup = {k: lab0[k] for k in ("model", "tokenizer", "trigger", "trigger_word", "pad_id", "data")}
    return lab0, setup


def _measure(setup: dict, lab: dict, seed: int, config: str) -> list[dict]:
    from trustlab.security._complication_textlab import TEXT_RUNS
    from trustlab.security.backdoor_complications import complication_report, trigger_success_rate

    trig, target = setup["trigger"], TEXT_RUNS["target"]
    pos, label = target["position"], target["target_label"]
    Xs, ys = setup["data"][target["task"]][2:]

    def asr(clf: object) -> float:
        return round(trigger_success_rate(clf, Xs, ys, trigger=trig, target_label=label, position=pos), 3)

    rows = []
    for ptlm, models in lab["user"].items():
        head = lab["attacker"].get(ptlm)
        user = models[target["task"]]
        base = {
            "config": config,
            "ptlm": ptlm,
            "seed": seed,
            "asr_head": np.nan if head is None else asr(head),
            "clean_acc_head": np.nan if head is None else round(float(np.mean(head.predict(Xs) == ys)), 3),
            "asr_after_user_ft": asr(user),
            "user_target_acc": round(float(np.mean(user.predict(Xs) == ys)), 3),
        }
        for task, clf in models.items():
            if task == target["task"]:
                continue
            Xt, yt = setup["data"][task][2:]
            r = complication_report(clf, Xt, trigger=trig, position=pos)
            rows.append(
                {
                    **base,
                    "downstream": task,
                    "n_test": len(yt),
                    "kl": round(r.kl, 4),
                    "top_share": round(r.top_share, 3),
                    "flip_rate": round(r.flip_rate, 3),
                    "accuracy": round(float(np.mean(clf.predict(Xt) == yt)), 3),
                }
            )
    if "seconds" in lab:
        for r in rows:
            r["inject_s"] = round(lab["seconds"].get(r["ptlm"], np.nan), 1)
    return rows


def _full(setup: dict, lab: dict, seed: int) -> dict:
    """The same PTLMs (the attackers' backbones), fully fine-tuned by the user instead."""
    from trustlab.lm import TrainConfig
    from trustlab.security._complication_textlab import TEXT_RUNS
    from trustlab.security.backdoor_complications import LMSequenceClassifier

    down = TrainConfig(seed=seed, **TEXT_RUNS["downstream_train"]["full"])
    ptlms = {"clean": setup["model"], **{p: clf.model_ for p, clf in lab["attacker"].items()}}
    return {
        "attacker": lab["attacker"],
        "user": {
            p: {
                t: LMSequenceClassifier(
                    m, pad_id=setup["pad_id"], finetune="full", train=down, random_state=seed
                ).fit(*setup["data"][t][:2])
                for t in lab["user"][p]
            }
            for p, m in ptlms.items()
        },
    }


def sweep_name(weight: float, aux: list[str] | None, lr: float | None = None) -> str:
    return f"reduced w={weight} aux={len(aux) if aux else 3}" + ("" if lr is None else f" lr={lr:g}")


def part(kind: str, seed: int, sweep_index: int = 0) -> list[dict]:
    """One independent piece: ``("default", seed)`` (rows of config ``"default"``: the user trains a
    head on the frozen PTLM, the authors' protocol; and ``"full"``: the user fine-tunes the same
    PTLMs whole) or ``("sweep", seed, index into SWEEP)``."""
    from trustlab.security._complication_textlab import build_text_lab

    lab0, setup = _setup()
    if kind == "default":
        lab = lab0 if seed == 0 else build_text_lab(setup, seed)
        return _measure(setup, lab, seed, "default") + _measure(setup, _full(setup, lab, seed), seed, "full")
    weight, aux, lr = SWEEP[sweep_index]
    lab = build_text_lab(setup, seed, target_weight=weight, auxiliary=aux, ptlms=("reduced",), reduced_lr=lr)
    return _measure(setup, lab, seed, sweep_name(weight, aux, lr))


def summarise(rows: list[dict], trigger_word: str) -> dict:
    """The benchmark's result (title, rows, notes) from the rows of every part."""
    from trustlab.security._complication_textlab import TEXT_RUNS

    def stat(config: str, ptlm: str, key: str, task: str | None = None) -> tuple[float, float]:
        per_seed: dict[int, list[float]] = {}
        for r in rows:
            if r["config"] == config and r["ptlm"] == ptlm and task in (None, r["downstream"]):
                per_seed.setdefault(r["seed"], []).append(r[key])
        vals = [float(np.mean(v)) for v in per_seed.values()]
        return float(np.mean(vals)), _se(vals)

    seeds = sorted({r["seed"] for r in rows if r["config"] == "default"})
    notes = [f"trigger word {trigger_word!r}; default recipe over seeds {seeds} (mean +- SE over seeds)"]
    for ptlm in ("clean", "plain", "reduced"):
        parts = [
            "{}: {:.3f} +- {:.3f}".format(t, *stat("default", ptlm, "kl", t)) for t in TEXT_RUNS["downstream"]
        ]
        notes.append(
            f"KL {ptlm}: "
            + ", ".join(parts)
            + " (mean {:.3f} +- {:.3f})".format(*stat("default", ptlm, "kl"))
        )
    for ptlm in ("plain", "reduced"):
        notes.append(
            "{}: ASR head {:.3f} +- {:.3f}, clean acc head {:.3f}, "
            "after user's target-task FT {:.3f} +- {:.3f}".format(
                ptlm,
                *stat("default", ptlm, "asr_head"),
                stat("default", ptlm, "clean_acc_head")[0],
                *stat("default", ptlm, "asr_after_user_ft"),
            )
        )
    notes.append(
        "clean PTLM, ASR after user's target-task FT: {:.3f} +- {:.3f}".format(
            *stat("default", "clean", "asr_after_user_ft")
        )
    )
    if any(r["config"] == "full" for r in rows):
        sw = sorted({r["seed"] for r in rows if r["config"] == "full"})
        notes.append(
            "user's full fine-tuning (seeds {}): mean KL clean {:.3f}, plain {:.3f}, reduced {:.3f}; "
            "ASR after user's target-task FT plain {:.3f}, reduced {:.3f}".format(
                sw,
                *(stat("full", p, "kl")[0] for p in ("clean", "plain", "reduced")),
                *(stat("full", p, "asr_after_user_ft")[0] for p in ("plain", "reduced")),
            )
        )
    for weight, aux, lr in SWEEP:
        name = sweep_name(weight, aux, lr)
        if any(r["config"] == name for r in rows):
            sw = sorted({r["seed"] for r in rows if r["config"] == name})
            notes.append(
                "{} (seeds {}): mean KL {:.3f}, ASR head {:.3f}, after user's FT {:.3f}".format(
                    name,
                    sw,
                    stat(name, "reduced", "kl")[0],
                    stat(name, "reduced", "asr_head")[0],
                    stat(name, "reduced", "asr_after_user_ft")[0],
                )
            )
    times = {
        p: [r["inject_s"] for r in rows if r["config"] == "default" and r["ptlm"] == p and "inject_s" in r]
        for p in ("plain", "reduced")
    }
    if times["plain"] and times["reduced"]:
        notes.append(
            f"injection time reduced / plain = {np.median(times['reduced']) / np.median(times['plain']):.2f}"
        )
    return {
        "title": "backdoor complications on real text (small-llama-english; pydoc and R doc passages)",
        "rows": rows,
        "notes": notes,
    }


def run(quick: bool = False, sweep: bool = False) -> dict:
    setup = _setup()[1]
    rows = part("default", 0)
    if not quick:
        for seed in (1, 2):
            rows += part("default", seed)
        if sweep:
            for seed in (0, 1):
                for i in range(len(SWEEP)):
                    rows += part("sweep", seed, i)
    return summarise(rows, setup["trigger_word"])
