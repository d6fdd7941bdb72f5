"""SAE probes vs baseline probes (row 002-17) on real texts with a lab LM, by token pooling.

Data: :func:`trustlab.explain.probing_tokens.text_probing_data`: paragraphs of CPython's pydoc
topics, first 32 tokens, residual stream after block 2 of ``small-llama-english`` (d = 96);
three binary tasks (code vs prose; statements vs types prose; expressions vs types prose), each
with a covariate-shifted test set (other topics, or code blocks instead of prose). One TopK SAE
per task (256 latents, k = 16, 600 Adam steps) trains on the token activations of paragraphs
outside the task. Probes: last-token, mean and max pooling of the activations (baselines) and of
the SAE's token latents (SAE probes, k = 16 and 128), as in the paper.

Figures: per pooling and regime, pooled over the three tasks, the mean gain of the SAE side
(quiver with SAE minus quiver without; head to head k = 128 vs logistic regression for label
noise and shift), its standard error over the cells and the SAE win rate; mean test AUC per
method and pooling.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.explain.probing import summarize_probes
    from trustlab.explain.probing_tokens import TEXT_TASKS, compare_pooled_probes, text_probing_data
    from trustlab.explain.sae import SparseAutoencoder

    torch.set_num_threads(1)
    regimes = {"scarcity": [8, 32, 128], "imbalance": [0.1, 0.3], "noise": [0.1, 0.3], "shift": [0]}
    methods = ["logreg", "pca", "knn"] if quick else ["logreg", "pca", "knn", "xgboost", "mlp"]
    tables, start = [], time.perf_counter()
    for i, task in enumerate(TEXT_TASKS):
        d = text_probing_data(task)
        sae = SparseAutoencoder(
            256, architecture="topk", k=16, batch_size=256, n_steps=600, learning_rate=3e-3
        )
        sae.fit(d.A_unlabelled[d.mask_unlabelled])
        t = compare_pooled_probes(
            d.A,
            d.mask,
            d.y,
            sae,
            A_shift=d.A_shift,
            mask_shift=d.mask_shift,
            y_shift=d.y_shift,
            regimes=regimes,
            methods=methods,
            sae_ks=[16, 128],
            n_seeds=3 if quick else 5,
            n_train=256,
            n_hparams=5 if quick else 10,
        )
        tables.append(t.assign(task=task, seed=t["seed"] + 100 * i))  # cells distinct across tasks
    table = pd.concat(tables, ignore_index=True)
    rows = []
    for pooling, grp in table.groupby("pooling"):
        for r in summarize_probes(grp, by_value=False).itertuples():
            rows.append({"pooling": pooling, "regime": r.regime, "cells": r.n_cells,
                         "mean_gain": round(r.mean_gain, 4), "se": round(r.se_gain, 4),
                         "sae_win_rate": round(r.win_rate, 3)})  # fmt: skip
    gains = overall_gains(table)
    aucs = (
        table[table["family"] != "quiver"]
        .groupby(["pooling", "method"])["test_auc"]
        .mean()
        .unstack()
        .round(3)
    )
    notes = [
        f"all cells (tasks x poolings x regimes x values x seeds): n = {len(gains)}, mean gain "
        f"{gains.mean():+.4f} +- {gains.std(ddof=1) / np.sqrt(len(gains)):.4f}, SAE win rate "
        f"{np.mean((gains > 0) + 0.5 * (gains == 0)):.3f}",
        "mean test AUC:\n" + aucs.to_string(),
        *noise_shift(),
        f"{time.perf_counter() - start:.0f} s",
    ]
    return {"title": "SAE probes vs baselines on pydoc texts (gain of the SAE side; > 0 means SAEs help)",
            "rows": rows, "notes": notes}  # fmt: skip


def overall_gains(table: pd.DataFrame) -> np.ndarray:
    """The SAE side's gain in every cell of a stacked ``compare_pooled_probes`` table."""
    from trustlab.explain.probing import QUIVER_REGIMES

    wide = table.pivot_table(
        index=["pooling", "regime", "value", "seed"], columns="method", values="test_auc"
    )
    quiver = wide.index.get_level_values("regime").isin(QUIVER_REGIMES)
    gain = np.where(
        quiver, wide["quiver_with_sae"] - wide["quiver_baselines"], wide["sae_k128"] - wide["logreg"]
    )
    return np.asarray(gain, dtype=float)


def noise_shift(sigma: float = 1.0) -> list[str]:
    """The planted "noisier" shift on real text: probes train on half of each task's paragraphs,
    test on the other half with Gaussian noise (``sigma`` x each dimension's token std) added to
    every token; TopK, BatchTopK and Matryoshka SAEs (256 latents, k = 16) vs logistic regression."""
    from trustlab.explain.probing import summarize_probes
    from trustlab.explain.probing_tokens import TEXT_TASKS, compare_pooled_probes, text_probing_data
    from trustlab.explain.sae import SparseAutoencoder

    tables = []
    for i, task in enumerate(TEXT_TASKS):
        d = text_probing_data(task)
        rng = np.random.default_rng(0)
        perm = rng.permutation(len(d.y))
        a, b = perm[: len(perm) // 2], perm[len(perm) // 2 :]
        noisy = d.A[b] + rng.normal(size=d.A[b].shape) * d.A[d.mask].std(axis=0) * sigma
        for arch in ("topk", "batchtopk", "matryoshka"):
            sae = SparseAutoencoder(
                256, architecture=arch, k=16, batch_size=256, n_steps=300, learning_rate=3e-3
            )
            sae.fit(d.A_unlabelled[d.mask_unlabelled])
            t = compare_pooled_probes(d.A[a], d.mask[a], d.y[a], sae, A_shift=noisy, mask_shift=d.mask[b],
                                      y_shift=d.y[b], regimes={"shift": [0]}, methods=["logreg"],
                                      sae_ks=[16, 128], n_seeds=3, n_train=256, n_hparams=4)  # fmt: skip
            tables.append(t.assign(seed=t["seed"] + 100 * i, arch=arch))
    table = pd.concat(tables, ignore_index=True)
    out = []
    for (arch, pooling), grp in table.groupby(["arch", "pooling"]):
        s = summarize_probes(grp, by_value=False).iloc[0]
        out.append(f"noise-adding shift, {arch} {pooling}: sae_k128 - logreg {s.mean_gain:+.4f} +- "
                   f"{s.se_gain:.4f} over {s.n_cells} cells, SAE win rate {s.win_rate:.3f}")  # fmt: skip
    return out
