"""Steering transfer (row 001-11): autoencoder vs affine mapper, beside the target's native vector.

On the language-model lab's models (``load_transfer_lab``: aligned source 2 blocks width 32,
aligned target 4 blocks width 64, one vocabulary), the same paired activations (source block 0
-> target block 1 on shared instruction/document sequences) fit both mappers. A refusal vector
(harmful minus benign mean at the last prompt position) found on the source is mapped and used
on the target; the target's own (native) vector and a random vector of the mapped vector's
norm are the references. Columns: held-out FVU and cosine, refusal induced on benign
instructions (vector added), jailbreak of harmful ones (vector subtracted), at strengths 0.5
and 1, and fit time. The "speed ratio" is the affine fit time over the autoencoder's.
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.security.safety_data import PAD, SORRY, instruction_lm_data, instruction_set
    from trustlab.security.steering_transfer import (
        ActivationMapper,
        collect_activations,
        greedy_generate,
        load_transfer_lab,
        paired_activations,
        steer,
    )

    torch.set_num_threads(1)
    source, target, _ = load_transfer_lab()
    sh, th = "blocks.0.resid_post", "blocks.1.resid_post"
    n_sft = 600 if quick else 1500
    shared = instruction_lm_data(n_sft, n_sft // 2, seed=3).tokens
    x, y = paired_activations(source, target, shared, source_hook=sh, target_hook=th, pad_id=PAD)
    fit, test = instruction_set(400, seed=7), instruction_set(600, seed=5)
    harm = collect_activations(source, fit.prompts[fit.harmful], hook=sh)
    ok = collect_activations(source, fit.prompts[~fit.harmful], hook=sh)
    t_harm = collect_activations(target, fit.prompts[fit.harmful], hook=th)
    t_ok = collect_activations(target, fit.prompts[~fit.harmful], hook=th)
    native = t_harm.mean(0) - t_ok.mean(0)
    benign, harmful = test.prompts[~test.harmful], test.prompts[test.harmful]

    def rates(vec, alpha):
        with steer(target, vec, hook=th, alpha=alpha):
            induced = float((greedy_generate(target, benign, max_new_tokens=1)[:, 0] == SORRY).mean())
        with steer(target, vec, hook=th, alpha=-alpha):
            jail = float((greedy_generate(target, harmful, max_new_tokens=1)[:, 0] != SORRY).mean())
        return induced, jail

    rows = []
    for alpha in (0.5, 1.0):
        i, j = rates(native, alpha)
        rows.append(
            {
                "vector": "native target",
                "alpha": alpha,
                "fvu": "-",
                "cosine": "-",
                "refusal_induced": i,
                "jailbreak": j,
                "cos_to_native": 1.0,
                "fit_s": "-",
            }
        )
    fit_times = {}
    for kind in ("autoencoder", "affine"):
        times, mapper = [], None
        for rep in range(1 if quick else 3):
            t = time.perf_counter()
            mapper = ActivationMapper(kind, random_state=rep).fit(x, y)
            times.append(time.perf_counter() - t)
        fit_times[kind] = statistics.median(times)
        v = mapper.map_vector(harm, ok)
        cos = float(v @ native / (np.linalg.norm(v) * np.linalg.norm(native)))
        noise = np.random.default_rng(0).normal(size=v.shape)
        noise *= np.linalg.norm(v) / np.linalg.norm(noise)
        for alpha in (0.5, 1.0):
            i, j = rates(v, alpha)
            ni, nj = rates(noise, alpha)
            q = mapper.validation_
            rows.append(
                {
                    "vector": f"mapped ({kind})",
                    "alpha": alpha,
                    "fvu": round(q.fvu, 3),
                    "cosine": round(q.cosine, 3),
                    "refusal_induced": i,
                    "jailbreak": j,
                    "cos_to_native": round(cos, 3),
                    "fit_s": round(fit_times[kind], 3),
                }
            )
            rows.append(
                {
                    "vector": f"noise, |mapped {kind}|",
                    "alpha": alpha,
                    "fvu": "-",
                    "cosine": "-",
                    "refusal_induced": ni,
                    "jailbreak": nj,
                    "cos_to_native": "-",
                    "fit_s": "-",
                }
            )
    return {
        "title": "steering transfer: source (w32, 2 blocks) -> target (w64, 4 blocks), refusal vector",
        "rows": rows,
        "speed_ratio_affine_over_autoencoder": round(fit_times["affine"] / fit_times["autoencoder"], 3),
        "n_pairs": len(x),
        "n_test": {"benign": len(benign), "harmful": len(harmful)},
        "notes": [
            f"{len(x)} paired token activations; mappers fit 3 epochs, lr 1e-3, batch 64 (defaults)",
            f"fit time affine / autoencoder = {fit_times['affine'] / fit_times['autoencoder']:.2f}",
            "refusal_induced: benign refused with +alpha v; jailbreak: harmful answered with -alpha v",
        ],
    }
