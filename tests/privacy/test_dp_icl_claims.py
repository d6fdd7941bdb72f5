"""Claim of row 002-10 at tiny scale: DP synthetic demonstrations beat zero-shot in-context learning.

The lab's ``tiny-mixtral-incontext`` model infers a latent affine task ``y = (k x + b) mod 16``
(8 tasks) from ``x y`` pairs in its context. Private demonstrations: 40 pairs of the task; 4
synthetic pairs (public ``x``, private ``y``) are generated at epsilon = 4 (delta = 1e-3, all four
tokens together); the model then answers all 16 queries ``x`` after them.
"""

from __future__ import annotations

import numpy as np
import pytest

V = 16


def _accuracy(model, demos, k, b):
    import torch

    prefix = [t for d in demos for t in d]
    ids = torch.tensor([[*prefix, x] for x in range(V)])
    with torch.no_grad():
        pred = model(input_ids=ids).logits[:, -1, :V].argmax(-1).numpy()
    return float(np.mean(pred == (k * np.arange(V) + b) % V))


@pytest.mark.claims
@pytest.mark.slow  # trains tiny-mixtral-incontext into the cache on first use (minutes on one core)
def test_claim_dp_synthetic_demonstrations_beat_zero_shot():
    pytest.importorskip("transformers")
    from trustlab.lm import get_recipe, load_shipped
    from trustlab.lm.recipes import make_data
    from trustlab.privacy.dp_icl import generate_dp_demonstrations

    model, _, _ = load_shipped("tiny-mixtral-incontext")
    data, _ = make_data(get_recipe("tiny-mixtral-incontext"))
    table = sorted(
        {
            (int(t), int(k), int(b))
            for t, k, b in zip(*(data.latent[c] for c in ("task", "k", "b")), strict=True)
        }
    )
    rng = np.random.default_rng(0)  # drives the data and the public x only; the noise is unseeded
    zero, synthetic = [], []
    for _ in range(3):
        for _, k, b in table:
            private = [[int(x), int((k * x + b) % V)] for x in rng.integers(0, V, 40)]
            prompts = [[int(x)] for x in rng.choice(V, 4, replace=False)]
            rel = generate_dp_demonstrations(
                model,
                private,
                epsilon=4.0,
                delta=1e-3,
                label_prompts=prompts,
                shots=2,
                max_tokens=1,
                max_demo_tokens=2,
                top_k=V,
                method="pta",
            )
            zero.append(_accuracy(model, [], k, b))
            synthetic.append(_accuracy(model, rel.value, k, b))
    diff = np.asarray(synthetic) - np.asarray(zero)
    se = diff.std(ddof=1) / np.sqrt(diff.size)
    # measured: zero-shot 0.28, DP synthetic at epsilon 4 about 0.59 (real 4-shot 0.57)
    assert diff.mean() - 3 * se > 0.1, (np.mean(zero), np.mean(synthetic), se)
