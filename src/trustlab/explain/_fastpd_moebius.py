"""Subset transforms of set functions on ``k`` slots: the algebra under FastPD's leaf games.

A set function is stored as an array over bit masks ``0 .. 2^k - 1`` on its last axis.
"""

from __future__ import annotations

import numpy as np


def transform(F: np.ndarray, k: int, kind: str) -> np.ndarray:
    """In-place subset-sum ('sub'), superset-sum ('sup') or Moebius ('mob') on the last axis."""
    lead = F.shape[:-1]
    m = 1 << k
    for b in range(k):
        view = F.reshape(*lead, m >> (b + 1), 2, 1 << b)
        if kind == "sub":
            view[..., 1, :] += view[..., 0, :]
        elif kind == "sup":
            view[..., 0, :] += view[..., 1, :]
        else:
            view[..., 1, :] -= view[..., 0, :]
    return F


def popcount(k: int) -> np.ndarray:
    masks = np.arange(1 << k)
    return np.array([bin(int(m)).count("1") for m in masks], dtype=np.int64)


def mobius_terms(masks: np.ndarray, max_terms: int = 1 << 16) -> tuple[np.ndarray, np.ndarray] | None:
    """Inclusion-exclusion for the Moebius coefficients of ``masks`` alone.

    ``mob(S) = sum_{T ⊆ S} (-1)^{|S|-|T|} F(T)``: returns every (set, subset) pair's subset ``T``
    and the signed ``(n_terms, n_masks)`` matrix summing the terms into their sets, or None when
    there would be more than ``max_terms`` terms.
    """
    subsets: list[int] = []
    rows: list[int] = []
    signs: list[float] = []
    for i, mask in enumerate(int(v) for v in masks):
        size = bin(mask).count("1")
        if len(subsets) + (1 << size) > max_terms:
            return None
        t = mask
        while True:  # every subset of mask, by the standard decrement-and-mask walk
            subsets.append(t)
            rows.append(i)
            signs.append(-1.0 if (size - bin(t).count("1")) % 2 else 1.0)
            if t == 0:
                break
            t = (t - 1) & mask
    sums = np.zeros((len(subsets), len(masks)))
    sums[np.arange(len(subsets)), rows] = signs
    return np.asarray(subsets, dtype=np.int64), sums
