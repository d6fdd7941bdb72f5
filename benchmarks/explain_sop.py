"""Sum-of-Parts (row 002-18) beside shap's GradientExplainer on the same backbone and inputs.

Data: scikit-learn's 8x8 digits (1,257 train / 540 test). Backbone: the vision lab's CNN
(width 8), trained 15 epochs. SOP is fitted around it (frozen) with the paper's defaults (20
groups of 20% of the pixels, 20 epochs; ``--quick``: 5), and so is a per-feature SANN (one group
per pixel, same backbone and selector). Post-hoc attributions of the backbone: shap's
GradientExplainer (expected gradients, the nearest installed peer; captum is not installed) and
gradient x input. Figures:

- test accuracy of the backbone, SOP and the per-feature SANN;
- seconds to explain the evaluation images (median of repeats) and SOP's time over shap's;
- faithfulness on the evaluation images: insertion and deletion AUC (10 steps, zero occlusion)
  of each map on the model it explains, and the completeness gap
  ``|sum(attributions) - logit| / |logit|`` (SOP's is zero by construction).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np


def _timed(fn: Any, repeats: int) -> tuple[Any, float]:
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, statistics.median(times)


def run(quick: bool = False) -> dict:
    import shap
    import torch

    from trustlab._adam import Adam
    from trustlab.explain.sop import SumOfParts
    from trustlab.explain.sop_faithfulness import gradient_x_input, insertion_deletion
    from trustlab.vision import accuracy, digits_split, make_classifier, train_classifier

    torch.set_num_threads(1)
    X_tr, X_te, y_tr, y_te = digits_split()
    n_eval, repeats = (100, 1) if quick else (200, 3)
    X = X_te[:n_eval]
    net = make_classifier("cnn", width=8, seed=0)
    opt = Adam(list(net.parameters()), lr=3e-3)

    def step(model: Any, xb: Any, yb: Any) -> None:
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.step(torch.autograd.grad(loss, list(model.parameters())))

    train_classifier(net, X_tr, y_tr, epochs=15, step=step)
    epochs = 5 if quick else 20
    t = time.perf_counter()
    sop = SumOfParts(net, n_epochs=epochs, random_state=0).fit(X_tr, y_tr)
    fit_s = time.perf_counter() - t
    feat = SumOfParts(net, grouping="features", n_epochs=epochs, random_state=0).fit(X_tr, y_tr)
    acc = {
        "backbone": accuracy(net, X_te, y_te),
        "sop": float(np.mean(sop.predict(X_te) == y_te)),
        "per-feature SANN": float(np.mean(feat.predict(X_te) == y_te)),
    }

    expl, t_sop = _timed(lambda: sop.explain(X), repeats)
    A_sop = expl.feature_attributions()
    with torch.no_grad():
        logits = net(torch.as_tensor(X)).numpy()
    pred = logits.argmax(1)

    def shap_maps() -> np.ndarray:
        bg = torch.as_tensor(X_tr[np.random.default_rng(0).choice(len(X_tr), 64, replace=False)])
        ex = shap.GradientExplainer(net, bg)
        vals, idx = ex.shap_values(torch.as_tensor(X), ranked_outputs=1, rseed=0)  # the top class
        assert np.array_equal(np.asarray(idx)[:, 0], pred)
        return np.asarray(vals)[..., 0]

    A_shap, t_shap = _timed(shap_maps, 1)  # 200 expected-gradient samples per image: minutes
    A_gxi, t_gxi = _timed(lambda: gradient_x_input(net, X), repeats)
    A_gxi_sop = gradient_x_input(sop.to_module(), X)
    rand = np.random.default_rng(0).random(X.shape)

    def gap(A: np.ndarray, z: np.ndarray) -> float:
        return float(np.mean(np.abs(A.reshape(len(A), -1).sum(1) - z) / np.abs(z)))

    sop_logit = expl.logits[np.arange(len(X)), expl.predicted]
    net_logit = logits[np.arange(len(X)), pred]
    cases = [
        ("SOP groups", "SOP", sop, A_sop, t_sop, gap(A_sop, sop_logit)),
        (
            "shap GradientExplainer",
            "backbone",
            net,
            A_shap,
            t_shap,
            gap(A_shap, net_logit),
        ),
        ("gradient x input", "backbone", net, A_gxi, t_gxi, gap(A_gxi, net_logit)),
        ("gradient x input", "SOP", sop, A_gxi_sop, float("nan"), gap(A_gxi_sop, sop_logit)),
        ("random ranking", "SOP", sop, rand, float("nan"), float("nan")),
        ("random ranking", "backbone", net, rand, float("nan"), float("nan")),
    ]
    rows = []
    for name, on, model, A, secs, g in cases:
        r = insertion_deletion(model, X, A)
        rows.append(
            {
                "attribution": name,
                "model": on,
                "accuracy": acc["sop" if on == "SOP" else "backbone"],
                "explain_s": round(secs, 4),
                "insertion": float(r.insertion.mean()),
                "deletion": float(r.deletion.mean()),
                "ins-del SE": float((r.insertion - r.deletion).std(ddof=1) / np.sqrt(len(X))),
                "completeness_gap": g,
            }
        )
    return {
        "title": f"Sum-of-Parts vs post-hoc attributions (digits, CNN backbone, {n_eval} test images)",
        "rows": rows,
        "accuracy": acc,
        "sop_fit_s": round(fit_s, 2),
        "speed_ratio_sop_over_shap": round(t_sop / t_shap, 3),
        "notes": [
            f"accuracy: backbone {acc['backbone']:.3f}, SOP {acc['sop']:.3f}, "
            f"per-feature SANN {acc['per-feature SANN']:.3f} ({epochs} epochs each)",
            f"SOP explain / shap GradientExplainer time: {t_sop / t_shap:.3f} "
            f"(SOP explains in its forward pass; fit took {fit_s:.1f} s)",
        ],
    }
