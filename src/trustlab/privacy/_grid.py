"""The public output grid of the bounded quantile mechanisms and the fine tie-breaking grid (private module).

The clipped data are snapped to the grid ``lower + k * step``, ``step = (upper - lower) /
resolution``, ``k = 0 .. resolution``; outputs are computed from the integer ``k`` alone,
so their low bits say nothing about the data (Mironov, CCS 2012). Ties are broken by a
secure uniform jitter of each record inside its own grid cell on a finer integer grid
(:class:`FineEdges`); see :func:`trustlab.privacy.quantiles.dp_quantiles` for why the
guarantee stays exact.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab.errors import ParameterError
from trustlab.privacy.samplers import uniform_int

__all__ = [
    "DEFAULT_RESOLUTION",
    "MAX_RESOLUTION",
    "FineEdges",
    "GridCounts",
    "QuantileGrid",
    "add_sparse",
    "check_resolution",
    "default_jitter",
    "sorted_clipped",
]

DEFAULT_RESOLUTION = 2**20
"""Default number of grid steps across the public bounds of a bounded quantile release."""

MAX_RESOLUTION = 2**40
"""Largest ``resolution`` accepted: the fine tie-breaking grid keeps at least ``2**21``
sub-positions per grid point inside the 62-bit integer range."""

# The fine grid (grid points times tie-breaking sub-positions) has at most this many
# positions, so every position, difference and uniform draw is an exact int64.
_FINE_TOTAL = 2**62


def check_resolution(resolution: Any) -> int:
    """The number of grid steps across the public bounds, an integer in ``1 .. 2**40``."""
    if (
        isinstance(resolution, bool)
        or not isinstance(resolution, numbers.Integral)
        or not 1 <= int(resolution) <= MAX_RESOLUTION
    ):
        raise ParameterError(
            f"resolution must be an integer between 1 and 2**40 (the number of grid steps across "
            f"the public bounds), got {resolution!r}; the default is 2**20.",
            argument="resolution",
        )
    return int(resolution)


class QuantileGrid:
    """The public output grid ``lower + k * step``, ``k = 0 .. resolution``."""

    def __init__(self, bounds: tuple[float, float], resolution: Any) -> None:
        lower, upper = bounds
        self.resolution = check_resolution(resolution)
        width = upper - lower
        if not math.isfinite(width):
            raise ParameterError(
                f"bounds ({lower!r}, {upper!r}) are too far apart: upper - lower overflows float64. "
                "Rescale the data (e.g. to other units) so that the bounds' width is finite.",
                argument="bounds",
            )
        self.step = width / self.resolution
        if not self.step >= np.finfo(float).tiny:
            raise ParameterError(
                f"resolution {self.resolution} is too fine for bounds ({lower!r}, {upper!r}): the "
                "grid step (upper - lower) / resolution underflows float64. Use a smaller "
                "resolution or rescale the data.",
                argument="resolution",
            )
        self.lower, self.upper = lower, upper

    def snap(self, z: np.ndarray) -> np.ndarray:
        """Nearest grid index of each (clipped) value, as int64; monotone in ``z``."""
        idx = np.rint((np.clip(z, self.lower, self.upper) - self.lower) / self.step)
        return np.clip(idx, 0, self.resolution).astype(np.int64)

    def values(self, idx: np.ndarray) -> np.ndarray:
        """``lower + idx * step`` from the integer indices alone, kept inside the bounds."""
        vals = self.lower + np.asarray(idx, dtype=np.int64).astype(float) * self.step
        return np.clip(vals, self.lower, self.upper)


def default_jitter(resolution: int) -> int:
    """Sub-positions per grid point: as many as fit the fine grid into ``2**62``."""
    return _FINE_TOTAL // (resolution + 1)


class GridCounts:
    """The records' grid indices in run-length form: sorted distinct indices and their counts.

    This is all the bounded quantile mechanisms read from the data: JointExp's
    weights depend on how many records fall in each grid cell, the tie-breaking
    jitter is drawn per record inside its cell. Two multisets of records with the
    same ``GridCounts`` give the same output distribution. It merges by adding
    counts (:meth:`merge`), so partial states of a partitioned table give exactly
    the state of the whole table (see :mod:`trustlab.compute.quantiles`).
    """

    def __init__(self, cells: Any, counts: Any) -> None:
        cells = np.asarray(cells, dtype=np.int64).reshape(-1)
        counts = np.asarray(counts, dtype=np.int64).reshape(-1)
        keep = counts > 0
        self.cells, self.counts = cells[keep], counts[keep]
        self.starts = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        self.n = int(self.starts[-1])

    @classmethod
    def from_sorted(cls, z_sorted: np.ndarray, grid: QuantileGrid) -> GridCounts:
        """The run-length grid indices of sorted values (snapped by ``grid.snap``, monotone)."""
        idx = grid.snap(np.asarray(z_sorted, dtype=float))
        if idx.size == 0:
            return cls(idx, idx)
        first = np.concatenate([[0], np.flatnonzero(np.diff(idx)) + 1])
        return cls(idx[first], np.diff(np.concatenate([first, [idx.size]])))

    @classmethod
    def from_values(cls, x: np.ndarray, grid: QuantileGrid) -> GridCounts:
        """The run-length grid indices of (unsorted, NaN-free) values."""
        cells, counts = np.unique(grid.snap(np.asarray(x, dtype=float)), return_counts=True)
        return cls(cells, counts)

    def merge(self, other: GridCounts) -> GridCounts:
        """The state of the union of both multisets (counts added cell by cell)."""
        return GridCounts(*add_sparse(self.cells, self.counts, other.cells, other.counts))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GridCounts):
            return NotImplemented
        return np.array_equal(self.cells, other.cells) and np.array_equal(self.counts, other.counts)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"GridCounts(n={self.n}, distinct cells={self.cells.size})"


def add_sparse(
    codes_a: np.ndarray, counts_a: np.ndarray, codes_b: np.ndarray, counts_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sum of two sparse count vectors (sorted distinct codes with counts); exact int64."""
    codes = np.concatenate([codes_a, codes_b]).astype(np.int64)
    counts = np.concatenate([counts_a, counts_b]).astype(np.int64)
    uniq, inv = np.unique(codes, return_inverse=True)
    total = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(total, inv.reshape(-1), counts)
    return uniq, total


class FineEdges:
    """Sorted fine-grid positions of the records, with lazily drawn tie-breaking jitter.

    Record ``i`` with grid index ``s_i`` sits at fine position ``s_i * K + u_i``, ``u_i``
    uniform on ``0 .. K - 1`` (independent, secure). Edge ``0`` is ``-1``, edge ``r``
    (``1 <= r <= n``) the ``r``-th smallest fine position, edge ``n + 1`` the last
    fine position ``N - 1``; interval ``r`` holds the fine positions ``o`` with
    ``edge[r] < o <= edge[r + 1]``, exactly those with ``r`` records strictly below.
    The records are given by their grid indices in run-length form
    (:class:`GridCounts`); they are jittered in whole runs of equal grid indices, and
    only for the runs that the computation reaches: records in other runs never
    influence it (their jitter would not change any computed weight).
    """

    def __init__(self, runs: GridCounts, grid: QuantileGrid, jitter: int) -> None:
        self.runs = runs
        self.grid = grid
        self.n = runs.n
        self.jitter = int(jitter)
        self.total = (grid.resolution + 1) * self.jitter
        self.edges = np.empty(self.n + 2, dtype=np.int64)
        self.edges[0], self.edges[-1] = -1, self.total - 1
        self.done = np.zeros(self.n + 2, dtype=bool)
        self.done[0] = self.done[-1] = True

    def _run_of(self, i: int) -> int:
        """Index of the run (equal grid index) holding record ``i``."""
        return int(np.searchsorted(self.runs.starts, i, side="right")) - 1

    def ensure(self, lo: int, hi: int) -> None:
        """Make edges ``lo .. hi`` available (drawing the jitter of the runs they touch)."""
        a, b = max(lo, 1), min(hi, self.n)
        if a > b or self.done[a : b + 1].all():
            return
        r0, r1 = self._run_of(a - 1), self._run_of(b - 1)
        i0, i1 = int(self.runs.starts[r0]), int(self.runs.starts[r1 + 1])
        seg = slice(i0 + 1, i1 + 1)
        need = ~self.done[seg]
        vals = self.edges[seg].copy()
        cells = np.repeat(self.runs.cells[r0 : r1 + 1], self.runs.counts[r0 : r1 + 1])[need]
        vals[need] = cells * self.jitter + uniform_int(self.jitter, int(need.sum()))
        # Runs occupy disjoint fine ranges, so sorting the segment only orders each run
        # internally (runs drawn earlier are already sorted and do not move).
        vals.sort()
        self.edges[seg] = vals
        self.done[seg] = True

    def log_lengths(self, lo: int, hi: int) -> np.ndarray:
        """Log of the number of fine positions in intervals ``lo .. hi`` (``-inf`` if none)."""
        self.ensure(lo, hi + 1)
        length = np.diff(self.edges[lo : hi + 2]).astype(float)
        with np.errstate(divide="ignore"):
            return np.log(length)


def sorted_clipped(x: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """A sorted copy of ``x`` clipped to ``[lower, upper]``."""
    z = np.clip(x, lower, upper)
    z.sort()
    return z
