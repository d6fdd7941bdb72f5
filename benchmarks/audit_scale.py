"""`trustlab audit` wall time and peak memory: the embedded data and a synthetic 1,000,000 x 20 table.

Targets (issue 2): embedded data < 60 s and < 1 GiB; 1M rows x 20 columns < 10 min and
< 4 GiB, on 2 cores. Each run is a fresh `trustlab audit` process; peak memory is
its maximum resident set size. There is no peer for a whole audit; the figure that
shows the work was done is the report's ROC AUC.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def _synthetic(n: int, path: Path) -> None:
    rng = np.random.default_rng(0)
    cols = {f"x{i}": rng.normal(size=n) for i in range(14)}
    cols |= {f"c{i}": rng.choice(list("abcde"), size=n) for i in range(3)}
    cols["sex"] = rng.choice(["f", "m"], size=n)
    cols["group"] = rng.choice(["g1", "g2", "g3"], size=n)
    logit = cols["x0"] - 0.5 * cols["x1"] + 0.3 * (cols["sex"] == "f")
    cols["y"] = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    pd.DataFrame(cols).to_parquet(path)


def _run(args: list[str], out: Path) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "trustlab.cli", "audit", *args, "--out", str(out)],
        check=True,
        capture_output=True,
    )
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    report = json.loads((out / "report.json").read_text())
    return {
        "wall_s": wall,
        "peak_mib": max(peak, before) / 1024,
        "roc_auc": report["sections"]["performance"]["figures"]["overall"]["roc_auc"],
    }


def run(quick: bool = False) -> dict:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        r = _run([], t / "default")
        rows.append({"case": "embedded Benefits (4,877 x 18)", **r, "target": "< 60 s, < 1024 MiB"})
        n = 100_000 if quick else 1_000_000
        _synthetic(n, t / "big.parquet")
        r = _run([str(t / "big.parquet"), "--target", "y", "--sensitive", "sex,group"], t / "big")
        rows.append({"case": f"synthetic {n:,} x 20", **r, "target": "< 600 s, < 4096 MiB"})
    return {
        "title": "trustlab audit: wall time and peak memory",
        "rows": rows,
        "notes": ["peak memory is ru_maxrss of the child process (max over runs so far)"],
    }
