"""Source-free class unlearning (DSDA, row 002-01) beside retraining and the paper's cheap baselines.

scikit-learn digits scaled to [-1, 1], 70/30 stratified split; a 64-64-10 ReLU MLP trained
with full-batch Adam (lr 1e-2, 100 steps; the original model). Forget class 3, and classes
{0, 7}. Methods (same original checkpoint, seeds 0..2, means reported):

- ``retrain``: the gold standard, a fresh MLP trained the same way on the real retain rows
  (needs the data);
- ``finetune_real``: 5 epochs of Adam (lr 1e-3, batch 32) on the real retain rows, starting
  from the original model (the classic "fine-tune" baseline; needs the data: an oracle here);
- ``dsda``: :class:`~trustlab.unlearning.source_free.SourceFreeUnlearner` with its defaults
  (no data);
- ablations of DSDA: ``egds_only`` (Euler, no momentum: plain SGLD at the same number of score
  evaluations, 40 steps), ``no_disc`` (``weights=(1, 1, 0)``), ``plain_sum`` (``c=0``: no
  conflict-averse step);
- ``random_labels``: the same synthetic sets, forget samples relabelled to random retain classes,
  cross-entropy fine-tuning with Adam (the cheap source-free baseline);
- peer (wall time and accuracy only): scikit-learn ``MLPClassifier`` refit on the retain rows.

Metrics: test accuracy on the forget classes (A_f) and on the retain classes (A_r), the
loss-threshold membership-inference advantage on forget-class rows (train vs test: the
one-sided KS statistic of their losses, Yeom et al. 2018), and wall time.
"""

from __future__ import annotations

import statistics
import time
import warnings
from typing import Any

import numpy as np


def _data() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 8.0 - 1.0).astype(np.float32)
    return tuple(train_test_split(X, y, test_size=0.3, random_state=0, stratify=y))


def _adam_fit(
    model: Any, X: np.ndarray, y: np.ndarray, *, lr: float, epochs: int, batch: int | None, seed: int
):
    import torch

    Xt, yt = torch.as_tensor(X), torch.as_tensor(y)
    params = list(model.parameters())
    m1 = [torch.zeros_like(p) for p in params]
    m2 = [torch.zeros_like(p) for p in params]
    gen = torch.Generator().manual_seed(seed)
    t = 0
    for _ in range(epochs):
        order = torch.randperm(len(yt), generator=gen) if batch else torch.arange(len(yt))
        size = batch or len(yt)
        for start in range(0, len(yt), size):
            rows = order[start : start + size]
            t += 1
            loss = torch.nn.functional.cross_entropy(model(Xt[rows]), yt[rows])
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g, a, b in zip(params, grads, m1, m2, strict=True):
                    a.mul_(0.9).add_(g, alpha=0.1)
                    b.mul_(0.999).addcmul_(g, g, value=0.001)
                    p.sub_(lr * (a / (1 - 0.9**t)) / ((b / (1 - 0.999**t)).sqrt() + 1e-8))
    return model.eval()


def _mlp(seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


def _losses(model: Any, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        out = torch.nn.functional.cross_entropy(
            model(torch.as_tensor(X)), torch.as_tensor(y), reduction="none"
        )
    return out.numpy()


def _mia(model: Any, Xm: np.ndarray, ym: np.ndarray, Xn: np.ndarray, yn: np.ndarray) -> float:
    lm, ln = np.sort(_losses(model, Xm, ym)), np.sort(_losses(model, Xn, yn))
    taus = np.concatenate([lm, ln])
    cdf_m = np.searchsorted(lm, taus, side="right") / lm.size
    cdf_n = np.searchsorted(ln, taus, side="right") / ln.size
    return float(max(0.0, (cdf_m - cdf_n).max()))


def _metrics(model: Any, data: tuple[np.ndarray, ...], forget: list[int]) -> dict[str, float]:
    import torch

    Xtr, Xte, ytr, yte = data
    with torch.no_grad():
        pred = model(torch.as_tensor(Xte)).argmax(dim=1).numpy()
    f_te, f_tr = np.isin(yte, forget), np.isin(ytr, forget)
    return {
        "A_f": float((pred[f_te] == yte[f_te]).mean()),
        "A_r": float((pred[~f_te] == yte[~f_te]).mean()),
        "MIA": _mia(model, Xtr[f_tr], ytr[f_tr], Xte[f_te], yte[f_te]),
    }


def _random_labels(model: Any, forget: list[int], seed: int) -> Any:
    import copy

    from trustlab.unlearning.source_free import synthesize

    s = synthesize(model, list(range(10)), 100, random_state=seed)
    rng = np.random.default_rng(seed)
    retain = np.array([c for c in range(10) if c not in forget])
    y = s.y.copy()
    f = np.isin(y, forget)
    y[f] = rng.choice(retain, size=int(f.sum()))
    return _adam_fit(copy.deepcopy(model), s.X.astype(np.float32), y, lr=1e-3, epochs=5, batch=32, seed=seed)


def run(quick: bool = False) -> dict:
    import copy

    import torch
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    from trustlab.unlearning.source_free import SourceFreeUnlearner

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    data = _data()
    Xtr, Xte, ytr, yte = data
    seeds = [0] if quick else [0, 1, 2]
    rows, notes = [], []
    variants: dict[str, dict[str, Any]] = {
        "dsda": {},
        "egds_only": {"integrator": "euler", "momentum": 0.0, "steps": 40},
        "no_disc": {"weights": (1.0, 1.0, 0.0)},
        "plain_sum": {"c": 0.0},
    }
    try:
        for forget in ([3], [0, 7]):
            keep = ~np.isin(ytr, forget)
            res: dict[str, list[dict[str, float]]] = {}
            for seed in seeds:
                original = _adam_fit(_mlp(seed), Xtr, ytr, lr=1e-2, epochs=100, batch=None, seed=seed)
                res.setdefault("original", []).append(_metrics(original, data, forget) | {"wall_s": 0.0})
                t = time.perf_counter()
                retrained = _adam_fit(
                    _mlp(seed + 100), Xtr[keep], ytr[keep], lr=1e-2, epochs=100, batch=None, seed=seed
                )
                res.setdefault("retrain", []).append(
                    _metrics(retrained, data, forget) | {"wall_s": time.perf_counter() - t}
                )
                t = time.perf_counter()
                tuned = _adam_fit(
                    copy.deepcopy(original), Xtr[keep], ytr[keep], lr=1e-3, epochs=5, batch=32, seed=seed
                )
                res.setdefault("finetune_real", []).append(
                    _metrics(tuned, data, forget) | {"wall_s": time.perf_counter() - t}
                )
                for name, kw in variants.items():
                    t = time.perf_counter()
                    unl = SourceFreeUnlearner(random_state=seed, **kw).fit(original, forget)
                    res.setdefault(name, []).append(
                        _metrics(unl.model_, data, forget) | {"wall_s": time.perf_counter() - t}
                    )
                    if name == "dsda":
                        hit = np.mean(list(unl.report_.synthesis.hit_rate.values()))
                        notes.append(
                            f"forget {forget}, seed {seed}: DSDA synthesis hit rate {hit:.3f}, "
                            f"{unl.report_.synthesis.score_evals} score evaluations, "
                            f"{unl.report_.optimizer_steps} fine-tuning steps"
                        )
                t = time.perf_counter()
                rl = _random_labels(original, forget, seed)
                res.setdefault("random_labels", []).append(
                    _metrics(rl, data, forget) | {"wall_s": time.perf_counter() - t}
                )
                t = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    peer = MLPClassifier((64,), max_iter=200, random_state=seed).fit(Xtr[keep], ytr[keep])
                wall = time.perf_counter() - t
                pf, pr = np.isin(yte, forget), ~np.isin(yte, forget)
                res.setdefault("peer: sklearn MLPClassifier refit", []).append(
                    {
                        "A_f": float((peer.predict(Xte[pf]) == yte[pf]).mean()),
                        "A_r": float((peer.predict(Xte[pr]) == yte[pr]).mean()),
                        "MIA": float("nan"),
                        "wall_s": wall,
                    }
                )
            base = statistics.mean(r["wall_s"] for r in res["retrain"])
            for name, runs in res.items():
                row = {"forget": str(forget), "method": name}
                for key in ("A_f", "A_r", "MIA"):
                    row[key] = float(np.mean([r[key] for r in runs]))
                row["wall_s"] = float(np.mean([r["wall_s"] for r in runs]))
                row["speed_vs_retrain"] = base / row["wall_s"] if row["wall_s"] > 0 else float("nan")
                rows.append(row)
            dsda = next(r for r in rows if r["forget"] == str(forget) and r["method"] == "dsda")
            orig = next(r for r in rows if r["forget"] == str(forget) and r["method"] == "original")
            retr = next(r for r in rows if r["forget"] == str(forget) and r["method"] == "retrain")
            notes.append(
                f"forget {forget}: DSDA A_f {dsda['A_f']:.3f} (retrain {retr['A_f']:.3f}), "
                f"A_r {dsda['A_r']:.3f} vs original {orig['A_r']:.3f} and retrain {retr['A_r']:.3f}; "
                f"wall time {dsda['wall_s']:.2f} s vs retrain {retr['wall_s']:.2f} s "
                f"(ratio {dsda['speed_vs_retrain']:.2f})"
            )
    finally:
        torch.set_num_threads(threads)
    notes.append(
        "retrain, finetune_real and the peer read the real retain rows; dsda, its ablations and "
        "random_labels read only the original model. Means over seeds "
        + ", ".join(map(str, seeds))
        + "; one thread."
    )
    return {
        "title": "Source-free class unlearning (DSDA) on digits vs retraining, fine-tuning and baselines",
        "rows": rows,
        "notes": notes,
    }
