"""Fairness: group metrics from confusion counts, post-processing, multicalibration, ..."""

from trustlab.fairness.coresets import (
    Coreset,
    KMedianResult,
    WeakStrongOracle,
    fair_assignment_cost,
    fair_kmedian,
    weak_strong_coreset,
)
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
from trustlab.fairness.multicalibration import (
    MultiaccuracyBoost,
    MulticalibrationBoost,
    ProxyBound,
    multiaccuracy_violation,
    multicalibration_violation,
    proxy_error_rates,
    proxy_violation_bound,
)
from trustlab.fairness.postprocessing import HardtPostProcessor

__all__ = [
    "Coreset",
    "DiversityResult",
    "EnsembleBenefits",
    "HardtPostProcessor",
    "KMedianResult",
    "MultiaccuracyBoost",
    "MulticalibrationBoost",
    "ProxyBound",
    "WeakStrongOracle",
    "bootstrap_counts",
    "confusion_by_group",
    "ensemble_benefits",
    "ensemble_size_curve",
    "fair_assignment_cost",
    "fair_kmedian",
    "fairness_differences",
    "fairness_gaps",
    "group_rates",
    "multiaccuracy_violation",
    "multicalibration_violation",
    "predictive_diversity",
    "proxy_error_rates",
    "proxy_violation_bound",
    "rates_from_counts",
    "weak_strong_coreset",
]
