"""Uncertainty: calibration metrics and bootstrap intervals."""

from trustlab.uncertainty.bootstrap import GAP_METHOD, gap_interval, symmetric_interval
from trustlab.uncertainty.calibration import calibration_table, expected_calibration_error

__all__ = [
    "GAP_METHOD",
    "calibration_table",
    "expected_calibration_error",
    "gap_interval",
    "symmetric_interval",
]
