"""Backdoor complications (row 002-08): the plain backdoor (baseline) vs the multi-task reduction.

On the lab's pretrained GPT-2 (``load_pretrained_lab``: 2 blocks, width 32) and its synthetic tasks,
the same target-task data (sentiment, trigger -> class 0), seeds and training budget inject the
plain backdoor (poison rate 0.01, the authors' README) and the paper's complication reduction
(poison rate 0.1, three auxiliary tasks, target weight 0.4); a clean PTLM is the control. The "user"
trains a new head on each PTLM for two unrelated downstream tasks (topic, emotion) and for the
target task itself (the attack must survive the user's step), in both protocols: ``head`` (backbone
frozen, the authors' ``downstream_finetune.py``) and ``full`` fine-tuning. Columns: KL(P_clean ||
P_triggered) on the downstream test texts, top share of triggered texts, downstream accuracy, attack
success rate with the attacker's head and after the user's fine-tuning on the target task, and
injection time. The "speed ratio" is the reduction's injection time over the plain backdoor's.
"""

from __future__ import annotations

import itertools
import time

import numpy as np


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.lm import TrainConfig
    from trustlab.security._complication_lab import TASKS, TRIGGER, load_pretrained_lab, task_data
    from trustlab.security.backdoor_complications import (
        LMSequenceClassifier,
        complication_report,
        inject_backdoor,
        trigger_success_rate,
    )

    torch.set_num_threads(1)
    base = load_pretrained_lab()
    X, y = task_data("sentiment", 8000, seed=1)
    aux = [task_data(t, 1000, seed=10 + i) for i, t in enumerate(("formality", "domain", "tone"))]
    inject_cfg = TrainConfig(steps=600, batch_size=32, lr=3e-3)
    rates = {"plain": 0.01, "reduced": 0.1}  # the authors' poison rates
    down_cfgs = {
        "head": TrainConfig(steps=150, batch_size=32, lr=1e-2),
        "full": TrainConfig(steps=150, batch_size=32, lr=1e-3),
    }
    X_s, y_s = task_data("sentiment", 500, seed=2)
    seeds = (0,) if quick else (0, 1, 2)
    downstream = ("topic",) if quick else ("topic", "emotion")
    rows, times = [], {"plain": [], "reduced": []}
    for seed in seeds:
        ptlms = {"clean": (base, None)}
        for name, auxiliary in (("plain", None), ("reduced", aux)):
            t = time.perf_counter()
            bd = inject_backdoor(
                base,
                X,
                y,
                trigger=TRIGGER,
                target_label=0,
                poison_rate=rates[name],
                auxiliary=auxiliary,
                train=inject_cfg,
                random_state=seed,
            )
            times[name].append(time.perf_counter() - t)
            ptlms[name] = (bd.model, bd.classifier)
        for (name, (ptlm, head)), ft in itertools.product(ptlms.items(), down_cfgs):
            down_cfg = down_cfgs[ft]
            asr = (
                np.nan
                if head is None
                else trigger_success_rate(head, X_s, y_s, trigger=TRIGGER, target_label=0)
            )
            X_u, y_u = task_data("sentiment", 1000, seed=30)  # the user's own target-task model
            user = LMSequenceClassifier(ptlm, finetune=ft, train=down_cfg, random_state=seed).fit(X_u, y_u)
            asr_user = trigger_success_rate(user, X_s, y_s, trigger=TRIGGER, target_label=0)
            for task in downstream:
                Xd, yd = task_data(task, 1000, seed=20)
                clf = LMSequenceClassifier(ptlm, finetune=ft, train=down_cfg, random_state=seed).fit(Xd, yd)
                Xt, yt = task_data(task, 1000, seed=21)
                r = complication_report(clf, Xt, trigger=TRIGGER)
                rows.append(
                    {
                        "user": ft,
                        "ptlm": name,
                        "seed": seed,
                        "downstream": f"{task} ({TASKS[task]})",
                        "kl": round(r.kl, 4),
                        "top_share": round(r.top_share, 3),
                        "flip_rate": round(r.flip_rate, 3),
                        "accuracy": round(float(np.mean(clf.predict(Xt) == yt)), 3),
                        "asr_attacker_head": round(float(asr), 3),
                        "asr_after_user_ft": round(asr_user, 3),
                    }
                )
    ratio = float(np.median(times["reduced"]) / np.median(times["plain"]))

    def mean(ptlm: str, key: str, ft: str) -> float:
        return float(np.nanmean([r[key] for r in rows if r["ptlm"] == ptlm and r["user"] == ft]))

    notes = []
    for ft in down_cfgs:
        notes += [
            f"user {ft}: mean KL over seeds x tasks: clean {mean('clean', 'kl', ft):.4f}, "
            f"plain {mean('plain', 'kl', ft):.4f}, reduced {mean('reduced', 'kl', ft):.4f}; "
            f"downstream accuracy clean {mean('clean', 'accuracy', ft):.3f}, "
            f"plain {mean('plain', 'accuracy', ft):.3f}, reduced {mean('reduced', 'accuracy', ft):.3f}",
            f"user {ft}: ASR after the user's target-task step: "
            + ", ".join(f"{p} {mean(p, 'asr_after_user_ft', ft):.3f}" for p in ("clean", "plain", "reduced")),
        ]
    notes += [
        f"mean ASR (attacker's head): plain {mean('plain', 'asr_attacker_head', 'head'):.3f}, "
        f"reduced {mean('reduced', 'asr_attacker_head', 'head'):.3f}",
        f"injection time reduced / plain = {ratio:.2f} (one batch of each of 3 auxiliary tasks per step)",
    ]
    return {
        "title": "backdoor complications: plain backdoor vs multi-task reduction (lab GPT-2, w32, 2 blocks)",
        "rows": rows,
        "speed_ratio_reduced_over_plain_injection": round(ratio, 3),
        "mean_kl": {
            ft: {p: round(mean(p, "kl", ft), 4) for p in ("clean", "plain", "reduced")} for ft in down_cfgs
        },
        "mean_asr": {p: round(mean(p, "asr_attacker_head", "head"), 3) for p in ("plain", "reduced")},
        "notes": notes,
    }
