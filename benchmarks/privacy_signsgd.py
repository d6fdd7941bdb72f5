"""Noisy SignSGD (002-03): accountant beside dp-accounting, and time per epoch beside Opacus DP-SGD.

Parts:

1. The accountant: amplified epsilon (sign compressor credited) vs the post-processing
   epsilon vs dp-accounting's ``RdpAccountant`` for the same Gaussian noise, and the
   time of each, at several (z, q, T), delta = 1e-5.
2. Training on scikit-learn digits (1400 train / 397 test rows, pixels / 16),
   multinomial logistic regression (64 -> 10), clipping C = 1, z = 1.5, q = 0.1, lr chosen
   per method, 10 epochs (100 steps):
   - trustlab ``NoisySignSGD`` with 10 workers on a non-IID split (one digit each),
     majority vote; per-example gradients by ``torch.func.vmap(grad)``;
   - the same optimizer on an IID split;
   - Opacus ``PrivacyEngine`` DP-SGD (Poisson sampling, same C and z) with plain SGD,
     when Opacus is importable (the dev extra pins ``opacus==1.6.0``; or
     ``pip install --no-deps --target DIR opacus==1.6.0`` and ``TRUSTLAB_OPACUS_PATH=DIR``).
   Median time per epoch over the repeats, test accuracy, and the epsilon each reports.

torch runs with one intra-op thread (small tensors; threads only contend).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Any

import numpy as np


def _data() -> tuple[Any, Any, Any, Any]:
    import torch
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(len(y))
    xt = torch.tensor(x[perm] / 16.0, dtype=torch.float32)
    yt = torch.tensor(y[perm], dtype=torch.long)
    return xt[:1400], yt[:1400], xt[1400:], yt[1400:]


def _signsgd_epochs(
    xtr: Any, ytr: Any, workers: Any, epochs: int, z: float, q: float
) -> tuple[float, Any, Any]:
    import torch
    from torch.func import functional_call, grad, vmap

    from trustlab.privacy.signsgd import NoisySignSGD

    model = torch.nn.Linear(64, 10)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    params = dict(model.named_parameters())

    def loss(p: dict[str, Any], x: Any, y: Any) -> Any:
        out = functional_call(model, p, (x[None],))
        return torch.nn.functional.cross_entropy(out, y[None])

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    opt = NoisySignSGD(
        list(params.values()), lr=0.01, clip_norm=1.0, noise_multiplier=z, sample_rate=q, num_workers=10
    )
    steps_per_epoch = round(1 / q)
    start = time.perf_counter()
    for _ in range(epochs * steps_per_epoch):
        mask = opt.poisson_mask(len(ytr))
        detached = {k: v.detach() for k, v in params.items()}
        g = per_example(detached, xtr[mask], ytr[mask])
        opt.step([g["weight"], g["bias"]], workers=workers[mask])
    per_epoch = (time.perf_counter() - start) / epochs
    return per_epoch, model, opt


def _accuracy(model: Any, x: Any, y: Any) -> float:
    import torch

    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def _opacus(xtr: Any, ytr: Any, epochs: int, z: float, q: float) -> tuple[float, Any, float] | None:
    path = os.environ.get("TRUSTLAB_OPACUS_PATH", "/tmp/opacus_peer")
    if path not in sys.path and os.path.isdir(path):
        sys.path.append(path)
    try:
        import warnings

        warnings.filterwarnings("ignore")
        from opacus import PrivacyEngine
    except Exception:
        return None
    import torch

    model = torch.nn.Linear(64, 10)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(xtr, ytr), batch_size=round(q * len(ytr))
    )
    engine = PrivacyEngine(accountant="rdp")
    model, opt, loader = engine.make_private(
        module=model,
        optimizer=opt,
        data_loader=loader,
        noise_multiplier=z,
        max_grad_norm=1.0,
        poisson_sampling=True,
    )
    start = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in loader:
            if len(yb) == 0:
                continue
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    per_epoch = (time.perf_counter() - start) / epochs
    return per_epoch, model, float(engine.get_epsilon(1e-5))


def run(quick: bool = False) -> dict[str, Any]:
    import torch
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    from trustlab.privacy.signsgd import SignMechanismAccountant

    torch.set_num_threads(1)
    rows: list[dict[str, Any]] = []
    for noise, z, q, steps in (
        ("gaussian", 1.0, 1.0, 100),
        ("gaussian", 1.0, 0.01, 1000),
        ("gaussian", 1.1, 0.01, 10_000),
        ("gaussian", 1.5, 0.1, 100),
        ("logistic", 1.0, 0.01, 1000),
    ):
        start = time.perf_counter()
        acc = SignMechanismAccountant(noise, z, q)
        amplified = acc.get_epsilon(1e-5, steps)
        t_ours = time.perf_counter() - start
        post = acc.get_epsilon_post_processing(1e-5, steps)
        peer = float("nan")
        t_peer = float("nan")
        if noise == "gaussian":
            start = time.perf_counter()
            r = RdpAccountant()
            r.compose(
                dp_event.SelfComposedDpEvent(
                    dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps
                )
            )
            peer = float(r.get_epsilon(1e-5))
            t_peer = time.perf_counter() - start
        rows.append(
            {
                "part": "1 accountant",
                "setting": f"{noise} z={z} q={q} T={steps}",
                "epsilon_amplified": amplified,
                "epsilon_post_processing": post,
                "epsilon_dp_accounting": peer,
                "time_s": t_ours,
                "peer_time_s": t_peer,
            }
        )

    xtr, ytr, xte, yte = _data()
    epochs = 3 if quick else 10
    repeats = 1 if quick else 3
    z, q = 1.5, 0.1
    iid = torch.arange(len(ytr)) % 10
    for label, workers in (
        ("trustlab NoisySignSGD, non-IID (1 digit/worker)", ytr),
        ("trustlab NoisySignSGD, IID", iid),
    ):
        times, accs, eps = [], [], 0.0
        for _ in range(repeats):
            t, model, opt = _signsgd_epochs(xtr, ytr, workers, epochs, z, q)
            times.append(t)
            accs.append(_accuracy(model, xte, yte))
            eps = opt.privacy_spent(1e-5).epsilon
        rows.append(
            {
                "part": "2 training",
                "setting": label,
                "epsilon_amplified": eps,
                "epsilon_post_processing": float("nan"),
                "epsilon_dp_accounting": float("nan"),
                "time_s": statistics.median(times),
                "peer_time_s": float(np.mean(accs)),
            }
        )
    notes = []
    peer = _opacus(xtr, ytr, epochs, z, q)
    if peer is None:
        notes.append("Opacus not importable: part 2's peer row skipped (see the module docstring).")
    else:
        times, accs, eps_o = [], [], 0.0
        for _ in range(repeats):
            t, model, eps_o = _opacus(xtr, ytr, epochs, z, q)  # type: ignore[misc]
            times.append(t)
            accs.append(_accuracy(model, xte, yte))
        rows.append(
            {
                "part": "2 training",
                "setting": "Opacus DP-SGD (peer), IID batches",
                "epsilon_amplified": float("nan"),
                "epsilon_post_processing": float("nan"),
                "epsilon_dp_accounting": eps_o,
                "time_s": statistics.median(times),
                "peer_time_s": float(np.mean(accs)),
            }
        )
        ratio = rows[-3]["time_s"] / rows[-1]["time_s"]
        notes.append(f"time per epoch, trustlab non-IID SignSGD / Opacus DP-SGD: {ratio:.2f}")
    notes += [
        "part 1: time_s = trustlab accountant (first call, no cache), peer_time_s = dp-accounting RDP.",
        "part 2: time_s = median seconds per epoch; peer_time_s column = mean test accuracy.",
        "The sign's epsilon is per record of one worker; Opacus's is per record of the pooled data.",
    ]
    return {
        "title": "Noisy SignSGD: accountant and training beside dp-accounting / Opacus",
        "rows": rows,
        "notes": notes,
    }
