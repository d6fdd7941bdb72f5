"""The Dask side of :func:`trustlab.compute.compute` (imported only when a Dask frame is given)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from trustlab.errors import DataError, TrustlabError

__all__ = ["compute_dask", "run_graph"]


def _partial_at(stat: Any, part: pd.DataFrame, offset: int | None) -> Any:
    """One partition's state; with ``offset``, the chunk's index becomes its global row positions."""
    if offset is not None:
        part = part.set_axis(pd.RangeIndex(offset, offset + len(part)), axis=0)
    return stat.partial(part)


def _merge_all(stat: Any, *states: Any) -> Any:
    out = states[0]
    for s in states[1:]:
        out = stat.merge(out, s)
    return out


def run_graph(obj: Any, client: Any = None) -> Any:
    """Compute a Dask collection or delayed object on ``client`` (or the default scheduler).

    Errors raised by the workers come back as :class:`~trustlab.errors.DataError` naming the
    cause (trustlab's own errors pass unchanged).
    """
    import dask

    try:
        if client is not None:
            return client.gather(client.compute(obj))
        return dask.compute(obj)[0]
    except TrustlabError:
        raise
    except Exception as exc:
        raise _task_failed(exc) from exc


def _task_failed(exc: Exception) -> DataError:
    """The DataError for a failed Dask task, with the worker's message on one line."""
    return DataError(
        f"a Dask task failed while computing the statistics ({type(exc).__name__}: "
        f"{' '.join(str(exc).split())[:300]}); check the input files (same columns and types "
        "in every file) and that the workers can read them.",
        argument="data",
    )


def _with_progress(states: list[Any], client: Any, progress: Callable[[int, int], None]) -> list[Any]:
    """Submit the partial states as futures and report each one that finishes."""
    from dask.distributed import as_completed

    futures = client.compute(states)
    progress(0, len(futures))
    try:
        for done, fut in enumerate(as_completed(futures), start=1):
            if fut.status == "error":
                fut.result()  # raises the worker's error
            progress(done, len(futures))
    except TrustlabError:
        raise
    except Exception as exc:
        raise _task_failed(exc) from exc
    return list(futures)


def compute_dask(
    stat: Any,
    data: Any,
    *,
    client: Any = None,
    fan_in: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> Any:
    """Partial states on the workers, merged in a tree of fan-in ``fan_in``, finalised here.

    Only the partial states (small: counts, sums) and the statistic object travel; the
    rows stay where the partitions are read.
    """
    import dask

    parts = data.to_delayed()
    stat_d = dask.delayed(stat, traverse=False)
    offsets: list[int | None] = [None] * len(parts)
    if getattr(stat, "needs_positions", False):
        lengths = run_graph([dask.delayed(len)(p) for p in parts], client)
        offsets = [int(o) for o in np.concatenate([[0], np.cumsum(lengths)[:-1]])]
    states = [dask.delayed(_partial_at, pure=True)(stat_d, p, o) for p, o in zip(parts, offsets, strict=True)]
    if not states:
        raise DataError("the Dask DataFrame has no partitions.", argument="data")
    if client is not None and progress is not None:
        states = _with_progress(states, client, progress)
    while len(states) > 1:  # a tree of merges, so no single task holds every state
        states = [
            dask.delayed(_merge_all, pure=True)(stat_d, *states[i : i + fan_in])
            for i in range(0, len(states), fan_in)
        ]
    return stat.finalize(run_graph(states[0], client))
