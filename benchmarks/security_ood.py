"""OOD detection: trustlab's S&I, GAIA-Z, MSP and energy beside pytorch-ood's detectors.

Same model (the security._nets CNN, trained on digits 0-5), same ID test rows and the same
three OOD sets (held-out digits 6-9; the ID test digits with N(0, 0.5) noise; far-OOD 8x8
grey patches of scikit-learn's two bundled photographs, ``_nets.far_ood``). pytorch-ood
runs MaxSoftmax, EnergyBased, ODIN (its defaults: eps 0.0014, T 1000) and Mahalanobis
(class means and shared covariance of the penultimate features of the training rows).
The rows print AUROC (ID vs OOD, OOD positive) and the scoring time; for MSP and energy,
the agreement of the two libraries' scores (max absolute difference) shows they computed
the same thing.

pytorch-ood 0.4.0 imports torchvision in its package ``__init__`` (model zoo, datasets);
no torchvision build matches the CPU torch 2.13.0 here, so the benchmark loads only the
``pytorch_ood.detector`` subpackage (which does not use torchvision) by registering the
package path without running its ``__init__``. Install: ``pip install --no-deps pytorch-ood``.
"""

from __future__ import annotations

import importlib.util
import pathlib
import statistics
import sys
import time
import types

import numpy as np


def _pytorch_ood_detectors() -> types.ModuleType:
    spec = importlib.util.find_spec("pytorch_ood")
    if spec is None or spec.origin is None:
        raise ImportError("pytorch-ood is not installed: pip install --no-deps pytorch-ood")
    if "pytorch_ood" not in sys.modules:
        pkg = types.ModuleType("pytorch_ood")
        pkg.__path__ = [str(pathlib.Path(spec.origin).parent)]
        sys.modules["pytorch_ood"] = pkg
    import pytorch_ood.detector as det

    return det


def _data(seed: int = 0):
    from trustlab.security._nets import digits, far_ood

    X, y = digits(image=True)
    perm = np.random.default_rng(seed).permutation(len(X))
    X, y = X[perm], y[perm]
    ind = y < 6
    X_id, y_id, X_out = X[ind], y[ind], X[~ind]
    n = len(X_id) // 2
    noise = np.random.default_rng(seed + 1).normal(0, 0.5, X_id[n:].shape)
    noisy = np.clip(X_id[n:] + noise, 0, 1).astype(np.float32)
    m = len(X_id) - n
    return (
        X_id[:n],
        y_id[:n],
        X_id[n:],
        {
            "held-out digits 6-9": X_out[:m],
            "noise": noisy,
            "photo patches (far-OOD)": far_ood(m, "patches", image=True, seed=seed),
        },
    )


def run(quick: bool = False) -> dict:
    import torch
    from sklearn.metrics import roc_auc_score

    from trustlab.security._nets import make_net, train
    from trustlab.security.ood import EnergyDetector, GAIADetector, MSPDetector, SplitIntegrateDetector

    det = _pytorch_ood_detectors()
    torch.set_num_threads(1)
    repeats = 2 if quick else 5
    X_tr, y_tr, X_te, ood_sets = _data()
    net = train(make_net("cnn", n_classes=6), X_tr, y_tr, epochs=30)

    def peer_scores(detector, X):
        return detector.predict(torch.as_tensor(X)).detach().numpy().astype(np.float64)

    features = net[:-1]  # penultimate features: everything before the linear head
    mahalanobis = det.Mahalanobis(features)
    mahalanobis.fit_features(features(torch.as_tensor(X_tr)).detach(), torch.as_tensor(y_tr))

    ours = {
        "S&I": SplitIntegrateDetector(net).fit(X_tr).score_samples,
        "GAIA-Z": GAIADetector(net).fit(X_tr).score_samples,
        "MSP": MSPDetector(net).fit(X_tr).score_samples,
        "energy": EnergyDetector(net).fit(X_tr).score_samples,
    }
    peers = {
        "MSP": lambda X: peer_scores(det.MaxSoftmax(net), X),
        "energy": lambda X: peer_scores(det.EnergyBased(net), X),
        "ODIN": lambda X: peer_scores(det.ODIN(net), X),
        "Mahalanobis": lambda X: peer_scores(mahalanobis, X),
    }

    def timed(fn, X):
        times, out = [], None
        for _ in range(repeats):
            t = time.perf_counter()
            out = fn(X)
            times.append(time.perf_counter() - t)
        return out, statistics.median(times)

    rows = []
    for set_name, X_ood in ood_sets.items():
        y = np.r_[np.zeros(len(X_te)), np.ones(len(X_ood))]
        results = {}
        for lib, table in (("trustlab", ours), ("pytorch-ood", peers)):
            for name, fn in table.items():
                s_id, t_id = timed(fn, X_te)
                s_ood, t_ood = timed(fn, X_ood)
                results[(lib, name)] = (np.r_[s_id, s_ood], t_id + t_ood)
        for name in ("S&I", "GAIA-Z", "MSP", "energy", "ODIN", "Mahalanobis"):
            o = results.get(("trustlab", name))
            p = results.get(("pytorch-ood", name))
            auc_o = float(roc_auc_score(y, o[0])) if o else float("nan")
            auc_p = float(roc_auc_score(y, p[0])) if p else float("nan")
            row = {
                "case": f"{set_name}, {name}",
                "metric": "AUROC / scoring s (median)",
                "trustlab": f"{auc_o:.3f} / {o[1]:.3f}" if o else "-",
                "peer": f"{auc_p:.3f} / {p[1]:.3f}" if p else "-",
                "peer_over_trustlab": round(p[1] / o[1], 3) if (o and p) else float("nan"),
            }
            if o and p:
                row["max_abs_score_difference"] = float(np.max(np.abs(o[0] - p[0])))
            rows.append(row)
        si_time = results[("trustlab", "S&I")][1]
        for name in ("ODIN", "Mahalanobis"):
            rows.append(
                {
                    "case": f"{set_name}, S&I vs pytorch-ood {name}",
                    "metric": "time ratio (peer / S&I)",
                    "trustlab": round(si_time, 3),
                    "peer": round(results[("pytorch-ood", name)][1], 3),
                    "peer_over_trustlab": round(results[("pytorch-ood", name)][1] / si_time, 3),
                }
            )
    return {
        "title": "OOD detection on digits (CNN, ID = 0-5): trustlab vs pytorch-ood",
        "rows": rows,
        "notes": [
            "AUROC with OOD as the positive class; both libraries score higher = more OOD",
            "pytorch-ood 0.4.0 detector subpackage only (torchvision absent; see module docstring)",
            f"{len(X_te)} ID test rows; times: median of {repeats} repeats, ID + OOD scoring, 1 thread",
            "S&I and GAIA-Z have no pytorch-ood counterpart; ODIN and Mahalanobis have no trustlab one",
        ],
    }
