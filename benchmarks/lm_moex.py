"""MoE-X (row 003-05): training cost and interpretability beside the lab's Mixtral and a dense MLP.

Same data (the lab's in-context tasks: 4 affine maps mod 8, 6 pairs), same model shape
(Mixtral attention, 2 blocks, width 32, 4 experts top-2 of width 64), same schedule and seed.
Variants: the lab's own ``transformers`` Mixtral (SwiGLU experts, softmax top-2: the peer for
speed), MoE-X (ReLU experts, sparsity-aware routing), a standard MoE with GELU experts and a
dense GELU MLP of the same active width. Printed: seconds per training step and the ratio to
the lab's Mixtral, held-out loss, and for the trustlab variants the interpretability figures of
:func:`trustlab.lm.moex_compare.compare_moe_variants` (BSP coverage and reconstruction).
"""

from __future__ import annotations

import time


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.lm import ModelConfig, TrainConfig, build_model, evaluate_loss, incontext_tasks, train_model
    from trustlab.lm.moex_compare import compare_moe_variants

    torch.set_num_threads(1)
    steps = 60 if quick else 300
    cfg = ModelConfig(
        "mixtral", vocab_size=8, d_model=32, n_layers=2, n_heads=2, max_len=12, n_experts=4, top_k=2
    )
    pool = incontext_tasks(4300, 6, 4, n_values=8, seed=0)
    from trustlab.lm.corpora import TokenData

    train = TokenData(
        pool.tokens[:4000], pool.loss_mask[:4000], 8, {k: v[:4000] for k, v in pool.latent.items()}
    )
    evals = TokenData(
        pool.tokens[4000:], pool.loss_mask[4000:], 8, {k: v[4000:] for k, v in pool.latent.items()}
    )
    tcfg = TrainConfig(steps=steps, batch_size=32, lr=1e-2, warmup=10, seed=0)
    lab = build_model(ModelConfig.from_dict({**cfg.to_dict(), "d_ff": 64}), seed=0)
    t = time.perf_counter()
    train_model(lab, train, tcfg)
    t_lab = (time.perf_counter() - t) / steps
    rows = [
        {
            "variant": "lab Mixtral (transformers)",
            "s / step": t_lab,
            "ratio": 1.0,
            "loss": evaluate_loss(lab, evals),
            "coverage": "-",
            "reconstruction": "-",
            "active": "-",
        }
    ]
    t = time.perf_counter()
    res = compare_moe_variants(seeds=[0], train_config=tcfg)
    per = (time.perf_counter() - t) / (3 * steps)  # includes the scoring passes: an upper bound
    for i, name in enumerate(res.variants):
        rows.append(
            {
                "variant": name,
                "s / step": per,
                "ratio": per / t_lab,
                "loss": float(res.loss[i, 0]),
                "coverage": float(res.coverage[i, 0]),
                "reconstruction": float(res.reconstruction[i, 0]),
                "active": float(res.active[i, 0]),
            }
        )
    return {
        "title": f"MoE-X vs standard MoE vs dense, {steps} steps (seed 0)",
        "rows": rows,
        "notes": [
            "trustlab variants: mean seconds per step over the three, scoring included (upper bound)",
            "coverage / reconstruction: BSP-style scores of the last block's wide hidden layer",
        ],
    }
