"""FastPD vs shap (interventional TreeExplainer) and shapiq (interventional, own venv).

XGBoost, 100 trees, depth 6, d = 8 Gaussian features; background = the explained
rows; n = 500, 2k, 5k, 20k (quick: 500, 2k). Times are medians over repeats,
single thread; shap uses ``maskers.Independent(X, max_samples=n)`` so that it does
not silently subsample the background to 100 rows. Agreement: max |difference| of
SHAP values on the first 50 rows.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from trustlab.explain import FastPD

ROOT = Path(__file__).resolve().parent.parent
SHAPIQ_PY = ROOT / ".venvs" / "shapiq" / "bin" / "python"
_SHAPIQ_SCRIPT = """
import sys, time, json, numpy as np, xgboost as xgb, shapiq
d = np.load(sys.argv[1]); X = d["X"]
m = xgb.XGBRegressor(); m.load_model(sys.argv[2])
t = time.perf_counter()
ex = shapiq.TreeExplainer(m, mode="interventional", reference_dataset=X, max_order=1,
                          index="SV", backend="shapiq")
ivs = ex.explain_X(X)
t = time.perf_counter() - t
vals = np.array([[iv[(j,)] for j in range(X.shape[1])] for iv in ivs[:50]])
np.save(sys.argv[3], vals)
print(json.dumps({"time": t}))
"""


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = X[:, 0] + X[:, 1] * X[:, 2] + np.sin(3 * X[:, 3]) + X[:, 4] * X[:, 5] * X[:, 6]
    return X, y + 0.3 * rng.normal(size=n)


def _fastpd(model, X):
    t = time.perf_counter()
    phi = FastPD(model).fit(X).shap_values(X)
    return time.perf_counter() - t, phi


def _shap(model, X):
    import shap

    t = time.perf_counter()
    masker = shap.maskers.Independent(X, max_samples=len(X))
    ex = shap.TreeExplainer(model, masker, feature_perturbation="interventional")
    phi = ex.shap_values(X, check_additivity=False)
    return time.perf_counter() - t, np.asarray(phi)


def _shapiq(model, X):
    if not SHAPIQ_PY.exists():
        return None, None
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(Path(tmp) / "d.npz", X=X)
        model.save_model(Path(tmp) / "m.json")
        script = Path(tmp) / "run.py"
        script.write_text(_SHAPIQ_SCRIPT)
        out = subprocess.run(
            [
                str(SHAPIQ_PY),
                str(script),
                str(Path(tmp) / "d.npz"),
                str(Path(tmp) / "m.json"),
                str(Path(tmp) / "v.npy"),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        )
        if out.returncode != 0:
            return None, out.stderr[-300:]
        return json.loads(out.stdout.strip().splitlines()[-1])["time"], np.load(Path(tmp) / "v.npy")


def run(quick: bool = False) -> dict:
    import xgboost as xgb

    sizes = [500, 2000, 5000, 20000]  # FastPD always; the peers up to 2k in quick mode
    peer_max = 2000 if quick else 5000
    rows = []
    notes = []
    times = {}
    for n in sizes:
        X, y = _data(n)
        model = xgb.XGBRegressor(n_estimators=100, max_depth=6, n_jobs=1, random_state=0)
        model.fit(X, y)
        reps = 3 if n <= 5000 else 1
        t_f = float(np.median([_fastpd(model, X)[0] for _ in range(reps)]))
        _, phi = _fastpd(model, X)
        times[n] = t_f
        row = {"n": n, "fastpd_s": t_f}
        if n <= peer_max:
            t_s, ref = _shap(model, X)
            row |= {
                "shap_s": t_s,
                "shap_ratio": t_s / t_f,
                "max_abs_diff_shap": float(np.abs(ref[:50] - phi[:50]).max()),
            }
        t_q, ref_q = _shapiq(model, X) if n <= peer_max else (None, None)
        if t_q is not None and isinstance(ref_q, np.ndarray):
            row |= {
                "shapiq_s": t_q,
                "shapiq_ratio": t_q / t_f,
                "max_abs_diff_shapiq": float(np.abs(ref_q - phi[:50]).max()),
            }
        elif isinstance(ref_q, str):
            notes.append(f"shapiq failed at n={n}: {ref_q}")
        rows.append(row)
    if 20000 in times and 5000 in times:
        notes.append(f"time(20k)/time(5k) = {times[20000] / times[5000]:.2f} (target <= 5)")
    notes.append("FastPD time includes fit (background tables) and shap_values; single thread.")
    notes.append("shapiq runs in .venvs/shapiq (Python 3.12) via subprocess, backend='shapiq'.")
    return {
        "title": "FastPD vs shap / shapiq interventional SHAP (XGBoost 100x depth 6)",
        "rows": rows,
        "notes": notes,
    }
