"""Mergeable statistics, run in process on pandas or on a Dask cluster."""

from trustlab.compute.backend import compute
from trustlab.compute.statistics import (
    CodeHistogram,
    MergeableStatistic,
    Moments,
    MomentsState,
    ValueCounts,
)

__all__ = [
    "CodeHistogram",
    "MergeableStatistic",
    "Moments",
    "MomentsState",
    "ValueCounts",
    "compute",
]
