"""The audit's statistics on a partitioned Parquet dataset: in process vs Dask (1 and 2 workers).

A synthetic table of ``rows`` x 20 columns is written as Parquet files of 500,000 rows.
The work timed is the distributed audit's two passes (:mod:`trustlab.audit._scale`):
pass 1 = every column's summary, the target's and sensitive columns' values and the
training sample; pass 2 = score the held-out rows with a model (a logistic pipeline
fitted once on the sample) and count them into the prediction and score tables. It runs

- in process: the files read into one pandas frame, then ``compute`` on it;
- on Dask: ``compute`` on ``dask.dataframe.read_parquet`` with a LocalCluster of 1 and of
  2 worker processes (one thread each, ``OMP_NUM_THREADS=1`` in the workers).

The peer is the in-process run; the agreement figure is the largest difference between
the merged results (counts must agree exactly; sums within float rounding).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

PART_ROWS = 500_000


def _write(n: int, root: Path) -> None:
    rng = np.random.default_rng(0)
    for k, start in enumerate(range(0, n, PART_ROWS)):
        m = min(PART_ROWS, n - start)
        cols: dict[str, Any] = {f"x{i}": rng.normal(size=m) for i in range(14)}
        cols |= {f"c{i}": rng.choice(list("abcde"), size=m) for i in range(3)}
        cols["sex"] = rng.choice(["f", "m"], size=m)
        cols["group"] = rng.choice(["g1", "g2", "g3"], size=m)
        logit = cols["x0"] - 0.5 * cols["x1"] + 0.3 * (cols["sex"] == "f")
        cols["y"] = np.where(rng.uniform(size=m) < 1 / (1 + np.exp(-logit)), "yes", "no")
        pd.DataFrame(cols).to_parquet(root / f"part-{k:05d}.parquet", index=False)


def _passes(frame_meta: pd.DataFrame, model: Any, levels: list[list[Any]]) -> tuple[Any, Any]:
    from trustlab.audit._scale import _ScoredHeldout, _TrainingSample
    from trustlab.audit._scale_stats import column_statistic, heldout_statistic
    from trustlab.compute.statistics import Several, ValueCounts
    from trustlab.models import categorical_columns

    sens = ["sex", "group"]
    first = Several(
        {
            "columns": column_statistic(frame_meta, categorical_columns(frame_meta)),
            "target": ValueCounts("y"),
            "sample": _TrainingSample(0.3, 0, 0.01),
            "sens:0": ValueCounts("sex"),
            "sens:1": ValueCounts("group"),
        }
    )
    features = [c for c in frame_meta.columns if c not in ("y", *sens)]
    second = _ScoredHeldout(
        heldout_statistic(sens, levels),
        model,
        {"features": features, "sensitive": sens, "target": "y", "positive": "yes"},
        None,
        test_size=0.3,
        seed=0,
        column=1,
    )
    return first, second


def _max_diff(a: Any, b: Any) -> float:
    """Largest difference between two merged results (0 when the counts agree exactly)."""
    if isinstance(a, dict):
        return max([_max_diff(a[k], b[k]) for k in a] or [0.0])
    if isinstance(a, np.ndarray):
        return float(np.max(np.abs(a.astype(float) - b.astype(float)))) if a.size else 0.0
    if isinstance(a, float | int) and not isinstance(a, bool):
        return 0.0 if (a == b or (np.isnan(a) and np.isnan(b))) else abs(float(a) - float(b))
    if hasattr(a, "positives"):  # ScoreTable
        return max(_max_diff(a.positives, b.positives), _max_diff(a.negatives, b.negatives))
    return 0.0


def run(quick: bool = False) -> dict:
    import dask.dataframe as dd
    from dask.distributed import Client, LocalCluster

    from trustlab.audit._scale import _as_category, _levels
    from trustlab.compute.backend import compute
    from trustlab.models import make_model

    n = 1_000_000 if quick else 4_000_000
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(n, root)
        files = sorted(str(p) for p in root.glob("*.parquet"))
        meta = _as_category(pd.read_parquet(files[0]).head(1000))
        sample = _as_category(pd.read_parquet(files[0]).sample(50_000, random_state=0))
        features = [c for c in meta.columns if c not in ("y", "sex", "group")]
        model = make_model("logistic", sample[features], random_state=0)
        model.fit(sample[features], (sample["y"] == "yes").astype(int))
        levels = [["f", "m"], ["g1", "g2", "g3"]]
        first, second = _passes(meta, model, levels)

        t0 = time.perf_counter()
        frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref1 = compute(first, frame)
        t1 = time.perf_counter() - t0
        t0 = time.perf_counter()
        ref2 = compute(second, frame)
        t2 = time.perf_counter() - t0
        del frame
        assert [_levels(ref1["sens:0"]), _levels(ref1["sens:1"])] == levels
        total = t_read + t1 + t2
        rows.append(
            {
                "backend": "in process (pandas)",
                "rows": n,
                "read_s": round(t_read, 2),
                "pass1_s": round(t1, 2),
                "pass2_s": round(t2, 2),
                "rows_per_s": round(n / total),
                "max_diff_vs_in_process": 0.0,
            }
        )
        for workers in (1, 2):
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
            client = Client(cluster)
            try:
                ddf = dd.read_parquet(files)
                client.run(lambda: __import__("trustlab.audit._scale"))  # warm the workers' imports
                t0 = time.perf_counter()
                got1 = compute(first, ddf, client=client)
                t1 = time.perf_counter() - t0
                t0 = time.perf_counter()
                got2 = compute(second, ddf, client=client)
                t2 = time.perf_counter() - t0
            finally:
                client.close()
                cluster.close()
            diff = max(_max_diff(ref1["columns"], got1["columns"]), _max_diff(ref2["scored"], got2["scored"]))
            rows.append(
                {
                    "backend": f"Dask LocalCluster, {workers} worker process(es)",
                    "rows": n,
                    "read_s": 0.0,
                    "pass1_s": round(t1, 2),
                    "pass2_s": round(t2, 2),
                    "rows_per_s": round(n / (t1 + t2)),
                    "max_diff_vs_in_process": diff,
                }
            )
    return {
        "title": "audit statistics on partitioned Parquet: in process vs Dask",
        "rows": rows,
        "notes": [
            f"{n:,} rows x 20 columns in {n // PART_ROWS} Parquet files of {PART_ROWS:,} rows; "
            "Dask reads the files inside the passes (each pass reads them again), the in-process "
            "run reads them once first (read_s).",
            "max_diff: largest absolute difference of any merged count or sum (0 = bit for bit).",
            "Machine: the shared 2-core development machine (other processes running): 2 Dask "
            "workers cannot beat 1 by more than the free cores allow.",
        ],
    }
