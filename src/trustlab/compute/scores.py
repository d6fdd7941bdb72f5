"""Mergeable score counts: exact ROC AUC, accuracy, Brier score and calibration by group.

The state is the table of distinct ``(group, score)`` pairs with their counts of
negatives and positives, sorted: merging two states is a sorted union with counts
added, so the merged table is exactly the whole data's, whatever the partitioning.
Every figure the audit's Performance section reports (accuracy at 0.5, ROC AUC with
ties counted one half, Brier score, ECE and the reliability curve on 10 bins) is a
function of that table, so it equals the row-level computation (scikit-learn's) up to
float rounding in the sums.

When a table would hold more than ``max_distinct`` pairs, scores are rounded down to the
finest dyadic grid (multiples of ``2**-b`` for ``b = grid_bits, grid_bits - 1, ...,``
:data:`MIN_GRID_BITS`) on which it holds at most ``max_distinct`` pairs, so a state's
memory is bounded (about 32 bytes a pair) whatever the number of rows. A score below the
decision threshold 0.5, a point of every grid, stays below it. Rounding down to a coarser
dyadic grid after a finer one equals rounding to the coarser one directly, and a union has
at least as many distinct pairs at each grid as any of its parts, so the grid a merged
state ends on is the finest grid on which the *whole* table fits: the result still does
not depend on the partitioning. Then AUC counts pairs in the same grid cell as ties and
the result says so (``rounded``, ``grid_bits``, ``auc_tie_share``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab.compute.groups import _level_codes
from trustlab.compute.statistics import MergeableStatistic

__all__ = ["ScoreCounts", "ScoreTable"]

_State = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int | None]  # group, score, neg, pos, grid

MIN_GRID_BITS = 8
"""The coarsest grid scores are rounded to (multiples of ``2**-8``), however many pairs remain."""


def _reduce(g: np.ndarray, s: np.ndarray, neg: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sort by (group, score) and add the counts of equal pairs."""
    if g.size == 0:
        return g, s, neg, pos
    order = np.lexsort((s, g))
    g, s, neg, pos = g[order], s[order], neg[order], pos[order]
    start = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (s[1:] != s[:-1])])
    return g[start], s[start], np.add.reduceat(neg, start), np.add.reduceat(pos, start)


@dataclass(frozen=True)
class ScoreTable:
    """Distinct scores by group with their counts of negatives and positives.

    Attributes
    ----------
    groups : tuple
        The group levels (one ``None`` level when not grouped).
    group : numpy.ndarray
        Group index of each entry (sorted by group, then score).
    score : numpy.ndarray
        The distinct scores.
    negatives, positives : numpy.ndarray
        ``int64`` counts of rows with label 0 and 1 at each ``(group, score)``.
    rounded : bool
        Whether the scores were rounded to the grid (see the module's notes).
    grid_bits : int or None
        The grid when rounded (scores are multiples of ``2**-grid_bits``), else None.

    See Also
    --------
    ScoreCounts : the statistic that builds it.
    """

    groups: tuple[Any, ...]
    group: np.ndarray
    score: np.ndarray
    negatives: np.ndarray
    positives: np.ndarray
    rounded: bool
    grid_bits: int | None = None

    def _of(self, i: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if i is None:  # all groups: merge the groups' entries by score
            _, s, neg, pos = _reduce(np.zeros_like(self.group), self.score, self.negatives, self.positives)
            return s, neg, pos
        m = self.group == i
        return self.score[m], self.negatives[m], self.positives[m]

    def metrics(self, i: int | None = None, *, threshold: float = 0.5, n_bins: int = 10) -> dict[str, Any]:
        """Count, accuracy, ROC AUC, Brier score and ECE of group ``i`` (all rows for None).

        Parameters
        ----------
        i : int, optional
            Index into :attr:`groups`.
        threshold : float
            Predicted positive when ``score >= threshold``.
        n_bins : int
            Equal-width bins of the ECE and the reliability curve.

        Returns
        -------
        dict
            ``count``, ``accuracy``, ``roc_auc`` (NaN with a single class), ``brier``,
            ``ece`` (NaN without rows), ``curve`` (``n_bins`` pairs of mean predicted and
            fraction positive, NaN in empty bins) and ``auc_tie_share`` (the share of
            positive-negative pairs tied, counted one half).
        """
        s, neg, pos = self._of(i)
        nneg, npos = int(neg.sum()), int(pos.sum())
        n = nneg + npos
        edges = np.linspace(0.0, 1.0, n_bins + 1)
        if n == 0:
            nan = float("nan")
            centre = (np.arange(n_bins) + 0.5) / n_bins
            curve = [[float(c), nan] for c in centre]
            return dict.fromkeys(("accuracy", "roc_auc", "brier", "ece", "auc_tie_share"), nan) | {
                "count": 0.0,
                "curve": curve,
            }
        above = s >= threshold
        accuracy = (pos[above].sum() + neg[~above].sum()) / n
        if npos and nneg:
            neg_below = np.cumsum(neg) - neg
            ties = float((pos * neg).sum()) / (npos * nneg)
            auc = float((pos * (neg_below + 0.5 * neg)).sum()) / (npos * nneg)
        else:
            auc, ties = float("nan"), float("nan")
        brier = float((neg * s**2 + pos * (1.0 - s) ** 2).sum()) / n
        idx = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
        w = (neg + pos).astype(float)
        count = np.bincount(idx, weights=w, minlength=n_bins)
        sum_p = np.bincount(idx, weights=w * s, minlength=n_bins)
        sum_y = np.bincount(idx, weights=pos.astype(float), minlength=n_bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_p = np.where(count > 0, sum_p / count, np.nan)
            frac = np.where(count > 0, sum_y / count, np.nan)
        ok = count > 0
        ece = float((np.abs(frac[ok] - mean_p[ok]) * (count[ok] / count.sum())).sum())
        return {
            "count": float(n),
            "accuracy": float(accuracy),
            "roc_auc": auc,
            "brier": brier,
            "ece": ece,
            "curve": np.column_stack([mean_p, frac]).tolist(),
            "auc_tie_share": ties,
        }


class ScoreCounts(MergeableStatistic[_State, ScoreTable]):
    """Counts of negatives and positives at each distinct score, by group (see the module notes).

    Parameters
    ----------
    score : str
        The score column (a probability of the positive label in ``[0, 1]``).
    label : str
        The 0/1 label column; other values are left out.
    group : str, optional
        A group column; all rows form one group when None.
    levels : sequence, optional
        The group's levels (with ``group``); any other or missing value forms one more
        level, ``"other"``.
    max_distinct : int, default 2**20
        Distinct ``(group, score)`` pairs kept exactly (about 32 bytes each): a state
        holds at most this many pairs (32 MiB), however many rows it counts.
    grid_bits : int, default 24
        Beyond ``max_distinct``, scores are rounded down to multiples of ``2**-grid_bits``,
        or of a coarser power of two (down to ``2**-MIN_GRID_BITS``) until at most
        ``max_distinct`` pairs remain.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"p": [0.1, 0.4, 0.35, 0.8], "y": [0, 0, 1, 1]})
    >>> m = compute(ScoreCounts("p", "y"), df, chunksize=3).metrics()
    >>> m["roc_auc"], m["accuracy"]
    (0.75, 0.75)
    """

    def __init__(
        self,
        score: str,
        label: str,
        *,
        group: str | None = None,
        levels: Any = None,
        max_distinct: int = 2**20,
        grid_bits: int = 24,
    ) -> None:
        self.score, self.label, self.group = score, label, group
        self.levels = list(levels) if levels is not None else None
        self.max_distinct, self.grid_bits = int(max_distinct), int(grid_bits)

    @staticmethod
    def _round(state: _State, bits: int) -> _State:
        g, s, neg, pos, _ = state
        scale = float(2**bits)
        g, s, neg, pos = _reduce(g, np.floor(s * scale) / scale, neg, pos)
        return g, s, neg, pos, bits

    def _settle(self, state: _State) -> _State:
        """Round to the finest grid (from the state's own) on which at most ``max_distinct`` pairs remain."""
        bits = state[4]
        if bits is None:
            if state[0].size <= self.max_distinct:
                return state
            bits = self.grid_bits
        state = self._round(state, bits)
        while state[0].size > self.max_distinct and bits > MIN_GRID_BITS:
            bits -= 1
            state = self._round(state, bits)
        return state

    @override
    def partial(self, chunk: pd.DataFrame) -> _State:
        y = pd.to_numeric(chunk[self.label], errors="coerce").to_numpy(dtype=float)
        s = pd.to_numeric(chunk[self.score], errors="coerce").to_numpy(dtype=float)
        ok = ((y == 0) | (y == 1)) & np.isfinite(s)
        if self.group is None:
            g = np.zeros(len(chunk), dtype=np.int64)
        else:
            g = _level_codes(chunk[self.group], self.levels or [], True)
        yi = y[ok].astype(np.int64)
        reduced = _reduce(g[ok], s[ok] + 0.0, 1 - yi, yi)
        return self._settle((*reduced, None))  # type: ignore[arg-type]

    @override
    def merge(self, a: _State, b: _State) -> _State:
        if a[4] != b[4]:  # round both to the coarser grid (commutes with the union)
            bits = min(x for x in (a[4], b[4]) if x is not None)
            a, b = self._round(a, bits), self._round(b, bits)
        g, s, neg, pos = _reduce(*(np.concatenate([x, y]) for x, y in zip(a[:4], b[:4], strict=True)))
        return self._settle((g, s, neg, pos, a[4]))

    @override
    def finalize(self, state: _State) -> ScoreTable:
        groups: tuple[Any, ...] = (None,) if self.group is None else (*(self.levels or []), "other")
        g, s, neg, pos, bits = state
        return ScoreTable(groups, g, s, neg, pos, bits is not None, bits)
