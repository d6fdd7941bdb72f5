"""MoE-X against a standard MoE (row 003-05) at the paper's comparison point, paired over seeds.

The paper's Table 1 / Table 3 compare MoE-X with a standard (Switch-style) MoE at equal
*activated* parameters; the standard MoE of the ablation (Table 3, first row) has the same
experts with GELU activations and a learned top-k router. Here both variants share the expert
count, expert width, top-k, data, schedule and seed (equal active *and* total parameters, up to
the standard router's ``n_experts x d_model`` weights), so each seed gives one paired
difference. Printed: per seed, and the mean +- standard error of the paired difference
(MoE-X minus MoE) of held-out loss, BSP coverage, BSP reconstruction and the active share.
Two shapes: the default (4 experts, top-2, expert width 64) and 8 experts top-2 (the paper's
expert count) at the same expert width. Also the paper's Table 3 ablation ``"relu-moe"`` (ReLU
experts, learned router) minus the standard MoE.
"""

from __future__ import annotations

import numpy as np


def _paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = a - b
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
    return float(d.mean()), se


def run(quick: bool = False) -> dict:
    from trustlab._threads import one_thread
    from trustlab.lm import ModelConfig, TrainConfig
    from trustlab.lm.moex_compare import compare_moe_variants

    seeds = [0] if quick else list(range(10))
    steps = 60 if quick else 300
    shapes = {"4 experts top-2": 4} if quick else {"4 experts top-2": 4, "8 experts top-2": 8}
    rows, tables = [], {}
    for name, n_experts in shapes.items():
        cfg = ModelConfig(
            "mixtral", vocab_size=8, d_model=32, n_layers=2, n_heads=2, n_experts=n_experts, top_k=2
        )
        per_seed = []
        res = None
        for seed in seeds:
            tcfg = TrainConfig(steps=steps, batch_size=32, lr=1e-2, warmup=10, seed=seed)
            with one_thread():
                r = compare_moe_variants(
                    ["moex", "moe", "relu-moe"], seeds=[seed], model_config=cfg, train_config=tcfg
                )
            per_seed.append(r)
            res = r
        assert res is not None
        for metric in ("loss", "coverage", "reconstruction", "active"):
            x, y, z = (np.array([getattr(r, metric)[i, 0] for r in per_seed]) for i in range(3))
            mean, se = _paired(x, y)
            mean_relu, se_relu = _paired(z, y)
            rows.append(
                {
                    "shape": name,
                    "metric": metric,
                    "MoE-X": float(x.mean()),
                    "MoE": float(y.mean()),
                    "ReLU MoE": float(z.mean()),
                    "MoE-X - MoE": mean,
                    "SE": se,
                    "ReLU MoE - MoE": mean_relu,
                    "SE ": se_relu,
                }
            )
            tables.setdefault(f"{name}: per seed (MoE-X / MoE / ReLU MoE)", []).append(
                {
                    "metric": metric,
                    **{
                        f"seed {s}": f"{a:.3f} / {b:.3f} / {c:.3f}"
                        for s, a, b, c in zip(seeds, x, y, z, strict=True)
                    },
                }
            )
        tables[f"{name}: routing score vs L0 r"] = [
            {
                "seed": s,
                "MoE-X": float(r.routing_correlation[0, 0]),
                "MoE": float(r.routing_correlation[1, 0]),
                "ReLU MoE": float(r.routing_correlation[2, 0]),
            }
            for s, r in zip(seeds, per_seed, strict=True)
        ]
    return {
        "title": f"MoE-X minus standard MoE, paired over seeds {seeds}, {steps} steps",
        "rows": rows,
        "tables": tables,
        "notes": ["equal active and total expert parameters; SE of the paired difference (n - 1)"],
    }
