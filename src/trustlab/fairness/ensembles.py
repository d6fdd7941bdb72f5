"""Disparate benefits of ensembles: per-group gains over the members and per-group diversity.

An ensemble is usually more accurate than its members, but the gain need not fall
evenly on the protected groups: Schweighofer et al. (ICML 2025) found that deep
ensembles raise selection and true-positive rates more for some groups than for
others (the *disparate benefits effect*), widening statistical-parity and
equal-opportunity gaps, and that per-group differences in the members' predictive
diversity explain it. This module measures the effect on given member
probabilities; :class:`~trustlab.fairness.HardtPostProcessor` mitigates it.

Hard predictions are the argmax of the (ensemble or member) probability, i.e.
``p > 0.5`` (a tie goes to class 0, as ``numpy.argmax`` breaks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import validate_params
from trustlab.errors import DataError, ParameterError
from trustlab.fairness._inputs import binary_labels, group_codes, member_probabilities, member_weights
from trustlab.fairness.metrics import rates_from_counts

__all__ = [
    "DiversityResult",
    "EnsembleBenefits",
    "ensemble_benefits",
    "ensemble_size_curve",
    "fairness_gaps",
    "group_rates",
    "predictive_diversity",
]

RATES = ("accuracy", "true_positive_rate", "false_positive_rate", "selection_rate")
GAPS = ("spd", "eod", "aod")
_LOG_FLOOR = 1e-12


def _counts(pred: np.ndarray, y: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Confusion counts ``[..., g, p, t]`` for predictions of shape (..., n)."""
    lead = pred.shape[:-1]
    flat = pred.reshape(-1, pred.shape[-1]).astype(np.int64)
    cell = codes * 4 + flat * 2 + y  # (R, n)
    offset = np.arange(flat.shape[0])[:, None] * (n_groups * 4)
    out = np.bincount((cell + offset).ravel(), minlength=flat.shape[0] * n_groups * 4)
    return out.reshape((*lead, n_groups, 2, 2)).astype(float)


def _privileged_index(labels: list[Any], privileged: Any) -> int:
    if privileged is None:
        return len(labels) - 1
    for i, lab in enumerate(labels):
        if lab == privileged or str(lab) == str(privileged):
            return i
    raise ParameterError(
        f"privileged={privileged!r} is not a group of sensitive_features ({labels}); pass one of them.",
        argument="privileged",
    )


def _gaps(
    rates: dict[str, np.ndarray], labels: list[Any], privileged: Any, absolute: bool
) -> dict[str, np.ndarray]:
    """SPD, EOD, AOD from rates of shape (..., n_groups)."""
    sr, tpr, fpr = rates["selection_rate"], rates["true_positive_rate"], rates["false_positive_rate"]
    if len(labels) == 2:
        p = _privileged_index(labels, privileged)
        o = 1 - p
        spd, eod, dfpr = sr[..., p] - sr[..., o], tpr[..., p] - tpr[..., o], fpr[..., p] - fpr[..., o]
    else:
        if not absolute and len(labels) > 2:
            raise ParameterError(
                f"signed gaps need exactly two groups (got {len(labels)}); pass absolute=True for the "
                "max-minus-min spread over groups.",
                argument="absolute",
            )

        def spread(v: np.ndarray) -> np.ndarray:
            return np.nanmax(v, axis=-1) - np.nanmin(v, axis=-1)

        spd, eod, dfpr = spread(sr), spread(tpr), spread(fpr)
    aod = 0.5 * np.abs(eod) + 0.5 * np.abs(dfpr)
    if absolute:
        spd, eod = np.abs(spd), np.abs(eod)
    return {"spd": spd, "eod": eod, "aod": aod}


def _prepare(
    y_true: Any, y_pred: Any, sensitive_features: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any]]:
    y = binary_labels(y_true, "y_true", both_classes=False)
    p = binary_labels(y_pred, "y_pred", n=y.size, both_classes=False)
    codes, labels = group_codes(sensitive_features, y.size)
    return y, p, codes, labels


def group_rates(y_true: Any, y_pred: Any, *, sensitive_features: Any) -> pd.DataFrame:
    """Accuracy, true/false-positive rate and selection rate of each group.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels, 0 or 1.
    sensitive_features : array-like of shape (n_samples,)
        The group of each row.

    Returns
    -------
    pandas.DataFrame
        One row per group (sorted), columns ``count``, ``accuracy``,
        ``true_positive_rate``, ``false_positive_rate``, ``selection_rate``
        (NaN where a denominator is empty).

    References
    ----------
    K. Schweighofer, A. Arnaiz-Rodriguez, S. Hochreiter, N. Oliver, "The Disparate
    Benefits of Deep Ensembles", ICML 2025.

    Examples
    --------
    >>> group_rates([1, 0, 1, 0], [1, 0, 0, 0], sensitive_features=["a", "a", "b", "b"])
       count  accuracy  true_positive_rate  false_positive_rate  selection_rate
    a    2.0       1.0                 1.0                  0.0             0.5
    b    2.0       0.5                 0.0                  0.0             0.0
    """
    y, p, codes, labels = _prepare(y_true, y_pred, sensitive_features)
    rates = rates_from_counts(_counts(p, y, codes, len(labels)))
    return pd.DataFrame({k: rates[k] for k in ("count", *RATES)}, index=pd.Index(labels))


@validate_params({"absolute": ["boolean"]})
def fairness_gaps(
    y_true: Any, y_pred: Any, *, sensitive_features: Any, privileged: Any = None, absolute: bool = False
) -> dict[str, float]:
    """Statistical-parity, equal-opportunity and average-odds differences.

    With two groups: ``spd = PR_priv - PR_other``, ``eod = TPR_priv - TPR_other``
    (signed, as in the paper's code; ``absolute=True`` for violations) and
    ``aod = (|TPR_priv - TPR_other| + |FPR_priv - FPR_other|) / 2``. With more groups
    each gap is the max-minus-min spread over groups (``absolute=True`` required).

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True and predicted labels, 0 or 1.
    sensitive_features : array-like of shape (n_samples,)
        The group of each row.
    privileged : object, optional
        The privileged group (default: the largest group label, e.g. ``1``).
    absolute : bool, default False
        Return ``|spd|`` and ``|eod|``.

    Returns
    -------
    dict of str to float
        ``"spd"``, ``"eod"`` and ``"aod"``.

    References
    ----------
    K. Schweighofer et al., "The Disparate Benefits of Deep Ensembles", ICML 2025;
    M. Hardt, E. Price, N. Srebro, "Equality of Opportunity in Supervised Learning",
    NeurIPS 2016.

    Examples
    --------
    >>> fairness_gaps([1, 0, 1, 0], [1, 0, 0, 0], sensitive_features=[1, 1, 0, 0])
    {'spd': 0.5, 'eod': 1.0, 'aod': 0.5}
    """
    y, p, codes, labels = _prepare(y_true, y_pred, sensitive_features)
    gaps = _gaps(rates_from_counts(_counts(p, y, codes, len(labels))), labels, privileged, bool(absolute))
    return {k: float(v) for k, v in gaps.items()}


@dataclass(frozen=True)
class EnsembleBenefits:
    """Per-group gains of an ensemble over its members.

    Attributes
    ----------
    per_group : pandas.DataFrame
        Rows indexed by ``(metric, group)`` for the metrics accuracy,
        true_positive_rate, false_positive_rate and selection_rate; columns
        ``member_mean``, ``member_std`` (over members), ``ensemble`` and
        ``delta = ensemble - member_mean``.
    gaps : pandas.DataFrame
        Rows ``spd``, ``eod``, ``aod`` (signed as :func:`fairness_gaps` with two groups,
        max-minus-min spreads with more), same columns.
    n_members : int
        Number of members.

    See Also
    --------
    ensemble_benefits : builds it.
    """

    per_group: pd.DataFrame
    gaps: pd.DataFrame
    n_members: int


def _ensemble_setup(
    member_probs: Any, y_true: Any, sensitive_features: Any, weights: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any], np.ndarray]:
    probs = member_probabilities(member_probs)
    y = binary_labels(y_true, "y_true", n=probs.shape[1], both_classes=False)
    codes, labels = group_codes(sensitive_features, y.size)
    w = member_weights(weights, probs.shape[0])
    return probs, y, codes, labels, w


def ensemble_benefits(
    member_probs: Any,
    y_true: Any,
    *,
    sensitive_features: Any,
    weights: Any = None,
    privileged: Any = None,
) -> EnsembleBenefits:
    """Per-group accuracy, TPR, FPR and selection rate of an ensemble versus its members.

    The ensemble predicts with the (weighted) mean of the members' probabilities;
    ``delta = F(ensemble) - mean_m F(member m)`` for each per-group rate and each
    fairness gap (the paper's "benefit delta"). A positive delta of ``spd``/``eod``
    with two groups means the ensemble widened the gap in favour of ``privileged``.

    Parameters
    ----------
    member_probs : array-like of shape (n_members, n_samples) or (n_members, n_samples, 2)
        Each member's probability of the positive class (or of both classes).
    y_true : array-like of shape (n_samples,)
        Labels, 0 or 1.
    sensitive_features : array-like of shape (n_samples,)
        The group of each row.
    weights : array-like of shape (n_members,), optional
        Ensemble weights in [0, 1] summing to 1 (default: uniform, the deep ensemble).
    privileged : object, optional
        The privileged group for the signed gaps (default: the largest label).

    Returns
    -------
    EnsembleBenefits

    References
    ----------
    K. Schweighofer, A. Arnaiz-Rodriguez, S. Hochreiter, N. Oliver, "The Disparate
    Benefits of Deep Ensembles", ICML 2025 (Section 4, Tables 1-2).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 400); a = rng.integers(0, 2, 400)
    >>> probs = 1 / (1 + np.exp(-(2 * y - 1 + rng.normal(0, 1.5, (5, 400)))))
    >>> b = ensemble_benefits(probs, y, sensitive_features=a)
    >>> list(b.gaps.index), list(b.per_group.columns)
    (['spd', 'eod', 'aod'], ['member_mean', 'member_std', 'ensemble', 'delta'])
    >>> bool(b.per_group.loc[("accuracy", 1), "delta"] > 0)
    True
    """
    probs, y, codes, labels, w = _ensemble_setup(member_probs, y_true, sensitive_features, weights)
    ens = w @ probs
    preds = np.vstack([probs > 0.5, (ens > 0.5)[None, :]])
    rates = rates_from_counts(_counts(preds, y, codes, len(labels)))  # (M + 1, G)
    gaps = _gaps(rates, labels, privileged, absolute=len(labels) > 2)

    def table(values: np.ndarray) -> dict[str, Any]:
        member = values[:-1]
        with np.errstate(invalid="ignore"):
            mean = np.nanmean(member, axis=0) if np.isfinite(member).any() else member[0]
            std = np.nanstd(member, axis=0) if np.isfinite(member).any() else member[0]
        return {"member_mean": mean, "member_std": std, "ensemble": values[-1], "delta": values[-1] - mean}

    rows = []
    for metric in RATES:
        t = table(rates[metric])
        for g, lab in enumerate(labels):
            rows.append(
                {"metric": metric, "group": lab, **{k: float(np.atleast_1d(v)[g]) for k, v in t.items()}}
            )
    per_group = pd.DataFrame(rows).set_index(["metric", "group"])
    gap_rows = {k: {c: float(v) for c, v in table(gaps[k]).items()} for k in GAPS}
    gap_frame = pd.DataFrame.from_dict(gap_rows, orient="index")[
        ["member_mean", "member_std", "ensemble", "delta"]
    ]
    return EnsembleBenefits(per_group=per_group, gaps=gap_frame, n_members=probs.shape[0])


def ensemble_size_curve(
    member_probs: Any, y_true: Any, *, sensitive_features: Any, privileged: Any = None
) -> pd.DataFrame:
    """Per-group rates and gaps of the ensemble of the first ``k`` members, ``k = 1..M``.

    Parameters
    ----------
    member_probs : array-like of shape (n_members, n_samples) or (n_members, n_samples, 2)
        Each member's probability of the positive class (or of both classes).
    y_true : array-like of shape (n_samples,)
        Labels, 0 or 1.
    sensitive_features : array-like of shape (n_samples,)
        The group of each row.
    privileged : object, optional
        The privileged group for the signed gaps (default: the largest label).

    Returns
    -------
    pandas.DataFrame
        Index ``n_members`` (1..M); columns ``(metric, group)`` for the four rates and
        ``(gap, "")`` for ``spd``, ``eod``, ``aod``.

    References
    ----------
    K. Schweighofer et al., "The Disparate Benefits of Deep Ensembles", ICML 2025 (Figure 3).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 300); a = rng.integers(0, 2, 300)
    >>> probs = rng.uniform(size=(4, 300))
    >>> curve = ensemble_size_curve(probs, y, sensitive_features=a)
    >>> curve.shape
    (4, 11)
    """
    probs, y, codes, labels, _ = _ensemble_setup(member_probs, y_true, sensitive_features, None)
    cum = np.cumsum(probs, axis=0) / np.arange(1, probs.shape[0] + 1)[:, None]
    rates = rates_from_counts(_counts(cum > 0.5, y, codes, len(labels)))
    gaps = _gaps(rates, labels, privileged, absolute=len(labels) > 2)
    data: dict[tuple[str, Any], np.ndarray] = {}
    for metric in RATES:
        for g, lab in enumerate(labels):
            data[(metric, lab)] = rates[metric][:, g]
    for k in GAPS:
        data[(k, "")] = gaps[k]
    frame = pd.DataFrame(data, index=pd.RangeIndex(1, probs.shape[0] + 1, name="n_members"))
    frame.columns = pd.MultiIndex.from_tuples(list(data), names=["metric", "group"])
    return frame


@dataclass(frozen=True)
class DiversityResult:
    """Predictive diversity of ensemble members, overall and per cell.

    Attributes
    ----------
    table : pandas.DataFrame
        Index: group (or ``(group, label)`` with ``by_label=True``); columns
        ``diversity`` (mean over the cell's rows, >= 0) and ``count``.
    overall : float
        Diversity over all rows.
    gap : float or None
        With ``by_label=True`` and two groups, the paper's gap score
        ``|DIV(y=1, a=1) - DIV(y=1, a=0)| + |DIV(y=0, a=1) - DIV(y=0, a=0)|``.

    See Also
    --------
    predictive_diversity : builds it.
    """

    table: pd.DataFrame
    overall: float
    gap: float | None


@validate_params({"by_label": ["boolean"]})
def predictive_diversity(
    member_probs: Any,
    y_true: Any,
    *,
    sensitive_features: Any = None,
    by_label: bool = False,
    weights: Any = None,
) -> DiversityResult:
    """Average member log-loss minus ensemble log-loss at the true label, per group.

    ``DIV = mean_k [log(sum_m w_m p_m(y_k|x_k)) - sum_m w_m log p_m(y_k|x_k)]``, which
    is >= 0 by Jensen's inequality and 0 exactly when all members agree on every
    row. Probabilities are floored at 1e-12 before the logarithm (a member that
    gives the true label probability 0 would otherwise make DIV infinite).

    Parameters
    ----------
    member_probs : array-like of shape (n_members, n_samples) or (n_members, n_samples, 2)
        Each member's probability of the positive class (or of both classes).
    y_true : array-like of shape (n_samples,)
        Labels, 0 or 1.
    sensitive_features : array-like of shape (n_samples,), optional
        The group of each row (default: one group).
    by_label : bool, default False
        Split each group by true label.
    weights : array-like of shape (n_members,), optional
        Ensemble weights in [0, 1] summing to 1 (default uniform).

    Returns
    -------
    DiversityResult

    References
    ----------
    K. Schweighofer et al., "The Disparate Benefits of Deep Ensembles", ICML 2025
    (Section 5); A. Jeffares, T. Liu, J. Crabbé, M. van der Schaar, "Joint Training of
    Deep Ensembles Fails Due to Learner Collusion", NeurIPS 2023 (the diversity term).

    Examples
    --------
    >>> p = np.array([[0.9, 0.2, 0.6], [0.5, 0.2, 0.6]])
    >>> r = predictive_diversity(p, [1, 0, 1], sensitive_features=["a", "a", "b"])
    >>> r.table["diversity"].round(4).tolist()
    [0.0213, 0.0]
    """
    probs = member_probabilities(member_probs)
    y = binary_labels(y_true, "y_true", n=probs.shape[1], both_classes=False)
    w = member_weights(weights, probs.shape[0])
    codes, labels = (
        (np.zeros(y.size, dtype=np.int64), ["all"])
        if sensitive_features is None
        else group_codes(sensitive_features, y.size)
    )
    p_true = np.clip(np.where(y[None, :] == 1, probs, 1.0 - probs), _LOG_FLOOR, 1.0)
    div = np.log(w @ p_true) - w @ np.log(p_true)
    div = np.maximum(div, 0.0)  # Jensen: only rounding can push it below 0
    if by_label:
        cell = codes * 2 + y
        index: pd.Index = pd.MultiIndex.from_product([labels, [0, 1]], names=["group", "label"])
        n_cells = 2 * len(labels)
    else:
        cell = codes
        index = pd.Index(labels, name="group")
        n_cells = len(labels)
    count = np.bincount(cell, minlength=n_cells).astype(float)
    total = np.bincount(cell, weights=div, minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    table = pd.DataFrame({"diversity": mean, "count": count}, index=index)
    gap = None
    if by_label and len(labels) == 2:
        d = mean.reshape(2, 2)
        gap = float(abs(d[1, 1] - d[0, 1]) + abs(d[1, 0] - d[0, 0]))
    if y.size == 0:
        raise DataError("y_true is empty.", argument="y_true")
    return DiversityResult(table=table, overall=float(div.mean()), gap=gap)
