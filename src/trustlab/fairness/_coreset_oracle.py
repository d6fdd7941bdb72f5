"""The weak-strong distance oracle of the fair k-median coresets.

Private to :mod:`trustlab.fairness.coresets`, which re-exports :class:`WeakStrongOracle`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError

_MASK64 = (1 << 64) - 1


def _splitmix(keys: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser: a fixed, well-mixed hash of uint64 keys -> uniform in [0, 1)."""
    z = keys.astype(np.uint64)
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


class WeakStrongOracle:
    """Distance oracles of the weak-strong model over n points, with exact query counters.

    ``weak(i, js)`` returns the true distance for a pair with probability
    ``1 - corrupt_prob`` and a corrupted value otherwise; whether a pair is corrupted,
    and its value, are fixed functions of ``(seed, min(i, j), max(i, j))``, so the
    answer is persistent and symmetric. ``strong(i, js)`` is exact and counted per
    pair, except between two points already revealed by ``reveal`` (the point-query
    form of the strong oracle: distances among revealed points are then known).

    Parameters
    ----------
    X : array-like of shape (n_points, n_features), optional
        Points in Euclidean space (or give ``dist``).
    dist : callable, optional
        ``dist(i, js) -> distances`` from point ``i`` to the points ``js`` (any metric).
    n_points : int, optional
        Number of points (required with ``dist``).
    corrupt_prob : float in [0, 1), default 1/3
        Probability that a pair's weak answer is corrupted.
    corruption : {"uniform", "far", "near"}, default "uniform"
        Corrupted value: uniform in ``[0, scale]``; ``d + U * scale`` (one-sided
        overestimate); ``U * d`` (underestimate).
    scale : float, optional
        Range of corrupted values (default: twice the largest distance from point 0,
        an upper bound of the diameter).
    random_state : int or None
        Seed of the (simulated) corruption pattern.

    Attributes
    ----------
    n_strong, n_point, n_weak : int
        Pair queries to the strong oracle, points revealed, pair queries to the weak oracle.

    References
    ----------
    V. Braverman, P. Dharangutte, S. H.-C. Jiang, H.-A. Nguyen, C. Wang, Y. Zhang, S. Zhou,
    "Relative Error Fair Clustering in the Weak-Strong Oracle Model", ICML 2025;
    M. Bateni et al., "Metric Clustering and MST with Strong and Weak Distance Oracles", COLT 2024.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> o = WeakStrongOracle(X, corrupt_prob=0.3, random_state=1)
    >>> bool(np.array_equal(o.weak(3, [5, 7]), o.weak(3, [5, 7])))
    True
    >>> float(o.strong(3, [5])[0]) == float(np.linalg.norm(X[3] - X[5])), o.n_strong
    (True, 1)
    """

    n: int
    n_strong: int
    n_point: int
    n_weak: int
    corrupt_prob: float
    corruption: str
    scale: float
    _seed: np.uint64
    _revealed: np.ndarray

    def __init__(
        self,
        X: Any = None,
        *,
        dist: Callable[[int, np.ndarray], np.ndarray] | None = None,
        n_points: int | None = None,
        corrupt_prob: float = 1 / 3,
        corruption: str = "uniform",
        scale: float | None = None,
        random_state: int | None = None,
    ) -> None:
        if (X is None) == (dist is None):
            raise ParameterError("pass exactly one of X (points) and dist (a metric callable).", argument="X")
        if X is not None:
            self._X = check_numeric_array(X, "X", ndim=2)
            self.n = self._X.shape[0]
        else:
            if not callable(dist):
                raise ParameterError("dist must be a callable dist(i, js) -> distances.", argument="dist")
            if n_points is None or isinstance(n_points, bool) or not isinstance(n_points, numbers.Integral):
                raise ParameterError("n_points (an int >= 1) is required with dist.", argument="n_points")
            self._X = None
            self.n = int(n_points)
        self._dist = dist
        if self.n < 1:
            raise DataError("the oracle needs at least one point.", argument="X")
        if (
            isinstance(corrupt_prob, bool)
            or not isinstance(corrupt_prob, numbers.Real)
            or not (0 <= corrupt_prob < 1)
        ):
            raise ParameterError(
                f"corrupt_prob must be in [0, 1), got {corrupt_prob!r}.", argument="corrupt_prob"
            )
        if corruption not in ("uniform", "far", "near"):
            raise ParameterError(
                f"corruption must be 'uniform', 'far' or 'near', got {corruption!r}.", argument="corruption"
            )
        self.corrupt_prob = float(corrupt_prob)
        self.corruption = corruption
        seed = 0 if random_state is None else int(random_state)
        self._seed = np.uint64((seed * 0x9E3779B97F4A7C15) & _MASK64)
        self.scale = (
            float(scale) if scale is not None else 2.0 * float(self._exact(0, np.arange(self.n)).max())
        )
        self.n_strong = 0
        self.n_point = 0
        self.n_weak = 0
        self._revealed = np.zeros(self.n, dtype=bool)

    def _exact(self, i: int, js: np.ndarray) -> np.ndarray:
        if self._X is not None:
            return np.sqrt(((self._X[js] - self._X[i]) ** 2).sum(axis=-1))
        assert self._dist is not None
        return np.asarray(self._dist(int(i), js), dtype=float).reshape(js.shape)

    def _index(self, js: Any) -> np.ndarray:
        arr = np.atleast_1d(np.asarray(js, dtype=np.int64))
        if arr.size and (arr.min() < 0 or arr.max() >= self.n):
            raise DataError(f"point indices must lie in [0, {self.n - 1}].", argument="js")
        return arr

    def strong(self, i: int, js: Any) -> np.ndarray:
        """Exact distances from point ``i`` to the points ``js`` (counted unless both revealed).

        Parameters
        ----------
        i : int
            A point index.
        js : int or array-like of int
            Point indices.

        Returns
        -------
        numpy.ndarray
            The exact distances.
        """
        arr = self._index(js)
        free = self._revealed[i] & self._revealed[arr]
        self.n_strong += int((~free).sum())
        return self._exact(i, arr)

    def reveal(self, i: Any) -> None:
        """Point query: reveal points ``i`` (counted once each); distances among revealed points are free.

        Parameters
        ----------
        i : int or array-like of int
            Point indices.
        """
        arr = self._index(i)
        new = np.unique(arr[~self._revealed[arr]])
        self.n_point += int(new.size)
        self._revealed[new] = True

    def weak(self, i: int, js: Any) -> np.ndarray:
        """Weak (possibly corrupted, persistent) distances from point ``i`` to the points ``js``.

        Parameters
        ----------
        i, js
            As in :meth:`strong`.

        Returns
        -------
        numpy.ndarray
            The weak oracle's answers.
        """
        arr = self._index(js)
        self.n_weak += int(arr.size)
        d = self._exact(i, arr)
        lo, hi = np.minimum(arr, i).astype(np.uint64), np.maximum(arr, i).astype(np.uint64)
        with np.errstate(over="ignore"):
            key = (lo * np.uint64(self.n) + hi) ^ self._seed
            u = _splitmix(key)
            v = _splitmix(key ^ np.uint64(0xD1B54A32D192ED03))
        bad = (u < self.corrupt_prob) & (arr != i)
        if self.corruption == "uniform":
            wrong = v * self.scale
        elif self.corruption == "far":
            wrong = d + (0.5 + v) * self.scale
        else:
            wrong = v * d
        return np.where(bad, wrong, d)
