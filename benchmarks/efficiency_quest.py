"""QuEST quantization-aware training beside a plain straight-through-estimator loop and LSQ.

Same data (scikit-learn digits, the vision lab's stratified 70/30 split), same pre-norm MLP
(``make_classifier("mlp", width=16)``: the two hidden Linear layers quantized, weights and
inputs), same Adam loop, epochs and seeds for every method; only the quantizer differs.
Rows: bit width, method, median wall time of one training (over the seeds), its ratio to the
abs-max STE loop (the issue's target: QuEST's training-step cost), and the mean test accuracy
with its gap to full precision (the paper's claim: QuEST's gap is the smallest at 4 bits and
below). No peer library implements QuEST; the STE and LSQ loops are trustlab's own baselines
(the paper's Table 1 rows).
"""

from __future__ import annotations

import statistics
import time

import numpy as np


def run(quick: bool = False) -> dict:
    from trustlab.efficiency import QuantizationAwareTraining
    from trustlab.vision import digits_split, make_classifier

    X_tr, X_te, y_tr, y_te = digits_split()
    seeds = (0,) if quick else (0, 1, 2)
    bit_widths = (2,) if quick else (4, 3, 2, 1)
    epochs = 5 if quick else 10

    def train(bits, method, seed):
        base = make_classifier("mlp", width=16, seed=seed)
        t = time.perf_counter()
        qat = QuantizationAwareTraining(base, bits=bits, method=method, epochs=epochs, random_state=seed)
        qat.fit(X_tr, y_tr)
        return time.perf_counter() - t, qat.score(X_te, y_te)

    fp = [train(None, "quest", s) for s in seeds]
    fp_acc = float(np.mean([a for _, a in fp]))
    rows = [
        {
            "bits": "fp32",
            "method": "-",
            "median_s": statistics.median(t for t, _ in fp),
            "vs_ste": 1.0,
            "accuracy": fp_acc,
            "gap": 0.0,
        }
    ]
    for bits in bit_widths:
        runs = {
            m: [train(bits, m, s) for s in seeds]
            for m in ("ste", "quest", "lsq")
            if not (m == "lsq" and bits < 2)
        }
        ste_time = statistics.median(t for t, _ in runs["ste"])
        for method, res in runs.items():
            acc = float(np.mean([a for _, a in res]))
            med = statistics.median(t for t, _ in res)
            rows.append(
                {
                    "bits": bits,
                    "method": method,
                    "median_s": med,
                    "vs_ste": med / ste_time,
                    "accuracy": acc,
                    "gap": fp_acc - acc,
                }
            )
    return {
        "title": "QuEST vs STE / LSQ quantization-aware training (digits, pre-norm MLP)",
        "rows": rows,
        "notes": [
            f"{len(seeds)} seed(s), {epochs} epochs, 540 test images; one torch thread",
            "vs_ste: median training time over the abs-max STE loop's at the same bit width",
        ],
    }
