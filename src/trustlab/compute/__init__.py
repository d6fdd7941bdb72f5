"""Mergeable statistics, run in process on pandas or on a Dask cluster.

See ``docs/scale.md``: what is computed where, and what crosses the network.
"""

from trustlab.compute.backend import compute
from trustlab.compute.bootstrap import BootstrapMeans, PoissonBootstrap, poisson_weights
from trustlab.compute.cluster import connect
from trustlab.compute.groups import ConfusionCounts, CrossCounts, GridHistogram, GroupConfusion, Histogram
from trustlab.compute.private import dp_histogram_of_counts
from trustlab.compute.quantiles import (
    BeyondWhiskers,
    BucketCounts,
    GroupedQuantileSummary,
    QuantileCounts,
    QuantileSummary,
    dp_boxplot_of_counts,
    dp_quantiles_of_counts,
    grouped_dp_boxplot_of_counts,
    grouped_dp_boxplot_on,
    grouped_dp_boxplots_on,
)
from trustlab.compute.scores import ScoreCounts, ScoreTable
from trustlab.compute.statistics import (
    CodeHistogram,
    MergeableStatistic,
    Moments,
    MomentsState,
    Several,
    ValueCounts,
)
from trustlab.compute.trees import FastPDBackground, FastPDBackgroundState

__all__ = [
    "BeyondWhiskers",
    "BootstrapMeans",
    "BucketCounts",
    "CodeHistogram",
    "ConfusionCounts",
    "CrossCounts",
    "FastPDBackground",
    "FastPDBackgroundState",
    "GridHistogram",
    "GroupConfusion",
    "GroupedQuantileSummary",
    "Histogram",
    "MergeableStatistic",
    "Moments",
    "MomentsState",
    "PoissonBootstrap",
    "QuantileCounts",
    "QuantileSummary",
    "ScoreCounts",
    "ScoreTable",
    "Several",
    "ValueCounts",
    "compute",
    "connect",
    "dp_boxplot_of_counts",
    "dp_histogram_of_counts",
    "dp_quantiles_of_counts",
    "grouped_dp_boxplot_of_counts",
    "grouped_dp_boxplot_on",
    "grouped_dp_boxplots_on",
    "poisson_weights",
]
