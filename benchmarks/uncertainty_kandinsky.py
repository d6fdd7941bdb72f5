"""Kandinsky conformal prediction vs crepes and MAPIE: per-group coverage, time, memory.

Same base model, same LAC score (``1 - p_hat(y|x)``; crepes' ``hinge``), same splits and
alpha = 0.1 for every method.

1. Coverage (embedded Benefits data, logistic model on 1,600 rows, R reshuffles of the
   other 3,277 into calibration / test halves): mean coverage per group over overlapping
   groups female, non-white (covariates) and y=no, y=yes (labels). Methods: MAPIE split
   (``SplitConformalClassifier``), crepes class-conditional (``class_cond=True``), crepes
   Mondrian on the sex x race cells (``mc=``), MAPIE's conditional conformal on the
   covariate groups (Gibbs et al.; ``ConditionalSplitConformalClassifier``, needs cvxpy),
   and trustlab's ``KandinskyConformal`` as split, class-conditional, Mondrian and with
   all overlapping groups. Agreement of prediction sets between the matching special
   cases is printed (crepes and MAPIE use the ``(n + 1)`` finite-sample rank, trustlab the
   paper's plain pinball fit: sets can differ at one order statistic).
2. Time: synthetic 3-class data, 100,000 calibration and 100,000 test rows: fit + predict,
   median of repeats, ratio trustlab / peer for the same special case.
3. Memory: fit on 1,000,000 calibration rows with 5 and 6 overlapping groups: the growth
   of the peak resident size during the fit over the resident size once the data and the
   model exist (the peak is reset just before the fit; no n x n array: the LP is solved
   on a band of rows).

Peers are imported if installed (``pip install crepes mapie cvxpy``); they are not
trustlab dependencies. Missing peers are reported in the notes.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pandas as pd

ALPHA = 0.1


def _peers() -> dict[str, Any]:
    found: dict[str, Any] = {}
    try:
        import crepes

        found["crepes"] = crepes
    except ImportError:
        pass
    try:
        import mapie.classification

        found["mapie"] = mapie
    except ImportError:
        pass
    try:
        import cvxpy  # noqa: F401
        from mapie.conditional_conformal_prediction import ConditionalSplitConformalClassifier

        found["mapie_conditional"] = ConditionalSplitConformalClassifier
    except ImportError:
        pass
    return found


def _benefits() -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray, Any]:
    from sklearn.linear_model import LogisticRegression

    from trustlab.datasets import load_default

    df = load_default()[0]
    y = df["ui"].to_numpy()
    X = pd.get_dummies(df.drop(columns=["ui"]), drop_first=True).astype(float)
    perm = np.random.default_rng(0).permutation(len(y))
    train, rest = perm[:1600], perm[1600:]
    model = LogisticRegression(max_iter=2000).fit(X.iloc[train], y[train])
    return X, y, train, rest, model


def _groups(Xf: pd.DataFrame, yy: Any) -> pd.DataFrame:
    yy = np.asarray(yy)
    return pd.DataFrame(
        {
            "female": Xf["sex_male"].to_numpy() == 0,
            "nonwhite": Xf["nwhite_yes"].to_numpy() == 1,
            "y=no": yy == "no",
            "y=yes": yy == "yes",
        }
    ).astype(float)


def _cells(Xf: Any, yy: Any = None) -> np.ndarray:
    Xf = pd.DataFrame(Xf, columns=_COLUMNS) if not isinstance(Xf, pd.DataFrame) else Xf
    s, w = Xf["sex_male"].to_numpy(), Xf["nwhite_yes"].to_numpy()
    return np.column_stack([(s == a) & (w == b) for a in (0, 1) for b in (0, 1)]).astype(float)


_COLUMNS: list[str] = []


def _coverage_part(reps: int, peers: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    from trustlab.uncertainty import KandinskyConformal, group_coverage

    X, y, _, rest, model = _benefits()
    _COLUMNS[:] = list(X.columns)
    results: dict[str, list[pd.Series]] = {}
    agree: dict[str, list[float]] = {}

    def record(name: str, sets: np.ndarray, test: np.ndarray, g: pd.DataFrame) -> None:
        idx = np.searchsorted(model.classes_, y[test])
        covered = sets[np.arange(len(test)), idx].astype(bool)
        table = group_coverage(covered, g, set_size=sets.sum(axis=1).astype(float), alpha=ALPHA)
        sizes = pd.Series({"set size": table["mean_set_size"].iloc[0]})
        results.setdefault(name, []).append(pd.concat([table["coverage"], sizes]))

    for r in range(reps):
        p = np.random.default_rng(100 + r).permutation(rest)
        cal, test = p[: len(p) // 2], p[len(p) // 2 :]
        Xc, Xt = X.iloc[cal], X.iloc[test]
        g = _groups(Xt, y[test])
        mine: dict[str, np.ndarray] = {}
        for name, feats, intercept in (
            ("trustlab split", None, True),
            ("trustlab class-cond", "class", False),
            ("trustlab Mondrian sex x race", _cells, False),
            ("trustlab Kandinsky (all groups)", _groups, True),
        ):
            cp = KandinskyConformal(
                model, group_features=feats, fit_intercept=intercept, alpha=ALPHA, random_state=r
            ).fit(Xc, y[cal])
            mine[name] = cp.predict(Xt)
            record(name, mine[name], test, g)
        if "mapie" in peers:
            from mapie.classification import SplitConformalClassifier

            m = SplitConformalClassifier(model, confidence_level=1 - ALPHA, prefit=True).conformalize(
                Xc, y[cal]
            )
            sets = np.asarray(m.predict_set(Xt)[1])[:, :, 0]
            record("MAPIE split", sets, test, g)
            agree.setdefault("split: trustlab vs MAPIE", []).append(
                float(np.mean(sets == mine["trustlab split"]))
            )
        if "crepes" in peers:
            from crepes import WrapClassifier

            w = WrapClassifier(model)
            w.calibrate(Xc, y[cal], class_cond=True)
            sets = np.asarray(w.predict_set(Xt, confidence=1 - ALPHA, smoothing=False, labels=False))
            record("crepes class-cond", sets, test, g)
            agree.setdefault("class-cond: trustlab vs crepes", []).append(
                float(np.mean(sets == mine["trustlab class-cond"]))
            )
            w2 = WrapClassifier(model)
            w2.calibrate(Xc, y[cal], mc=lambda Z: _cells(Z).argmax(axis=1))
            sets = np.asarray(w2.predict_set(Xt, confidence=1 - ALPHA, smoothing=False, labels=False))
            record("crepes Mondrian sex x race", sets, test, g)
            agree.setdefault("Mondrian: trustlab vs crepes", []).append(
                float(np.mean(sets == mine["trustlab Mondrian sex x race"]))
            )
        if "mapie_conditional" in peers and r < max(1, reps // 4):
            cls = peers["mapie_conditional"]

            def fmap(Z: Any) -> np.ndarray:
                Z = pd.DataFrame(np.asarray(Z), columns=_COLUMNS)
                return np.column_stack([np.ones(len(Z)), Z["sex_male"] == 0, Z["nwhite_yes"] == 1]).astype(
                    float
                )

            try:
                m = cls(fmap, model, confidence_level=1 - ALPHA, prefit=True).conformalize(
                    Xc.to_numpy(), y[cal]
                )
                sets = np.asarray(m.predict_set(Xt.to_numpy())[1])
                sets = sets[:, :, 0] if sets.ndim == 3 else sets
                record("MAPIE conditional (covariate groups)", sets, test, g)
            except Exception as exc:  # a peer failure is reported, not hidden
                notes.append(f"MAPIE ConditionalSplitConformalClassifier failed: {type(exc).__name__}: {exc}")
                peers.pop("mapie_conditional")
    rows = []
    for name, series in results.items():
        mean = pd.concat(series, axis=1).mean(axis=1)
        row: dict[str, Any] = {"method": name, "reps": len(series)}
        for k, v in mean.items():
            row[str(k)] = round(float(v), 3)
        cov = [row[c] for c in ("female", "nonwhite", "y=no", "y=yes", "all")]
        row["worst |gap|"] = round(max(abs(c - (1 - ALPHA)) for c in cov), 3)
        rows.append(row)
    for k, v in agree.items():
        notes.append(f"set agreement {k}: {statistics.mean(v):.4f} of (row, class) cells")
    return rows


def _synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    logits = X[:, :3] * np.array([1.0, 0.7, 0.4]) + 0.5 * X[:, 3:4]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return X, y


def _timing_part(repeats: int, n: int, peers: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    from sklearn.linear_model import LogisticRegression

    from trustlab.uncertainty import KandinskyConformal

    X, y = _synthetic(3 * n, 1)
    model = LogisticRegression().fit(X[:n], y[:n])
    Xc, yc, Xt = X[n : 2 * n], y[n : 2 * n], X[2 * n :]

    def cells(Z: Any, yy: Any = None) -> np.ndarray:
        Z = np.asarray(Z)
        a, b = Z[:, 3] > 0, Z[:, 4] > 0.5
        return np.column_stack([a & b, a & ~b, ~a & b, ~a & ~b]).astype(float)

    def timed(fn: Any) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    cases: list[tuple[str, Any, str | None, Any]] = [
        (
            "split",
            lambda: KandinskyConformal(model, random_state=0).fit(Xc, yc).predict(Xt),
            "mapie",
            lambda: (
                __import__("mapie.classification", fromlist=["x"])
                .SplitConformalClassifier(model, confidence_level=1 - ALPHA, prefit=True)
                .conformalize(Xc, yc)
                .predict_set(Xt)
            ),
        ),
        (
            "class-conditional",
            lambda: (
                KandinskyConformal(model, group_features="class", fit_intercept=False, random_state=0)
                .fit(Xc, yc)
                .predict(Xt)
            ),
            "crepes",
            lambda: _crepes_fit_predict(model, Xc, yc, Xt, class_cond=True),
        ),
        (
            "Mondrian (4 cells)",
            lambda: (
                KandinskyConformal(model, group_features=cells, fit_intercept=False, random_state=0)
                .fit(Xc, yc)
                .predict(Xt)
            ),
            "crepes",
            lambda: _crepes_fit_predict(model, Xc, yc, Xt, mc=lambda Z: cells(Z).argmax(axis=1)),
        ),
    ]
    rows = []
    for name, mine, peer, theirs in cases:
        t_mine = timed(mine)
        row: dict[str, Any] = {"case": name, "n_cal": n, "n_test": n, "trustlab_s": round(t_mine, 3)}
        if peer in peers:
            t_peer = timed(theirs)
            row.update(
                {"peer": peer, "peer_s": round(t_peer, 3), "ratio trustlab/peer": round(t_mine / t_peer, 4)}
            )
        else:
            row.update(
                {
                    "peer": f"{peer} (not installed)",
                    "peer_s": float("nan"),
                    "ratio trustlab/peer": float("nan"),
                }
            )
        rows.append(row)
    return rows


def _crepes_fit_predict(model: Any, Xc: Any, yc: Any, Xt: Any, **kw: Any) -> Any:
    from crepes import WrapClassifier

    w = WrapClassifier(model)
    w.calibrate(Xc, yc, **kw)
    return w.predict_set(Xt, confidence=1 - ALPHA, smoothing=False, labels=False)


_MEMORY_SCRIPT = """
import os, time, json, numpy as np
from sklearn.linear_model import LogisticRegression
from trustlab.uncertainty import KandinskyConformal
n, n_groups = {n}, {n_groups}
rng = np.random.default_rng(2)
X = rng.standard_normal((n, 6)).astype(float)
y = (X[:, 0] + rng.standard_normal(n) > 0).astype(int)
model = LogisticRegression().fit(X[:5000], y[:5000])
def groups(Z, yy):
    Z = np.asarray(Z)
    sig = 1 / (1 + np.exp(-Z[:, 3]))
    cols = [Z[:, 1] > 0, Z[:, 2] > 1, sig, np.asarray(yy) == 1, Z[:, 4] < -0.5, Z[:, 5] > 0.5]
    return np.column_stack(cols[:n_groups])
def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
def hwm_mib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
baseline = rss_mib()  # the data and the model exist: resident memory now, not an earlier peak
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current resident size
t0 = time.perf_counter()
cp = KandinskyConformal(model, group_features=groups, random_state=0).fit(X, y)
fit_s = time.perf_counter() - t0
peak = hwm_mib()
print(json.dumps({{"n_groups": n_groups, "fit_s": fit_s, "rss_before_fit_mib": baseline,
                   "peak_rss_mib": peak, "fit_growth_mib": peak - baseline}}))
"""


def _memory_part(n: int, n_groups: int) -> dict[str, Any]:
    """Peak resident growth of one fit over the resident size once the data and model exist
    (Linux: the peak is reset through /proc/self/clear_refs just before the fit)."""
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT.format(n=n, n_groups=n_groups)],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run(quick: bool = False) -> dict[str, Any]:
    """Run the three parts; ``quick`` uses fewer reshuffles and smaller sizes."""
    peers = _peers()
    notes: list[str] = []
    for name in ("crepes", "mapie", "mapie_conditional"):
        if name not in peers:
            notes.append(f"peer {name} not importable here: its rows are missing")
    coverage = _coverage_part(5 if quick else 20, peers, notes)
    timing = _timing_part(2 if quick else 3, 20_000 if quick else 100_000, peers, notes)
    size = 100_000 if quick else 1_000_000
    memory = [_memory_part(size, g) for g in (5, 6)]
    for m in memory:
        notes.append(
            f"memory: fit on {size:,} calibration rows, {m['n_groups']} group columns + constant: "
            f"{m['fit_s']:.1f} s, peak resident growth {m['fit_growth_mib']:.0f} MiB over "
            f"{m['rss_before_fit_mib']:.0f} MiB once the data and model exist"
        )
    for row in timing:
        notes.append(
            f"time {row['case']}: trustlab {row['trustlab_s']} s vs {row['peer']} {row['peer_s']} s "
            f"(ratio {row['ratio trustlab/peer']})"
        )
    return {
        "title": "Kandinsky conformal vs crepes / MAPIE: mean coverage per group (target 0.9), Benefits data",
        "rows": coverage,
        "timing": timing,
        "memory": memory,
        "notes": notes,
    }
