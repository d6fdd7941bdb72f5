"""Run a mergeable statistic on a pandas DataFrame (in process) or a Dask DataFrame."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from functools import reduce
from typing import Any, TypeVar

import pandas as pd

from trustlab._param_validation import HasMethods, Interval, validate_params
from trustlab.compute.statistics import MergeableStatistic
from trustlab.errors import DataError

__all__ = ["compute"]

S = TypeVar("S")
R = TypeVar("R")


def _is_dask(data: Any) -> bool:
    return type(data).__module__.startswith("dask")


@validate_params(
    {
        "stat": [HasMethods(["partial", "merge", "finalize"])],
        "chunksize": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "progress": [None, callable],
    }
)
def compute(
    stat: MergeableStatistic[S, R],
    data: Any,
    *,
    chunksize: int | None = None,
    client: Any = None,
    progress: Callable[[int, int], None] | None = None,
) -> R:
    """Compute ``stat`` on ``data``.

    Parameters
    ----------
    stat : MergeableStatistic
        The statistic.
    data : pandas.DataFrame or dask.dataframe.DataFrame
        A pandas frame is processed in process, in chunks of ``chunksize`` rows
        (all at once by default). A Dask frame is processed partition by
        partition on its scheduler, or on ``client`` when one is given.
    chunksize : int, optional
        Rows per chunk for pandas input.
    client : dask.distributed.Client, optional
        Where to run a Dask computation.
    progress : callable, optional
        With ``client``: called as ``progress(done, total)`` each time a partition's
        partial state is ready (the CLI's progress bar follows the Dask tasks this way).

    Returns
    -------
    result
        ``stat.finalize`` of the merged partial states; the same whatever the
        partitioning (exactly for counts, up to float rounding for sums). When
        ``stat.needs_positions``, each chunk's index holds its rows' positions
        ``0 .. n - 1`` in the whole table (for a Dask frame: the partitions in order).

    Raises
    ------
    DataError
        ``data`` is neither a pandas nor a Dask DataFrame, or a partition fails to
        load (the message names the partition and the cause).

    Examples
    --------
    >>> import pandas as pd
    >>> from trustlab.compute import Moments
    >>> compute(Moments("x"), pd.DataFrame({"x": [1.0, 2.0, 3.0]}), chunksize=2)["mean"]
    2.0
    """
    if _is_dask(data):
        from trustlab.compute._dask import compute_dask

        return compute_dask(stat, data, client=client, progress=progress)
    if not isinstance(data, pd.DataFrame):
        raise DataError(
            f"data must be a pandas or Dask DataFrame, got {type(data).__name__}.",
            argument="data",
        )
    if getattr(stat, "needs_positions", False):
        data = data.set_axis(pd.RangeIndex(len(data)), axis=0)
    if chunksize is None or chunksize >= len(data):
        return stat.finalize(stat.partial(data))
    chunks = (data.iloc[i : i + chunksize] for i in range(0, len(data), chunksize))
    return stat.finalize(reduce(stat.merge, map(stat.partial, chunks)))
