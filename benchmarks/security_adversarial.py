"""PGD adversarial training: trustlab's adversarial_train beside a plain PGD loop built on torchattacks.

Same data (scikit-learn digits scaled to [0, 1]: 1,200 training rows, 597 test rows),
same model (the MLP of ``trustlab.security._nets``, same seed), same optimiser (SGD,
momentum 0.9, weight decay 5e-4, lr 0.1 decayed 10x at half and three quarters of the
epochs), same batches of 64, same attack in training (L-inf PGD, eps 0.1, step eps/4,
10 steps, random start) and the same per-epoch evaluation (PGD-20 on the test rows).
trustlab's loop also computes the class attribution similarity each epoch; the peer
loop does not. Both final models are scored by the same evaluator: torchattacks'
PGD-20 (and trustlab's, as a cross-check).
"""

from __future__ import annotations

import time

import numpy as np

EPS = 0.1


def run(quick: bool = False) -> dict:
    import torch
    import torchattacks

    from trustlab.security._nets import digits, make_net, predict
    from trustlab.security.adversarial import adversarial_train, pgd_attack

    epochs = 6 if quick else 30
    X, y = digits()
    order = np.random.default_rng(0).permutation(len(X))
    tr, te = order[:1200], order[1200:]
    Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # warm-up: the first optimiser step imports torch's lazy modules (dynamo, sympy: seconds)
        adversarial_train(make_net("mlp"), Xtr[:64], ytr[:64], Xte[:64], yte[:64], eps=EPS, epochs=1, steps=1)
        start = time.perf_counter()
        ours = adversarial_train(
            make_net("mlp", seed=0), Xtr, ytr, Xte, yte, eps=EPS, epochs=epochs, batch_size=64
        )
        t_ours = (time.perf_counter() - start) / epochs

        peer = make_net("mlp", seed=0)
        opt = torch.optim.SGD(peer.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        train_atk = torchattacks.PGD(peer, eps=EPS, alpha=EPS / 4, steps=10, random_start=True)
        eval_atk = torchattacks.PGD(peer, eps=EPS, alpha=EPS / 4, steps=20, random_start=True)
        Xt, yt = torch.as_tensor(Xtr), torch.as_tensor(ytr)
        Xe, ye = torch.as_tensor(Xte), torch.as_tensor(yte)
        gen = torch.Generator().manual_seed(0)
        peer_hist = []
        start = time.perf_counter()
        for epoch in range(epochs):
            rate = 0.1 * (1.0 if epoch < epochs * 0.5 else 0.1 if epoch < epochs * 0.75 else 0.01)
            for group in opt.param_groups:
                group["lr"] = rate
            perm = torch.randperm(len(Xt), generator=gen)
            for s in range(0, len(Xt), 64):
                idx = perm[s : s + 64]
                x_adv = train_atk(Xt[idx], yt[idx])
                peer.train()
                loss = torch.nn.functional.cross_entropy(peer(x_adv), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
            peer.eval()
            x_eval = eval_atk(Xe, ye)
            with torch.no_grad():
                peer_hist.append(float((peer(x_eval).argmax(1) == ye).float().mean()))
        t_peer = (time.perf_counter() - start) / epochs

        def robust(model, which: str) -> float:
            if which == "torchattacks":
                atk = torchattacks.PGD(model, eps=EPS, alpha=EPS / 4, steps=20, random_start=True)
                x_adv = atk(Xe, ye).numpy()
            else:
                x_adv = pgd_attack(model, Xte, yte, eps=EPS, steps=20, random_state=1)
            return float(np.mean(predict(model, x_adv) == yte))

        rows = []
        for name, model in (("last epoch", ours.model), ("best epoch", ours.best_model)):
            peer_model = peer
            rows.append(
                {
                    "case": f"MLP, {epochs} epochs, {name if name == 'last epoch' else 'trustlab best'}",
                    "metric": "robust accuracy, torchattacks PGD-20",
                    "trustlab": robust(model, "torchattacks"),
                    "peer": robust(peer_model, "torchattacks"),
                }
            )
        rows.append(
            {
                "case": f"MLP, {epochs} epochs, last epoch",
                "metric": "robust accuracy, trustlab PGD-20",
                "trustlab": robust(ours.model, "trustlab"),
                "peer": robust(peer, "trustlab"),
            }
        )
        rows.append(
            {
                "case": f"MLP, {epochs} epochs, last epoch",
                "metric": "clean accuracy",
                "trustlab": float(np.mean(predict(ours.model, Xte) == yte)),
                "peer": float(np.mean(predict(peer, Xte) == yte)),
            }
        )
        rows.append(
            {
                "case": "per epoch (train + PGD-20 evaluation)",
                "metric": "seconds, one thread",
                "trustlab": t_ours,
                "peer": t_peer,
            }
        )
        for r in rows:
            r["peer_over_trustlab"] = r["peer"] / r["trustlab"] if r["trustlab"] else float("nan")
    finally:
        torch.set_num_threads(threads)
    return {
        "title": "PGD adversarial training on digits vs a plain torchattacks PGD loop (peer = torchattacks)",
        "rows": rows,
        "notes": [
            f"eps={EPS} (L-inf, inputs in [0, 1]), step eps/4, 10 training steps, PGD-20 evaluation",
            "trustlab's per-epoch time includes the class attribution similarity on the PGD-20 test examples",
            "row 'trustlab best': trustlab's best-robustness checkpoint beside the peer's last epoch",
            "trustlab CAS by epoch: " + str([round(float(c), 2) for c in ours.history["cas"]]),
            "trustlab robust accuracy by epoch: "
            + str([round(float(a), 3) for a in ours.history["robust_accuracy"]]),
            f"peer robust accuracy by epoch: {[round(a, 3) for a in peer_hist]}",
            "torchattacks installed with `pip install --no-deps torchattacks` (its pins would replace "
            "torch 2.13 by 2.14 through torchvision and downgrade requests)",
        ],
    }
