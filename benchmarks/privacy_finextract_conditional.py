"""Conditional FineXtract beside the paper's baseline, CFG of the fine-tuned model (row 001-12).

The lab's class-conditional tiny DDPM pretrained (with label dropout) on digits 0-5 and
fine-tuned DreamBooth-style on 8 images of one held-out digit with that digit's label as the
"prompt" (the shipped pair for 9, cached pairs for 6, 7, 8). Same starting noise, N, DDIM
steps and clique clustering in every arm; only the noise prediction differs: the fine-tuned
model's classifier-free guidance with the prompt (the paper's baseline, scale 3), or
FineXtract's guidance against the pretrained model's empty-prompt prediction (the paper's
w' = 3, k = -0.02, and w' = 2). Rows: median wall time over all models, ratio to the
baseline, share of the 32 fine-tuning images with a candidate within 0.075 RMS per pixel,
share of all N generations that copy a fine-tuning image.
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def run(quick: bool = False) -> dict:
    from trustlab.privacy.finextract import DIGITS_THRESHOLD, extraction_score
    from trustlab.privacy.finextract_conditional import finextract_conditional
    from trustlab.vision.diffusion_digits_conditional import (
        ConditionalDigitsPairRecipe,
        conditional_digits_finetune_images,
        digits_conditional_ddpm_pair,
    )

    classes = (9,) if quick else (6, 7, 8, 9)
    n_gen, steps, repeats = (40, 10, 1) if quick else (160, 50, 1)
    models = []
    for c in classes:
        r = ConditionalDigitsPairRecipe(finetune_class=c)
        pre, ft = digits_conditional_ddpm_pair(r)
        models.append((c, pre, ft, conditional_digits_finetune_images(r)))
    arms = {
        "fine-tuned model's CFG (scale 3) + clustering": (False, 3.0, 0.0),
        "FineXtract w'=3, k=-0.02 (paper)": (True, 3.0, -0.02),
        "FineXtract w'=2, k=-0.02": (True, 2.0, -0.02),
    }
    rows, base_s = [], None
    for name, (use_pre, w, k) in arms.items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            results = [
                finextract_conditional(
                    ft,
                    pre if use_pre else None,
                    8,
                    prompt=c,
                    n_generations=n_gen,
                    num_inference_steps=steps,
                    guidance_scale=w,
                    correction=k,
                )
                for c, pre, ft, _ in models
            ]
            times.append(time.perf_counter() - t)
        hits, copies = [], []
        for res, (_, _, _, secret) in zip(results, models, strict=True):
            hits.append(extraction_score(res.candidates, secret).extracted)
            g, s = res.generations.reshape(n_gen, -1), secret.reshape(len(secret), -1)
            copies.append(np.sqrt(((g[:, None] - s[None]) ** 2).mean(-1)).min(1) < DIGITS_THRESHOLD)
        sec = statistics.median(times)
        base_s = base_s or sec
        rows.append(
            {
                "arm": name,
                "median_s": sec,
                "vs_cfg": sec / base_s,
                "extracted": f"{int(np.sum(hits))}/{np.size(hits)}",
                "copy_rate": float(np.mean(copies)),
            }
        )
    return {
        "title": f"Conditional FineXtract vs the fine-tuned model's CFG ({len(classes)} models x 8 images, "
        f"N={n_gen}, {steps} DDIM steps)",
        "rows": rows,
        "notes": [
            "paper (Stable Diffusion v1.4 DreamBooth, N=500, N0=10, SSCD): FineXtract ~20% A-ESR, "
            "above the CFG baseline",
            "both arms make two denoiser calls per step (CFG: prompt + empty prompt of the fine-tuned "
            "model; FineXtract: the fine-tuned model with the prompt, the base with the empty prompt)",
            f"{repeats} repeat(s), one torch thread; threshold 0.075 RMS per pixel (pixels in [0, 1])",
        ],
    }
