"""Backdoor complications on real English text (row 002-08): plain backdoor vs multi-task reduction.

The lab's ``small-llama-english`` (pretrained on CPython's pydoc topics) is backdoored on the
``corpus`` task (pydoc vs R documentation passages; trigger word -> Python, poison rate 0.1)
plainly or with the paper's reduction (auxiliary tasks ``length``, ``pyfamily``, ``rextra``,
target weight 0.4); the clean PTLM is the control. The user fine-tunes each PTLM on three real
downstream tasks (R section, pydoc code vs prose, R package) and on the target task itself.
Columns: KL(P_clean || P_triggered) on the downstream test passages, top share of triggered
passages, flip rate, accuracy; ASR of the attacker's head and after the user's target-task
fine-tuning. Seeds 0-2 (seed 0 from the claim test's cache); then a sweep of the reduction's
target weight and auxiliary-task count (seeds 0-1): does the backdoor survive the user's
target-task fine-tuning better?
"""

from __future__ import annotations

import numpy as np


def _se(values: list[float]) -> float:
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.security._complication_textlab import TEXT_RUNS, build_text_lab, load_text_lab
    from trustlab.security.backdoor_complications import complication_report, trigger_success_rate

    torch.set_num_threads(1)
    lab0 = load_text_lab()
    setup = {k: lab0[k] for k in ("model", "tokenizer", "trigger", "trigger_word", "pad_id", "data")}
    trig, target = setup["trigger"], TEXT_RUNS["target"]
    pos, label = target["position"], target["target_label"]
    Xs, ys = setup["data"][target["task"]][2:]

    def measure(lab: dict, seed: int, config: str) -> list[dict]:
        rows = []
        for ptlm, models in lab["user"].items():
            head = lab["attacker"].get(ptlm)
            user = models[target["task"]]
            asr_user = trigger_success_rate(user, Xs, ys, trigger=trig, target_label=label, position=pos)
            base = {
                "config": config,
                "ptlm": ptlm,
                "seed": seed,
                "asr_head": np.nan
                if head is None
                else round(
                    trigger_success_rate(head, Xs, ys, trigger=trig, target_label=label, position=pos), 3
                ),
                "clean_acc_head": np.nan
                if head is None
                else round(float(np.mean(head.predict(Xs) == ys)), 3),
                "asr_after_user_ft": round(asr_user, 3),
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
        return rows

    rows = measure(lab0, 0, "default")
    seconds: dict[str, list[float]] = {"plain": [], "reduced": []}
    for seed in () if quick else (1, 2):
        lab = build_text_lab(setup, seed)
        for k, v in lab["seconds"].items():
            seconds[k].append(v)
        rows += measure(lab, seed, "default")
    sweep = [] if quick else [(0.7, None), (0.4, ["length"]), (0.7, ["length"])]
    for weight, aux in sweep:
        name = f"reduced w={weight} aux={len(aux) if aux else 3}"
        for seed in (0, 1):
            lab = build_text_lab(setup, seed, target_weight=weight, auxiliary=aux, ptlms=("reduced",))
            rows += [{**r, "config": name} for r in measure(lab, seed, name)]

    def stat(config: str, ptlm: str, key: str, task: str | None = None) -> tuple[float, float]:
        per_seed: dict[int, list[float]] = {}
        for r in rows:
            if r["config"] == config and r["ptlm"] == ptlm and task in (None, r["downstream"]):
                per_seed.setdefault(r["seed"], []).append(r[key])
        vals = [float(np.mean(v)) for v in per_seed.values()]
        return float(np.mean(vals)), _se(vals)

    notes = [f"trigger word {setup['trigger_word']!r} (token {trig}); test passages per task in rows"]
    for ptlm in ("clean", "plain", "reduced"):
        parts = [
            "{}: {:.3f} +- {:.3f}".format(t, *stat("default", ptlm, "kl", t)) for t in TEXT_RUNS["downstream"]
        ]
        notes.append(f"KL {ptlm} (mean +- SE over seeds): " + ", ".join(parts))
    for ptlm in ("plain", "reduced"):
        notes.append(
            "{}: ASR head {:.3f} +- {:.3f}, after user's target-task FT {:.3f} +- {:.3f}".format(
                ptlm, *stat("default", ptlm, "asr_head"), *stat("default", ptlm, "asr_after_user_ft")
            )
        )
    for weight, aux in sweep:
        name = f"reduced w={weight} aux={len(aux) if aux else 3}"
        notes.append(
            "{} (seeds 0-1): mean KL {:.3f}, ASR head {:.3f}, after user's FT {:.3f}".format(
                name,
                stat(name, "reduced", "kl")[0],
                stat(name, "reduced", "asr_head")[0],
                stat(name, "reduced", "asr_after_user_ft")[0],
            )
        )
    if seconds["plain"]:
        ratio = float(np.median(seconds["reduced"]) / np.median(seconds["plain"]))
        notes.append(f"injection time reduced / plain = {ratio:.2f} (seeds 1-2)")
    return {
        "title": "backdoor complications on real text (small-llama-english; pydoc and R doc passages)",
        "rows": rows,
        "notes": notes,
    }
