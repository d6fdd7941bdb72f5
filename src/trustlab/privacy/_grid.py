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
    "QuantileGrid",
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


class FineEdges:
    """Sorted fine-grid positions of the records, with lazily drawn tie-breaking jitter.

    Record ``i`` with grid index ``s_i`` sits at fine position ``s_i * K + u_i``, ``u_i``
    uniform on ``0 .. K - 1`` (independent, secure). Edge ``0`` is ``-1``, edge ``r``
    (``1 <= r <= n``) the ``r``-th smallest fine position, edge ``n + 1`` the last
    fine position ``N - 1``; interval ``r`` holds the fine positions ``o`` with
    ``edge[r] < o <= edge[r + 1]``, exactly those with ``r`` records strictly below.
    Records are snapped and jittered in whole runs of equal grid indices, and only
    for the runs that the computation reaches: records in other runs never
    influence it (their jitter would not change any computed weight).
    """

    def __init__(self, z_sorted: np.ndarray, grid: QuantileGrid, jitter: int) -> None:
        self.z = z_sorted
        self.grid = grid
        self.n = int(z_sorted.size)
        self.jitter = int(jitter)
        self.total = (grid.resolution + 1) * self.jitter
        self.edges = np.empty(self.n + 2, dtype=np.int64)
        self.edges[0], self.edges[-1] = -1, self.total - 1
        self.done = np.zeros(self.n + 2, dtype=bool)
        self.done[0] = self.done[-1] = True

    def _run_start(self, i: int) -> int:
        """First record index of the run (equal grid index) holding record ``i``."""
        cell = self.grid.snap(self.z[i : i + 1])[0]
        lo, step = i, 256
        while lo > 0:
            start = max(0, lo - step)
            same = int(np.count_nonzero(self.grid.snap(self.z[start:lo]) == cell))
            if same < lo - start:
                return lo - same
            lo, step = start, 2 * step
        return 0

    def _run_stop(self, i: int) -> int:
        """One past the last record index of the run holding record ``i``."""
        cell = self.grid.snap(self.z[i : i + 1])[0]
        hi, step = i + 1, 256
        while hi < self.n:
            stop = min(self.n, hi + step)
            same = int(np.count_nonzero(self.grid.snap(self.z[hi:stop]) == cell))
            if same < stop - hi:
                return hi + same
            hi, step = stop, 2 * step
        return self.n

    def ensure(self, lo: int, hi: int) -> None:
        """Make edges ``lo .. hi`` available (drawing the jitter of the runs they touch)."""
        a, b = max(lo, 1), min(hi, self.n)
        if a > b or self.done[a : b + 1].all():
            return
        i0, i1 = self._run_start(a - 1), self._run_stop(b - 1)
        seg = slice(i0 + 1, i1 + 1)
        need = ~self.done[seg]
        vals = self.edges[seg].copy()
        cells = self.grid.snap(self.z[i0:i1][need])
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
