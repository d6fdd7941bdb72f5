"""DP releases of merged counts: noise added once, after merging, by the existing mechanisms.

A distributed run merges exact counts (bit-for-bit those of the whole table) and only
then calls the mechanism of :mod:`trustlab.privacy.statistics`, once: the noise, the
ledger entry and the privacy spent are those of an in-process run on the same table.
Workers never draw noise (a noisy partial state per partition would spend the budget
once per partition and leak through the merge).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab._param_validation import EPSILON, validate_params
from trustlab.errors import DataError
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.release import Release
from trustlab.privacy.statistics import MAX_BINS, release_counts

__all__ = ["dp_histogram_of_counts"]


@validate_params(
    {
        "epsilon": [EPSILON],
        "description": [str],
        "accountant": [None, Accountant],
    }
)
def dp_histogram_of_counts(
    counts: Any,
    epsilon: float,
    *,
    description: str = "histogram",
    accountant: Accountant | None = None,
) -> Release:
    """Release merged exact counts with the mechanism of :func:`~trustlab.privacy.dp_histogram`.

    The counts go straight to the mechanism ``dp_histogram`` applies to the counts it
    takes of its codes (:func:`trustlab.privacy.statistics.release_counts`): the noise
    scale, the ledger entry and the distribution of the output are exactly those of the
    in-process call on the rows' codes. The bin set (``counts.size``) is public; no
    check reads the counts' values beyond their type and sign.

    Parameters
    ----------
    counts : array-like of int
        Exact non-negative counts per bin (e.g. a merged :class:`~trustlab.compute.CodeHistogram`
        or :class:`~trustlab.compute.CrossCounts`, any shape: flattened in C order).
    epsilon : float
        Privacy budget.
    description : str
        What is counted, for the ledger.
    accountant : Accountant, optional
        Budget to charge, checked before any noise is drawn.

    Returns
    -------
    Release
        As :func:`~trustlab.privacy.dp_histogram`; ``value`` has ``counts.size`` entries.

    Raises
    ------
    DataError
        ``counts`` is not a non-empty array of non-negative integers (at most ``MAX_BINS``).

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
    return release_counts(flat, epsilon, description=description, accountant=accountant)
