"""SAFE pruning beside torch.nn.utils.prune magnitude pruning at equal sparsity.

Same data (digits, the vision lab's split), same pre-norm MLP (``make_classifier("mlp",
width=16)``, every Linear weight prunable, global sparsity), same number of epochs and Adam
rate. The peer is PyTorch's ``torch.nn.utils.prune.global_unstructured`` (L1) applied after
half the epochs of dense training, then masked fine-tuning for the rest; ADMM is SAFE with
rho = 0. Rows: sparsity, method, median wall time of one run, ratio to the peer, the measured
sparsity (equal by construction), test accuracy and the largest Hessian eigenvalue of the
training loss on the kept weights (SAFE's claim: higher accuracy, flatter minimum).
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def run(quick: bool = False) -> dict:
    from trustlab.efficiency import SAFEPruning, sharpness
    from trustlab.vision import digits_split, make_classifier

    X_tr, X_te, y_tr, y_te = digits_split()
    seeds = (0,) if quick else (0, 1)
    levels = (0.9,) if quick else (0.9, 0.95, 0.98)
    epochs = 10 if quick else 20
    rows = []
    for sparsity in levels:
        res: dict = {}
        for method in ("magnitude", "admm", "safe"):
            out = []
            for seed in seeds:
                base = make_classifier("mlp", width=16, seed=seed)
                t = time.perf_counter()
                fit = SAFEPruning(base, sparsity=sparsity, method=method, epochs=epochs, random_state=seed)
                fit.fit(X_tr, y_tr)
                out.append(
                    (
                        time.perf_counter() - t,
                        fit.score(X_te, y_te),
                        fit.sparsity_,
                        sharpness(fit.model_, X_tr[:500], y_tr[:500]),
                    )
                )
            res[method] = out
        peer = statistics.median(o[0] for o in res["magnitude"])
        for method, out in res.items():
            med = statistics.median(o[0] for o in out)
            rows.append(
                {
                    "sparsity": sparsity,
                    "method": method,
                    "median_s": med,
                    "vs_torch_prune": med / peer,
                    "measured_sparsity": float(np.mean([o[2] for o in out])),
                    "accuracy": float(np.mean([o[1] for o in out])),
                    "lambda_max": float(np.mean([o[3] for o in out])),
                }
            )
    return {
        "title": "SAFE vs torch.nn.utils.prune magnitude pruning (digits, pre-norm MLP)",
        "rows": rows,
        "notes": [
            f"{len(seeds)} seed(s), {epochs} epochs, 540 test images; one torch thread",
            "SAFE runs two forward/backward passes per step (SAM), so it costs about twice ADMM",
        ],
    }
