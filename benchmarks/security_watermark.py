"""BiMark (multi-bit, unbiased) beside a plain Kirchenbauer-style green list and MPAC-style multi-bit.

Three parts, all on the language-model lab's models (no download):

1. **Embedding overhead per token** (the issue's target): wall time per generated token of
   ``generate_watermarked`` with no watermark, a plain one-bit Kirchenbauer et al. green list
   (``MPACBaseline(n_bits=1)``: gamma 1/2, delta 2, the context seeds the list), MPAC-style 8 bits
   and BiMark 8 bits (10 layers), on an untrained Llama with a 1,024- and an 8,192-token vocabulary
   (the cost of a watermark grows with the vocabulary, not with the model's depth).
2. **Detection time** per text for the same schemes (the key and the token ids only).
3. **Extraction and robustness to edits**: the slow claim test's model (a 2-block Llama trained
   30 steps on streams of sorting examples, next-token loss ~2.2 nats), 8-bit messages in
   48-token continuations; a fraction of the generated tokens is then
   replaced by uniformly random tokens (0, 10, 20, 30 %) and the bit accuracy and exact-message
   rate of BiMark and MPAC (delta 2) are read back. BiMark's votes use every layer, so they
   degrade gracefully with edits; each edit also breaks the ``window`` contexts that follow it.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

MSG = "10110010"


def _time_generate(model, prompts, wm, message, n_new, repeats):
    from trustlab.security.watermark import generate_watermarked

    times = []
    for r in range(repeats):
        t = time.perf_counter()
        generate_watermarked(model, prompts, wm, message, max_new_tokens=n_new, seed=r)
        times.append(time.perf_counter() - t)
    return statistics.median(times) / (n_new * prompts.shape[0])


def _edit(ids: np.ndarray, start: int, rate: float, vocab: int, rng) -> np.ndarray:
    out = ids.copy()
    gen = out[start:]
    hit = rng.random(gen.size) < rate
    gen[hit] = rng.integers(0, vocab, hit.sum())
    return out


def _stream_model():
    """The slow claim test's model: a 2-block Llama trained 30 steps on streams of sorting examples."""
    from trustlab.lm import ModelConfig, TrainConfig, build_model, sorting_task, train_model
    from trustlab.lm.corpora import TokenData

    tok = sorting_task(2000, 6, n_values=12, seed=0).tokens.reshape(500, 52)
    model = build_model(
        ModelConfig("llama", vocab_size=13, d_model=32, n_layers=2, n_heads=2, max_len=128), seed=0
    )
    data = TokenData(tok, np.ones_like(tok, dtype=bool), 13)
    train_model(model, data, TrainConfig(steps=30, batch_size=16, lr=1e-2, warmup=5, seed=0))
    return model


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.lm import ModelConfig, build_model
    from trustlab.security.watermark import BiMark, MPACBaseline, generate_watermarked

    torch.set_num_threads(1)
    repeats, n_new, batch = (2, 16, 4) if quick else (3, 48, 8)
    rows: list[dict] = []
    for vocab in (1024, 8192):
        model = build_model(
            ModelConfig("llama", vocab_size=vocab, d_model=96, n_layers=4, n_heads=4, max_len=128), seed=0
        )
        prompts = np.random.default_rng(0).integers(0, vocab, (batch, 4))
        schemes = {
            "none": (None, None),
            "Kirchenbauer (1 bit)": (MPACBaseline(vocab, key=1, n_bits=1), "0"),
            "MPAC-style (8 bits)": (MPACBaseline(vocab, key=1, n_bits=8), MSG),
            "BiMark (8 bits, 10 layers)": (BiMark(vocab, key=1, n_bits=8), MSG),
        }
        per_token = {
            name: _time_generate(model, prompts, wm, msg, n_new, repeats)
            for name, (wm, msg) in schemes.items()
        }
        texts = generate_watermarked(model, prompts, None, max_new_tokens=n_new, seed=0)
        for name, (wm, _) in schemes.items():
            row = {
                "case": f"vocab {vocab}, {name}",
                "ms_per_token": round(1e3 * per_token[name], 3),
                "overhead_vs_none": round(per_token[name] / per_token["none"] - 1, 3),
                "ratio_vs_kirchenbauer": round(per_token[name] / per_token["Kirchenbauer (1 bit)"], 3),
            }
            if wm is not None:
                t = time.perf_counter()
                for text in texts:
                    wm.extract(text, start=4)
                row["detect_ms_per_text"] = round(1e3 * (time.perf_counter() - t) / len(texts), 3)
            rows.append(row)

    model = _stream_model()
    vocab = int(model.config.vocab_size)
    n_texts = 12 if quick else 40
    prompts = np.random.default_rng(1).integers(0, vocab, (n_texts, 2))
    target = np.array([int(b) for b in MSG])
    for name, wm in (
        ("BiMark", BiMark(vocab, key=3, n_bits=8)),
        ("MPAC-style delta 2", MPACBaseline(vocab, key=3, n_bits=8, delta=2.0)),
    ):
        ids = generate_watermarked(model, prompts, wm, MSG, max_new_tokens=48, seed=0)
        for rate in (0.0, 0.1, 0.2, 0.3):
            rng = np.random.default_rng(7)
            found = [wm.extract(_edit(row, 2, rate, vocab, rng), start=2) for row in ids]
            rows.append(
                {
                    "case": f"trained model, {name}, {int(100 * rate)}% tokens replaced",
                    "bit_accuracy": round(float(np.mean([np.mean(f.bits == target) for f in found])), 3),
                    "exact_message_rate": round(float(np.mean([f.message == MSG for f in found])), 3),
                    "median_p_value": float(np.median([f.p_value for f in found])),
                }
            )
    return {
        "title": "BiMark: embedding overhead, detection time, extraction under edits",
        "rows": rows,
        "notes": [
            "overhead_vs_none: extra wall time per generated token over unwatermarked sampling (1 thread).",
            "ratio_vs_kirchenbauer: time per token relative to the plain one-bit green list.",
            "Untrained 4-block Llama (d_model 96) for timing; "
            "a sorting-stream Llama (trained here) for extraction.",
        ],
    }
