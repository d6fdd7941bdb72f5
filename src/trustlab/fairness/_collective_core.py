"""Counting core of the collective-action bounds: cells of categorical data, the platform, the bounds.

Rows of integer-coded categorical features are mapped to one cell index each
(mixed radix over the features' cardinalities); joint frequencies of (cell, label) are
one ``bincount``. The platform is the Bayes classifier of its empirical training
distribution: ``f(x) = argmax_y P_train(x, y)`` (ties to the smaller label; unseen
cells get the most frequent training label), as in Gauthier, Bach and Jordan (2025).
"""

from __future__ import annotations

import numpy as np


def cells(X: np.ndarray, card: np.ndarray) -> np.ndarray:
    """Cell index of each row (mixed radix)."""
    return np.ravel_multi_index(tuple(X.T), tuple(int(c) for c in card)).astype(np.int64)


def joint(codes: np.ndarray, y: np.ndarray, n_cells: int, n_classes: int) -> np.ndarray:
    """Empirical joint distribution ``P(cell, label)`` as an ``(n_cells, n_classes)`` array."""
    counts = np.bincount(codes * n_classes + y, minlength=n_cells * n_classes).astype(float)
    return counts.reshape(n_cells, n_classes) / max(codes.size, 1)


def platform_labels(table: np.ndarray) -> np.ndarray:
    """The platform's label for every cell from its training joint table."""
    labels = np.argmax(table, axis=1)
    unseen = table.sum(axis=1) == 0
    labels[unseen] = int(np.argmax(table.sum(axis=0)))
    return labels


def apply_signal(X: np.ndarray, signal: dict[int, int]) -> np.ndarray:
    """``g(x)``: set the signal's features to its values."""
    out = X.copy()
    for j, v in signal.items():
        out[:, j] = v
    return out


def hoeffding(delta: float, k: int) -> float:
    """``R(delta, k) = sqrt(log(1 / delta) / (2 k))`` (``inf`` for ``k = 0``)."""
    return float(np.sqrt(np.log(1.0 / delta) / (2.0 * k))) if k > 0 else float("inf")


def bound_from_cells(
    member_cells: np.ndarray,
    planted_mass: np.ndarray,
    gap: np.ndarray,
    *,
    n_act: int,
    n_total: int,
    slack_planted: float,
    slack_gap: float,
    epsilon: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-member success indicators: ``(plug-in, certified)``.

    A member's transformed cell is won when the collective's planted mass beats the
    rest of the population's margin: ``(n/N) P~ - ((N-n)/N) Delta - eps/(1-eps) > 0``;
    the certified version subtracts the concentration slacks from each estimate.
    """
    a = n_act / n_total
    rob = epsilon / (1.0 - epsilon)
    p = planted_mass[member_cells]
    d = gap[member_cells]
    plug = a * p - (1 - a) * d - rob > 0
    cert = a * (p - slack_planted) - (1 - a) * (d + slack_gap) - rob > 0
    return plug, cert
