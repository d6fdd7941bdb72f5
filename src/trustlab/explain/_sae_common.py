"""Helpers shared by the SAEBench metrics (sae_metrics.py and _sae_scr.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from trustlab.errors import DataError, ParameterError


def _check_sae(sae: Any) -> Any:
    if not all(hasattr(sae, a) for a in ("transform", "W_dec_", "b_dec_")):
        raise ParameterError(
            f"sae must be a fitted SparseAutoencoder (transform, W_dec_, b_dec_), got {type(sae).__name__}; "
            "call fit first.",
            argument="sae",
        )
    return sae


def random_rotation(d: int, random_state: int) -> np.ndarray:
    """A seeded random orthonormal ``(d, d)`` matrix (QR of a Gaussian matrix)."""
    return np.linalg.qr(np.random.default_rng(random_state).normal(size=(d, d)))[0]


def signed_codes(r: np.ndarray) -> np.ndarray:
    """``[ReLU(r), ReLU(-r)]``: non-negative latents that decode exactly with rows ``Q^T, -Q^T``."""
    return np.concatenate([np.maximum(r, 0.0), np.maximum(-r, 0.0)], axis=1)


def _unit_rows(W: np.ndarray) -> np.ndarray:
    return W / np.maximum(np.linalg.norm(W, axis=1, keepdims=True), 1e-12)


def binary_labels(y: Any, n: int, name: str = "y") -> np.ndarray:
    """``y`` as 0/1 (the larger of its two values is 1); DataError naming ``name`` otherwise."""
    arr = np.asarray(y)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise DataError(
            f"{name} must be 1-D with one label per row ({n}), got shape {arr.shape}.", argument=name
        )
    labels = np.unique(arr)
    if labels.size != 2:
        raise DataError(
            f"{name} must have exactly two distinct values, got {labels.size}; a target with one value "
            "cannot be probed: pick a concept that is present in some rows and absent in others.",
            argument=name,
        )
    return (arr == labels[1]).astype(int)


def _rank_by_mean_difference(Z: np.ndarray, y: np.ndarray) -> np.ndarray:
    diff = Z[y == 1].mean(0) - Z[y == 0].mean(0)
    return np.argsort(-np.abs(diff), kind="stable")


def _probe(Z: np.ndarray, y: np.ndarray) -> LogisticRegression:
    return LogisticRegression(max_iter=1000).fit(Z, y)


def _ablate(X: np.ndarray, Z: np.ndarray, D: np.ndarray, latents: Any) -> np.ndarray:
    """Zero-ablate ``latents`` keeping the reconstruction error: ``x - sum_{l in latents} a_l d_l``."""
    lat = np.asarray(latents, dtype=int)
    return X - Z[:, lat] @ D[lat] if lat.size else X.copy()
