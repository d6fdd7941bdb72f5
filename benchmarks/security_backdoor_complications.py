"""Backdoor complications (row 002-08): the plain backdoor (baseline) vs the multi-task reduction.

On the lab's pretrained GPT-2 (``load_pretrained_lab``: 2 blocks, width 32) and its synthetic
tasks, the same target-task data (sentiment, trigger -> class 0, poison rate 0.1), seeds and
training budget inject the plain backdoor and the paper's complication reduction (three auxiliary
tasks, target weight 0.4); a clean PTLM is the control. Each PTLM is fine-tuned by the "user" on
two unrelated downstream tasks (topic, emotion), and on the target task itself (the attack must
survive the user's fine-tuning). Columns: KL(P_clean || P_triggered) on the downstream test
texts, top share of triggered texts, downstream accuracy, attack success rate with the attacker's
head and after the user's fine-tuning on the target task, and injection time. The "speed ratio"
is the reduction's injection time over the plain backdoor's.
"""

from __future__ import annotations

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
    X, y = task_data("sentiment", 2000, seed=1)
    aux = [task_data(t, 1000, seed=10 + i) for i, t in enumerate(("formality", "domain", "tone"))]
    inject_cfg = TrainConfig(steps=300, batch_size=32, lr=3e-3)
    down_cfg = TrainConfig(steps=150, batch_size=32, lr=1e-3)
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
                auxiliary=auxiliary,
                train=inject_cfg,
                random_state=seed,
            )
            times[name].append(time.perf_counter() - t)
            ptlms[name] = (bd.model, bd.classifier)
        for name, (ptlm, head) in ptlms.items():
            asr = (
                np.nan
                if head is None
                else trigger_success_rate(head, X_s, y_s, trigger=TRIGGER, target_label=0)
            )
            X_u, y_u = task_data("sentiment", 1000, seed=30)  # the user fine-tunes on the target task
            user = LMSequenceClassifier(ptlm, train=down_cfg, random_state=seed).fit(X_u, y_u)
            asr_user = trigger_success_rate(user, X_s, y_s, trigger=TRIGGER, target_label=0)
            for task in downstream:
                Xd, yd = task_data(task, 1000, seed=20)
                clf = LMSequenceClassifier(ptlm, train=down_cfg, random_state=seed).fit(Xd, yd)
                Xt, yt = task_data(task, 1000, seed=21)
                r = complication_report(clf, Xt, trigger=TRIGGER)
                rows.append(
                    {
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

    def mean(ptlm: str, key: str) -> float:
        return float(np.nanmean([r[key] for r in rows if r["ptlm"] == ptlm]))

    return {
        "title": "backdoor complications: plain backdoor vs multi-task reduction (lab GPT-2, w32, 2 blocks)",
        "rows": rows,
        "speed_ratio_reduced_over_plain_injection": round(ratio, 3),
        "mean_kl": {p: round(mean(p, "kl"), 4) for p in ("clean", "plain", "reduced")},
        "mean_asr": {p: round(mean(p, "asr_attacker_head"), 3) for p in ("plain", "reduced")},
        "notes": [
            f"mean KL over seeds x tasks: clean {mean('clean', 'kl'):.4f}, plain {mean('plain', 'kl'):.4f}, "
            f"reduced {mean('reduced', 'kl'):.4f}",
            f"mean ASR (attacker's head): plain {mean('plain', 'asr_attacker_head'):.3f}, "
            f"reduced {mean('reduced', 'asr_attacker_head'):.3f}; after the user's target-task "
            f"fine-tuning: plain {mean('plain', 'asr_after_user_ft'):.3f}, "
            f"reduced {mean('reduced', 'asr_after_user_ft'):.3f}",
            f"injection time reduced / plain = {ratio:.2f} (one batch of each of 3 auxiliary tasks per step)",
        ],
    }
