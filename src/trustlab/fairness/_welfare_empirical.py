"""Data-driven targeting: reach curves, Wilson intervals, the Gaussian calibration (private)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.fairness import _welfare_model as _model
from trustlab.fairness._inputs import scores_1d


def check_scores(scores: Any, name: str = "scores") -> np.ndarray:
    """Finite 1-D risk scores (higher = more at risk)."""
    arr = scores_1d(scores, name)
    if arr.size < 2:
        raise DataError(f"{name} must hold at least 2 rows, got {arr.size}.", argument=name)
    return arr


def worst_off_indicator(outcome: Any, n: int, worst_off_fraction: float | None) -> np.ndarray:
    """0/1 worst-off flags: a 0/1 outcome as given, or the top ``worst_off_fraction`` of a continuous one."""
    y = check_numeric_array(outcome, "worst_off", ndim=1)
    if y.size != n:
        raise DataError(
            f"worst_off has {y.size} entries but scores has {n}; pass one per row.", argument="worst_off"
        )
    binary = bool(np.isin(y, (0.0, 1.0)).all())
    if worst_off_fraction is None:
        if not binary:
            raise DataError(
                "worst_off is continuous (not only 0/1): pass worst_off_fraction, the share with the "
                "highest (worst) outcome counted as worst-off (e.g. 0.1), or pass 0/1 flags.",
                argument="worst_off",
            )
        flags = y.astype(np.int64)
    else:
        # the ceil(beta n) highest outcomes; ties at the cut all count (documented)
        k = max(1, math.ceil(worst_off_fraction * n - 1e-9))
        cut = np.partition(y, n - k)[n - k]
        flags = (y >= cut).astype(np.int64)
    if flags.sum() == 0:
        raise DataError("worst_off flags no one as worst-off; reach is undefined.", argument="worst_off")
    if flags.sum() == n:
        raise DataError("worst_off flags everyone as worst-off; targeting is moot.", argument="worst_off")
    return flags


def service_weights(scores: np.ndarray, capacity: float) -> np.ndarray:
    """Serve the ``capacity * n`` highest scores; rows tied at the cut share the remaining places."""
    n = scores.size
    slots = capacity * n
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    w = np.zeros(n)
    if slots >= n:
        return np.ones(n)
    k = math.floor(slots)
    cut = s[k] if k < n else s[-1]
    above = scores > cut
    tied = scores == cut
    left = slots - above.sum()
    w[above] = 1.0
    w[tied] = left / tied.sum()
    return w


class SortedScores:
    """Scores sorted once (descending) so that bootstrap resamples only reweight rows."""

    def __init__(self, scores: np.ndarray) -> None:
        self.order = np.argsort(-scores, kind="stable")
        s = scores[self.order]
        self.block_end = np.r_[s[1:] != s[:-1], True]  # last row of each tie block

    def curve(self, flags: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(capacity, reach)`` knots of the piecewise-linear reach curve (rows weighted)."""
        w = np.ones(flags.size) if weights is None else weights[self.order].astype(float)
        f = flags[self.order] * w
        cum_n = np.cumsum(w)[self.block_end]
        cum_f = np.cumsum(f)[self.block_end]
        return np.r_[0.0, cum_n / cum_n[-1]], np.r_[0.0, cum_f / cum_f[-1]]


def reach_curve(scores: np.ndarray, flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(capacity, reach)`` knots of the piecewise-linear empirical curve (ties merged)."""
    return SortedScores(scores).curve(flags)


def capacity_for_reach(curve: tuple[np.ndarray, np.ndarray], target: float) -> float:
    """Smallest capacity whose empirical reach is at least ``target`` (linear between knots)."""
    cap, val = curve
    target = min(target, 1.0)
    i = int(np.searchsorted(val, target - 1e-12, side="left"))
    if i == 0:
        return 0.0
    if i >= len(val):
        return 1.0
    v0, v1 = val[i - 1], val[i]
    return float(cap[i - 1] + (cap[i] - cap[i - 1]) * (target - v0) / (v1 - v0))


def comparison_point(
    sorted_scores: SortedScores,
    flags: np.ndarray,
    capacity: float,
    delta_r2: float,
    improved: SortedScores | None,
    weights: np.ndarray | None = None,
) -> tuple[float, float, float, float, float, float]:
    """``(beta, reach, r2_equivalent, par, reach_gain, capacity_increase)`` on one (re)sample."""
    beta = float(np.average(flags, weights=weights))
    curve = sorted_scores.curve(flags, weights)
    v = float(np.interp(capacity, *curve))
    r2 = _model.r2_from_value(capacity, v, beta)
    par = _model.par(capacity, r2, beta) if 0 < r2 < 1 and capacity < 1 else math.nan
    if improved is not None:
        gain = float(np.interp(capacity, *improved.curve(flags, weights))) - v
    else:
        gain = _model.value(capacity, min(1.0, r2 + delta_r2), beta) - _model.value(capacity, r2, beta)
    inc = max(0.0, capacity_for_reach(curve, v + gain) - capacity) if gain > 0 else 0.0
    return beta, v, r2, par, gain, min(inc, 1.0 - capacity)


@validate_params({"delta_r2": [Interval(numbers.Real, 0, 1, closed="right")]})
def residual_scaled_scores(predictions: Any, outcome: Any, delta_r2: float) -> np.ndarray:
    """A "similar but slightly better" predictor: the residuals scaled so ``R^2`` rises by ``delta_r2``.

    The paper's construction (Section 4 and Appendix B.3): ``Y_+ = Y_hat + delta (Y - Y_hat)``
    with ``delta = 1 - sqrt(1 - delta_r2 * SST / SSR)``, so the new residuals are
    ``(1 - delta)`` times the old ones (same shape, smaller spread) and
    ``R^2_+ = R^2 + delta_r2`` exactly (``R^2 = 1 - SSR / SST`` of ``predictions`` as
    predictions of ``outcome``).

    Parameters
    ----------
    predictions : array-like of shape (n,)
        The model's predictions of ``outcome``, on its scale (e.g. predicted months
        unemployed, or probabilities for a 0/1 outcome); higher = worse, as ``outcome``.
    outcome : array-like of shape (n,)
        The welfare outcome (higher = worse) or 0/1 worst-off flags.
    delta_r2 : float in (0, 1]
        The rise of ``R^2``; at most ``1 - R^2`` (``SSR / SST``).

    Returns
    -------
    numpy.ndarray of shape (n,)
        The improved predictions.

    Raises
    ------
    DataError
        Mismatched lengths, a constant outcome, perfect predictions, or ``delta_r2``
        above ``1 - R^2``.

    References
    ----------
    U. Fischer-Abaigar, C. Kern, J. C. Perdomo, "The Value of Prediction in Identifying
    the Worst-Off", ICML 2025, Appendix B.3.

    Examples
    --------
    >>> y = np.array([1.0, 2.0, 3.0, 4.0]); p = np.array([1.5, 1.5, 3.5, 3.5])
    >>> better = residual_scaled_scores(p, y, 0.1)
    >>> r2 = lambda q: 1 - ((y - q) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    >>> round(float(r2(better) - r2(p)), 12)
    0.1
    """
    p = check_scores(predictions, "scores")
    y = check_numeric_array(outcome, "worst_off", ndim=1)
    if y.size != p.size:
        raise DataError(
            f"worst_off has {y.size} entries but scores has {p.size}; pass one per row.", argument="worst_off"
        )
    sst = float(((y - y.mean()) ** 2).sum())
    ssr = float(((y - p) ** 2).sum())
    if sst <= 0 or ssr <= 0:
        raise DataError(
            "residual scaling needs a varying outcome and imperfect predictions (R^2 < 1).",
            argument="worst_off",
        )
    room = 1.0 - float(delta_r2) * sst / ssr
    if room < 0:
        raise DataError(
            f"delta_r2={delta_r2:g} exceeds 1 - R^2 = {ssr / sst:.4g} of these predictions; pick a "
            "smaller improvement.",
            argument="delta_r2",
        )
    delta = 1.0 - math.sqrt(room)
    return np.asarray(p + delta * (y - p))
