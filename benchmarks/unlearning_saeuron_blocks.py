"""Which block SAeUron should hook on the lab's class-conditional digit DDPM (row 003-06).

For each block, the shipped recipe (``trustlab.unlearning._saeuron_lab``: 40 generations per
digit, seed 0; 512 BatchTopK features, ``k = 4``) is fitted and swept per digit on validation
noise (seed 3, 10 prompts per digit, percentiles {90, 95, 99}, the paper's multipliers), then
each digit is removed alone at its swept point on the evaluation noise (seed 1): the removed
digit's generation rate (1 - UA) and the other digits' accuracy (IRA), judged by a logistic
regression on scikit-learn's digits. ``mid`` and ``down2`` load their shipped fits (the same
recipe and sweep). "Ideal erasure" replaces the block's output by its value under the null
prompt, everything upstream recomputed unconditioned: the best any edit of that output can do.

``--quick``: the two shipped fits only, 10 prompts per digit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BLOCKS = ("down2", "mid", "upsample", "up1")


def _ideal_erasure(su: Any, judge: Any, X: np.ndarray, y: np.ndarray, block: str) -> list[float]:
    import torch

    net, state = su.model, {"busy": False}

    def pre(module: Any, args: Any, kwargs: Any) -> None:
        state["x"], state["t"] = args[0], torch.as_tensor(args[1])

    def hook(module: Any, args: Any, out: Any) -> Any:
        if state["busy"]:
            return out
        state["busy"] = True
        try:
            x, t = state["x"], state["t"]
            t = t.expand(x.shape[0]) if t.ndim == 0 else t
            tn = net._embed(t) + net.class_embedding(torch.full((len(t),), net.n_classes, dtype=torch.long))
            h1 = net.down1(net.inp(x), tn)
            h = net.down2(net.downsample(h1), tn)
            if block in ("mid", "upsample", "up1"):
                h = net.mid(h, tn)
            if block in ("upsample", "up1"):
                h = net.upsample(h)
            if block == "up1":
                h = net.up1(torch.cat([h, h1], dim=1), tn)
            return h
        finally:
            state["busy"] = False

    handles = [
        net.register_forward_pre_hook(pre, with_kwargs=True),
        getattr(net, block).register_forward_hook(hook),
    ]
    try:
        pred = judge(su.generate(X, y))
    finally:
        for h in handles:
            h.remove()
    return [round(float(np.mean(pred[y == c] == c)), 2) for c in range(10)]


def run(quick: bool = False) -> dict:
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    from trustlab.unlearning import _saeuron_lab as lab
    from trustlab.unlearning.saeuron import digits_saeuron
    from trustlab.unlearning.saeuron_eval import unlearning_rates

    n_eval = 10 if quick else 30
    digits = load_digits()
    clf = LogisticRegression(max_iter=500).fit(digits.data / 16.0, digits.target)

    def judge(images: np.ndarray) -> np.ndarray:
        return clf.predict(images.reshape(len(images), -1))

    y = np.repeat(np.arange(10), n_eval)
    X = np.random.default_rng(1).standard_normal((len(y), 1, 8, 8))
    y20 = np.repeat(np.arange(10), 20)  # the ideal erasure's prompts
    X20 = np.random.default_rng(1).standard_normal((len(y20), 1, 8, 8))
    rows: list[dict] = []
    per_digit: dict[str, dict] = {}
    for block in ("down2", "mid") if quick else BLOCKS:
        if block in lab.SHIPPED:
            su = digits_saeuron(hook=block)
        else:
            su = digits_saeuron(hook=block, refit=True)
            lab.tune_lab(su)
        per = {}
        for c in range(10):
            r = unlearning_rates(y, judge(su.generate(X, y, unlearn=[c])), [c])
            per[c] = (round(r.removed_rate, 2), round(r.retained_accuracy, 2))
        pair = unlearning_rates(y, judge(su.generate(X, y, unlearn=[1, 3])), [1, 3])
        rows.append(
            {
                "block": block,
                "removed_mean": round(float(np.mean([v[0] for v in per.values()])), 3),
                "kept_mean": round(float(np.mean([v[1] for v in per.values()])), 3),
                "digit_4": per[4],
                "digit_7": per[7],
                "pair_1_3": (round(pair.removed_rate, 2), round(pair.retained_accuracy, 2)),
                "ideal_erasure": None if quick else _ideal_erasure(su, judge, X20, y20, block),
            }
        )
        per_digit[block] = {c: f"{a:.2f} / {b:.2f}" for c, (a, b) in per.items()}
    return {
        "title": f"SAeUron per block of the lab UNet ({n_eval} prompts per digit, per-digit swept points)",
        "rows": rows,
        "per_digit": per_digit,
        "notes": [
            "removed: share of the removed digit's prompts still drawn (1 - UA); "
            "kept: the others' accuracy (IRA)",
            "pair_1_3: digits 1 and 3 with their swept points united",
            "ideal_erasure: share of each digit's prompts (20 per digit, seed 1) still drawn when the "
            "block's output is its null-prompt value, everything upstream unconditioned",
        ],
    }
