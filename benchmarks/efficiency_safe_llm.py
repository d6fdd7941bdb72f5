"""Block-wise SAFE / SAFE+ post-training pruning of a small Llama beside Wanda and magnitude pruning.

The paper's LLM setting (Table 1) in miniature: the shipped ``small-llama-english`` (Llama,
4 blocks of width 96, trained on CPython's pydoc topics; trained into the cache on first
use), 128 calibration sequences of 64 tokens drawn from its training split, 50 %
unstructured sparsity of every Linear weight of the blocks, perplexity on the held-out
topics (the recipe's test split). The peer is Wanda (one-shot ``|W| ||X||`` per output
row, the paper's strongest cheap baseline); magnitude is one-shot ``|W|`` per layer.
Rows: method, wall time, ratio to Wanda, measured sparsity, held-out perplexity.
"""

from __future__ import annotations

import time

import numpy as np

METHODS = ("wanda", "magnitude", "safe", "safe_plus")


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.efficiency.safe_llm import decoder_layers, lm_perplexity, prune_causal_lm
    from trustlab.lm.recipes import get_recipe, load_shipped, make_data

    recipe = get_recipe("small-llama-english")
    model, _tok, _path = load_shipped("small-llama-english")
    train, _ = make_data(recipe, split="train")
    test, _ = make_data(recipe, split="test")
    seeds = (0,) if quick else (0, 1)
    n_steps = 50 if quick else 100
    dense = lm_perplexity(model, test.tokens)
    rows = [{"method": "dense", "seed": "-", "seconds": 0.0, "vs_wanda": 0.0, "sparsity": 0.0, "ppl": dense}]
    for seed in seeds:
        pick = np.random.default_rng(seed).choice(len(train.tokens), 128, replace=False)
        calib = train.tokens[pick]
        res = {}
        for method in METHODS:
            t = time.perf_counter()
            pruned = prune_causal_lm(model, calib, method=method, n_steps=n_steps, random_state=seed)
            secs = time.perf_counter() - t
            ws = [
                m.weight
                for b in decoder_layers(pruned)
                for m in b.modules()
                if isinstance(m, torch.nn.Linear)
            ]
            sparsity = sum(int((w == 0).sum()) for w in ws) / sum(w.numel() for w in ws)
            res[method] = (secs, sparsity, lm_perplexity(pruned, test.tokens))
        for method, (secs, sparsity, ppl) in res.items():
            row = {"method": method, "seed": seed, "seconds": secs, "vs_wanda": secs / res["wanda"][0]}
            rows.append(row | {"sparsity": sparsity, "ppl": ppl})
    return {
        "title": "SAFE / SAFE+ vs Wanda and magnitude: block-wise post-training pruning, 50 %, small Llama",
        "rows": rows,
        "notes": [
            f"{len(seeds)} calibration draw(s) of 128 x 64 tokens; {n_steps} SAFE x-steps per block "
            "(Adam 1e-3, rho 1e-3, lambda 1, K 10, batch 32); held-out pydoc topics",
            "SAFE: two forward/backward passes of a block per x-step (SAM); Wanda and magnitude: one-shot",
        ],
    }
