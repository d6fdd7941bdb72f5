"""Multiaccuracy and multicalibration with proxy groups (Bharti et al., ICML 2025).

A predictor ``f`` of a binary ``Y`` is *multiaccurate* on a collection of groups when
its mean error on each group is small, and *multicalibrated* when it is calibrated on
each group. When the sensitive attribute defining the groups is missing, proxies
``g_hat(X)`` learned where it is known give (1) an upper bound on the true violation
computed from proxy quantities only::

    V(f, g) <= V(f, g_hat) + min(err, sqrt(MSE(f) * err)),   err = P(g != g_hat)

for ``V`` the MA or the (l1) MC violation, and (2) a remedy: post-processing ``f`` to
be multiaccurate / multicalibrated on the proxies lowers both terms of the bound.

Derivation (why the bound holds on every sample, not only in expectation):
``g (f - Y) = g_hat (f - Y) + (g - g_hat)(f - Y)``; the triangle inequality (inside
the conditional expectation given the discretised prediction for MC), then
``|f - Y| <= 1`` gives the ``err`` term and Cauchy-Schwarz with
``E[(g - g_hat)^2] = err`` the ``sqrt(MSE * err)`` term.

The boosts live in the private module ``_mc_boost``; the input checks and violation
kernels that they share with the metrics here live in ``_mc_inputs``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.fairness._mc_boost import MultiaccuracyBoost, MulticalibrationBoost
from trustlab.fairness._mc_inputs import _LEVELS, _group_matrix, _levels, _ma, _mc, _prepare

__all__ = [
    "MultiaccuracyBoost",
    "MulticalibrationBoost",
    "ProxyBound",
    "multiaccuracy_violation",
    "multicalibration_violation",
    "proxy_error_rates",
    "proxy_violation_bound",
]


def multiaccuracy_violation(y_true: Any, y_prob: Any, *, groups: Any) -> pd.Series:
    """Multiaccuracy violation ``|E[g(X) (f(X) - Y)]|`` of each group.

    Equal to ``P(g = 1) |E[f - Y | g = 1]|``: the group's share times its mean bias.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Labels, 0 or 1.
    y_prob : array-like of shape (n_samples,)
        Predicted probabilities ``f(X)`` in [0, 1].
    groups : array-like of shape (n_samples, n_groups) or (n_samples,)
        0/1 membership indicators (groups may overlap; DataFrame column names are
        kept), or one group label per row.

    Returns
    -------
    pandas.Series
        One violation per group.

    References
    ----------
    B. Bharti, M. V. Clemens-Sewall, P. Yi, J. Sulam, "Multiaccuracy and Multicalibration
    via Proxy Groups", ICML 2025. M. P. Kim, A. Ghorbani, J. Zou, "Multiaccuracy:
    Black-Box Post-Processing for Fairness in Classification", AIES 2019.

    Examples
    --------
    >>> multiaccuracy_violation([1, 0, 1, 0], [0.5, 0.5, 0.9, 0.1], groups=["a", "a", "b", "b"]).round(3)
    a    0.0
    b    0.0
    dtype: float64
    >>> float(multiaccuracy_violation([1, 1], [0.5, 0.5], groups=[[1], [1]])[0])
    0.5
    """
    y, f, g, names = _prepare(y_true, y_prob, groups, "groups")
    return pd.Series(_ma(y, f, g), index=names, dtype=float)


@validate_params({"n_levels": [_LEVELS], "p": [Interval(numbers.Integral, 1, 2, closed="both")]})
def multicalibration_violation(
    y_true: Any, y_prob: Any, *, groups: Any, n_levels: int = 100, p: int = 1
) -> pd.Series:
    """Multicalibration violation of each group on the grid of ``n_levels`` levels.

    With ``f_m = round(f * m) / m``: ``sum_v P(f_m = v, g = 1) |v - E[Y | f_m = v, g = 1]|^p``;
    ``p = 1`` is the l1 violation the proxy bound holds for, ``p = 2`` the squared
    variant the boosting stop rule uses.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Labels, 0 or 1.
    y_prob : array-like of shape (n_samples,)
        Predicted probabilities in [0, 1].
    groups : array-like of shape (n_samples, n_groups) or (n_samples,)
        0/1 membership indicators or one group label per row.
    n_levels : int, default 100
        Grid size ``m`` (the paper's code uses 100 levels for evaluation).
    p : {1, 2}, default 1
        Exponent of the calibration gap.

    Returns
    -------
    pandas.Series
        One violation per group.

    References
    ----------
    B. Bharti et al., "Multiaccuracy and Multicalibration via Proxy Groups", ICML 2025;
    U. Hebert-Johnson, M. Kim, O. Reingold, G. Rothblum, "Multicalibration: Calibration
    for the (Computationally-Identifiable) Masses", ICML 2018.

    Examples
    --------
    >>> mc = multicalibration_violation([1, 0, 1, 1], [0.5, 0.5, 0.5, 0.5], groups=["a", "a", "b", "b"])
    >>> mc.round(3).tolist()
    [0.0, 0.25]
    """
    y, f, g, names = _prepare(y_true, y_prob, groups, "groups")
    return pd.Series(_mc(y, f, g, int(n_levels), int(p)), index=names, dtype=float)


def proxy_error_rates(true_groups: Any, proxy_groups: Any) -> pd.Series:
    """Share of rows where each proxy disagrees with its true group, ``P(g_j != g_hat_j)``.

    Estimated once on data where the sensitive attribute is known; the bound then
    needs only proxies.

    Parameters
    ----------
    true_groups : array-like of shape (n_samples, n_groups) or (n_samples,)
        True 0/1 memberships (or labels).
    proxy_groups : array-like of shape (n_samples, n_groups) or (n_samples,)
        Proxy memberships, same columns in the same order.

    Returns
    -------
    pandas.Series
        One error rate per group (named after the proxy columns).

    References
    ----------
    B. Bharti et al., "Multiaccuracy and Multicalibration via Proxy Groups", ICML 2025.

    Examples
    --------
    >>> proxy_error_rates([[1, 0], [0, 1], [1, 1]], [[1, 0], [1, 1], [1, 0]]).tolist()
    [0.3333333333333333, 0.3333333333333333]
    """
    ph, names = _group_matrix(proxy_groups, len(np.asarray(proxy_groups)), "proxy_groups")
    gt, _ = _group_matrix(true_groups, ph.shape[0], "true_groups")
    if gt.shape[1] != ph.shape[1]:
        raise DataError(
            f"true_groups has {gt.shape[1]} groups but proxy_groups has {ph.shape[1]}; "
            "pass one proxy per group.",
            argument="proxy_groups",
        )
    return pd.Series(np.mean(gt != ph, axis=0), index=names, dtype=float)


@dataclass(frozen=True)
class ProxyBound:
    """Upper bounds on the true MA/MC violations computed from proxies only.

    Attributes
    ----------
    table : pandas.DataFrame
        Per proxy group: ``proxy_violation``, ``proxy_error``, ``slack``
        (``min(err, sqrt(MSE * err))``) and ``bound`` (their sum).
    mse : float
        Mean squared error (Brier score) of the predictor the violation is about: ``f``
        for ``kind="ma"``, ``f`` rounded to the ``n_levels`` grid for ``kind="mc"``.
    worst_bound : float
        ``max_j bound_j``: bounds the worst true-group violation.
    worst_group : object
        The group attaining ``worst_bound``.
    kind : str
        ``"ma"`` or ``"mc"``.

    See Also
    --------
    proxy_violation_bound : builds it.
    """

    table: pd.DataFrame
    mse: float
    worst_bound: float
    worst_group: Any
    kind: str


@validate_params({"kind": [Options({"ma", "mc"})], "n_levels": [_LEVELS]})
def proxy_violation_bound(
    y_true: Any,
    y_prob: Any,
    *,
    proxy_groups: Any,
    proxy_errors: Any,
    kind: str = "mc",
    n_levels: int = 100,
) -> ProxyBound:
    """Bound the true multiaccuracy or multicalibration violation from proxy groups.

    ``V(f, g_j) <= V(f, g_hat_j) + min(err_j, sqrt(MSE(f) err_j))`` for each group ``j``
    (``V`` the MA violation or the l1 MC violation on ``n_levels`` levels). The MC
    violation is that of ``f`` rounded to the ``n_levels`` grid, so for ``kind="mc"`` the
    MSE is that of the rounded predictor (Cauchy-Schwarz on the same predictor; with the
    unrounded MSE the bound failed by 1.5e-4 on a 6-row sample). The inequality holds
    exactly on any sample whose proxy error rates are ``err_j``; with ``err_j``
    estimated on other data it holds up to that estimate's error.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Labels, 0 or 1.
    y_prob : array-like of shape (n_samples,)
        Predicted probabilities in [0, 1].
    proxy_groups : array-like of shape (n_samples, n_groups) or (n_samples,)
        Proxy memberships ``g_hat_j(X)`` (no missing values).
    proxy_errors : array-like of shape (n_groups,)
        ``P(g_j != g_hat_j)`` per group, each in [0, 1] (see :func:`proxy_error_rates`).
    kind : {"mc", "ma"}, default "mc"
        Which violation to bound.
    n_levels : int, default 100
        Grid size for the MC violation.

    Returns
    -------
    ProxyBound

    References
    ----------
    B. Bharti, M. V. Clemens-Sewall, P. Yi, J. Sulam, "Multiaccuracy and Multicalibration
    via Proxy Groups", ICML 2025 (Section 4).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> g = rng.integers(0, 2, (500, 2)); y = rng.integers(0, 2, 500)
    >>> f = np.clip(0.5 + 0.2 * g[:, 0] - 0.1, 0, 1)
    >>> b = proxy_violation_bound(y, f, proxy_groups=g, proxy_errors=[0.1, 0.0])
    >>> b.table.columns.tolist(), b.kind
    (['proxy_violation', 'proxy_error', 'slack', 'bound'], 'mc')
    """
    y, f, g, names = _prepare(y_true, y_prob, proxy_groups, "proxy_groups")
    err = check_numeric_array(proxy_errors, "proxy_errors", ndim=1)
    if err.size != g.shape[1]:
        raise DataError(
            f"proxy_errors has {err.size} entries but proxy_groups has {g.shape[1]} groups.",
            argument="proxy_errors",
        )
    if err.min() < 0 or err.max() > 1:
        raise DataError(
            f"proxy_errors are probabilities P(g != g_hat) and must lie in [0, 1]; got "
            f"[{err.min():g}, {err.max():g}].",
            argument="proxy_errors",
        )
    scored = f if kind == "ma" else _levels(f, int(n_levels)) / int(n_levels)
    mse = float(np.mean((scored - y) ** 2))
    viol = _ma(y, f, g) if kind == "ma" else _mc(y, f, g, int(n_levels), 1)
    slack = np.minimum(err, np.sqrt(mse * err))
    table = pd.DataFrame(
        {"proxy_violation": viol, "proxy_error": err, "slack": slack, "bound": viol + slack},
        index=pd.Index(names, name="group"),
    )
    j = int(np.argmax(table["bound"].to_numpy()))
    return ProxyBound(
        table=table, mse=mse, worst_bound=float(table["bound"].iloc[j]), worst_group=names[j], kind=kind
    )
