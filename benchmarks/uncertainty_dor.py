"""DOR prompt tuning beside zero-shot, CoOp and KgCoOp on the lab's tiny CLIP (base-to-new digits).

Wang, Li & Wei (ICML 2025) compare CoOp + DOR with CoOp and KgCoOp on base and new classes. All
four run on the same frozen tiny CLIP (:func:`trustlab.vision.tiny_clip.tiny_clip`), the same
few-shot images of digits 0-4 and the same held-out noisy digits 0-9, over several seeds (a seed
draws the shots, the test noise and DOR's outliers). Printed per method: base and new accuracy and
top-label ECE (trustlab's ``expected_calibration_error``, 10 bins), the new-class text-feature
divergence, and the median fit time with its ratio to CoOp's (one CPU thread). There is no peer
library here (no pretrained CLIP can be loaded offline); CoOp and KgCoOp are the paper's baselines,
run by the same code with the regulariser switched.

Settings: the lab's own prompt at 4 shots (the model's zero-shot is near its best there, so
prompt tuning gains no base accuracy; the new-class side of the paper shows) and at 16 shots (the
issue's bar: DOR's base and new ECE at or below the better baseline's), a weak prompt at 16 shots
(the context starts from four words no caption used, zero-shot base accuracy 0.69; prompt tuning
gains 0.17 on the base classes, so the base-class side shows), also at lambda = 0.5 for both
regularisers, and a corner mark on every image at 16 shots (zero-shot calibrated on both sides,
CoOp gains 2.6 points of base accuracy). KgCoOp + DOR runs with DOR's lambda = 2 (the paper's for
DOR on other tuners) and KgCoOp's 8.
"""

from __future__ import annotations

import time

import numpy as np

DRAWS = 4
CTX = "a photo of the digit"
SE_OF = ("base_acc", "base_ece", "new_ece")  # standard errors over seeds are reported for these
WEAK_CTX = "apple river cloud table"
SETTINGS = {  # name: (ctx_init, shots per base class, Adam steps, learning rate, lambda, corner mark, draws)
    "lab_prompt_4_shots": (CTX, 4, 300, 0.05, 8.0, 0.0, DRAWS),
    "lab_prompt_16_shots": (CTX, 16, 200, 0.02, 8.0, 0.0, DRAWS),
    "weak_prompt_16_shots": (WEAK_CTX, 16, 200, 0.02, 8.0, 0.0, DRAWS),
    "weak_prompt_16_shots_lambda_0.5": (WEAK_CTX, 16, 200, 0.02, 0.5, 0.0, DRAWS),
    "corner_mark_0.6_16_shots": (CTX, 16, 200, 0.02, 8.0, 0.6, 2),
}


def run(quick: bool = False) -> dict:
    seeds = [0, 1] if quick else [0, 1, 2, 3, 4, 5]
    out: dict = {"seeds": seeds}
    for name, (ctx, shots, steps, lr, reg_weight, mark, draws) in SETTINGS.items():
        out[name] = _setting(ctx, shots, steps, lr, reg_weight, seeds, mark, draws)
    return out


def _setting(
    ctx: str, shots: int, steps: int, lr: float, reg_weight: float, seeds: list[int], mark: float, draws: int
) -> dict:
    import torch

    from trustlab.uncertainty.prompt_tuning import (
        PromptTuner,
        text_feature_divergence,
        top_label_calibration,
        zero_shot_proba,
    )
    from trustlab.vision.tiny_clip import digit_task, outlier_vocabulary, tiny_clip

    torch.set_num_threads(1)
    model = tiny_clip()
    rows: dict[str, dict[str, list[float]]] = {}

    def add(method: str, **values: float) -> None:
        for k, v in values.items():
            rows.setdefault(method, {}).setdefault(k, []).append(v)

    for seed in seeds:
        task = digit_task(shots=shots, n_draws=draws, corner_mark=mark, random_state=seed)
        zb = top_label_calibration(
            task.y_base, zero_shot_proba(model, task.X_base, task.base_names, template=ctx + " {}")
        )
        zn = top_label_calibration(
            task.y_new, zero_shot_proba(model, task.X_new, task.new_names, template=ctx + " {}")
        )
        with torch.no_grad():
            from trustlab.uncertainty._prompt_model import encode_prompts, prompt_tokens

            ids, eot = prompt_tokens(model, [f"{ctx} {c}" for c in task.new_names], "new")
            fd = text_feature_divergence(encode_prompts(model, ids, eot).numpy())
        add(
            "zero-shot",
            base_acc=zb.accuracy,
            base_ece=zb.ece,
            base_conf=zb.confidence,
            new_acc=zn.accuracy,
            new_ece=zn.ece,
            new_conf=zn.confidence,
            fd_new=fd,
            seconds=0.0,
        )
        for method in ("coop", "kgcoop", "dor", "kgcoop+dor"):
            tuner = PromptTuner(
                model,
                method=method,
                ctx_init=ctx,
                n_steps=steps,
                lr=lr,
                reg_weight=2.0 if method == "kgcoop+dor" else reg_weight,
                random_state=seed,
                outlier_words=outlier_vocabulary(task.base_names),
            )
            start = time.process_time()
            tuner.fit(task.X_shots, task.y_shots, class_names=task.base_names)
            seconds = time.process_time() - start
            b = top_label_calibration(task.y_base, tuner.predict_proba(task.X_base))
            n = top_label_calibration(task.y_new, tuner.predict_proba(task.X_new, task.new_names))
            add(
                method,
                base_acc=b.accuracy,
                base_ece=b.ece,
                base_conf=b.confidence,
                new_acc=n.accuracy,
                new_ece=n.ece,
                new_conf=n.confidence,
                fd_new=text_feature_divergence(tuner.text_features(task.new_names)),
                seconds=seconds,
            )
    coop_time = float(np.median(rows["coop"]["seconds"]))
    table = []
    for method, values in rows.items():
        row = {"method": method, **{k: round(float(np.mean(v)), 4) for k, v in values.items()}}
        row.update(
            {f"{k}_se": round(float(np.std(values[k], ddof=1) / np.sqrt(len(seeds))), 4) for k in SE_OF}
        )
        row["seconds"] = round(float(np.median(values["seconds"])), 3)
        row["time_vs_coop"] = round(row["seconds"] / coop_time, 2)
        table.append(row)
    return {
        "setting": f"prompt {ctx!r}, {shots} shots/base class, {steps} Adam steps lr {lr}, "
        f"lambda {reg_weight} (2 for DOR in kgcoop+dor), corner mark {mark}, "
        f"{draws} noise draws of the 540 held-out digits, seeds {seeds}; means over seeds, "
        "median CPU seconds per fit",
        "per_seed_new_ece": {m: [round(x, 4) for x in v["new_ece"]] for m, v in rows.items()},
        "rows": table,
    }
