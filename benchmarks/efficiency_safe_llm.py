"""Block-wise SAFE / SAFE+ post-training pruning of a small Llama beside SparseGPT, Wanda and magnitude.

The paper's LLM setting (Table 1) in miniature, on the claim test's model: a Llama of 2
blocks of width 64 trained here for 300 steps on three quarters of CPython's pydoc topics
(byte-level BPE, 512), 128 calibration sequences of 64 tokens drawn from its training
blocks, 50 % unstructured and 2:4 sparsity of every Linear weight of the blocks, perplexity
on 200 blocks of the held-out quarter of the topics; one torch thread. The peers are
SparseGPT (one-shot OBS reconstruction with the inverse Hessian, block 128, damp 1 %), ALPS
(ADMM with its rho schedule on each Linear's reconstruction, then CG on the kept weights) and
Wanda (one-shot ``|W| ||X||`` per output row), the paper's cheap baselines; magnitude is
one-shot ``|W|`` per layer (per group of 4 under 2:4).
Rows: method, pattern, calibration seed, wall time, ratio to Wanda, measured sparsity,
held-out perplexity.
"""

from __future__ import annotations

import time

import numpy as np

METHODS = ("wanda", "magnitude", "sparsegpt", "alps", "safe", "safe_plus")
PATTERNS = ("unstructured", "2:4")


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.efficiency.safe_llm import decoder_layers, lm_perplexity, prune_causal_lm
    from trustlab.lm import ModelConfig, build_model, encode_texts, english_corpus, train_tokenizer
    from trustlab.lm.training import TrainConfig, train_model

    torch.set_num_threads(1)
    texts = english_corpus()
    tok = train_tokenizer(texts[::2] + texts[1::4], vocab_size=512)
    train = encode_texts(tok, [t for i, t in enumerate(texts) if i % 4 != 3], 64)
    held = encode_texts(tok, [t for i, t in enumerate(texts) if i % 4 == 3], 64).tokens[:200]
    model = build_model(
        ModelConfig("llama", vocab_size=len(tok), d_model=64, n_layers=2, n_heads=4, max_len=64)
    )
    train_model(model, train, TrainConfig(steps=300, batch_size=32, lr=3e-3, warmup=20))
    model.eval()
    seeds = (0,) if quick else (0, 1)
    n_steps = 50 if quick else 100
    dense = lm_perplexity(model, held)
    rows = [
        {"method": "dense", "pattern": "-", "seed": "-", "seconds": 0.0, "vs_wanda": 0.0, "sparsity": 0.0}
        | {"ppl": dense}
    ]
    for seed in seeds:
        pick = np.random.default_rng(seed).choice(len(train.tokens), 128, replace=False)
        calib = train.tokens[pick]
        for pattern in PATTERNS:
            res = {}
            for method in METHODS:
                t = time.perf_counter()
                pruned = prune_causal_lm(
                    model, calib, method=method, pattern=pattern, n_steps=n_steps, random_state=seed
                )
                secs = time.perf_counter() - t
                ws = [
                    m.weight
                    for b in decoder_layers(pruned)
                    for m in b.modules()
                    if isinstance(m, torch.nn.Linear)
                ]
                sparsity = sum(int((w == 0).sum()) for w in ws) / sum(w.numel() for w in ws)
                res[method] = (secs, sparsity, lm_perplexity(pruned, held))
            for method, (secs, sparsity, ppl) in res.items():
                row = {"method": method, "pattern": pattern, "seed": seed, "seconds": secs}
                rows.append(row | {"vs_wanda": secs / res["wanda"][0], "sparsity": sparsity, "ppl": ppl})
    return {
        "title": "SAFE / SAFE+ vs ALPS, SparseGPT, Wanda and magnitude: block-wise post-training pruning, "
        "50 % and 2:4, small Llama",
        "rows": rows,
        "notes": [
            f"{len(seeds)} calibration draw(s) of 128 x 64 tokens; {n_steps} SAFE x-steps per block "
            "(Adam 1e-3, rho 1e-3, lambda 1, K 10, batch 32)",
            "SAFE: two forward/backward passes of a block per x-step (SAM); ALPS, SparseGPT, Wanda "
            "and magnitude: one-shot",
        ],
    }
