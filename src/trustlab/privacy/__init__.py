"""Differential privacy: releases, accounting, safe samplers and DP statistics."""

from trustlab.privacy.accounting import Accountant, LedgerEntry
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import discrete_laplace, gaussian, laplace
from trustlab.privacy.statistics import dp_count, dp_histogram, dp_mean, dp_sum

__all__ = [
    "Accountant",
    "LedgerEntry",
    "Release",
    "discrete_laplace",
    "dp_count",
    "dp_histogram",
    "dp_mean",
    "dp_sum",
    "gaussian",
    "laplace",
]
