"""Mergeable statistics, run in process on pandas or on a Dask cluster.

See ``docs/scale.md``: what is computed where, and what crosses the network.
"""

from trustlab.compute.backend import compute
from trustlab.compute.bootstrap import BootstrapMeans, PoissonBootstrap, poisson_weights
from trustlab.compute.cluster import connect
from trustlab.compute.groups import ConfusionCounts, CrossCounts, GridHistogram, GroupConfusion, Histogram
from trustlab.compute.private import dp_histogram_of_counts
from trustlab.compute.scores import ScoreCounts, ScoreTable
from trustlab.compute.statistics import (
    CodeHistogram,
    MergeableStatistic,
    Moments,
    MomentsState,
    Several,
    ValueCounts,
)

__all__ = [
    "BootstrapMeans",
    "CodeHistogram",
    "ConfusionCounts",
    "CrossCounts",
    "GridHistogram",
    "GroupConfusion",
    "Histogram",
    "MergeableStatistic",
    "Moments",
    "MomentsState",
    "PoissonBootstrap",
    "ScoreCounts",
    "ScoreTable",
    "Several",
    "ValueCounts",
    "compute",
    "connect",
    "dp_histogram_of_counts",
    "poisson_weights",
]
