"""The table of (group cell, score bin, label) counts that Performance and Fairness share.

In private mode this table is the only release made from the predictions: one
discrete-Laplace histogram whose cells partition the evaluation rows (parallel
composition), from which every performance and fairness figure follows by
post-processing. Without ``--private`` the same table drives the bootstrap
intervals, while point estimates come from the exact predictions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.section import AuditContext
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.statistics import dp_histogram

__all__ = ["N_SCORE_BINS", "PredictionTable", "build_prediction_table", "group_levels"]

N_SCORE_BINS = 20  # width 0.05: the 0.5 decision threshold and the 10 calibration bins are edges
OTHER = "(missing or other)"


def group_levels(ctx: AuditContext, column: str) -> list[Any]:
    """The levels of a sensitive column: declared in the schema (private) or seen in the data."""
    if ctx.private:
        cats = ctx.schema.categories(column)
        if cats is None:  # the audit checks this before any section runs
            raise KeyError(column)
        return [*cats, OTHER]
    values = ctx.data[column]
    levels = sorted(pd.unique(values.dropna()), key=str)
    return [*levels, OTHER] if values.isna().any() else levels


def _codes(values: pd.Series, levels: list[Any]) -> np.ndarray:
    lookup = {v: i for i, v in enumerate(levels) if v != OTHER}
    other = levels.index(OTHER) if OTHER in levels else -1
    mapped = values.astype(object).map(lookup)
    return mapped.fillna(other).to_numpy(dtype=np.int64)


@dataclass(frozen=True)
class PredictionTable:
    """Counts ``counts[cell, bin, label]`` over the cross product of sensitive levels.

    ``noise_scale`` is the discrete Laplace scale of each count (None when raw).
    """

    attributes: tuple[str, ...]
    levels: tuple[tuple[Any, ...], ...]
    counts: np.ndarray
    noise_scale: float | None

    @property
    def edges(self) -> np.ndarray:
        return np.linspace(0.0, 1.0, self.counts.shape[-2] + 1)

    def by_attribute(self, attribute: str, counts: np.ndarray | None = None) -> np.ndarray:
        """Counts ``[..., level, bin, label]`` of one attribute (summing over the others).

        ``counts`` defaults to the table's own; pass replicates ``[..., cell, bin, label]``
        (e.g. from :func:`~trustlab.fairness.bootstrap_counts`) to marginalise them all.
        """
        c = self.counts if counts is None else counts
        lead = c.ndim - 3
        a = self.attributes.index(attribute)
        shape = tuple(len(lv) for lv in self.levels)
        full = c.reshape(*c.shape[:lead], *shape, *c.shape[-2:])
        others = tuple(lead + i for i in range(len(shape)) if i != a)
        return full.sum(axis=others) if others else full

    def overall(self) -> np.ndarray:
        """Counts ``[bin, label]`` over all rows."""
        return self.counts.sum(axis=0)


def confusion_from_bins(binned: np.ndarray) -> np.ndarray:
    """``[..., bin, label]`` -> ``[..., predicted, label]`` with the threshold 0.5."""
    half = binned.shape[-2] // 2
    return np.stack([binned[..., :half, :].sum(axis=-2), binned[..., half:, :].sum(axis=-2)], -2)


def binned_metrics(binned: np.ndarray) -> dict[str, float]:
    """Accuracy, ROC AUC, Brier score and ECE from one ``[bin, label]`` count table.

    Scores are taken at bin midpoints and ties within a bin count one half for
    the AUC, so the figures are binned approximations (Brier within one bin
    width, ECE on 10 bins of width 0.1).
    """
    c = np.clip(np.asarray(binned, dtype=float), 0, None)
    neg, pos = c[:, 0], c[:, 1]
    n, n_pos, n_neg = c.sum(), pos.sum(), neg.sum()
    k = c.shape[0]
    mid = (np.arange(k) + 0.5) / k
    out = {"count": float(n)}
    if n <= 0:
        return {**out, "accuracy": np.nan, "roc_auc": np.nan, "brier": np.nan, "ece": np.nan}
    half = k // 2
    out["accuracy"] = float((neg[:half].sum() + pos[half:].sum()) / n)
    above = np.concatenate([np.cumsum(pos[::-1])[::-1][1:], [0.0]])  # positives in higher bins
    out["roc_auc"] = float((neg * (above + 0.5 * pos)).sum() / (n_pos * n_neg)) if n_pos and n_neg else np.nan
    out["brier"] = float((pos * (1 - mid) ** 2 + neg * mid**2).sum() / n)
    pairs = c.reshape(10, k // 10, 2).sum(axis=1)
    pn = pairs.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = pairs[:, 1] / pn
    centre = (np.arange(10) + 0.5) / 10
    ok = pn > 0
    out["ece"] = float((np.abs(frac - centre)[ok] * pn[ok]).sum() / n)
    return out


def build_prediction_table(ctx: AuditContext, budget: Accountant | None) -> PredictionTable:
    """Count the evaluation rows by (sensitive cell, score bin, label); privatise in private mode."""
    attrs = tuple(ctx.sensitive)
    levels = tuple(tuple(group_levels(ctx, a)) for a in attrs)
    sens = ctx.sensitive_test
    cell = np.zeros(len(ctx.test_index), dtype=np.int64)
    for attr, lv in zip(attrs, levels, strict=True):
        cell = cell * len(lv) + _codes(sens[attr], list(lv))
    n_cells = int(np.prod([len(lv) for lv in levels])) if levels else 1
    score_bin = np.clip((ctx.proba_test * N_SCORE_BINS).astype(np.int64), 0, N_SCORE_BINS - 1)
    codes = (cell * N_SCORE_BINS + score_bin) * 2 + ctx.y_test
    n_codes = n_cells * N_SCORE_BINS * 2
    if budget is None:
        counts = np.bincount(codes, minlength=n_codes)
        scale = None
    else:
        release = dp_histogram(
            codes,
            n_codes,
            budget.remaining_epsilon,
            description=(
                f"evaluation rows counted by sensitive group x score bin (20) x label ({n_codes} cells)"
            ),
        )
        budget.record(release)
        counts = release.value
        scale = float(release.parameters["scale"])
    return PredictionTable(
        attributes=attrs,
        levels=levels,
        counts=np.asarray(counts).reshape(n_cells, N_SCORE_BINS, 2),
        noise_scale=scale,
    )
