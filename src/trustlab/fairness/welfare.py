"""Welfare of prediction vs capacity when screening the worst-off.

A planner serves the share ``capacity`` (``alpha``) of a population with the highest
predicted risk; the worst-off are the share ``beta`` with the worst outcome. Its
welfare is the share of the worst-off it reaches. Two levers raise it: a better
predictor (higher ``R^2``) or more capacity. Fischer-Abaigar, Kern and Perdomo (2025)
compare them in a Gaussian model (risk score and outcome bivariate normal with
correlation ``sqrt(R^2)``) through the prediction-access ratio (PAR: welfare gained per
unit of capacity over welfare gained per unit of ``R^2``), and with data-driven tools
on a fitted model's scores and outcomes.

Model functions: :func:`screening_value`, :func:`prediction_access_ratio`,
:func:`capacity_equivalent`. Data-driven: :func:`targeting_reach` (overall and per
group, with intervals; what the audit's Targeting view calls) and
:func:`compare_prediction_capacity` (the capacity increase that matches a prediction
improvement, with bootstrap intervals).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._stats import wilson
from trustlab._validation import make_generator
from trustlab.errors import DataError
from trustlab.fairness import _welfare_empirical as _emp
from trustlab.fairness import _welfare_model as _model
from trustlab.fairness._inputs import group_codes
from trustlab.fairness._welfare_empirical import residual_scaled_scores

__all__ = [
    "CapacityComparison",
    "TargetingReach",
    "capacity_equivalent",
    "compare_prediction_capacity",
    "prediction_access_ratio",
    "residual_scaled_scores",
    "screening_value",
    "targeting_reach",
]

_CAPACITY = Interval(numbers.Real, 0, 1, closed="right")
_OPEN01 = Interval(numbers.Real, 0, 1, closed="neither")
_R2 = Interval(numbers.Real, 0, 1, closed="both")


@validate_params({"capacity": [_CAPACITY], "r2": [_R2], "worst_off_fraction": [_OPEN01]})
def screening_value(capacity: float, r2: float, worst_off_fraction: float) -> float:
    """Share of the worst-off reached in the Gaussian screening model.

    ``V(alpha, R^2) = Phi2(Phi^-1(alpha), Phi^-1(beta); sqrt(R^2)) / beta``: the
    probability that a worst-off person (outcome in the worst ``beta`` share) has a
    predicted risk in the top ``alpha`` share, when prediction and outcome are
    bivariate normal with squared correlation ``R^2``.

    Parameters
    ----------
    capacity : float in (0, 1]
        Share of the population served (``alpha``).
    r2 : float in [0, 1]
        Predictive power of the risk score (squared correlation with the outcome).
    worst_off_fraction : float in (0, 1)
        Share of the population counted as worst-off (``beta``).

    Returns
    -------
    float
        The reach in [0, 1]: ``alpha`` at ``R^2 = 0``, ``min(alpha, beta) / beta`` at 1.

    References
    ----------
    U. Fischer-Abaigar, C. Kern, J. C. Perdomo, "The Value of Prediction in Identifying
    the Worst-Off", ICML 2025 (arXiv 2501.19334).

    Examples
    --------
    >>> round(screening_value(0.1, 0.0, 0.1), 6), round(screening_value(0.1, 0.2, 0.1), 3)
    (0.1, 0.293)
    """
    return _model.value(float(capacity), float(r2), float(worst_off_fraction))


@validate_params(
    {"capacity": [_OPEN01], "r2": [_OPEN01], "worst_off_fraction": [_OPEN01], "delta": [None, _OPEN01]}
)
def prediction_access_ratio(
    capacity: float, r2: float, worst_off_fraction: float, *, delta: float | None = None
) -> float:
    """Prediction-access ratio: marginal welfare of capacity over that of prediction.

    ``PAR = (dV/dalpha) / (dV/dR^2)`` in the Gaussian model, with
    ``dV/dalpha = Phi((b - rho a) / sqrt(1 - rho^2)) / beta`` and
    ``dV/dR^2 = phi2(a, b; rho) / (2 rho beta)`` (``a = Phi^-1(alpha)``,
    ``b = Phi^-1(beta)``, ``rho = sqrt(R^2)``). ``PAR > 1``: one point of capacity buys
    more welfare than one point of ``R^2``; multiply by the cost of a point of ``R^2``
    over that of a point of capacity to compare per unit of money.

    Parameters
    ----------
    capacity : float in (0, 1)
        Share served (``alpha``).
    r2 : float in (0, 1)
        Current predictive power.
    worst_off_fraction : float in (0, 1)
        Share counted as worst-off (``beta``).
    delta : float in (0, 1), optional
        The paper's Eq. 3 with finite steps ``Delta_alpha = Delta_R2 = delta`` (its
        Figure 2 uses 0.01, Figure 3 0.1): ``(V(alpha + delta) - V(alpha)) /
        (V(R^2 + delta) - V(R^2))``, with ``alpha + delta`` and ``R^2 + delta`` capped at 1.
        ``None``: the local ratio above (its limit as ``delta -> 0``).

    Returns
    -------
    float
        The ratio (``inf`` where improving prediction no longer helps).

    References
    ----------
    U. Fischer-Abaigar, C. Kern, J. C. Perdomo, "The Value of Prediction in Identifying
    the Worst-Off", ICML 2025; J. C. Perdomo, "The Relative Value of Prediction in
    Algorithmic Decision Making", ICML 2024 (the ratio).

    Examples
    --------
    >>> [round(prediction_access_ratio(0.1, r2, 0.1), 2) for r2 in (0.001, 0.2, 0.999)]
    [0.21, 3.35, 0.44]
    >>> round(prediction_access_ratio(0.1, 0.2, 0.1, delta=1e-6), 2)
    3.35
    """
    alpha, rr, beta = float(capacity), float(r2), float(worst_off_fraction)
    if delta is None:
        return _model.par(alpha, rr, beta)
    d = float(delta)
    gain_access = _model.value(min(1.0, alpha + d), rr, beta) - _model.value(alpha, rr, beta)
    gain_prediction = _model.value(alpha, min(1.0, rr + d), beta) - _model.value(alpha, rr, beta)
    return math.inf if gain_prediction <= 0 else gain_access / gain_prediction


@validate_params(
    {"capacity": [_OPEN01], "r2": [_R2], "worst_off_fraction": [_OPEN01], "delta_r2": [_CAPACITY]}
)
def capacity_equivalent(capacity: float, r2: float, worst_off_fraction: float, delta_r2: float) -> float:
    """Capacity increase worth the same welfare as a prediction improvement (Gaussian model).

    Solves ``V(alpha + d, R^2) = V(alpha, R^2 + delta_r2)`` for ``d`` (``R^2 + delta_r2``
    capped at 1; ``d`` capped at ``1 - alpha``, where everyone is served).

    Parameters
    ----------
    capacity : float in (0, 1)
        Current share served.
    r2 : float in [0, 1]
        Current predictive power.
    worst_off_fraction : float in (0, 1)
        Share counted as worst-off.
    delta_r2 : float in (0, 1]
        The prediction improvement.

    Returns
    -------
    float
        The matching capacity increase ``d`` (0 when the improvement gains nothing).

    References
    ----------
    U. Fischer-Abaigar, C. Kern, J. C. Perdomo, "The Value of Prediction in Identifying
    the Worst-Off", ICML 2025.

    Examples
    --------
    >>> round(capacity_equivalent(0.1, 0.2, 0.1, 0.05), 4)
    0.015
    """
    return _model.capacity_equivalent(float(capacity), float(r2), float(worst_off_fraction), float(delta_r2))


@dataclass(frozen=True)
class CapacityComparison:
    """Improving prediction vs expanding capacity, estimated from scores and outcomes.

    Attributes
    ----------
    capacity : float
        Share served.
    worst_off_fraction : float
        Share of rows flagged worst-off (``beta``).
    reach : float
        Share of the worst-off served at ``capacity``.
    r2_equivalent : float
        ``R^2`` of the Gaussian model that reproduces ``reach`` at ``capacity``.
    prediction_access_ratio : float
        The model's PAR at ``(capacity, r2_equivalent, beta)`` (NaN at ``R^2`` 0 or 1).
    reach_gain : float
        Reach gained by the prediction improvement (model-based for ``delta_r2``, or
        measured with ``improved_scores``).
    capacity_increase : float
        Capacity increase that gains the same reach on the empirical reach curve.
    intervals : pandas.DataFrame
        Bootstrap percentile intervals (columns ``low``, ``high``) for ``reach``,
        ``r2_equivalent``, ``prediction_access_ratio``, ``reach_gain`` and
        ``capacity_increase``.
    method : str
        ``"model"`` (gain from ``delta_r2`` in the Gaussian model), ``"residual_scaling"``
        (the paper's construction: measured with the residuals scaled by
        :func:`residual_scaled_scores`) or ``"improved_scores"``.
    delta_r2 : float or None
        The prediction improvement for ``"model"`` and ``"residual_scaling"``.
    confidence : float
        Level of the intervals.

    See Also
    --------
    compare_prediction_capacity : builds it.
    """

    capacity: float
    worst_off_fraction: float
    reach: float
    r2_equivalent: float
    prediction_access_ratio: float
    reach_gain: float
    capacity_increase: float
    intervals: pd.DataFrame
    method: str
    delta_r2: float | None
    confidence: float


_FIELDS = ("reach", "r2_equivalent", "prediction_access_ratio", "reach_gain", "capacity_increase")


@validate_params(
    {
        "capacity": [_CAPACITY],
        "delta_r2": [_CAPACITY],
        "improvement": [Options({"model", "residual_scaling"})],
        "worst_off_fraction": [_OPEN01, None],
        "n_bootstrap": [Interval(numbers.Integral, 0, None, closed="left")],
        "confidence": [_OPEN01],
        "random_state": ["random_state"],
    }
)
def compare_prediction_capacity(
    scores: Any,
    worst_off: Any,
    *,
    capacity: float,
    delta_r2: float = 0.05,
    improved_scores: Any = None,
    improvement: str = "model",
    worst_off_fraction: float | None = None,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    random_state: Any = None,
) -> CapacityComparison:
    """Estimate the welfare of a prediction improvement and the capacity that matches it.

    The data-driven tool: from a fitted model's risk scores and outcomes, (1) the reach
    at ``capacity``; (2) the Gaussian model's ``R^2`` that reproduces it (a latent,
    probit-style calibration for a binary outcome) and the PAR there; (3) the reach a
    better predictor would add: measured with ``improved_scores`` (e.g. a model with more
    features), else the model's gain from ``R^2 + delta_r2``; (4) the capacity increase
    that adds the same reach on the *empirical* reach curve of the current scores.
    Intervals: percentile bootstrap over rows (``random_state`` drives only the
    resampling).

    Parameters
    ----------
    scores : array-like of shape (n,)
        Predicted risk (higher = more at risk).
    worst_off : array-like of shape (n,)
        0/1 flags (1 = worst-off), or a continuous outcome (higher = worse) with
        ``worst_off_fraction``.
    capacity : float in (0, 1]
        Share served.
    delta_r2 : float in (0, 1], default=0.05
        Prediction improvement to price (ignored with ``improved_scores``).
    improved_scores : array-like of shape (n,), optional
        Scores of the improved predictor on the same rows.
    improvement : {"model", "residual_scaling"}, default="model"
        How ``delta_r2`` is priced without ``improved_scores``: ``"model"``, the Gaussian
        model's gain at the equivalent ``R^2``; ``"residual_scaling"``, the paper's
        empirical construction (its Section 4): the improved scores are
        ``scores + delta (worst_off - scores)`` with ``R^2`` higher by exactly
        ``delta_r2`` (:func:`residual_scaled_scores`), and the gain is measured on them.
        It needs ``scores`` to be predictions of ``worst_off`` on its scale.
    worst_off_fraction : float in (0, 1), optional
        For a continuous ``worst_off``: the share with the highest values counted.
    n_bootstrap : int, default=200
        Bootstrap resamples (0: no intervals, NaN).
    confidence : float in (0, 1), default=0.95
        Level of the intervals.
    random_state : None, int or numpy Generator
        Seeds the bootstrap.

    Returns
    -------
    CapacityComparison
        Point estimates and intervals.

    Raises
    ------
    DataError
        NaN or infinite scores, mismatched lengths, no one (or everyone) worst-off.
    ParameterError
        ``capacity`` outside (0, 1], ``delta_r2`` outside (0, 1].

    References
    ----------
    U. Fischer-Abaigar, C. Kern, J. C. Perdomo, "The Value of Prediction in Identifying
    the Worst-Off", ICML 2025.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(2, 20000))
    >>> y = z[0]; s = 0.5 * z[0] + np.sqrt(0.75) * z[1]  # R^2 = 0.25
    >>> c = compare_prediction_capacity(s, y, capacity=0.1, worst_off_fraction=0.1, n_bootstrap=0)
    >>> 0.2 < c.r2_equivalent < 0.3, 0 < c.capacity_increase < 0.05
    (True, True)
    """
    s = _emp.check_scores(scores)
    flags = _emp.worst_off_indicator(worst_off, s.size, worst_off_fraction)
    improved = None
    if improved_scores is not None:
        improved = _emp.check_scores(improved_scores, "improved_scores")
        if improved.size != s.size:
            raise DataError(
                f"improved_scores has {improved.size} rows but scores has {s.size}; score the same rows.",
                argument="improved_scores",
            )
    alpha, dr2 = float(capacity), float(delta_r2)
    if improved is None and improvement == "residual_scaling":
        improved = residual_scaled_scores(s, worst_off, dr2)
    ranked = _emp.SortedScores(s)
    ranked_improved = None if improved is None else _emp.SortedScores(improved)
    point = _emp.comparison_point(ranked, flags, alpha, dr2, ranked_improved)
    rng = make_generator(random_state)
    boot = []
    n = s.size
    for _ in range(int(n_bootstrap)):
        counts = np.bincount(rng.integers(0, n, n), minlength=n)
        worst = int(counts @ flags)
        if worst in (0, n):
            continue
        boot.append(_emp.comparison_point(ranked, flags, alpha, dr2, ranked_improved, counts)[1:])
    lo_q, hi_q = (1 - confidence) / 2, (1 + confidence) / 2
    arr = np.array(boot) if boot else np.full((1, 5), np.nan)
    with np.errstate(all="ignore"):
        low = [float(np.nanquantile(c, lo_q)) if np.isfinite(c).any() else math.nan for c in arr.T]
        high = [float(np.nanquantile(c, hi_q)) if np.isfinite(c).any() else math.nan for c in arr.T]
    intervals = pd.DataFrame({"low": low, "high": high}, index=list(_FIELDS))
    return CapacityComparison(
        capacity=alpha,
        worst_off_fraction=point[0],
        reach=point[1],
        r2_equivalent=point[2],
        prediction_access_ratio=point[3],
        reach_gain=point[4],
        capacity_increase=point[5],
        intervals=intervals,
        method="improved_scores" if improved_scores is not None else improvement,
        delta_r2=None if improved_scores is not None else dr2,
        confidence=float(confidence),
    )


@dataclass(frozen=True)
class TargetingReach:
    """Who is reached when the top ``capacity`` share of predicted risk is served.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per group (first row ``"all"``): ``n``, ``n_worst_off``,
        ``served_share`` (share of the group served), ``reach`` (share of the group's
        worst-off served), ``reach_low``, ``reach_high`` (Wilson score interval over the
        group's worst-off) and ``reach_gap`` (group reach minus overall reach).
    capacity : float
        Share served.
    worst_off_fraction : float
        Share of rows flagged worst-off.
    confidence : float
        Level of the intervals.
    comparison : CapacityComparison or None
        Prediction improvement vs capacity (overall), when ``delta_r2`` was given.

    See Also
    --------
    targeting_reach : builds it.
    """

    table: pd.DataFrame
    capacity: float
    worst_off_fraction: float
    confidence: float
    comparison: CapacityComparison | None


@validate_params(
    {
        "capacity": [_CAPACITY],
        "worst_off_fraction": [_OPEN01, None],
        "confidence": [_OPEN01],
        "delta_r2": [_CAPACITY, None],
        "n_bootstrap": [Interval(numbers.Integral, 0, None, closed="left")],
        "empty_groups": [Options({"raise", "drop"})],
        "random_state": ["random_state"],
    }
)
def targeting_reach(
    scores: Any,
    worst_off: Any,
    *,
    capacity: float,
    sensitive_features: Any = None,
    worst_off_fraction: float | None = None,
    confidence: float = 0.95,
    delta_r2: float | None = 0.05,
    n_bootstrap: int = 200,
    empty_groups: str = "raise",
    random_state: Any = None,
) -> TargetingReach:
    """Share of the truly worst-off reached when the top ``capacity`` of risk are served.

    The serving rule is global (one threshold for everyone); rows tied at the threshold
    share the remaining places (the expected reach under random tie-breaking). Per
    group: the share of that group's worst-off who are served, with a Wilson interval
    over the group's worst-off. With ``delta_r2``, also the capacity increase that would
    match that prediction improvement (:func:`compare_prediction_capacity`).

    Parameters
    ----------
    scores : array-like of shape (n,)
        Predicted risk (higher = more at risk); no NaN.
    worst_off : array-like of shape (n,)
        0/1 flags (1 = worst-off), or a continuous outcome (higher = worse) with
        ``worst_off_fraction``.
    capacity : float in (0, 1]
        Share served (``q``).
    sensitive_features : array-like of shape (n,), optional
        One group label per row.
    worst_off_fraction : float in (0, 1), optional
        For a continuous ``worst_off``: the share with the highest values counted.
    confidence : float in (0, 1), default=0.95
        Level of the intervals.
    delta_r2 : float in (0, 1] or None, default=0.05
        Prediction improvement to price in capacity (None: skip).
    n_bootstrap : int, default=200
        Bootstrap resamples for the comparison's intervals.
    empty_groups : {"raise", "drop"}, default="raise"
        What to do with a group that has no worst-off rows (its reach is undefined).
    random_state : None, int or numpy Generator
        Seeds the bootstrap.

    Returns
    -------
    TargetingReach
        The per-group table and the comparison.

    Raises
    ------
    DataError
        NaN scores, mismatched lengths, a group without worst-off rows (with
        ``empty_groups="raise"``), missing group labels.
    ParameterError
        ``capacity`` outside (0, 1].

    References
    ----------
    U. Fischer-Abaigar, C. Kern, J. C. Perdomo, "The Value of Prediction in Identifying
    the Worst-Off", ICML 2025.

    Examples
    --------
    >>> s = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.1])
    >>> y = np.array([1, 0, 1, 1, 0, 0])
    >>> r = targeting_reach(s, y, capacity=0.5, sensitive_features=list("aabbab"), delta_r2=None)
    >>> r.table["reach"].round(3).tolist()
    [0.667, 1.0, 0.5]
    """
    s = _emp.check_scores(scores)
    flags = _emp.worst_off_indicator(worst_off, s.size, worst_off_fraction)
    w = _emp.service_weights(s, float(capacity))
    rows = {"all": np.ones(s.size, dtype=bool)}
    if sensitive_features is not None:
        codes, labels = group_codes(sensitive_features, s.size)
        for c, lab in enumerate(labels):
            mask = codes == c
            if flags[mask].sum() == 0:
                if empty_groups == "raise":
                    raise DataError(
                        f"sensitive_features: group {lab!r} has no worst-off rows ({int(mask.sum())} rows), "
                        "so its reach is undefined; merge it with another group or pass empty_groups='drop'.",
                        argument="sensitive_features",
                    )
                continue
            rows[lab] = mask
    records = []
    overall = float(w @ flags / flags.sum())
    for lab, mask in rows.items():
        nw = float(flags[mask].sum())
        hit = float(w[mask] @ flags[mask])
        lo, hi = wilson(hit, nw, float(confidence))
        records.append(
            {
                "group": lab,
                "n": int(mask.sum()),
                "n_worst_off": int(nw),
                "served_share": float(w[mask].mean()),
                "reach": hit / nw,
                "reach_low": lo,
                "reach_high": hi,
                "reach_gap": hit / nw - overall,
            }
        )
    table = pd.DataFrame.from_records(records).set_index("group")
    comparison = None
    if delta_r2 is not None:
        comparison = compare_prediction_capacity(
            s,
            flags,
            capacity=capacity,
            delta_r2=delta_r2,
            n_bootstrap=n_bootstrap,
            confidence=confidence,
            random_state=random_state,
        )
    return TargetingReach(table, float(capacity), float(flags.mean()), float(confidence), comparison)
