"""Fairness: group metrics from confusion counts, post-processing, multicalibration, ..."""

from trustlab.fairness.ensembles import (
    DiversityResult,
    EnsembleBenefits,
    ensemble_benefits,
    ensemble_size_curve,
    fairness_gaps,
    group_rates,
    predictive_diversity,
)
from trustlab.fairness.metrics import (
    bootstrap_counts,
    confusion_by_group,
    fairness_differences,
    rates_from_counts,
)
from trustlab.fairness.postprocessing import HardtPostProcessor

__all__ = [
    "DiversityResult",
    "EnsembleBenefits",
    "HardtPostProcessor",
    "bootstrap_counts",
    "confusion_by_group",
    "ensemble_benefits",
    "ensemble_size_curve",
    "fairness_differences",
    "fairness_gaps",
    "group_rates",
    "predictive_diversity",
    "rates_from_counts",
]
