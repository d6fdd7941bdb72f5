"""The Poisson bootstrap as a mergeable statistic: replicate weights drawn per row from a counter.

The ordinary (multinomial) bootstrap draws ``n`` rows with replacement from the whole
table, which needs every row in one place. The Poisson bootstrap gives row ``i`` in
replicate ``b`` an independent weight ``w_ib ~ Poisson(1)`` instead (Hanley and
MacGibbon 2006; Chamandy, Muralidharan, Najmi, Naidu, "Estimating Uncertainty for
Massive Data Streams", Google 2012): replicate sums are sums over partitions, so they
merge by addition. Here ``w_ib`` is a pure function of ``(seed, b, i)``, ``i`` the row's
position in the whole table, through a counter-based generator (SplitMix64's mixer over
the three words, then inversion of the Poisson(1) CDF): the replicates are identical
whatever the partitioning, the chunk size or the number of workers.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab._param_validation import Interval, validate_params
from trustlab._stats import splitmix64 as _mix
from trustlab.compute.statistics import MergeableStatistic
from trustlab.errors import ParameterError

__all__ = ["BootstrapMeans", "PoissonBootstrap", "poisson_weights"]

_K = 20  # P(Poisson(1) > 20) < 1e-19: below the 2**-53 resolution of the uniforms
_CDF = np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(_K + 1)])
_G1, _G2, _G3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xD1B54A32D192ED03), np.uint64(0x8CB92BA72F3D8DD7)
_BLOCK = 1 << 22  # rows x replicates generated at a time


@validate_params(
    {
        "n_boot": [Interval(numbers.Integral, 1, 100_000, closed="both")],
        "seed": [Interval(numbers.Integral, 0, 2**63 - 1, closed="both")],
    }
)
def poisson_weights(positions: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Poisson(1) bootstrap weights of rows at the given global positions.

    Parameters
    ----------
    positions : array-like of int
        Each row's position in the whole table (``>= 0``).
    n_boot : int
        Number of replicates.
    seed : int
        The key; the same seed and position give the same weights everywhere.

    Returns
    -------
    numpy.ndarray
        ``uint8`` weights of shape ``(len(positions), n_boot)``.

    References
    ----------
    Hanley, MacGibbon. "Creating non-parametric bootstrap samples using Poisson
    frequencies". Computer Methods and Programs in Biomedicine 83, 2006. Steele, Lea,
    Flood. "Fast splittable pseudorandom number generators". OOPSLA 2014 (SplitMix64).

    Examples
    --------
    >>> w = poisson_weights(np.arange(100_000), 2, seed=0)
    >>> w.shape, round(float(w.mean()), 2)
    ((100000, 2), 1.0)
    >>> bool((poisson_weights(np.arange(5, 8), 2, 0) == w[5:8]).all())
    True
    """
    pos = np.asarray(positions)
    if pos.ndim != 1 or (pos.size and (pos.dtype.kind not in "iu" or pos.min() < 0)):
        raise ParameterError("positions must be a 1-d array of non-negative integers.", argument="positions")
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], dtype=np.uint64) * _G1 + _G3)[0]
        rows = _mix(pos.astype(np.uint64) * _G2 ^ key)
        reps = _mix((np.arange(n_boot, dtype=np.uint64) + np.uint64(1)) * _G3)
        h = _mix(rows[:, None] ^ reps[None, :])
    u = (h >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return np.minimum(np.searchsorted(_CDF, u, side="right"), _K).astype(np.uint8)


@dataclass(frozen=True)
class BootstrapMeans:
    """A column's mean and its Poisson-bootstrap replicates.

    Attributes
    ----------
    mean : float
        The mean of the present values.
    replicates : numpy.ndarray
        ``n_boot`` replicate means (weighted by the rows' Poisson weights).

    See Also
    --------
    PoissonBootstrap : the statistic that builds it.
    """

    mean: float
    replicates: np.ndarray

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """Percentile interval of the replicates.

        Parameters
        ----------
        level : float
            Coverage.

        Returns
        -------
        tuple of float
        """
        a = (1.0 - level) / 2
        r = self.replicates[np.isfinite(self.replicates)]
        if r.size == 0:
            return float("nan"), float("nan")
        return float(np.quantile(r, a)), float(np.quantile(r, 1 - a))


class PoissonBootstrap(MergeableStatistic[np.ndarray, BootstrapMeans]):
    """The mean of a numeric column with ``n_boot`` Poisson-bootstrap replicates, mergeable.

    State: ``[n_boot + 1, 2]`` sums (weighted count, weighted sum), row 0 with weight 1.
    Each row's weights depend on ``(seed, replicate, position)`` only
    (:func:`poisson_weights`), so the result is the same on any partitioning.

    Parameters
    ----------
    column : str
        A numeric column (missing values and non-numbers are left out).
    n_boot : int, default 200
        Number of replicates.
    seed : int, default 0
        Key of the weights (a public choice).

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"x": np.arange(1000.0)})
    >>> a = compute(PoissonBootstrap("x", n_boot=50), df)
    >>> b = compute(PoissonBootstrap("x", n_boot=50), df, chunksize=77)
    >>> a.mean, bool(np.allclose(a.replicates, b.replicates))
    (499.5, True)
    """

    needs_positions = True

    def __init__(self, column: str, *, n_boot: int = 200, seed: int = 0) -> None:
        self.column, self.n_boot, self.seed = column, int(n_boot), int(seed)

    @override
    def partial(self, chunk: pd.DataFrame) -> np.ndarray:
        x = pd.to_numeric(chunk[self.column], errors="coerce").to_numpy(dtype=float)
        pos = np.asarray(chunk.index, dtype=np.int64)
        ok = ~np.isnan(x)
        x, pos = x[ok], pos[ok]
        out = np.zeros((self.n_boot + 1, 2))
        out[0] = x.size, x.sum()
        step = max(1, _BLOCK // self.n_boot)
        for i in range(0, x.size, step):
            w = poisson_weights(pos[i : i + step], self.n_boot, self.seed).astype(np.float64)
            out[1:, 0] += w.sum(axis=0)
            out[1:, 1] += x[i : i + step] @ w
        return out

    @override
    def merge(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    @override
    def finalize(self, state: np.ndarray) -> BootstrapMeans:
        with np.errstate(invalid="ignore", divide="ignore"):
            means = state[:, 1] / state[:, 0]
        return BootstrapMeans(float(means[0]), means[1:])
