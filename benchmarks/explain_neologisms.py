"""Neologism learning (row 000-15) beside plain-text instructions, prompt tuning and fine-tuning.

Same lab model (the shipped instruction-task GPT-2, docs/explain/neologisms.md), same
preference pairs, same evaluation: ``write about T in N words STYLE :`` for the 4 topics and
N = 1..8, 8 samples each (256 responses); effect size = the correlation of the sampled length
with N and the exact-length rate. Arms:

- plain prompts (no training): the neutral word ``please`` and the human instruction ``exactly``;
- the neologism in the style slot, APO-up (the paper) and NLL on the chosen responses (ablation);
- prompt tuning (Lester et al. 2021) with one soft token prepended to the prompt, trained with
  the same APO-up loss and optimiser (``please`` stays in the slot): the same number of
  trained weights (d = 32), but in a position the model never saw a word in;
- full fine-tuning (all weights, next-token loss on the chosen responses with ``exactly`` in
  the slot, the lab's training loop): 27,000 weights trained, and the model changes for every
  prompt (column "drift": mean |change| of log p(response | prompt) on held-out ``please``
  prompts; 0 by construction for the embedding-only arms).

Training time: median of repeats after one warm-up (one torch thread).
"""

from __future__ import annotations

import copy
import statistics
import time

import numpy as np


def _median_time(fn, repeats: int):
    out = fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def _effect(learner, style: str, prefix: str = "", model=None, n_samples: int = 8) -> tuple[float, float]:
    from trustlab.explain._neologism_task import TOPICS, length_prompt

    targets = list(range(1, 9))
    prompts = [prefix + length_prompt(t, n, style) for t in TOPICS for n in targets]
    if model is not None:  # a fine-tuned copy: the learner's sampler on another model
        learner = copy.copy(learner)
        learner.model = model
        learner._layer = model.get_input_embeddings()
    samples = learner.generate(prompts, n_samples=n_samples, max_new_tokens=12, random_state=7)
    asked = np.repeat([n for _ in TOPICS for n in targets], n_samples)
    got = np.array([len(s) for per in samples for s in per])
    return float(np.corrcoef(asked, got)[0, 1]), float(np.mean(asked == got))


def _drift(before, after_model, learner) -> float:
    from trustlab.explain.neologisms import length_task_pairs

    p, c, _, _ = length_task_pairs(32, "please", seed=99)
    a = before.log_prob(p, c)
    other = copy.copy(learner)
    other.model = after_model
    other._layer = after_model.get_input_embeddings()
    return float(np.mean(np.abs(other.log_prob(p, c) - a)))


def _finetune(model, tok, prompts, chosen, steps: int):
    from trustlab.lm import TokenData, TrainConfig, train_model

    rows = []
    for p, c in zip(prompts, chosen, strict=True):
        ids = tok(p)["input_ids"]
        rows.append((ids + tok(c)["input_ids"] + [tok.eos_token_id], len(ids)))
    length = max(len(r) for r, _ in rows)
    tokens = np.zeros((len(rows), length), dtype=np.int64)
    mask = np.zeros((len(rows), length), dtype=bool)
    for i, (r, k) in enumerate(rows):
        tokens[i, : len(r)] = r
        mask[i, k : len(r)] = True
    tuned = copy.deepcopy(model)
    train_model(tuned, TokenData(tokens, mask, len(tok)), TrainConfig(steps=steps, batch_size=8, lr=3e-3))
    return tuned


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.explain.neologisms import NeologismLearner, length_task_model, length_task_pairs

    torch.set_num_threads(1)
    repeats = 1 if quick else 3
    n_pairs, epochs, lr = (32, 5, 0.03) if quick else (64, 20, 1e-2)
    model, tok = length_task_model()
    p, c, r, _ = length_task_pairs(n_pairs, "<len>", seed=0)
    rows = []

    def fit(prompts, loss="apo-up"):
        learner = NeologismLearner(
            model, tok, token="<len>", init="please", loss=loss, lr=lr, n_epochs=epochs
        )
        return learner.fit(prompts, c, r)

    t_neo, neo = _median_time(lambda: fit(p), repeats)
    for style in ("please", "exactly"):
        corr, exact = _effect(neo, style)
        rows.append(
            {
                "arm": f"plain prompt '{style}'",
                "trained weights": 0,
                "train s": 0.0,
                "length corr": corr,
                "exact rate": exact,
                "drift": 0.0,
            }
        )
    corr, exact = _effect(neo, "<len>")
    rows.append(
        {
            "arm": "neologism, APO-up (paper)",
            "trained weights": neo.embedding_.size,
            "train s": t_neo,
            "length corr": corr,
            "exact rate": exact,
            "drift": 0.0,
        }
    )
    t_nll, nll = _median_time(lambda: fit(p, "nll"), repeats)
    corr, exact = _effect(nll, "<len>")
    rows.append(
        {
            "arm": "neologism, NLL on chosen",
            "trained weights": nll.embedding_.size,
            "train s": t_nll,
            "length corr": corr,
            "exact rate": exact,
            "drift": 0.0,
        }
    )
    soft_prompts = ["<len> " + q.replace("<len>", "please") for q in p]
    t_soft, soft = _median_time(lambda: fit(soft_prompts), repeats)
    corr, exact = _effect(soft, "please", prefix="<len> ")
    rows.append(
        {
            "arm": "prompt tuning, 1 soft token, APO-up",
            "trained weights": soft.embedding_.size,
            "train s": t_soft,
            "length corr": corr,
            "exact rate": exact,
            "drift": 0.0,
        }
    )
    ft_prompts = [q.replace("<len>", "exactly") for q in p]
    steps = epochs * int(np.ceil(n_pairs / 8))
    t_ft, tuned = _median_time(lambda: _finetune(model, tok, ft_prompts, c, steps), repeats)
    corr, exact = _effect(neo, "exactly", model=tuned)
    n_weights = sum(int(w.numel()) for w in tuned.parameters())
    rows.append(
        {
            "arm": "full fine-tune, NLL, 'exactly'",
            "trained weights": n_weights,
            "train s": t_ft,
            "length corr": corr,
            "exact rate": exact,
            "drift": _drift(neo, tuned, neo),
        }
    )
    for row in rows:
        row["time ratio (neologism / arm)"] = t_neo / row["train s"] if row["train s"] else float("nan")
    return {
        "title": "length control, lab instruction task: neologism vs prompts, prompt tuning, fine-tuning",
        "rows": rows,
        "notes": [
            f"{n_pairs} preference pairs, {epochs} epochs (same steps for every trained arm); "
            "256 sampled responses per arm (4 topics x N = 1..8 x 8 samples)",
            "drift: mean |change| of log p(response|prompt) on 32 held-out 'please' prompts",
        ],
    }
