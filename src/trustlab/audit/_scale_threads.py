"""How many native (OpenMP / BLAS) threads the audit's model may use."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from trustlab.errors import ParameterError

__all__ = ["native_threads"]


def native_threads() -> Any:
    """Limit OpenMP/BLAS thread pools while the audit fits and scores its model.

    HistGradientBoosting's OpenMP fit slows down ~15x (6.6 s -> 106 s for 100,000 rows x 19
    columns, measured on the 2-core machine while other processes held the cores) when its
    threads compete for busy cores; one thread keeps it near its quiet time. The limit is
    ``TRUSTLAB_THREADS`` when set, none when the user set ``OMP_NUM_THREADS`` (their choice
    stands), else 1 (docs/scale.md).
    """
    from threadpoolctl import threadpool_limits

    value = os.environ.get("TRUSTLAB_THREADS")
    if value is None and "OMP_NUM_THREADS" in os.environ:
        return contextlib.nullcontext()
    try:
        limit = max(1, int(value)) if value is not None else 1
    except ValueError:
        raise ParameterError(
            f"TRUSTLAB_THREADS must be a positive integer, got {value!r}.", argument="TRUSTLAB_THREADS"
        ) from None
    return threadpool_limits(limits=limit)
