"""MixBridge (Divide-and-Merge, with and without WRS) beside the single-bridge baseline on the same inputs.

The paper's comparison (Tables 1-2): one I2SB bridge trained on the benign task and all
triggers at once vs MixBridge. Data: 2x super-resolution of scikit-learn's 8x8 digits (600
training pairs per task), three heterogeneous backdoors (zeros, inverted threes, diamonds),
the lab's UNet at width 8 for every network; the single bridge gets the experts' total steps.
Scored on 300 held-out digits per task with I2SB sampling (nfe 10): benign MSE and the
FID-like distance of the benign outputs to the clean digits, per trigger attack success (MSE
< 0.01 to a target), backdoor MSE and target similarity (both feature metrics on the lab's
tiny-CLIP image tower, :mod:`trustlab.security.mixbridge_metrics`), router entropy. Every
network is retrained per seed (3 seeds; ``--quick``: 1 seed, fewer steps); rows give mean ±
standard error over seeds (``summary``: the same as numbers, ``*_se`` the standard errors).
Times are CPU training seconds on one thread. The paper's second task (inpainting) and the
poison-rate sweep: ``security_mixbridge_inpaint``, which reuses this file's training and scoring.
"""

from __future__ import annotations

import math
import time

SEEDS = (0, 1, 2)


def _train_models(seed: int, steps: int, X0, X1, targets) -> dict:
    """The single bridge, MixBridge (WRS 1) and a no-WRS merge of the same experts, for one seed."""
    from trustlab.security.mixbridge import MixBridge, merge_bridges, train_router
    from trustlab.vision.bridge import train_bridge
    from trustlab.vision.classifiers import make_classifier
    from trustlab.vision.diffusion import make_unet

    start = time.process_time()
    attack = MixBridge(make_unet(channels=8), expert_steps=steps, wrs=1.0, random_state=10 * seed).fit(
        X0, X1, targets
    )
    t_mix = time.process_time() - start
    pairs = attack.poison(X0, X1, targets)
    start = time.process_time()
    single = train_bridge(
        make_unet(channels=8), pairs.X0, pairs.X1, steps=pairs.n_tasks * steps, random_state=7 + 10 * seed
    )
    t_single = time.process_time() - start
    router = train_router(
        make_classifier("cnn", width=8, n_classes=pairs.n_tasks), pairs, steps=200, random_state=seed
    )
    no_wrs = merge_bridges(attack.experts_, router, pairs, steps=50, wrs=0.0, random_state=100 + seed)
    return {
        "models": [
            ("single bridge", single, t_single),
            ("MixBridge (WRS 1)", attack.model_, t_mix),
            ("MixBridge (no WRS)", no_wrs, float("nan")),
        ],
        "attack": attack,
        "router": router,
        "pairs": pairs,
    }


def _score(name: str, model, secs: float, seed: int, Xv0, Xv1, targets, holes=None) -> dict:
    """One model's row: benign MSE and FID-like, per-trigger ASR / backdoor MSE / similarity, entropy.

    With ``holes`` (inpainting masks of the held-out inputs) also the benign MSE inside the holes.
    """
    from trustlab.security.mixbridge import evaluate_bridge_backdoor
    from trustlab.vision.bridge import bridge_sample

    r = evaluate_bridge_backdoor(model, Xv0, Xv1, targets, nfe=10, random_state=seed, features="lab")
    row: dict = {"model": name, "seed": seed, "benign_mse": r.benign_mse, "benign_fid": r.benign_fid}
    if holes is not None:  # the same draw as the report's benign outputs (same sampler seed)
        out = bridge_sample(model, Xv1, nfe=10, random_state=seed)
        row["hole_mse"] = float((((out - Xv0) ** 2) * holes).sum() / (holes.sum() * Xv0.shape[1]))
    assert r.target_similarity is not None
    for k, (a, m, c) in enumerate(
        zip(r.attack_success, r.backdoor_mse, r.target_similarity, strict=True), start=1
    ):
        row[f"asr_{k}"] = a
        row[f"bd_mse_{k}"] = m
        row[f"sim_{k}"] = c
    row["entropy_triggers"] = (
        sum(r.router_entropy[1:]) / (len(r.router_entropy) - 1) if r.router_entropy else float("nan")
    )
    row["train_cpu_s"] = secs
    return row


def _one_seed(seed: int, steps: int, X0, X1, targets, Xv0, Xv1) -> list[dict]:
    trained = _train_models(seed, steps, X0, X1, targets)
    return [_score(name, m, secs, seed, Xv0, Xv1, targets) for name, m, secs in trained["models"]]


def _mean_se(values: list[float]) -> tuple[float, float]:
    n = len(values)
    m = sum(values) / n
    if n < 2 or any(math.isnan(v) for v in values):
        return m, float("nan")
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    return m, math.sqrt(var / n)


def _summarise(per_seed: list[dict]) -> tuple[list[dict], list[dict]]:
    """Mean and standard error over seeds per model (``summary``) and the formatted table rows."""
    summary, rows = [], []
    for name in dict.fromkeys(r["model"] for r in per_seed):
        mine = [r for r in per_seed if r["model"] == name]
        stats: dict = {"model": name}
        for key in mine[0]:
            if key in ("model", "seed"):
                continue
            m, se = _mean_se([float(r[key]) for r in mine])
            stats[key] = m
            stats[f"{key}_se"] = se
        summary.append(stats)

        def fmt(keys: list[str], digits: int, s: dict = stats) -> str:
            return " / ".join(f"{s[k]:.{digits}f}±{s[k + '_se']:.{digits}f}" for k in keys)

        k3 = range(1, 4)
        rows.append(
            {
                "model": name,
                "benign MSE": fmt(["benign_mse"], 3),
                **({"hole MSE": fmt(["hole_mse"], 3)} if "hole_mse" in stats else {}),
                "benign FID-like": fmt(["benign_fid"], 2),
                "ASR per trigger": fmt([f"asr_{k}" for k in k3], 2),
                "backdoor MSE": fmt([f"bd_mse_{k}" for k in k3], 3),
                "target similarity": fmt([f"sim_{k}" for k in k3], 3),
                "trigger entropy": fmt(["entropy_triggers"], 2),
            }
        )
    return summary, rows


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.security.mixbridge_lab import digits_backdoor_targets, digits_sr_pairs
    from trustlab.security.mixbridge_metrics import fid_like

    torch.set_num_threads(1)
    steps = 100 if quick else 300
    n_eval = 100 if quick else 300
    seeds = SEEDS[:1] if quick else SEEDS
    X0, X1 = digits_sr_pairs("train", 600)
    targets = digits_backdoor_targets()
    Xv0, Xv1 = digits_sr_pairs("test", n_eval)

    per_seed: list[dict] = []
    for seed in seeds:
        per_seed += _one_seed(seed, steps, X0, X1, targets, Xv0, Xv1)

    summary, rows = _summarise(per_seed)
    half = n_eval // 2
    t_ratio = [
        mix["train_cpu_s"] / one["train_cpu_s"]
        for one, mix in zip(per_seed[0::3], per_seed[1::3], strict=True)
    ]
    return {
        "title": "MixBridge vs a single bridge on three heterogeneous backdoors (8x8 digits, 2x SR)",
        "rows": rows,
        "summary": summary,
        "per_seed": per_seed,
        "reference": {
            "fid_pooled_inputs_vs_clean": fid_like(Xv1, Xv0),
            f"fid_clean_vs_clean_{half}_vs_{half}": fid_like(Xv0[:half], Xv0[half:]),
        },
        "notes": [
            f"{len(seeds)} seeds, every network retrained per seed; *_se = standard error over seeds",
            "time ratio MixBridge / single bridge (CPU training), per seed: "
            + ", ".join(f"{x:.2f}" for x in t_ratio),
            "ASR: share of triggered outputs within MSE 0.01 of a target; entropy in nats (log 4 = 1.39)",
            "benign_fid: FID-like distance (tiny-CLIP features) of the benign outputs to the clean digits; "
            "sim_k: mean feature cosine of trigger k's outputs with their intended targets",
            "the no-WRS mixture reuses MixBridge's experts with its own router (merge time not counted)",
        ],
    }
