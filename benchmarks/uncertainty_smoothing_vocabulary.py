"""Label smoothing's ECE gain at a small and a large vocabulary, same hidden size (002-09).

Huang, Lu & Zeng (ICML 2025) trace smoothing's failure on large-vocabulary LLMs to the model's
ability to become over-confident, which falls with the vocabulary size and rises with the hidden
size. ``tests/uncertainty/test_smoothing_capacity.py`` shows the hidden-size side in the ECE; this
benchmark measures the vocabulary side at ``D = 16``, where smoothing's target is reachable at
``V = 16`` (attainable confidence 1.00) and not at ``V = 4096`` (0.52): 1-block lab Llamas with the
output rows at norm 3 and the head and final norm frozen (as in the test), fine-tuned 150 steps on
150 noisy instruction items with and without smoothing 0.1, option ECE on 2,000 held-out items,
paired over seeds (each seed draws the model, the items and the batch order).
"""

from __future__ import annotations

import numpy as np

_ANSWERS = np.arange(12, 16)  # the four answer tokens


def _items(n: int, seed: int, noise: float = 0.4):
    """``x1 x2 x3 SEP answer`` with answer ``12 + x1 mod 4``, else a random one (the test's task)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, (n, 3))
    y = np.where(rng.random(n) < noise, rng.integers(0, 4, n), x[:, 0] % 4)
    tokens = np.c_[x, np.full(n, 11), 12 + y]
    mask = np.zeros_like(tokens, dtype=bool)
    mask[:, -1] = True
    return tokens, mask, 12 + y


def _fine_tune(vocab: int, d: int, smoothing: float, seed: int) -> tuple[float, float]:
    import torch

    from trustlab.lm import ModelConfig, TrainConfig, build_model, train_model
    from trustlab.lm.corpora import TokenData
    from trustlab.uncertainty import expected_calibration_error
    from trustlab.uncertainty.label_smoothing import smoothed_lm_loss

    model = build_model(
        ModelConfig("llama", vocab_size=vocab, d_model=d, n_layers=1, n_heads=2, max_len=8), seed=seed
    )
    w = model.get_output_embeddings().weight
    with torch.no_grad():
        w.copy_(w / w.norm(dim=1, keepdim=True) * 3.0)
    w.requires_grad_(False)
    model.model.norm.weight.requires_grad_(False)
    tokens, mask, _ = _items(150, seed)

    def loss(m, t, k):
        return smoothed_lm_loss(m, t, k, smoothing=smoothing, memory_light=False)

    config = TrainConfig(steps=150, batch_size=32, lr=1e-2, warmup=10, seed=seed)
    train_model(model, TokenData(tokens, mask, vocab), config, loss_fn=loss if smoothing else None)
    test, _, answers = _items(2000, 100 + seed)
    with torch.no_grad():
        probs = torch.softmax(model(torch.as_tensor(test[:, :-1])).logits[:, -1, 12:16].double(), -1)
    conf, pred = probs.max(-1)
    correct = (pred.numpy() + 12 == answers).astype(int)
    return float(correct.mean()), float(expected_calibration_error(correct, conf.numpy()))


def run(quick: bool = False) -> dict:
    import torch

    from trustlab._threads import one_thread

    seeds = range(3 if quick else 10)
    gains: dict[int, list[float]] = {16: [], 4096: []}
    rows = []
    with one_thread():
        torch.set_num_threads(1)
        for vocab in gains:
            runs = {b: [_fine_tune(vocab, 16, b, s) for s in seeds] for b in (0.0, 0.1)}
            hard, smooth = np.array(runs[0.0]), np.array(runs[0.1])
            gains[vocab] = list(hard[:, 1] - smooth[:, 1])
            g = np.array(gains[vocab])
            rows.append(
                {
                    "vocabulary": vocab,
                    "hidden": 16,
                    "accuracy hard / smoothed": f"{hard[:, 0].mean():.3f} / {smooth[:, 0].mean():.3f}",
                    "ECE hard": float(hard[:, 1].mean()),
                    "ECE smoothed": float(smooth[:, 1].mean()),
                    "gain": float(g.mean()),
                    "gain SE": float(g.std(ddof=1) / np.sqrt(len(g))),
                }
            )
    diff = np.array(gains[16]) - np.array(gains[4096])
    se = diff.std(ddof=1) / np.sqrt(len(diff))
    notes = [f"gain(V=16) - gain(V=4096) = {diff.mean():.4f} (paired SE {se:.4f}, {len(diff)} seeds)"]
    return {"title": "label smoothing's ECE gain by vocabulary size (D = 16)", "rows": rows, "notes": notes}
