"""Mergeable statistics: compute per partition, merge partial states, finalise.

A :class:`MergeableStatistic` has three pure methods: ``partial(chunk)`` maps one
partition (a pandas DataFrame) to a small state, ``merge(a, b)`` combines two
states (associative and commutative), and ``finalize(state)`` turns the merged
state into the result. Any backend that can map over partitions and reduce runs
them, with the same result whatever the partitioning.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import pandas as pd
from typing_extensions import override

__all__ = [
    "CodeHistogram",
    "MergeableStatistic",
    "Moments",
    "MomentsState",
    "Several",
    "ValueCounts",
]

S = TypeVar("S")
R = TypeVar("R")


class MergeableStatistic(ABC, Generic[S, R]):
    """A statistic computed as partial states merged together (abstract base class).

    Subclasses implement three pure methods: :meth:`partial` (one partition to a
    small state), :meth:`merge` (associative and commutative) and :meth:`finalize`.
    The result must not depend on how the rows were partitioned.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> class RowCount(MergeableStatistic[int, int]):
    ...     def partial(self, chunk):
    ...         return len(chunk)
    ...     def merge(self, a, b):
    ...         return a + b
    ...     def finalize(self, state):
    ...         return state
    >>> compute(RowCount(), pd.DataFrame({"x": range(10)}), chunksize=3)
    10
    """

    needs_positions: bool = False
    """Whether :meth:`partial` reads each row's position in the whole table from the chunk's
    index. When True, :func:`~trustlab.compute.compute` hands every chunk with its index set
    to the rows' global positions ``0 .. n - 1`` (in the data's order), whatever the
    partitioning; otherwise the index is whatever the partition carries."""

    @abstractmethod
    def partial(self, chunk: pd.DataFrame) -> S:
        """The state of one partition.

        Parameters
        ----------
        chunk : pandas.DataFrame
            One partition of the data.

        Returns
        -------
        state
            A small, picklable summary of ``chunk``.
        """

    @abstractmethod
    def merge(self, a: S, b: S) -> S:
        """Combine two partial states.

        Parameters
        ----------
        a, b : state
            States returned by :meth:`partial` or :meth:`merge`.

        Returns
        -------
        state
            The state of the union of the two partitions.
        """

    @abstractmethod
    def finalize(self, state: S) -> R:
        """Turn the merged state into the result.

        Parameters
        ----------
        state : state
            The merged state of all partitions.

        Returns
        -------
        result
            The statistic's value.
        """


@dataclass(frozen=True)
class MomentsState:
    """Counts and power sums of one numeric column (mergeable by addition, min and max).

    Attributes
    ----------
    rows : int
        Rows seen.
    missing : int
        Rows whose value is missing or not numeric.
    total, total_sq : float
        Sum and sum of squares of the present values.
    minimum, maximum : float
        Extremes of the present values (``inf`` / ``-inf`` when there are none).

    See Also
    --------
    Moments : the statistic whose state this is.
    """

    rows: int
    missing: int
    total: float
    total_sq: float
    minimum: float
    maximum: float


class Moments(MergeableStatistic[MomentsState, dict[str, float]]):
    """Rows, missing count, mean, standard deviation, min and max of a numeric column.

    Parameters
    ----------
    column : str
        Name of the column; values that are not numbers count as missing.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"x": [1.0, 2.0, None, 4.0]})
    >>> r = compute(Moments("x"), df, chunksize=2)
    >>> r["missing"], r["mean"]
    (1, 2.3333333333333335)
    """

    def __init__(self, column: str) -> None:
        self.column = column

    @override
    def partial(self, chunk: pd.DataFrame) -> MomentsState:
        x = pd.to_numeric(chunk[self.column], errors="coerce").to_numpy(dtype=float)
        ok = x[~np.isnan(x)]
        return MomentsState(
            rows=int(x.size),
            missing=int(x.size - ok.size),
            total=float(ok.sum()),
            total_sq=float(np.square(ok).sum()),
            minimum=float(ok.min()) if ok.size else np.inf,
            maximum=float(ok.max()) if ok.size else -np.inf,
        )

    @override
    def merge(self, a: MomentsState, b: MomentsState) -> MomentsState:
        return MomentsState(
            a.rows + b.rows,
            a.missing + b.missing,
            a.total + b.total,
            a.total_sq + b.total_sq,
            min(a.minimum, b.minimum),
            max(a.maximum, b.maximum),
        )

    @override
    def finalize(self, state: MomentsState) -> dict[str, float]:
        n = state.rows - state.missing
        mean = state.total / n if n else float("nan")
        var = max(0.0, state.total_sq / n - mean**2) * n / (n - 1) if n > 1 else float("nan")
        return {
            "rows": state.rows,
            "missing": state.missing,
            "mean": mean,
            "std": float(np.sqrt(var)),
            "min": state.minimum if n else float("nan"),
            "max": state.maximum if n else float("nan"),
        }


class ValueCounts(MergeableStatistic[dict[Any, int], dict[Any, int]]):
    """Counts of each value of a column, missing values under the key ``None``.

    Parameters
    ----------
    column : str
        Name of the column.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> compute(ValueCounts("c"), pd.DataFrame({"c": ["a", "b", "a", None]}), chunksize=2)
    {'a': 2, None: 1, 'b': 1}
    """

    def __init__(self, column: str) -> None:
        self.column = column

    @override
    def partial(self, chunk: pd.DataFrame) -> dict[Any, int]:
        counts = chunk[self.column].value_counts(dropna=False, sort=False)
        return {(None if pd.isna(k) else k): int(v) for k, v in counts.items() if v}  # type: ignore[call-overload]

    @override
    def merge(self, a: dict[Any, int], b: dict[Any, int]) -> dict[Any, int]:
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
        return out

    @override
    def finalize(self, state: dict[Any, int]) -> dict[Any, int]:
        return dict(sorted(state.items(), key=lambda kv: (-kv[1], str(kv[0]))))


class CodeHistogram(MergeableStatistic[np.ndarray, np.ndarray]):
    """Counts of integer codes ``0..n_bins-1`` held in one column (e.g. a cell index).

    Parameters
    ----------
    column : str
        Name of an integer column whose values lie in ``0 .. n_bins - 1``.
    n_bins : int
        Number of codes.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> compute(CodeHistogram("k", 3), pd.DataFrame({"k": [0, 2, 2, 1, 2]}), chunksize=2).tolist()
    [1, 1, 3]
    """

    def __init__(self, column: str, n_bins: int) -> None:
        self.column = column
        self.n_bins = n_bins

    @override
    def partial(self, chunk: pd.DataFrame) -> np.ndarray:
        codes = chunk[self.column].to_numpy(dtype=np.int64)
        return np.bincount(codes, minlength=self.n_bins)

    @override
    def merge(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    @override
    def finalize(self, state: np.ndarray) -> np.ndarray:
        return state


class Several(MergeableStatistic[dict[str, Any], dict[str, Any]]):
    """Several statistics computed in one pass over the data (one read of each partition).

    Parameters
    ----------
    statistics : dict of str to MergeableStatistic
        The statistics, by name; the result has the same keys.

    Examples
    --------
    >>> from trustlab.compute import compute
    >>> df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "c": ["a", "b", "a"]})
    >>> r = compute(Several({"x": Moments("x"), "c": ValueCounts("c")}), df, chunksize=2)
    >>> r["x"]["mean"], r["c"]
    (2.0, {'a': 2, 'b': 1})
    """

    def __init__(self, statistics: dict[str, MergeableStatistic[Any, Any]]) -> None:
        self.statistics = dict(statistics)

    @property
    def needs_positions(self) -> bool:  # type: ignore[override]
        """True when one of the statistics needs the rows' global positions."""
        return any(getattr(s, "needs_positions", False) for s in self.statistics.values())

    @override
    def partial(self, chunk: pd.DataFrame) -> dict[str, Any]:
        return {k: s.partial(chunk) for k, s in self.statistics.items()}

    @override
    def merge(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        return {k: s.merge(a[k], b[k]) for k, s in self.statistics.items()}

    @override
    def finalize(self, state: dict[str, Any]) -> dict[str, Any]:
        return {k: s.finalize(state[k]) for k, s in self.statistics.items()}
