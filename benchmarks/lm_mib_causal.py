"""MIB causal-variable localisation (row 002-13): featurizers side by side on the same model and pairs.

Models: the lab's ``micro-llama-sorting`` (2 blocks, width 32) and a 3-block x 4-head Llama trained
here on the same sorting task (as benchmarks/lm_mib.py). Causal model: ``sorting_causal_model``
(inputs, the ``argmin`` pointer, the ``min`` value, the answer = ``min``) and
``second_value_causal_model`` (the emitted ``first`` value, the answer = the next larger input).
Pairs: 256 training and 256 test pairs per variable (``sorting_pairs``, seeds 0 and 1),
independent base and counterfactual inputs whose interchange changes the answer, kept where the
model answers both inputs correctly.
Per featurizer: IIA on the test pairs at each site (block inputs at the answer position, then the
last block's output), its best and its mean over the sites, the features moved at the best site,
and the wall time of training and scoring all sites. MIB's own track code runs on pyvene, which is
not installed beside the pinned torch; the full-vector interchange (nothing learned) is the
reference. A last block sweeps DAS's dimension ``k`` on the small model.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from benchmarks.lm_mib import _models  # the same two sorting models as the circuit track


def run(quick: bool = False) -> dict:
    from trustlab.lm.mib_causal import causal_variable_localization, sorting_pairs

    torch.set_num_threads(1)
    rows = []
    for label, model in _models(quick):
        for variable in ("min", "argmin", "first"):
            train = sorting_pairs(256, variable=variable, seed=0)
            test = sorting_pairs(256, variable=variable, seed=1)
            t = time.perf_counter()
            res = causal_variable_localization(model, train, test)
            seconds = time.perf_counter() - t
            for i, method in enumerate(res.methods):
                j = int(np.argmax(res.iia[i]))
                rows.append(
                    {
                        "model": label,
                        "variable": variable,
                        "featurizer": method,
                        "best IIA": float(res.iia[i].max()),
                        "mean IIA": float(res.iia[i].mean()),
                        "IIA per site": " ".join(f"{x:.3f}" for x in res.iia[i]),
                        "features at best": int(res.n_features[i, j]),
                        "pairs train/test": f"{res.n_train}/{res.n_test}",
                        "all featurizers s": seconds,
                    }
                )
    model = _models(True)[0][1]
    train, test = sorting_pairs(256, seed=0), sorting_pairs(256, seed=1)
    for k in (1, 2, 4, 8, 16):
        res = causal_variable_localization(model, train, test, methods=["das", "random"], das_dim=k)
        for i, method in enumerate(res.methods):
            rows.append(
                {
                    "model": "Llama 2x2 (micro-llama-sorting)",
                    "variable": "min",
                    "featurizer": f"{method}, k={k}",
                    "best IIA": float(res.iia[i].max()),
                    "mean IIA": float(res.iia[i].mean()),
                    "IIA per site": " ".join(f"{x:.3f}" for x in res.iia[i]),
                    "features at best": k,
                    "pairs train/test": f"{res.n_train}/{res.n_test}",
                    "all featurizers s": float("nan"),
                }
            )
    return {
        "title": "MIB causal-variable localisation: full vector, DAS, DBM (neurons, PCA, SAE), random",
        "rows": rows,
        "notes": [
            "IIA: share of test pairs answered with the causal model's label under the interchange",
            "sites: 0..n_layers = residual stream entering each block, then leaving the last, at the answer",
            "training (MIB's config.py): AdamW lr 1e-2, 3 epochs, batches of 32; DBM L1 1e-4, "
            "temperature 1 -> 0.01",
            "DAS and random subspace: k = d_model / 4 = 8 (sweep in the last rows); SAE: Matryoshka, "
            "128 latents, k = 8, 300 steps on the site's activations at every position of the training "
            "inputs",
            "argmin: a pointer variable the models do not hold at the answer position (negative control)",
            "first: the emitted first sorted value as the threshold for the second "
            "(second_value_causal_model); pairs where moving the counterfactual's whole state would "
            "also be right are dropped",
        ],
    }
