"""Counts by (score bin, label): their projection, confusion matrix and metrics (private module).

Pure array functions behind :mod:`trustlab.audit.prediction_table`, which re-exports them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["binned_metrics", "confusion_from_bins", "consistent_counts", "discrete_laplace_sd"]


def discrete_laplace_sd(scale: float | None) -> float:
    """Standard deviation of discrete Laplace noise of ``scale`` (0 for None).

    It is ``sqrt(2a) / (1 - a)`` with ``a = exp(-1 / scale)``.

    Parameters
    ----------
    scale : float or None
        The noise scale (``1 / epsilon`` for a count); None or 0 means no noise.

    Returns
    -------
    float
        The standard deviation.

    Examples
    --------
    >>> round(discrete_laplace_sd(1.0), 4), discrete_laplace_sd(None)
    (1.357, 0.0)
    """
    if not scale:
        return 0.0
    a = math.exp(-1.0 / scale)
    return math.sqrt(2.0 * a) / (1.0 - a)


def consistent_counts(noisy: Any) -> np.ndarray:
    """Project each ``[..., bin, label]`` block onto non-negative counts with the same clamped total.

    The block's total ``T = max(0, sum)`` is kept (a sum of unbiased noisy counts is
    unbiased, so group sizes are not inflated by clipping), and the block becomes the
    Euclidean projection of the noisy counts onto ``{x >= 0, sum x = T}``:
    ``x = max(noisy - tau, 0)`` with ``tau`` chosen so that the total is ``T``
    (Duchi, Shalev-Shwartz, Singer, Chandra, "Efficient Projections onto the
    l1-Ball for Learning in High Dimensions", ICML 2008). Pure post-processing.

    Parameters
    ----------
    noisy : array-like of shape (..., n_bins, 2)
        Noisy counts; every leading index is one block.

    Returns
    -------
    numpy.ndarray
        Non-negative float counts of the same shape; a block with a non-positive total
        becomes all zeros.

    Examples
    --------
    >>> consistent_counts([[[5, -2], [1, 0]]]).tolist()
    [[[4.0, 0.0], [0.0, 0.0]]]
    """
    v = np.asarray(noisy, dtype=float)
    shape = v.shape
    flat = v.reshape(-1, shape[-2] * shape[-1])
    total = np.maximum(flat.sum(axis=1), 0.0)
    u = -np.sort(-flat, axis=1)
    css = np.cumsum(u, axis=1) - total[:, None]
    ind = np.arange(1, flat.shape[1] + 1)
    cond = u - css / ind > 0
    rho = flat.shape[1] - 1 - np.argmax(cond[:, ::-1], axis=1)  # last index where cond holds
    theta = css[np.arange(flat.shape[0]), rho] / (rho + 1)
    out = np.maximum(flat - theta[:, None], 0.0)
    out[total <= 0] = 0.0
    return out.reshape(shape)


def confusion_from_bins(binned: np.ndarray) -> np.ndarray:
    """``[..., bin, label]`` -> ``[..., predicted, label]`` with the threshold 0.5.

    Parameters
    ----------
    binned : numpy.ndarray of shape (..., n_bins, 2)
        Counts by score bin and label (an even number of bins: the lower half predicts 0).

    Returns
    -------
    numpy.ndarray of shape (..., 2, 2)
        ``[..., predicted, label]`` counts.

    Examples
    --------
    >>> import numpy as np
    >>> b = np.zeros((20, 2)); b[2, 0] = 3; b[12, 0] = 1; b[17, 1] = 2
    >>> confusion_from_bins(b).tolist()
    [[3.0, 0.0], [1.0, 2.0]]
    """
    half = binned.shape[-2] // 2
    return np.stack([binned[..., :half, :].sum(axis=-2), binned[..., half:, :].sum(axis=-2)], -2)


def binned_metrics(binned: Any) -> dict[str, np.ndarray]:
    """Count, positives, negatives, accuracy, ROC AUC, Brier score and ECE of ``[..., bin, label]`` tables.

    Vectorised over leading axes (replicates, groups). Scores are taken at bin
    midpoints and ties within a bin count one half for the AUC, so the figures are
    binned approximations (Brier within one bin width, ECE on 10 bins of width
    0.1). A figure with an empty denominator is NaN.

    Parameters
    ----------
    binned : array-like of shape (..., n_bins, 2)
        Counts by score bin and label, ``n_bins`` a multiple of 10 (negative counts are
        read as 0).

    Returns
    -------
    dict of str to numpy.ndarray
        ``count``, ``positives``, ``negatives``, ``accuracy``, ``roc_auc``, ``brier`` and
        ``ece``, each of the leading shape.

    Examples
    --------
    >>> import numpy as np
    >>> b = np.zeros((20, 2)); b[2, 0] = 3; b[12, 0] = 1; b[17, 1] = 2
    >>> m = binned_metrics(b)
    >>> float(m["accuracy"]), float(m["roc_auc"]), float(m["brier"])
    (0.8333333333333334, 1.0, 0.078125)
    """
    c = np.clip(np.asarray(binned, dtype=float), 0, None)
    neg, pos = c[..., 0], c[..., 1]
    n_pos, n_neg = pos.sum(axis=-1), neg.sum(axis=-1)
    n = n_pos + n_neg
    k = c.shape[-2]
    mid = (np.arange(k) + 0.5) / k
    half = k // 2
    above = np.cumsum(pos[..., ::-1], axis=-1)[..., ::-1] - pos  # positives in higher bins
    centre = (np.arange(10) + 0.5) / 10
    pairs = c.reshape(*c.shape[:-2], 10, k // 10, 2).sum(axis=-2)
    pn = pairs.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = (neg[..., :half].sum(axis=-1) + pos[..., half:].sum(axis=-1)) / n
        auc = (neg * (above + 0.5 * pos)).sum(axis=-1) / (n_pos * n_neg)
        brier = (pos * (1 - mid) ** 2 + neg * mid**2).sum(axis=-1) / n
        frac = np.where(pn > 0, pairs[..., 1] / pn, 0.0)
        ece = (np.abs(frac - centre) * pn).sum(axis=-1) / n
    return {
        "count": n,
        "positives": n_pos,
        "negatives": n_neg,
        "accuracy": np.asarray(accuracy),
        "roc_auc": np.where((n_pos > 0) & (n_neg > 0), auc, np.nan),
        "brier": np.asarray(brier),
        "ece": np.asarray(ece),
    }
