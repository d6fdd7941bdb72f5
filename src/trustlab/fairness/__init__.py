"""Fairness: group metrics from confusion counts, post-processing, multicalibration, ..."""

from trustlab.fairness.metrics import (
    bootstrap_counts,
    confusion_by_group,
    fairness_differences,
    rates_from_counts,
)

__all__ = ["bootstrap_counts", "confusion_by_group", "fairness_differences", "rates_from_counts"]
