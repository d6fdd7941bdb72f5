"""Calibration metrics: the reliability table and the expected calibration error (ECE)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError

__all__ = ["calibration_table", "expected_calibration_error"]


def _check(y_true: Any, y_prob: Any) -> tuple[np.ndarray, np.ndarray]:
    y = check_numeric_array(y_true, "y_true", ndim=1)
    p = check_numeric_array(y_prob, "y_prob", ndim=1)
    if y.shape != p.shape:
        raise DataError(
            f"y_true and y_prob must have the same length, got {y.size} and {p.size}.",
            argument="y_prob",
        )
    if not np.isin(y, (0, 1)).all():
        raise DataError("y_true must be 0/1 labels.", argument="y_true")
    if (p < 0).any() or (p > 1).any():
        raise DataError("y_prob must be probabilities in [0, 1].", argument="y_prob")
    return y, p


_N_BINS = {"n_bins": [Interval(numbers.Integral, 1, None, closed="left")]}


@validate_params(_N_BINS)
def calibration_table(y_true: Any, y_prob: Any, *, n_bins: int = 10) -> pd.DataFrame:
    """Reliability table on ``n_bins`` equal-width bins of the predicted probability.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        0/1 labels.
    y_prob : array-like of shape (n_samples,)
        Predicted probabilities of label 1, in [0, 1].
    n_bins : int, default=10
        Number of equal-width bins on [0, 1].

    Returns
    -------
    pandas.DataFrame
        One row per bin: ``lower``, ``upper``, ``count``, ``mean_predicted``
        and ``fraction_positive`` (NaN in empty bins).

    Examples
    --------
    >>> calibration_table([0, 1, 1, 0], [0.1, 0.9, 0.8, 0.3], n_bins=2)["count"].tolist()
    [2, 2]
    """
    y, p = _check(y_true, y_prob)
    n_bins = int(n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    idx = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, n_bins - 1)
    count = np.bincount(idx, minlength=n_bins)
    sum_p = np.bincount(idx, weights=p, minlength=n_bins)
    sum_y = np.bincount(idx, weights=y, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return pd.DataFrame(
            {
                "lower": edges[:-1],
                "upper": edges[1:],
                "count": count,
                "mean_predicted": np.where(count > 0, sum_p / count, np.nan),
                "fraction_positive": np.where(count > 0, sum_y / count, np.nan),
            }
        )


@validate_params(_N_BINS)
def expected_calibration_error(y_true: Any, y_prob: Any, *, n_bins: int = 10) -> float:
    """Expected calibration error: the count-weighted mean |fraction positive - mean predicted|.

    Parameters
    ----------
    y_true, y_prob, n_bins
        As in :func:`calibration_table` (the ECE is read off its bins).

    Returns
    -------
    float
        The ECE, in [0, 1].

    References
    ----------
    Naeini, Cooper, Hauskrecht. "Obtaining Well Calibrated Probabilities Using
    Bayesian Binning". AAAI 2015.

    Examples
    --------
    >>> expected_calibration_error([0, 1], [0.0, 1.0])
    0.0
    """
    table = calibration_table(y_true, y_prob, n_bins=n_bins)
    ok = table["count"] > 0
    gaps = (table["fraction_positive"] - table["mean_predicted"]).abs()[ok]
    weights = table["count"][ok] / table["count"].sum()
    return float((gaps * weights).sum())
