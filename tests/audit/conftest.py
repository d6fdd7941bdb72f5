"""Helpers shared by the audit tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trustlab.audit.section import STATUSES


def _walk_intervals(figures: Any, path: str = ""):
    """Yield (path, estimate, low, high) for every figure that carries an interval."""
    if isinstance(figures, dict):
        ints = figures.get("intervals")
        if isinstance(ints, dict):
            for k, (lo, hi) in ints.items():
                yield f"{path}/{k}", figures[k], lo, hi
        if "mean_interval" in figures:
            yield f"{path}/mean", figures["mean"], *figures["mean_interval"]
        if "missing_interval" in figures:
            yield f"{path}/missing", figures["missing_rate"], *figures["missing_interval"]
        if "rate_intervals" in figures:
            for m, rows in figures["rate_intervals"].items():
                for i, (lo, hi) in enumerate(rows):
                    yield f"{path}/{m}[{i}]", figures["rates"][m][i], lo, hi
            for i, (lo, hi) in enumerate(figures["count_intervals"]):
                yield f"{path}/count[{i}]", figures["rates"]["count"][i], lo, hi
        if "difference_intervals" in figures:
            for k, (lo, hi) in figures["difference_intervals"].items():
                yield f"{path}/{k}", figures["differences"][k], lo, hi
        for k, v in figures.items():
            if k not in ("intervals", "rate_intervals", "difference_intervals"):
                yield from _walk_intervals(v, f"{path}/{k}")
    elif isinstance(figures, list):
        for i, v in enumerate(figures):
            yield from _walk_intervals(v, f"{path}[{i}]")


def check_report_intervals(report) -> int:
    """Every estimate lies in its interval; every verdict matches its stated interval."""
    n = 0
    for r in report.results:
        for path, est, lo, hi in _walk_intervals(r.figures, r.name):
            if est is None or not np.isfinite(est):
                assert not np.isfinite(lo) or not np.isfinite(hi) or lo <= hi, path
                continue
            assert lo <= est + 1e-12 and est <= hi + 1e-12, (path, est, lo, hi)
            n += 1
    for _, c in report.checks:
        assert c.status in STATUSES and c.rule, c
    return n


@pytest.fixture()
def interval_check():
    """:func:`check_report_intervals`, for tests in this folder."""
    return check_report_intervals


def _write_parts(df, root: Path, parts: int = 4) -> Path:
    for i, rows in enumerate(np.array_split(np.arange(len(df)), parts)):
        df.iloc[rows].to_parquet(root / f"part-{i}.parquet", index=False)
    return root


@pytest.fixture(scope="session")
def parquet_parts():
    """``parquet_parts(df, root, parts=4)``: the rows in order, split into ``part-i.parquet`` files."""
    return _write_parts
