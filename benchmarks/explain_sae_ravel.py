"""SAEBench's RAVEL metric (row 002-19): cost, and agreement with a direct per-pair evaluation.

No pip peer: ``sae-bench`` is not in this project's package index, and its pyproject pins
``numpy < 2.0`` (trustlab runs numpy 2) and pulls ``sae_lens``, ``transformer_lens``, ``openai``
and ``datasets < 4``, so the reference here is
a direct re-implementation of the scoring step: each held-out pair run alone through
``trustlab.lm.run_with_hooks``, its base entity vector replaced by
``W_dec where(mask, f(x_source), f(x_base)) + b_dec`` computed in NumPy float64, and the
next-token argmax compared with the batched, float32 interventions ``ravel`` scored.

Substrate: ``load_ravel_lab()`` (64 planted cities, country / continent / language; a 2-block
Llama), hook ``blocks.0.resid_pre`` at the entity token, SAEs of 128 latents (k = 4) fitted
on all 18,432 token positions of the corpus, 1,500 steps. Figures: fit and RAVEL CPU seconds,
scores, and the share of held-out pairs where the direct evaluation agrees.
"""

from __future__ import annotations

import time

import numpy as np

HOOK = "blocks.0.resid_pre"


def _direct(model, sae, c, X, mask, pairs) -> tuple[np.ndarray, float]:
    import torch

    from trustlab.lm import run_with_hooks

    Z = np.asarray(sae.transform(X), dtype=float)
    D, b = np.asarray(sae.W_dec_), np.asarray(sae.b_dec_)
    t = time.process_time()
    preds = []
    for base, source in zip(pairs["base"], pairs["source"], strict=True):
        vec = torch.as_tensor(np.where(mask, Z[source], Z[base]) @ D + b, dtype=torch.float32)
        p = int(c.entity_pos[base])

        def patch(x, vec=vec, p=p):
            x = x.clone()
            x[0, p] = vec
            return x

        out = run_with_hooks(model, c.prompts[base : base + 1], [], edits={HOOK: patch})["logits"]
        preds.append(int(out[0, -1].argmax()))
    return np.asarray(preds), time.process_time() - t


def run(quick: bool = False) -> dict:
    import torch

    from trustlab._threads import one_thread
    from trustlab.explain.ravel_lab import AttributeDictionary, load_ravel_lab
    from trustlab.explain.sae import SparseAutoencoder
    from trustlab.explain.sae_ravel import RandomBasisControl, _Intervention, ravel
    from trustlab.lm import run_with_hooks

    t = time.process_time()
    model, c = load_ravel_lab()
    rows, notes = [], [f"lab load (train on first use): {time.process_time() - t:.1f} s CPU"]
    acts = run_with_hooks(model, c.prompts, [HOOK])[HOOK].double().numpy()
    X_all = acts.reshape(-1, acts.shape[-1])
    X = acts[np.arange(len(c.prompts)), c.entity_pos]
    archs = ["attribute", "control", "topk", "matryoshka"]
    if not quick:
        archs += ["batchtopk", "relu"]
    with one_thread():
        for arch in archs:
            t = time.process_time()
            if arch == "attribute":
                sae = AttributeDictionary(model, c)
            elif arch == "control":
                sae = RandomBasisControl(X_all)
            else:
                sae = SparseAutoencoder(
                    128,
                    architecture=arch,
                    k=4,
                    n_steps=300 if quick else 1500,
                    batch_size=512,
                    random_state=0,
                ).fit(X_all)
            fit_s = time.process_time() - t
            t = time.process_time()
            r = ravel(model, sae, HOOK, c.prompts, c.answer, c.attribute, c.entity_pos)
            ravel_s = time.process_time() - t
            agree, n, direct_s, batched_s = 0, 0, 0.0, 0.0
            run = _Intervention(model, HOOK, c.prompts, c.entity_pos, sae.transform(X), sae, X, False)
            for a in r.masks if not quick else ["country"]:
                t = time.process_time()
                with torch.no_grad():
                    hard = torch.as_tensor(r.masks[a], dtype=torch.float32)
                    run.logits(r.pairs[a]["base"].to_numpy(), r.pairs[a]["source"].to_numpy(), hard)
                batched_s += time.process_time() - t
                preds, secs = _direct(model, sae, c, X, r.masks[a], r.pairs[a])
                ok = preds == r.pairs[a]["target"].to_numpy()
                agree += int((ok == r.correct[a]).sum())
                n += ok.size
                direct_s += secs
            rows.append(
                {
                    "sae": arch,
                    "fit_cpu_s": round(fit_s, 2),
                    "ravel_cpu_s": round(ravel_s, 2),
                    "disentanglement": round(r.score, 3),
                    "cause": round(r.cause, 3),
                    "isolation": round(r.isolation, 3),
                    "direct_agreement": round(agree / n, 4),
                    "direct_pairs": n,
                    "direct_cpu_ms_per_pair": round(1000 * direct_s / n, 2),
                    "batched_cpu_ms_per_pair": round(1000 * batched_s / n, 3),
                }
            )
    notes.append(f"torch threads {torch.get_num_threads()} outside one_thread; prompts {len(c.prompts)}")
    return {"title": "RAVEL (SAEBench) on the planted-entity lab", "rows": rows, "notes": notes}
