"""Kandinsky conformal prediction, and coverage per (overlapping, fractional) group.

Split conformal prediction covers the label with probability ``1 - alpha`` on average
only. Kandinsky conformal prediction (Bairaktari, Wu and Wu, ICML 2025) targets
``1 - alpha`` coverage simultaneously over a class of groups that may overlap, have
fractional membership and be defined on covariates *and labels*: with a group-feature
map ``Phi(x, y) in [0, 1]^d`` (column j = weight of ``(x, y)`` in group j) it fits the
linear ``(1 - alpha)``-quantile regression of the calibration scores on ``Phi``,

``beta = argmin_beta sum_i rho_{1-alpha}(S_i - beta' Phi(x_i, y_i))``

(``rho`` the pinball loss), and predicts ``C(x) = {y : S(x, y) <= beta' Phi(x, y)}``; the
threshold depends on the candidate label because ``Phi`` does. A constant ``Phi`` is
split conformal, the one-hot of the class is class-conditional conformal, indicators of
disjoint cells are Mondrian conformal, covariate-only ``Phi`` is group-conditional
conformal (Gibbs, Cherian and Candes; batch multivalid) — all through the one class
:class:`KandinskyConformal`.

:func:`group_coverage` is the evaluation side: coverage and mean set size overall and
per group (indicator or fractional weights), with confidence intervals and a status.

The implementation lives in private modules: the estimator (``_conformal_kandinsky``),
its scores and group features (``_conformal_inputs``), the quantile regression
(``_conformal_qr``), group weights and indicators (``_conformal_groups``) and the
coverage evaluation (``_conformal_coverage``).
"""

from __future__ import annotations

from trustlab.uncertainty._conformal_coverage import (
    conformal_coverage,
    group_coverage,
    weighted_coverage_deviation,
)
from trustlab.uncertainty._conformal_groups import group_indicators
from trustlab.uncertainty._conformal_kandinsky import KandinskyConformal

__all__ = [
    "KandinskyConformal",
    "conformal_coverage",
    "group_coverage",
    "group_indicators",
    "weighted_coverage_deviation",
]
