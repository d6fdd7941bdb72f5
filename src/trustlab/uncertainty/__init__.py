"""Uncertainty: calibration, conformal prediction and risk estimation."""

from trustlab.uncertainty.calibration import calibration_table, expected_calibration_error

__all__ = ["calibration_table", "expected_calibration_error"]
