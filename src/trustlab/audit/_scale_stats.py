"""The raw audit's data-heavy statistics as mergeable statistics (:mod:`trustlab.compute`).

The Data, Performance and Fairness sections read their exact figures from the results
below, stored in the context's shared cache under fixed keys. In process they are
computed on first use from the pandas frames of the context; a distributed run
(:mod:`trustlab.audit._scale`) computes the same statistics on Dask partitions, merges
them, and stores the merged results under the same keys before the sections run, so the
sections never see a row and never know where their figures were computed.

Bootstrap intervals: the prediction table's replicates are multinomial resamples of the
merged counts (:func:`trustlab.fairness.bootstrap_counts`), which is the row bootstrap of
the held-out rows reduced to the table (resampling rows with replacement and counting
them by cell gives exactly a multinomial draw of the cell counts); they are drawn once,
after merging, and cost ``O(cells x replicates)`` instead of ``O(rows x replicates)``, so
they are unchanged from the in-process audit and do not depend on the partitioning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.prediction_table import (
    N_BOOT,
    N_SCORE_BINS,
    OTHER,
    PredictionTable,
    group_levels,
    shared_prediction_table,
)
from trustlab.audit.section import AuditContext
from trustlab.compute.backend import compute
from trustlab.compute.groups import CrossCounts
from trustlab.compute.scores import ScoreCounts, ScoreTable
from trustlab.compute.statistics import MergeableStatistic, Moments, Several, ValueCounts
from trustlab.fairness import bootstrap_counts
from trustlab.privacy.accounting import Accountant

__all__ = [
    "BIN",
    "COLUMNS_KEY",
    "SCORES_KEY",
    "TABLE_KEY",
    "P",
    "Y",
    "as_category",
    "column_statistic",
    "column_summaries",
    "heldout_frame",
    "heldout_statistic",
    "prediction_table",
    "score_tables",
    "table_from_counts",
]

COLUMNS_KEY = "raw_column_statistics"
SCORES_KEY = "raw_score_tables"
TABLE_KEY = "prediction_table_raw"  # the key shared_prediction_table uses in raw mode
Y, P, BIN = "__trustlab_y__", "__trustlab_p__", "__trustlab_bin__"


def as_category(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns as ``category``, as :func:`trustlab.datasets.load_table` reads them.

    The distributed audits feed their model (and FastPD's background) rows read this way.
    """
    out = frame.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c]):
            out[c] = out[c].astype(object).astype("category")
    return out


def column_statistic(frame: pd.DataFrame, categorical: list[Any]) -> Several:
    """One pass over every column: value counts of the categorical ones, moments of the others."""
    cats = set(categorical)
    return Several({str(i): ValueCounts(c) if c in cats else Moments(c) for i, c in enumerate(frame.columns)})


def column_summaries(ctx: AuditContext, categorical: list[Any]) -> dict[str, Any]:
    """The merged per-column statistics (key ``str(position)``) of the whole table."""
    stats: dict[str, Any] = ctx.shared(
        COLUMNS_KEY, lambda: compute(column_statistic(ctx.data, categorical), ctx.data)
    )
    return stats


def heldout_frame(ctx: AuditContext) -> pd.DataFrame:
    """The held-out rows as the statistics read them: sensitive columns, label, score, score bin."""
    frame = ctx.sensitive_test.reset_index(drop=True)
    p = np.asarray(ctx.proba_test, dtype=float)
    return frame.assign(**{Y: np.asarray(ctx.y_test, dtype=np.int64), P: p, BIN: score_bins(p)})


def score_bins(p: np.ndarray) -> np.ndarray:
    """Score bin of each probability (width ``1 / N_SCORE_BINS``), as the prediction table bins it."""
    return np.clip((np.asarray(p, dtype=float) * N_SCORE_BINS).astype(np.int64), 0, N_SCORE_BINS - 1)


def heldout_statistic(sensitive: list[Any], levels: list[list[Any]]) -> Several:
    """The held-out rows' statistics in one pass: the prediction table and the score tables."""
    cells: dict[str, Sequence[Any]] = {
        a: [v for v in lv if v != OTHER] for a, lv in zip(sensitive, levels, strict=True)
    }
    stats: dict[str, MergeableStatistic[Any, Any]] = {
        "table": CrossCounts(cells | {BIN: list(range(N_SCORE_BINS)), Y: [0, 1]}),
        "overall": ScoreCounts(P, Y),
    }
    for i, a in enumerate(sensitive):
        stats[f"scores:{i}"] = ScoreCounts(P, Y, group=a, levels=cells[a])
    return Several(stats)


def table_from_counts(
    cross: np.ndarray, sensitive: list[Any], levels: list[list[Any]], random_state: int, n_boot: int = N_BOOT
) -> PredictionTable:
    """The raw :class:`PredictionTable` of merged :class:`CrossCounts` (as the in-process builder makes it).

    ``cross`` has one "other" slot per axis; a sensitive column's slot is its ``OTHER``
    level when its levels hold one, and is empty otherwise (like the bin and label slots).
    """
    keep = tuple(
        [slice(None) if OTHER in lv else slice(0, len(lv)) for lv in levels]
        + [slice(0, N_SCORE_BINS), slice(0, 2)]
    )
    counts = np.asarray(cross)[keep]
    n_cells = int(np.prod([len(lv) for lv in levels])) if levels else 1
    counts = counts.reshape(n_cells, N_SCORE_BINS, 2).astype(float)
    return PredictionTable(
        attributes=tuple(sensitive),
        levels=tuple(tuple(lv) for lv in levels),
        counts=counts,
        released=None,
        noise_scale=None,
        replicates=bootstrap_counts(counts, n_boot=n_boot, random_state=random_state),
    )


def _heldout_results(ctx: AuditContext) -> dict[str, Any]:
    levels = [group_levels(ctx, a) for a in ctx.sensitive]
    merged = compute(heldout_statistic(ctx.sensitive, levels), heldout_frame(ctx))
    table = table_from_counts(merged["table"], ctx.sensitive, levels, ctx.random_state)
    scores = {"overall": merged["overall"]} | {a: merged[f"scores:{i}"] for i, a in enumerate(ctx.sensitive)}
    return {"table": table, "scores": scores}


def prediction_table(ctx: AuditContext, budget: Accountant | None) -> PredictionTable:
    """The shared prediction table: from merged counts in raw mode, the DP release otherwise."""
    if budget is None and TABLE_KEY not in ctx._shared:
        results = _heldout_results(ctx)
        ctx.shared(TABLE_KEY, lambda: results["table"])
        ctx.shared(SCORES_KEY, lambda: results["scores"])
    return shared_prediction_table(ctx, budget)


def score_tables(ctx: AuditContext) -> dict[str, ScoreTable]:
    """Merged score tables of the held-out rows: ``"overall"`` and one per sensitive column (raw mode)."""
    if SCORES_KEY not in ctx._shared:
        prediction_table(ctx, None)
    tables: dict[str, ScoreTable] = ctx._shared[SCORES_KEY]
    return tables
