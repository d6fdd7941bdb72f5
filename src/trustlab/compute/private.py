"""DP releases of merged counts: noise added once, after merging, by the existing mechanisms.

A distributed run merges exact counts (bit-for-bit those of the whole table) and only
then calls the mechanism of :mod:`trustlab.privacy.statistics`, once: the noise, the
ledger entry and the privacy spent are those of an in-process run on the same table.
Workers never draw noise (a noisy partial state per partition would spend the budget
once per partition and leak through the merge).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, Interval, validate_params
from trustlab.errors import DataError
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.release import Release
from trustlab.privacy.statistics import MAX_BINS, dp_histogram

__all__ = ["dp_histogram_of_counts"]


@validate_params(
    {
        "epsilon": [EPSILON],
        "description": [str],
        "accountant": [None, Accountant],
        "max_rows": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def dp_histogram_of_counts(
    counts: Any,
    epsilon: float,
    *,
    description: str = "histogram",
    accountant: Accountant | None = None,
    max_rows: int = 2**31,
) -> Release:
    """Release merged exact counts with :func:`~trustlab.privacy.dp_histogram`, unchanged.

    The counts are turned back into the bin codes they count (``np.repeat``, ``uint16`` or
    ``uint32`` codes) and handed to ``dp_histogram``: the mechanism, its noise scale, its
    ledger entry and the distribution of its output are exactly those of the in-process
    call on the rows' codes. The bin set (``counts.size``) is public.

    Parameters
    ----------
    counts : array-like of int
        Exact non-negative counts per bin (e.g. a merged :class:`~trustlab.compute.CodeHistogram`
        or :class:`~trustlab.compute.groups.CrossCounts`, any shape: flattened in C order).
    epsilon : float
        Privacy budget.
    description : str
        What is counted, for the ledger.
    accountant : Accountant, optional
        Budget to charge.
    max_rows : int, default 2**31
        Refuse totals above this (the codes are materialised: 2 or 4 bytes a row).

    Returns
    -------
    Release
        As :func:`~trustlab.privacy.dp_histogram`; ``value`` has ``counts.size`` entries.

    Raises
    ------
    DataError
        ``counts`` is not an array of non-negative integers, or its total exceeds ``max_rows``.

    References
    ----------
    Dwork, McSherry, Nissim, Smith. "Calibrating Noise to Sensitivity in Private Data
    Analysis". TCC 2006.

    Examples
    --------
    >>> r = dp_histogram_of_counts([3, 0, 5], epsilon=1.0, description="demo")
    >>> r.value.shape, r.parameters["scale"], r.description
    ((3,), 1.0, 'demo')
    """
    c = np.asarray(counts)
    if c.dtype.kind not in "iu" or c.size == 0 or c.size > MAX_BINS or (c < 0).any():
        raise DataError(
            f"counts must be a non-empty array of at most {MAX_BINS} non-negative integers; "
            f"got dtype {c.dtype} and shape {c.shape}.",
            argument="counts",
        )
    flat = c.reshape(-1).astype(np.int64)
    total = int(flat.sum())
    if total > max_rows:
        raise DataError(
            f"counts total {total:,} rows, more than max_rows={max_rows:,}; raise max_rows if the "
            "memory allows (4 bytes a row).",
            argument="counts",
        )
    dtype = np.uint16 if flat.size <= 2**16 else np.uint32
    codes = np.repeat(np.arange(flat.size, dtype=dtype), flat)
    return dp_histogram(codes, flat.size, epsilon, description=description, accountant=accountant)
