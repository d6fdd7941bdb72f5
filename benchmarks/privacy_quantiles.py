"""DP quantiles: trustlab (JointExp) vs OpenDP make_private_quantile and diffprivlib, n=1e6, 5 levels, eps=1.

A second part runs JointExp on tied data -- integers from {1..5} and a count column
on 0..10 with 74% zeros -- against OpenDP's quantile mechanism
(``make_private_quantile``, the exponential mechanism over candidates, epsilon / m per
level) with the candidates equal to trustlab's public grid (the integers between the
bounds), and trustlab's default 2**20-step grid beside it. Before issue 10 JointExp
gave quartiles 1.8 / 2.1 / 2.3 on 5,000 draws from {1, 2, 3} (zero-length intervals got
zero weight) and raised ``log_weights has no finite entry`` at epsilon >= 10.

diffprivlib 0.6.6 does not import beside scikit-learn 1.9, so it runs in a separate
virtual environment (an older scikit-learn) through a subprocess, on the same data
written to a temporary ``.npy`` file; its time is measured inside that process
(the quantile call only). Set ``TRUSTLAB_DIFFPRIVLIB_PYTHON`` to that environment's
python (default ``/tmp/dpl-venv/bin/python``). Without it the benchmark still runs
and says diffprivlib was not compared. Make the environment with::

    python -m venv /tmp/dpl-venv
    /tmp/dpl-venv/bin/pip install "scikit-learn==1.5.2" "numpy<2.1" "scipy<1.15" diffprivlib==0.6.6

A second part compares the means without public bounds: trustlab's ``dp_mean(x,
None, ...)`` (bounds estimated privately and charged) against diffprivlib's
``mean(x, bounds=None)`` (which reads min/max off the data, with a
``PrivacyLeakWarning``): the price of not leaking.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

LEVELS = [0.1, 0.25, 0.5, 0.75, 0.9]

_DPL_SCRIPT = """
import json, sys, time, warnings
import numpy as np
import diffprivlib
from diffprivlib.tools import mean, quantile
x = np.load(sys.argv[1])
levels = json.loads(sys.argv[2])
lo, hi = float(sys.argv[3]), float(sys.argv[4])
t = time.perf_counter()
q = quantile(x, levels, epsilon=1.0, bounds=(lo, hi))
tq = time.perf_counter() - t
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    t = time.perf_counter()
    m = mean(x, epsilon=1.0)
    tm = time.perf_counter() - t
print(json.dumps({"q": [float(v) for v in q], "q_s": tq, "mean": float(m), "mean_s": tm,
                  "version": diffprivlib.__version__}))
"""


def _dpl_python() -> str | None:
    path = os.environ.get("TRUSTLAB_DIFFPRIVLIB_PYTHON", "/tmp/dpl-venv/bin/python")
    if not Path(path).exists():
        return None
    try:
        subprocess.run([path, "-c", "import diffprivlib"], check=True, capture_output=True, timeout=120)
    except (subprocess.SubprocessError, OSError):
        return None
    return path


def _diffprivlib(python: str, x: np.ndarray, bounds: tuple[float, float]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.npy"
        np.save(path, x)
        out = subprocess.run(
            [python, "-c", _DPL_SCRIPT, str(path), json.dumps(LEVELS), str(bounds[0]), str(bounds[1])],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _opendp(
    x: np.ndarray, eps: float, bounds: tuple[float, float], candidates: list[float] | None = None
) -> np.ndarray:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    cands = np.linspace(bounds[0], bounds[1], 10001).tolist() if candidates is None else candidates
    dom = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=x.size)
    out = []
    xs = x.tolist()
    for a in LEVELS:  # eps/5 per level; input_domain with known size
        # calibrate scale so that the map at d_in=2 (one replacement) is eps/5
        scale = dp.binary_search_param(
            lambda s, a=a: dp.m.make_private_quantile(
                dom,
                dp.symmetric_distance(),
                dp.max_divergence(),
                candidates=cands,
                alpha=a,
                scale=s,
            ),
            d_in=2,
            d_out=eps / len(LEVELS),
        )
        m = dp.m.make_private_quantile(
            dom,
            dp.symmetric_distance(),
            dp.max_divergence(),
            candidates=cands,
            alpha=a,
            scale=scale,
        )
        out.append(m(xs))
    return np.array(out)


# Tied data: (name, values, probabilities, bounds)
TIED = [
    ("integers 1..5", np.arange(1, 6), [0.15, 0.2, 0.3, 0.2, 0.15], (0.0, 6.0)),
    (
        "count 0..10, 74% zeros",
        np.arange(11),
        [0.74, 0.12, 0.06, 0.03, 0.02, 0.01, 0.008, 0.006, 0.003, 0.002, 0.001],
        (0.0, 10.0),
    ),
]


def _tied_release(label: str, x: np.ndarray, bounds: tuple[float, float], res: int) -> np.ndarray:
    from trustlab.privacy.quantiles import dp_quantiles

    if label == "jointexp_int":
        return dp_quantiles(x, LEVELS, 1.0, bounds, resolution=res).value
    if label == "jointexp_default":
        return dp_quantiles(x, LEVELS, 1.0, bounds).value
    if label == "independent_int":
        return dp_quantiles(x, LEVELS, 1.0, bounds, resolution=res, method="independent").value
    cands = [float(bounds[0] + k) for k in range(res + 1)]
    if label == "opendp_noiseless":  # OpenDP's own target: its score's minimiser (scale 1e-9)
        return _opendp_scale(x, bounds, cands, 1e-9)
    return _opendp(x, 1.0, bounds, cands)


def _opendp_scale(x: np.ndarray, bounds: tuple[float, float], cands: list[float], scale: float) -> np.ndarray:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    dom = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=x.size)
    xs = x.tolist()
    return np.array(
        [
            dp.m.make_private_quantile(
                dom, dp.symmetric_distance(), dp.max_divergence(), candidates=cands, alpha=a, scale=scale
            )(xs)
            for a in LEVELS
        ]
    )


TIED_METHODS = {
    "jointexp_int": "trustlab JointExp, integer grid (resolution = upper - lower)",
    "jointexp_default": "trustlab JointExp, default grid (resolution 2**20)",
    "independent_int": "trustlab independent (eps/5 per level), integer grid",
    "opendp": "OpenDP 0.16 make_private_quantile (eps/5 per level, the integer grid as candidates)",
}


def _tied(n: int, reps: int) -> tuple[list[dict], list[str]]:
    """JointExp on tied data vs OpenDP's quantile mechanism on the same public grid."""
    _tied_release("jointexp_int", np.arange(10.0), (0.0, 10.0), 10)  # warm up OpenDP's samplers
    rows: list[dict] = []
    own_target_mae = {}
    for name, values, probs, bounds in TIED:
        res = int(bounds[1] - bounds[0])
        runs: dict[str, list[tuple[float, float, bool]]] = {}
        own = []
        for seed in range(reps):
            x = np.random.default_rng(100 + seed).choice(values, size=n, p=probs).astype(float)
            true = np.quantile(x, LEVELS, method="inverted_cdf")
            target = _tied_release("opendp_noiseless", x, bounds, res)
            for label in TIED_METHODS:
                t = time.perf_counter()
                out = np.asarray(_tied_release(label, x, bounds, res), dtype=float)
                elapsed = time.perf_counter() - t
                runs.setdefault(label, []).append(
                    (float(np.mean(np.abs(out - true))), elapsed, bool(np.array_equal(out, true)))
                )
                if label == "opendp":
                    own.append(float(np.mean(np.abs(out - target))))
            own_target_mae[name] = (statistics.mean(own), target.tolist(), true.tolist())
        peer_s = statistics.median(r[1] for r in runs["opendp"])
        for label, vals in runs.items():
            med_s = statistics.median(r[1] for r in vals)
            rows.append(
                {
                    "data": name,
                    "method": TIED_METHODS[label],
                    "mae": statistics.mean(r[0] for r in vals),
                    "exact_share": sum(r[2] for r in vals) / len(vals),
                    "median_s": med_s,
                    "time_ratio_to_opendp": med_s / peer_s,
                }
            )
    notes = [
        f"tied data, n={n}, levels {LEVELS}, eps=1, replace-one, {reps} seeds: MAE = mean |release - "
        "true quantile (inverted CDF)| over levels and seeds; exact_share = share of releases equal to "
        "the true quantiles at every level; time = median wall time of one release.",
    ]
    for r in rows:
        notes.append(
            f"{r['data']} | {r['method']}: MAE {r['mae']:.3g}, exact {r['exact_share']:.2f}, "
            f"{r['median_s']:.3g} s (x{r['time_ratio_to_opendp']:.3g} OpenDP's time)"
        )
    for name, (mae, target, true) in own_target_mae.items():
        notes.append(
            f"{name}: OpenDP's noiseless answer (scale 1e-9) is {target} against the true quantiles {true}; "
            f"its releases' MAE to its own noiseless answer is {mae:.3g}. Its score "
            "|(1-alpha) #below - alpha #above| ignores the atom at the candidate, so on tied data its "
            "optimum can be the next atom."
        )
    return rows, notes


def _median(rows: list[dict], key: str) -> float | str:
    vals = [r[key] for r in rows if isinstance(r[key], float)]
    return statistics.median(vals) if vals else "n/a"


def run(quick: bool = False) -> dict:
    from trustlab.privacy.quantiles import dp_quantiles
    from trustlab.privacy.statistics import dp_mean

    n = 10**5 if quick else 10**6
    reps = 3 if quick else 5
    bounds = (0.0, 100.0)
    python = _dpl_python()
    rows = []
    mean_rows = []
    version = ""
    for seed in range(reps):
        x = np.random.default_rng(seed).lognormal(size=n)
        true = np.quantile(x, LEVELS)
        t = time.perf_counter()
        ours = dp_quantiles(x, LEVELS, 1.0, bounds).value
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        peer = _opendp(x, 1.0, bounds)
        t_peer = time.perf_counter() - t
        row: dict = {
            "seed": seed,
            "trustlab_mae": float(np.mean(np.abs(ours - true))),
            "opendp_mae": float(np.mean(np.abs(peer - true))),
            "diffprivlib_mae": "n/a",
            "trustlab_s": t_ours,
            "opendp_s": t_peer,
            "diffprivlib_s": "n/a",
        }
        t = time.perf_counter()
        m_ours, _ = dp_mean(x, None, 1.0, anchor=0.0)
        t_mean = time.perf_counter() - t
        mrow = {"trustlab_err": abs(m_ours - float(x.mean())), "trustlab_s": t_mean}
        if python is not None:
            res = _diffprivlib(python, x, bounds)
            version = res["version"]
            row["diffprivlib_mae"] = float(np.mean(np.abs(np.asarray(res["q"]) - true)))
            row["diffprivlib_s"] = float(res["q_s"])
            mrow |= {"diffprivlib_err": abs(res["mean"] - float(x.mean())), "diffprivlib_s": res["mean_s"]}
        rows.append(row)
        mean_rows.append(mrow)
    summary = {"seed": "median"} | {k: _median(rows, k) for k in rows[0] if k != "seed"}
    rows.append(summary)
    notes = [
        "trustlab: JointExp (all 5 levels jointly, eps=1, replace-one).",
        "OpenDP 0.16 make_private_quantile: eps/5 per level on 10,001 grid candidates, "
        "known-size domain, calibrated by binary search for one replacement (d_in=2).",
        f"error ratio trustlab/opendp = {summary['trustlab_mae'] / summary['opendp_mae']:.3g}; "
        f"time ratio = {summary['trustlab_s'] / summary['opendp_s']:.3g}",
    ]
    if python is None:
        notes.append(
            "diffprivlib not compared: no environment with diffprivlib found (it does not import "
            "beside scikit-learn 1.9); set TRUSTLAB_DIFFPRIVLIB_PYTHON, see the module docstring."
        )
    else:
        dpl_mae, dpl_s = summary["diffprivlib_mae"], summary["diffprivlib_s"]
        assert isinstance(dpl_mae, float) and isinstance(dpl_s, float)
        notes += [
            f"diffprivlib {version} tools.quantile (separate venv, scikit-learn 1.5.2, run by subprocess "
            "on the same data; time of the call only): exponential mechanism per level with eps/5, "
            "sensitivity 1, bounds (0, 100).",
            f"error ratio trustlab/diffprivlib = {summary['trustlab_mae'] / dpl_mae:.3g}; "
            f"time ratio = {summary['trustlab_s'] / dpl_s:.3g}",
        ]
    t_err = statistics.median(r["trustlab_err"] for r in mean_rows)
    t_s = statistics.median(r["trustlab_s"] for r in mean_rows)
    mean_note = (
        f"mean without public bounds, eps=1: trustlab dp_mean(x, None) (bounds by dp_bounds at levels "
        f"0.01/0.99 from anchor 0, eps 0.25, charged) median |error| {t_err:.4g} in {t_s:.3g} s"
    )
    if python is not None:
        d_err = statistics.median(r["diffprivlib_err"] for r in mean_rows)
        d_s = statistics.median(r["diffprivlib_s"] for r in mean_rows)
        mean_note += (
            f"; diffprivlib mean(x, bounds=None) {d_err:.4g} in {d_s:.3g} s, but it reads min/max off "
            "the data (PrivacyLeakWarning: not differentially private)"
        )
    notes.append(mean_note)
    tied_rows, tied_notes = _tied(10**5 if quick else 10**6, 3 if quick else 5)
    notes += tied_notes
    return {
        "title": f"DP quantiles, lognormal n={n}, 5 levels, eps=1, bounds {bounds}",
        "rows": rows,
        "mean_without_bounds": mean_rows,
        "tied": tied_rows,
        "notes": notes,
    }
