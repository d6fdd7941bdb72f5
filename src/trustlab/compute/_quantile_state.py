"""The sufficient statistic of the DP quantiles and boxplots, per partition (private module).

See :mod:`trustlab.compute.quantiles` (the public names are re-exported there): grid
counts for JointExp, bucket counts for the extreme scans, the counts beyond released
whiskers for a boxplot's second pass; all merge by addition.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab._param_validation import Interval, check_params
from trustlab._validation import check_bounds
from trustlab.compute.statistics import MergeableStatistic
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._boxplot_core import MAX_BUCKETS
from trustlab.privacy._boxplot_rules import OTHER_LABEL, check_categories, group_codes
from trustlab.privacy._durfee import scan_cap
from trustlab.privacy._grid import DEFAULT_RESOLUTION, MAX_RESOLUTION, GridCounts, QuantileGrid, add_sparse
from trustlab.privacy._inputs import BASE

__all__ = [
    "BeyondWhiskers",
    "BucketCounts",
    "GroupedQuantileSummary",
    "QuantileCounts",
    "QuantileSummary",
    "bucket_table",
]

Sparse = tuple[np.ndarray, np.ndarray]


def _edges(anchor: float, log_base: float, stop: int) -> np.ndarray:
    """Bucket edges ``expm1((k + 1) log(base)) + anchor``, ``k = 0 .. stop - 1``: the scan's formula."""
    ks = np.arange(0, stop)
    return np.expm1((ks + 1) * log_base) + anchor


def bucket_table(anchor: float, base: float, top: float) -> np.ndarray:
    """The scan's bucket edges from ``anchor`` up to the first edge above ``top`` (or the scan's cap).

    Public: a function of the bounds and ``base`` alone. A value ``y <= top`` has code
    ``#{k : edge_k <= y}`` and lies below edge ``k`` exactly when its code is ``<= k``.
    """
    cap = min(MAX_BUCKETS, scan_cap(anchor, base, "bounds"))
    log_base = math.log(base)
    stop = min(cap, math.ceil(math.log1p(max(top - anchor, 0.0)) / log_base) + 64)
    table = _edges(anchor, log_base, stop)
    while table[-1] <= top and stop < cap:
        stop = min(cap, 2 * stop)
        table = _edges(anchor, log_base, stop)
    above = np.flatnonzero(table > top)
    return table[: above[0] + 1] if above.size else table


class BucketCounts:
    """Clipped values counted by the bucket of an extreme scan: what the scan reads from them.

    The boxplot's extreme scans compare ``#{z < edge_k}`` (upper scan, anchored at the
    lower bound) or ``#{-z < edge_k}`` (mirrored scan, anchored at ``-upper``) with a
    noisy threshold. This object answers those counts from the merged bucket counts,
    through the interface the scan uses on the sorted values (``size`` and
    ``searchsorted``), so :func:`~trustlab.privacy._durfee.scan` runs
    unchanged on it. A query at a value that is not one of its edges is a bug (the
    edges would not be the scan's): it raises ``AssertionError``.

    Parameters
    ----------
    table : numpy.ndarray
        The public edges (:func:`bucket_table`).
    codes, counts : numpy.ndarray
        Sorted distinct bucket codes and their counts.
    mirrored : bool
        Whether the codes are of ``-z`` (the lower scan).
    complete : bool
        Whether the table reaches beyond every value (its last edge is above them).

    See Also
    --------
    QuantileCounts : the statistic that builds it (``base=``).

    Examples
    --------
    >>> import math
    >>> from trustlab.compute import compute
    >>> s = compute(QuantileCounts("x", (0, 10), base=1.001), pd.DataFrame({"x": [0.5, 2.0, 9.0]}))
    >>> edges = np.expm1(np.arange(1, 4000) * math.log(1.001)) + 0.0   # the upper scan's edges
    >>> bool((np.searchsorted(s.upper, edges) == np.searchsorted([0.5, 2.0, 9.0], edges)).all())
    True
    """

    def __init__(
        self, table: np.ndarray, codes: np.ndarray, counts: np.ndarray, mirrored: bool, complete: bool
    ):
        self.table, self.mirrored, self.complete = table, bool(mirrored), bool(complete)
        self.codes, self.counts = codes.astype(np.int64), counts.astype(np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self.size = int(self.starts[-1])

    def _below(self, e: np.ndarray) -> np.ndarray:
        """``#{y < e}`` for scan edges ``e``."""
        idx = np.searchsorted(self.table, e, side="left")
        inside = idx < self.table.size
        if not np.array_equal(self.table[idx[inside]], e[inside]) or (not self.complete and not inside.all()):
            raise AssertionError("bucket counts queried off their edges")  # pragma: no cover
        below = np.full(e.shape, self.size, dtype=np.int64)
        below[inside] = self.starts[np.searchsorted(self.codes, idx[inside], side="right")]
        return below

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> np.ndarray:
        """``numpy.searchsorted`` of the sorted clipped values at the scan's edges (as the scan asks).

        Parameters
        ----------
        v : array-like of float
            Edges of the scan (``-edges`` for the mirrored scan).
        side : {"left", "right"}
            ``"left"`` for the upper scan, ``"right"`` for the mirrored one (as the scan calls it).
        sorter : None
            Unused (the interface of :meth:`numpy.ndarray.searchsorted`).

        Returns
        -------
        numpy.ndarray
            ``int64`` counts of values below (``"left"``) or at most (``"right"``) each ``v``.
        """
        v = np.asarray(v, dtype=float)
        if self.mirrored:  # the scan asks #{z <= -edge} = size - #{-z < edge}
            assert side == "right"
            return self.size - self._below(-v)
        assert side == "left"
        return self._below(v)

    def __repr__(self) -> str:
        return f"BucketCounts(n={self.size}, buckets={self.codes.size}, mirrored={self.mirrored})"


@dataclass(frozen=True)
class QuantileSummary:
    """The merged sufficient statistic of one column (or one group) for the DP quantiles and boxplots.

    Attributes
    ----------
    n : int
        Present values (NaN is an absent record; ``+-inf`` is clipped like any value).
    missing : int
        Absent records (NaN or not a number).
    grid : GridCounts
        The clipped values' grid indices with their counts (what JointExp reads).
    upper, lower : BucketCounts or None
        The clipped values counted by the upper / mirrored scan's buckets (with ``base``).
    bounds : (float, float)
        The public bounds.
    resolution : int
        Grid steps across the bounds.
    base : float or None
        The scans' bucket base.

    See Also
    --------
    QuantileCounts : the statistic that builds it.
    """

    n: int
    missing: int
    grid: GridCounts
    upper: BucketCounts | None
    lower: BucketCounts | None
    bounds: tuple[float, float]
    resolution: int
    base: float | None


@dataclass(frozen=True)
class GroupedQuantileSummary:
    """:class:`QuantileSummary` of each public group.

    Attributes
    ----------
    categories : tuple
        The public groups.
    groups : tuple of QuantileSummary
        One per category, then one for the missing or undeclared labels.

    See Also
    --------
    QuantileCounts : the statistic that builds it (with ``group=``).
    """

    categories: tuple[Any, ...]
    groups: tuple[QuantileSummary, ...]


_State = list[tuple[int, int, Sparse, Sparse | None, Sparse | None]]


def _labels(chunk: pd.DataFrame, group: Any) -> pd.Series:
    if group not in chunk.columns:
        raise DataError(
            f"the data have no column {group!r}; pass one of {list(chunk.columns)[:10]}.", argument="group"
        )
    return chunk[group]


def _numeric(chunk: pd.DataFrame, column: str) -> np.ndarray:
    if column not in chunk.columns:
        raise DataError(
            f"the data have no column {column!r}; pass one of {list(chunk.columns)[:10]}.", argument="column"
        )
    return np.asarray(pd.to_numeric(chunk[column], errors="coerce").to_numpy(dtype=float), dtype=float)


class QuantileCounts(MergeableStatistic[_State, "QuantileSummary | GroupedQuantileSummary"]):
    """The sufficient statistic of the DP quantiles / boxplots, per partition, merged by addition.

    Per group: the number of present and absent values, the sparse counts of the
    clipped values by grid index (``rint((clip(x) - lower) / step)``, ``resolution + 1``
    possible cells) and, with ``base``, by bucket of the boxplot's two extreme scans.
    A partial state holds at most one entry per distinct cell of its partition.

    Parameters
    ----------
    column : str
        The numeric column (values are read with ``pandas.to_numeric(errors="coerce")``).
    bounds : (float, float)
        Public bounds.
    resolution : int, default 2**20
        Grid steps across the bounds (as in :func:`~trustlab.privacy.dp_quantiles`).
    base : float, optional
        Bucket base of the boxplot's extreme scans (1.001 in the boxplots); None for
        quantiles only.
    group : str, optional
        A group column; with it, ``categories`` (public) is required and the result is a
        :class:`GroupedQuantileSummary` (missing or undeclared labels form one more group).
    categories : sequence, optional
        The public groups.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"x": [0.0, 0.5, 0.5, 9.0, None]})
    >>> s = compute(QuantileCounts("x", (0, 1), resolution=4), df, chunksize=2)
    >>> s.grid.cells.tolist(), s.grid.counts.tolist(), s.missing
    ([0, 2, 4], [1, 2, 1], 1)
    """

    def __init__(
        self,
        column: str,
        bounds: tuple[float, float],
        *,
        resolution: int = DEFAULT_RESOLUTION,
        base: float | None = None,
        group: str | None = None,
        categories: Sequence[Any] | None = None,
    ) -> None:
        check_params(
            {"resolution": resolution, "base": base},
            {
                "resolution": [Interval(numbers.Integral, 1, MAX_RESOLUTION, closed="both")],
                "base": [None, BASE],
            },
            "QuantileCounts",
        )
        self.column = column
        self.bounds = check_bounds(bounds)
        self.grid = QuantileGrid(self.bounds, int(resolution))
        self.resolution = int(resolution)
        self.base = None if base is None else float(base)
        self.group = group
        if group is not None:
            self.categories: list[Any] | None = check_categories(categories, OTHER_LABEL)
        elif categories is not None:
            raise ParameterError(
                "categories needs group= (the column holding the labels).", argument="categories"
            )
        else:
            self.categories = None
        lower, upper = self.bounds
        if self.base is not None:
            self._up = bucket_table(lower, self.base, upper)
            self._lo = bucket_table(-upper, self.base, -lower)

    def _one(self, x: np.ndarray) -> tuple[int, int, Sparse, Sparse | None, Sparse | None]:
        present = ~np.isnan(x)
        z = np.clip(x[present], *self.bounds)
        runs = GridCounts.from_values(z, self.grid)
        up = lo = None
        if self.base is not None:
            up = np.unique(np.searchsorted(self._up, z, side="right"), return_counts=True)
            lo = np.unique(np.searchsorted(self._lo, -z, side="right"), return_counts=True)
        return int(present.sum()), int((~present).sum()), (runs.cells, runs.counts), up, lo

    @override
    def partial(self, chunk: pd.DataFrame) -> _State:
        x = _numeric(chunk, self.column)
        if self.categories is None:
            return [self._one(x)]
        codes = group_codes(_labels(chunk, self.group), self.categories, len(chunk))
        return [self._one(x[codes == g]) for g in range(len(self.categories) + 1)]

    @override
    def merge(self, a: _State, b: _State) -> _State:
        def add(p: Sparse | None, q: Sparse | None) -> Sparse | None:
            return None if p is None or q is None else add_sparse(p[0], p[1], q[0], q[1])

        return [
            (sa[0] + sb[0], sa[1] + sb[1], add(sa[2], sb[2]), add(sa[3], sb[3]), add(sa[4], sb[4]))  # type: ignore[misc]
            for sa, sb in zip(a, b, strict=True)
        ]

    def _summary(self, s: tuple[int, int, Sparse, Sparse | None, Sparse | None]) -> QuantileSummary:
        lower, upper = self.bounds
        up = lo = None
        if s[3] is not None and s[4] is not None:
            up = BucketCounts(self._up, *s[3], mirrored=False, complete=bool(self._up[-1] > upper))
            lo = BucketCounts(self._lo, *s[4], mirrored=True, complete=bool(self._lo[-1] > -lower))
        return QuantileSummary(s[0], s[1], GridCounts(*s[2]), up, lo, self.bounds, self.resolution, self.base)

    @override
    def finalize(self, state: _State) -> QuantileSummary | GroupedQuantileSummary:
        if self.categories is None:
            return self._summary(state[0])
        return GroupedQuantileSummary(tuple(self.categories), tuple(self._summary(s) for s in state))


class BeyondWhiskers(MergeableStatistic[np.ndarray, np.ndarray]):
    """Exact counts of the raw values below / above released whiskers (a boxplot's second pass).

    Parameters
    ----------
    column : str
        The numeric column.
    whiskers : mapping of int to (float, float)
        Released whiskers per group index (``0`` without groups): public.
    group : str, optional
        The group column, with the public ``categories`` (as in :class:`QuantileCounts`).
    categories : sequence, optional
        The public groups.

    Returns
    -------
    numpy.ndarray
        ``int64`` of shape ``(groups, 2)``: values ``< lo`` and ``> hi`` per group
        (``-inf`` and ``+inf`` count; NaN does not).

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"x": [-5.0, 0.0, 1.0, 7.0, float("inf")]})
    >>> compute(BeyondWhiskers("x", {0: (-1.0, 2.0)}), df, chunksize=2).tolist()
    [[1, 2]]
    """

    def __init__(
        self,
        column: str,
        whiskers: Mapping[int, tuple[float, float]],
        *,
        group: str | None = None,
        categories: Sequence[Any] | None = None,
    ) -> None:
        self.column, self.group = column, group
        self.categories = None if group is None else check_categories(categories, OTHER_LABEL)
        size = 1 if self.categories is None else len(self.categories) + 1
        self.lo = np.full(size, -np.inf)
        self.hi = np.full(size, np.inf)
        for g, (lo, hi) in whiskers.items():
            self.lo[int(g)], self.hi[int(g)] = float(lo), float(hi)

    @override
    def partial(self, chunk: pd.DataFrame) -> np.ndarray:
        x = _numeric(chunk, self.column)
        codes = (
            np.zeros(len(chunk), dtype=np.int64)
            if self.categories is None
            else group_codes(_labels(chunk, self.group), self.categories, len(chunk))
        )
        size = self.lo.size
        below = np.bincount(codes[x < self.lo[codes]], minlength=size)
        above = np.bincount(codes[x > self.hi[codes]], minlength=size)
        return np.stack([below, above], axis=1).astype(np.int64)

    @override
    def merge(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    @override
    def finalize(self, state: np.ndarray) -> np.ndarray:
        return state
