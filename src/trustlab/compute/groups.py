"""Mergeable counts over public levels: cross tables, group confusion counts and histograms.

Every statistic here is a table of integer counts whose shape is fixed before the data
are read (public levels, a public grid), so partial states merge by addition and the
merged table is bit-for-bit the table of the whole data. Such a table is what the DP
mechanisms of :mod:`trustlab.privacy` take (see :mod:`trustlab.compute.private`): noise
is added once, after merging.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab._param_validation import Interval, check_params
from trustlab.compute.statistics import MergeableStatistic
from trustlab.errors import ParameterError

__all__ = [
    "ConfusionCounts",
    "CrossCounts",
    "GridHistogram",
    "GroupConfusion",
    "Histogram",
]


def _level_codes(values: pd.Series, levels: Sequence[Any], other: bool) -> np.ndarray:
    """Index of each value in ``levels``; ``len(levels)`` (other) or -1 (dropped) for the rest."""
    lookup = {v: i for i, v in enumerate(levels)}
    mapped = values.astype(object).map(lookup)
    return mapped.fillna(len(levels) if other else -1).to_numpy(dtype=np.int64)


class CrossCounts(MergeableStatistic[np.ndarray, np.ndarray]):
    """Counts of rows over the cross product of the public levels of several columns.

    Parameters
    ----------
    levels : dict of str to sequence
        For each column, its public levels (never read off the data).
    other : bool, default True
        Count a value outside a column's levels (or missing) in one extra "other" level
        of that column; when False such rows are left out.

    Returns
    -------
    numpy.ndarray
        ``int64`` counts of shape ``(len(levels_1) + other, len(levels_2) + other, ...)``.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"g": ["a", "b", "a", None], "y": [1, 0, 1, 1]})
    >>> compute(CrossCounts({"g": ["a", "b"], "y": [0, 1]}), df, chunksize=2).tolist()
    [[0, 2, 0], [1, 0, 0], [0, 1, 0]]
    """

    def __init__(self, levels: dict[str, Sequence[Any]], *, other: bool = True) -> None:
        if not isinstance(levels, dict) or not levels:
            raise ParameterError(
                "levels must be a non-empty dict mapping each column to its public levels.",
                argument="levels",
            )
        self.levels = {k: list(v) for k, v in levels.items()}
        self.other = bool(other)
        self.shape = tuple(len(v) + self.other for v in self.levels.values())

    @override
    def partial(self, chunk: pd.DataFrame) -> np.ndarray:
        code = np.zeros(len(chunk), dtype=np.int64)
        keep = np.ones(len(chunk), dtype=bool)
        for (col, lv), size in zip(self.levels.items(), self.shape, strict=True):
            c = _level_codes(chunk[col], lv, self.other)
            keep &= c >= 0
            code = code * size + np.maximum(c, 0)
        n = int(np.prod(self.shape))
        return np.bincount(code[keep], minlength=n).astype(np.int64).reshape(self.shape)

    @override
    def merge(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    @override
    def finalize(self, state: np.ndarray) -> np.ndarray:
        return state


@dataclass(frozen=True)
class ConfusionCounts:
    """Confusion counts of a binary classifier by group.

    Attributes
    ----------
    groups : tuple
        The group levels (the public levels, then ``"other"`` when counted).
    counts : numpy.ndarray
        ``int64`` array ``[group, predicted, label]`` (``predicted`` and ``label`` in {0, 1}).

    See Also
    --------
    GroupConfusion : the statistic that builds it.
    """

    groups: tuple[Any, ...]
    counts: np.ndarray

    def rates(self) -> pd.DataFrame:
        """Per-group count, selection rate, TPR, FPR and accuracy (NaN for an empty denominator).

        Returns
        -------
        pandas.DataFrame
            One row per group.
        """
        c = self.counts.astype(float)
        n = c.sum(axis=(1, 2))
        pos, neg = c[:, :, 1].sum(axis=1), c[:, :, 0].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return pd.DataFrame(
                {
                    "count": n,
                    "selection_rate": c[:, 1, :].sum(axis=1) / n,
                    "tpr": c[:, 1, 1] / pos,
                    "fpr": c[:, 1, 0] / neg,
                    "accuracy": (c[:, 0, 0] + c[:, 1, 1]) / n,
                },
                index=pd.Index([str(g) for g in self.groups], name="group"),
            )


class GroupConfusion(MergeableStatistic[np.ndarray, ConfusionCounts]):
    """Confusion counts ``[group, predicted, label]`` of a score thresholded at ``threshold``.

    Parameters
    ----------
    group : str
        The group column.
    levels : sequence
        The group's public levels; other and missing values form one more group.
    label : str
        The 0/1 label column (other values are left out).
    score : str
        The score column; predicted positive when ``score >= threshold``.
    threshold : float, default 0.5
        The decision threshold.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"g": ["a", "a", "b"], "y": [1, 0, 1], "p": [0.9, 0.7, 0.2]})
    >>> r = compute(GroupConfusion("g", ["a", "b"], "y", "p"), df, chunksize=2)
    >>> r.rates()["tpr"].tolist()[:2]
    [1.0, 0.0]
    """

    def __init__(self, group: str, levels: Sequence[Any], label: str, score: str, threshold: float = 0.5):
        self.group, self.levels = group, list(levels)
        self.label, self.score, self.threshold = label, score, float(threshold)

    @override
    def partial(self, chunk: pd.DataFrame) -> np.ndarray:
        g = _level_codes(chunk[self.group], self.levels, True)
        y = pd.to_numeric(chunk[self.label], errors="coerce").to_numpy(dtype=float)
        p = pd.to_numeric(chunk[self.score], errors="coerce").to_numpy(dtype=float)
        ok = (y == 0) | (y == 1)
        pred = (p >= self.threshold).astype(np.int64)
        code = (g * 2 + pred) * 2 + np.where(ok, y, 0).astype(np.int64)
        shape = (len(self.levels) + 1, 2, 2)
        return np.bincount(code[ok], minlength=int(np.prod(shape))).astype(np.int64).reshape(shape)

    @override
    def merge(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    @override
    def finalize(self, state: np.ndarray) -> ConfusionCounts:
        return ConfusionCounts((*self.levels, "other"), state)


@dataclass(frozen=True)
class Histogram:
    """Counts of a numeric column on a public grid.

    Attributes
    ----------
    edges : numpy.ndarray
        ``n_bins + 1`` public edges.
    counts : numpy.ndarray
        ``int64`` counts per bin (values outside the grid clipped into the end bins).
    missing : int
        Rows whose value is missing or not a number.

    See Also
    --------
    GridHistogram : the statistic that builds it.
    """

    edges: np.ndarray
    counts: np.ndarray
    missing: int


class GridHistogram(MergeableStatistic[tuple[np.ndarray, int], Histogram]):
    """Counts of a numeric column on ``n_bins`` equal-width bins of the public ``[lower, upper]``.

    Values are clipped to the bounds first (as the DP mechanisms clip), so every present
    value falls in a bin; bin ``i`` holds ``edges[i] <= x < edges[i + 1]`` (the last bin
    also holds ``upper``).

    Parameters
    ----------
    column : str
        The column.
    lower, upper : float
        Public bounds, ``lower < upper``.
    n_bins : int
        Number of bins.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"x": [0.0, 0.4, 0.5, 1.0, 7.0, None]})
    >>> h = compute(GridHistogram("x", 0.0, 1.0, 2), df, chunksize=4)
    >>> h.counts.tolist(), h.missing
    ([2, 3], 1)
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "lower": [Interval(numbers.Real, None, None, closed="neither")],
        "upper": [Interval(numbers.Real, None, None, closed="neither")],
        "n_bins": [Interval(numbers.Integral, 1, 10**7, closed="both")],
    }

    def __init__(self, column: str, lower: float, upper: float, n_bins: int) -> None:
        check_params(
            {"lower": lower, "upper": upper, "n_bins": n_bins}, self._parameter_constraints, "GridHistogram"
        )
        lower, upper = float(lower), float(upper)
        if not (np.isfinite(lower) and np.isfinite(upper) and lower < upper):
            raise ParameterError(
                f"GridHistogram needs finite public bounds with lower < upper; got {lower}, {upper}.",
                argument="bounds",
            )
        self.column, self.lower, self.upper, self.n_bins = column, lower, upper, int(n_bins)

    @override
    def partial(self, chunk: pd.DataFrame) -> tuple[np.ndarray, int]:
        x = pd.to_numeric(chunk[self.column], errors="coerce").to_numpy(dtype=float)
        ok = ~np.isnan(x)
        z = (np.clip(x[ok], self.lower, self.upper) - self.lower) / (self.upper - self.lower)
        idx = np.minimum((z * self.n_bins).astype(np.int64), self.n_bins - 1)
        return np.bincount(idx, minlength=self.n_bins).astype(np.int64), int((~ok).sum())

    @override
    def merge(self, a: tuple[np.ndarray, int], b: tuple[np.ndarray, int]) -> tuple[np.ndarray, int]:
        return a[0] + b[0], a[1] + b[1]

    @override
    def finalize(self, state: tuple[np.ndarray, int]) -> Histogram:
        return Histogram(np.linspace(self.lower, self.upper, self.n_bins + 1), state[0], int(state[1]))
