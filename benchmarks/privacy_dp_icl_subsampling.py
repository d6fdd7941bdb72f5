"""DP-ICL with Algorithm 3's fresh subsets per token (amplification by subsampling) vs fixed subsets.

The concept task of ``privacy_dp_icl_concepts`` (row 002-10; the claim test's setting): 5 concepts
sharing 4 plausible tokens, 30 private demonstrations of one concept, 4 synthetic demonstrations of
6 tokens (24 noisy tokens, delta = 1e-3 for all), top_k = the 14 content tokens, PTA with alpha = 5.
Arms, paired (the same private set and concept): the default fixed partition of all 30 into 30
subsets of 1 (Gaussian-DP composition); Algorithm 3 with M = 5 and M = 10 subsets of 1 drawn
without replacement per token (q = 1/6, 1/3; PLD of the subsampled Gaussian, replace-one); and
the fixed partition of only the first 5 demonstrations (the same 5 forward passes per token as
M = 5, no amplification). Per-token sigma of each arm, and the paper's Poisson/add-remove epsilon
(Gopi et al.'s PRV accounting) and the RDP bound at the sigma charged.
"""

from __future__ import annotations

import math
import time

import numpy as np


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.privacy.dp_icl import dp_icl_sigma, generate_dp_demonstrations, step_sensitivity
    from trustlab.privacy.dp_icl_concepts import SharedTokenConcepts, concept_accuracy, concept_model
    from trustlab.privacy.dp_icl_subsampling import (
        poisson_subsampled_epsilon,
        subsampled_epsilon,
        subsampled_sigma,
    )

    torch.set_num_threads(1)
    task = SharedTokenConcepts()
    model = concept_model(task)
    repeats = 6 if quick else 60
    epsilons = (1.0, 2.0, 4.0)
    n, steps, k = 30, 4 * task.length, task.n_content
    arms = {
        "fixed, 30 subsets (default)": (None, n),
        "Algorithm 3, M=10 of 30 per token": (10, n),
        "Algorithm 3, M=5 of 30 per token": (5, n),
        "fixed, 5 subsets (first 5 demonstrations)": (None, 5),
    }
    ok: dict[str, list[float]] = {}
    secs = dict.fromkeys(arms, 0.0)
    rng = np.random.default_rng(2)
    for _ in range(repeats):
        concept = int(rng.integers(task.n_concepts))
        private = task.demonstrations(concept, n, rng)
        for eps in epsilons:
            for name, (m, used) in arms.items():
                t = time.perf_counter()
                rel = generate_dp_demonstrations(
                    model,
                    private[:used],
                    epsilon=eps,
                    delta=1e-3,
                    label_prompts=[[task.delim]],
                    n_demonstrations=4,
                    max_tokens=task.length,
                    max_demo_tokens=task.length + 1,
                    top_k=k,
                    alpha=5.0,
                    method="pta",
                    n_subsets=m,
                )
                secs[name] += time.perf_counter() - t
                hit = float(concept_accuracy(model, task, [rel.value], [concept])[0])
                ok.setdefault(f"{name}, eps={eps:g}", []).append(hit)
    rows = [
        {"case": case, "accuracy": float(np.mean(v)), "se": float(np.std(v, ddof=1) / math.sqrt(len(v)))}
        for case, v in ok.items()
    ]
    for eps in epsilons:
        for other in list(arms)[1:]:
            d = np.subtract(ok[f"{other}, eps={eps:g}"], ok[f"fixed, 30 subsets (default), eps={eps:g}"])
            rows.append(
                {
                    "case": f"{other} minus fixed 30, eps={eps:g}",
                    "accuracy": float(d.mean()),
                    "se": float(d.std(ddof=1) / math.sqrt(d.size)),
                }
            )
    for eps in epsilons:  # equal compute: 5 forward passes per token either way
        d = np.subtract(
            ok[f"Algorithm 3, M=5 of 30 per token, eps={eps:g}"],
            ok[f"fixed, 5 subsets (first 5 demonstrations), eps={eps:g}"],
        )
        rows.append(
            {
                "case": f"Algorithm 3 M=5 minus fixed 5 subsets, eps={eps:g}",
                "accuracy": float(d.mean()),
                "se": float(d.std(ddof=1) / math.sqrt(d.size)),
            }
        )
    sens = step_sensitivity(k)
    sigmas = []
    for eps in epsilons:
        row = {"epsilon": eps, "fixed (any M)": dp_icl_sigma(eps, 1e-3, steps, k)}
        for m in (10, 5):
            s = subsampled_sigma(eps, 1e-3, n=n, sample_size=m, n_steps=steps, sensitivity=sens)
            row[f"M={m}"] = s
            row[f"M={m}: paper's Poisson eps"] = poisson_subsampled_epsilon(
                s, 1e-3, q=m / n, n_steps=steps, sensitivity=sens
            )
            row[f"M={m}: RDP eps"] = subsampled_epsilon(
                s, 1e-3, n=n, sample_size=m, n_steps=steps, sensitivity=sens, method="rdp"
            )
        sigmas.append(row)
    base = secs["fixed, 30 subsets (default)"]
    return {
        "title": "DP-ICL on the concept task: Algorithm 3's subsampling vs fixed subsets (PTA, alpha 5)",
        "rows": rows,
        "sigma_per_token": sigmas,
        "notes": [
            f"{repeats} paired repeats; 5 concepts (chance 0.2); 24 noisy tokens; delta 1e-3.",
            "time relative to the fixed 30-subset default: "
            + ", ".join(f"{a} {secs[a] / base:.2f}x" for a in arms if a != "fixed, 30 subsets (default)"),
        ],
    }
