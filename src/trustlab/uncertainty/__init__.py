"""Uncertainty: conformal prediction, calibration metrics, bootstrap intervals, ridge risk, prompt tuning."""

from trustlab.uncertainty.bootstrap import GAP_METHOD, gap_interval, symmetric_interval
from trustlab.uncertainty.calibration import calibration_table, expected_calibration_error
from trustlab.uncertainty.conformal import (
    KandinskyConformal,
    conformal_coverage,
    group_coverage,
    group_indicators,
    weighted_coverage_deviation,
)
from trustlab.uncertainty.prompt_tuning import (
    DualEncoder,
    PromptTuner,
    TopLabelCalibration,
    text_feature_divergence,
    top_label_calibration,
    zero_shot_proba,
)
from trustlab.uncertainty.ridge_risk import (
    CorrGCVRidgeCV,
    STransform,
    corr_gcv,
    corr_gcv_forecast,
    exponential_correlation,
    gcv,
    s_transform,
)

__all__ = [
    "GAP_METHOD",
    "CorrGCVRidgeCV",
    "DualEncoder",
    "KandinskyConformal",
    "PromptTuner",
    "STransform",
    "TopLabelCalibration",
    "calibration_table",
    "conformal_coverage",
    "corr_gcv",
    "corr_gcv_forecast",
    "expected_calibration_error",
    "exponential_correlation",
    "gap_interval",
    "gcv",
    "group_coverage",
    "group_indicators",
    "s_transform",
    "symmetric_interval",
    "text_feature_divergence",
    "top_label_calibration",
    "weighted_coverage_deviation",
    "zero_shot_proba",
]
