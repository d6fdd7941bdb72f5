"""MixBridge vs the single bridge on the paper's second task, inpainting, and across poison rates.

The paper's ImageNet setting (Tables 1-2, inpainting; the poison-rate sweep) on the lab: scikit-
learn's 8x8 digits with free-form holes covering 20-30% of the image (I2SB's
``inpaint-freeform2030``: the hole filled with Gaussian noise, clipped to the pixel range here;
4 mask draws per training digit, 600 digits), the same three heterogeneous backdoors (zeros,
inverted threes, diamonds), the lab's UNet at width 8, the single bridge trained the experts'
total steps. Scored as ``security_mixbridge`` (300 held-out digits with one fixed mask each,
nfe 10; every network retrained for 3 seeds, mean ± standard error), plus the benign MSE inside
the holes. Poison-rate sweep (``tables``): each training pair poisoned with probability ``rate``
(:func:`~trustlab.security.mixbridge.poison_rate_pairs`; the authors' default split is 75%): the
single bridge retrained on those pairs, MixBridge's Merge (WRS 1) redone on them from the same
experts and router (the experts are trained apart on their own task, as in the Divide stage);
150 held-out digits, nfe 10. ``--quick``: 1 seed, fewer steps, rates 0.1 and 0.9.
"""

from __future__ import annotations

import time

from benchmarks.security_mixbridge import SEEDS, _mean_se, _score, _summarise, _train_models

RATES = (0.1, 0.5, 0.9)


def _sweep(seed: int, steps: int, trained: dict, targets, Xs0, Xs1, rates) -> list[dict]:
    from trustlab.security.mixbridge import evaluate_bridge_backdoor, merge_bridges, poison_rate_pairs
    from trustlab.vision.bridge import train_bridge
    from trustlab.vision.diffusion import make_unet

    pairs, experts, router = trained["pairs"], trained["attack"].experts_, trained["router"]
    rows = []
    for j, rate in enumerate(rates):
        rp = poison_rate_pairs(pairs, rate, random_state=1000 * seed + j)
        single = train_bridge(
            make_unet(channels=8), rp.X0, rp.X1, steps=pairs.n_tasks * steps, random_state=7 + 10 * seed + j
        )
        merged = merge_bridges(experts, router, rp, steps=50, wrs=1.0, random_state=200 + 10 * seed + j)
        for name, model in (("single bridge", single), ("MixBridge (WRS 1)", merged)):
            r = evaluate_bridge_backdoor(model, Xs0, Xs1, targets, nfe=10, random_state=seed)
            row = {"model": name, "rate": rate, "seed": seed, "benign_mse": r.benign_mse}
            row.update({f"asr_{k}": a for k, a in enumerate(r.attack_success, start=1)})
            row["asr_mean"] = sum(r.attack_success) / len(r.attack_success)
            rows.append(row)
    return rows


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.security.mixbridge_lab import digits_backdoor_targets, digits_inpaint_pairs
    from trustlab.security.mixbridge_metrics import fid_like

    torch.set_num_threads(1)
    steps = 100 if quick else 300
    n_eval = 100 if quick else 300
    n_sweep = 60 if quick else 150
    seeds = SEEDS[:1] if quick else SEEDS
    rates = (0.1, 0.9) if quick else RATES
    targets = digits_backdoor_targets()
    Xv0, Xv1, holes = digits_inpaint_pairs("test", n_eval, random_state=1)

    per_seed: list[dict] = []
    sweep: list[dict] = []
    for seed in seeds:
        X0, X1, _ = digits_inpaint_pairs("train", 600, draws=4, random_state=seed)
        trained = _train_models(seed, steps, X0, X1, targets)
        per_seed += [
            _score(name, m, secs, seed, Xv0, Xv1, targets, holes=holes) for name, m, secs in trained["models"]
        ]
        start = time.process_time()
        sweep += _sweep(seed, steps, trained, targets, Xv0[:n_sweep], Xv1[:n_sweep], rates)
        per_seed[-1]["sweep_cpu_s"] = time.process_time() - start

    for r in per_seed:
        r.pop("sweep_cpu_s", None)
    summary, rows = _summarise(per_seed)
    sweep_rows = []
    for name in ("single bridge", "MixBridge (WRS 1)"):
        for rate in rates:
            mine = [r for r in sweep if r["model"] == name and r["rate"] == rate]
            cells = {"model": name, "poison rate": rate}
            for key in ("asr_1", "asr_2", "asr_3", "asr_mean", "benign_mse"):
                m, se = _mean_se([r[key] for r in mine])
                cells[key] = f"{m:.3f}±{se:.3f}"
            sweep_rows.append(cells)
    half = n_eval // 2
    t_ratio = [
        mix["train_cpu_s"] / one["train_cpu_s"]
        for one, mix in zip(per_seed[0::3], per_seed[1::3], strict=True)
    ]
    return {
        "title": "MixBridge vs a single bridge, three heterogeneous backdoors (8x8 digits, inpainting)",
        "rows": rows,
        "summary": summary,
        "per_seed": per_seed,
        "tables": {f"Poison-rate sweep ({n_sweep} held-out digits per task)": sweep_rows},
        "sweep_per_seed": sweep,
        "reference": {
            "fid_masked_inputs_vs_clean": fid_like(Xv1, Xv0),
            f"fid_clean_vs_clean_{half}_vs_{half}": fid_like(Xv0[:half], Xv0[half:]),
            "mse_masked_inputs_vs_clean": float(((Xv1 - Xv0) ** 2).mean()),
            "hole_share": float(holes.mean()),
        },
        "notes": [
            f"{len(seeds)} seeds, every network retrained per seed; *_se = standard error over seeds",
            "time ratio MixBridge / single bridge (CPU training), per seed: "
            + ", ".join(f"{x:.2f}" for x in t_ratio),
            "ASR: share of triggered outputs within MSE 0.01 of a target; entropy in nats (log 4 = 1.39)",
            "hole_mse: benign MSE inside the holes only; benign_mse: whole image (the sampler does not "
            "paste the known pixels back, as the authors' generation)",
            "sweep: single bridge retrained on the rate's pairs; MixBridge re-merged (WRS 1) from the same "
            "experts and router on them",
        ],
    }
