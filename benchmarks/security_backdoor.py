"""TSC backdoor purification beside fine-tuning, fine-pruning and the Adversarial Robustness Toolbox.

Same data for every defence: scikit-learn's digits (1,797 8x8 images scaled to [0, 1]),
1,200 training rows of which 10% carry a 2x2 white BadNets patch and are relabelled 0,
597 clean test rows; the backdoored model is the MLP, the CNN or the CNN with BatchNorm
(``cnn_bn``) of ``trustlab.security._nets`` trained 30 epochs on the poisoned rows.
Fine-pruning handles networks without BatchNorm only (it is skipped for ``cnn_bn``). Post-training
defences (TSC, fine-tuning, fine-pruning) get the same 360 clean training rows.
ART's defences that apply to a PyTorch classifier on this data are *poison filters*
(activation clustering, Chen et al. 2018; spectral signatures, Tran et al. 2018): they
need the whole poisoned training set (a stronger access than TSC's), flag rows, and the
model is retrained from scratch on the rows they keep. ART's NeuralCleanse mitigation
is Keras-only and STRIP detects triggered inputs at test time without repairing the
model, so neither is compared.
"""

from __future__ import annotations

import time

import numpy as np

N_TRAIN, N_CLEAN = 1200, 360


def _scenario(kind: str, seed: int):
    from trustlab.security._nets import digits, make_net, train
    from trustlab.security.backdoor import badnets_poison

    X, y = digits(image=kind.startswith("cnn"))
    order = np.random.default_rng(seed).permutation(len(X))
    tr, te = order[:N_TRAIN], order[N_TRAIN:]
    data = badnets_poison(X[tr], y[tr], rate=0.1, target=0, random_state=seed)
    net = train(make_net(kind, seed=seed), data.X, data.y, epochs=30, seed=seed)
    clean = np.random.default_rng(seed + 100).choice(np.flatnonzero(~data.poisoned), N_CLEAN, replace=False)
    return net, data, X[tr][clean], y[tr][clean], X[te], y[te]


def _art_filter(name: str, net, data, kind: str, seed: int):
    """Run an ART poison filter on the poisoned training set; retrain on the rows it keeps."""
    import torch
    from art.defences.detector.poison import ActivationDefence, SpectralSignatureDefense
    from art.estimators.classification import PyTorchClassifier

    from trustlab.security._nets import make_net, train

    shape = data.X.shape[1:]
    clf = PyTorchClassifier(
        model=net,
        loss=torch.nn.CrossEntropyLoss(),
        input_shape=shape,
        nb_classes=10,
        clip_values=(0.0, 1.0),
    )
    if name == "activation clustering":
        defence = ActivationDefence(clf, data.X, data.y)
        _, is_clean = defence.detect_poison(nb_clusters=2, nb_dims=10, reduce="PCA")
    else:
        onehot = np.eye(10)[data.y]
        defence = SpectralSignatureDefense(clf, data.X, onehot, expected_pp_poison=0.1, batch_size=128)
        _, is_clean = defence.detect_poison()
    keep = np.asarray(is_clean, dtype=bool)
    model = train(make_net(kind, seed=seed), data.X[keep], data.y[keep], epochs=30, seed=seed)
    caught = float(np.mean(~keep[data.poisoned])) if data.poisoned.any() else float("nan")
    return model, caught, float(np.mean(~keep[~data.poisoned]))


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.security._backdoor_baselines import fine_prune, fine_tune
    from trustlab.security._nets import predict
    from trustlab.security.backdoor import attack_success_rate, tsc_purify

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    notes = []
    try:
        for kind in ("mlp",) if quick else ("mlp", "cnn", "cnn_bn"):
            for seed in (0,) if quick else (0, 1, 2):
                net, data, Xc, yc, Xte, yte = _scenario(kind, seed)

                def scores(model, Xte=Xte, yte=yte):
                    return float(np.mean(predict(model, Xte) == yte)), attack_success_rate(
                        model, Xte, yte, target=0
                    )

                acc0, asr0 = scores(net)
                rows.append(
                    {
                        "model": kind,
                        "seed": seed,
                        "defence": "none (backdoored)",
                        "clean_acc": acc0,
                        "asr": asr0,
                        "s": 0.0,
                    }
                )
                runs = {
                    "TSC (trustlab)": lambda n, x, t: (
                        tsc_purify(n, x, t, t=0.5, epochs=50, batch_size=32).model
                    ),
                    "fine-tuning": fine_tune,
                    "fine-pruning": lambda n, x, t: fine_prune(n, x, t)[0],
                }
                if kind == "cnn_bn":
                    del runs["fine-pruning"]  # its layer reader rejects BatchNorm
                for name, fn in runs.items():
                    start = time.perf_counter()
                    model = fn(net, Xc, yc)
                    elapsed = time.perf_counter() - start
                    acc, asr = scores(model)
                    rows.append(
                        {
                            "model": kind,
                            "seed": seed,
                            "defence": name,
                            "clean_acc": acc,
                            "asr": asr,
                            "s": elapsed,
                        }
                    )
                for name in ("activation clustering", "spectral signatures"):
                    start = time.perf_counter()
                    model, caught, false_flag = _art_filter(name, net, data, kind, seed)
                    elapsed = time.perf_counter() - start
                    acc, asr = scores(model)
                    rows.append(
                        {
                            "model": kind,
                            "seed": seed,
                            "defence": f"ART {name} + retrain",
                            "clean_acc": acc,
                            "asr": asr,
                            "s": elapsed,
                        }
                    )
                    notes.append(
                        f"{kind} seed {seed}: ART {name} flagged {caught:.0%} of the poisoned rows and "
                        f"{false_flag:.0%} of the clean ones"
                    )
    finally:
        torch.set_num_threads(threads)
    tsc = [r for r in rows if r["defence"] == "TSC (trustlab)"]
    for r in rows:
        match = next(t for t in tsc if t["model"] == r["model"] and t["seed"] == r["seed"])
        r["s_over_tsc"] = r["s"] / match["s"] if match["s"] else float("nan")
    return {
        "title": "Backdoor purification on digits (BadNets 2x2 patch, 10% poisoned, target 0)",
        "rows": rows,
        "notes": [
            "asr: share of triggered test digits of other classes labelled 0 (a clean model: 0.00)",
            f"TSC, fine-tuning, fine-pruning: the same {N_CLEAN} clean training rows; TSC t=0.5, "
            "3 rounds, 50 curve epochs, batch 32 (digits-scaled; docs/security/backdoor.md)",
            "ART filters see the whole poisoned training set and retrain from scratch (different access)",
            "s: wall-clock seconds of the defence (one thread); s_over_tsc: that over TSC's",
            *notes,
        ],
    }
