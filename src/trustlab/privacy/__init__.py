"""Differential privacy: releases, accounting, safe samplers, DP statistics, quantiles, boxplots."""

from trustlab.privacy.accounting import Accountant, LedgerEntry
from trustlab.privacy.audit import AuditResult, audit_epsilon, clopper_pearson
from trustlab.privacy.boxplot import (
    BoxplotStats,
    boxplot_distance,
    dp_boxplot_stats,
    grouped_dp_boxplot,
)
from trustlab.privacy.boxplot_plot import plot_dp_boxplot
from trustlab.privacy.quantiles import dp_quantile, dp_quantiles, unbounded_quantile
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import discrete_laplace, exponential_select, gaussian, laplace
from trustlab.privacy.statistics import dp_count, dp_histogram, dp_mean, dp_sum

__all__ = [
    "Accountant",
    "AuditResult",
    "BoxplotStats",
    "LedgerEntry",
    "Release",
    "audit_epsilon",
    "boxplot_distance",
    "clopper_pearson",
    "discrete_laplace",
    "dp_boxplot_stats",
    "dp_count",
    "dp_histogram",
    "dp_mean",
    "dp_quantile",
    "dp_quantiles",
    "dp_sum",
    "exponential_select",
    "gaussian",
    "grouped_dp_boxplot",
    "laplace",
    "plot_dp_boxplot",
    "unbounded_quantile",
]
