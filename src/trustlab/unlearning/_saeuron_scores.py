"""SAeUron's feature score and selection rule, and a Frechet distance for the retained classes.

Pure NumPy functions, exported by :mod:`trustlab.unlearning.saeuron`.

References
----------
.. [1] B. Cywinski, K. Deja. "SAeUron: Interpretable Concept Unlearning in Diffusion Models
   with Sparse Autoencoders". ICML 2025.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab.errors import DataError, ParameterError

__all__ = ["feature_scores", "frechet_distance", "select_features"]


def _check_means(concept_means: Any) -> np.ndarray:
    arr = np.asarray(concept_means, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[0] < 2 or arr.shape[2] < 1:
        raise DataError(
            "concept_means must have shape (n_concepts >= 2, n_steps, n_latents); got "
            f"{arr.shape}. Fit SAeUron on at least two concepts.",
            argument="concept_means",
        )
    if not np.all(np.isfinite(arr)) or arr.min() < 0:
        raise DataError(
            "concept_means must be finite, non-negative SAE activations.", argument="concept_means"
        )
    return arr


def feature_scores(concept_means: Any, target: Any, *, counts: Any = None, eps: float = 1e-8) -> np.ndarray:
    """The paper's importance score of every SAE feature for one concept, per step (eq. 3).

    Parameters
    ----------
    concept_means : array-like of shape (n_concepts, n_steps, n_latents)
        ``mu(i, t, D_c)``: mean SAE activation of each feature at each step on each concept.
    target : int
        Index of the concept (first axis).
    counts : array-like of shape (n_concepts,), optional
        Generations behind each concept's mean; the "other concepts" mean pools them with
        these weights (the authors pool the other concepts' samples). Default: equal.
    eps : float, default=1e-8
        Added to the normalising sums (the authors' value).

    Returns
    -------
    ndarray of shape (n_steps, n_latents)
        ``mu_c / sum mu_c - mu_not_c / sum mu_not_c``; positive where the feature takes a
        larger share of the concept's activation mass than of the others'.

    References
    ----------
    .. [1] Cywinski, Deja. "SAeUron: Interpretable Concept Unlearning in Diffusion Models with
       Sparse Autoencoders". ICML 2025.

    Examples
    --------
    >>> means = np.array([[[4.0, 1.0, 0.0]], [[1.0, 1.0, 2.0]]])
    >>> feature_scores(means, 0).round(3).tolist()
    [[0.55, -0.05, -0.5]]
    """
    arr = _check_means(concept_means)
    k = arr.shape[0]
    if isinstance(target, bool) or not isinstance(target, numbers.Integral) or not 0 <= int(target) < k:
        raise ParameterError(
            f"target must be a concept index in [0, {k}); got {target!r}.", argument="target"
        )
    w = np.ones(k) if counts is None else np.asarray(counts, dtype=np.float64)
    if w.shape != (k,) or not np.all(np.isfinite(w)) or w.min() < 0:
        raise DataError(f"counts must be {k} non-negative numbers, one per concept.", argument="counts")
    w = w.copy()
    w[int(target)] = 0.0
    if w.sum() <= 0:
        raise DataError(
            "counts give the other concepts no weight; each needs generations.", argument="counts"
        )
    mu_c = arr[int(target)]
    mu_o = np.tensordot(w / w.sum(), arr, axes=1)
    return mu_c / (mu_c.sum(1, keepdims=True) + eps) - mu_o / (mu_o.sum(1, keepdims=True) + eps)


def select_features(scores: Any, percentile: float) -> list[np.ndarray]:
    """Indices of the features whose score exceeds the step's ``percentile``-th percentile.

    Parameters
    ----------
    scores : array-like of shape (n_steps, n_latents)
        From :func:`feature_scores`.
    percentile : float in [0, 100)
        The paper's ``tau``: 99.99-99.999 for Stable Diffusion's 20,480 features (1-2 per step).

    Returns
    -------
    list of ndarray
        One array of feature indices per step.

    Examples
    --------
    >>> [s.tolist() for s in select_features([[0.1, 0.5, -0.2, 0.3]], 50)]
    [[1, 3]]
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 1 or not np.all(np.isfinite(arr)):
        raise DataError("scores must be a finite (n_steps, n_latents) array.", argument="scores")
    if isinstance(percentile, bool) or not isinstance(percentile, numbers.Real) or not 0 <= percentile < 100:
        raise ParameterError(f"percentile must lie in [0, 100); got {percentile!r}.", argument="percentile")
    cut = np.quantile(arr, float(percentile) / 100.0, axis=1)
    return [np.flatnonzero(row > c) for row, c in zip(arr, cut, strict=True)]


def frechet_distance(features_a: Any, features_b: Any) -> float:
    """Frechet distance between Gaussians fitted to two feature sets (the FID formula).

    ``|m_a - m_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))``; with Inception features it is FID
    (Heusel et al., 2017), which the paper reports for the retained concepts. Here it takes
    any feature map (e.g. a digit classifier's hidden layer or PCA of pixels).

    Parameters
    ----------
    features_a, features_b : array-like of shape (n_a, p), (n_b, p)
        At least two rows each.

    Returns
    -------
    float
        Non-negative.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=(4000, 2))
    >>> round(frechet_distance(a, a + [3.0, 0.0]), 2)
    9.0
    """
    from scipy import linalg

    a = np.asarray(features_a, dtype=np.float64)
    b = np.asarray(features_b, dtype=np.float64)
    for name, arr in (("features_a", a), ("features_b", b)):
        if arr.ndim != 2 or arr.shape[0] < 2 or not np.all(np.isfinite(arr)):
            raise DataError(f"{name} must be a finite 2-d array with at least two rows.", argument=name)
    if a.shape[1] != b.shape[1]:
        raise DataError(
            f"features_a and features_b must have the same columns; got {a.shape[1]} and {b.shape[1]}.",
            argument="features_b",
        )
    ca, cb = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    root = linalg.sqrtm(ca @ cb)
    root = np.real(root)
    dist = float(((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(ca + cb - 2.0 * root))
    return max(dist, 0.0)


def scaling_plan(
    concept_means: np.ndarray,
    counts: np.ndarray,
    removed: list[int],
    points: list[tuple[float, float]],
    percentile: Any,
    multiplier: Any,
    score_against: str,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per step: the features scaled to remove the concepts ``removed`` and their factors.

    ``removed`` are row indices of ``concept_means``, ``points`` each one's ``(percentile,
    multiplier)`` (``percentile`` / ``multiplier`` override them when not None). Each concept's
    selected features get ``multiplier * mu(i, t, D_c)``; a feature two concepts select keeps the
    stronger scaling. ``score_against="retained"`` drops the co-removed concepts from ``D_not_c``.
    """
    if score_against not in ("all", "retained"):
        raise ParameterError(
            f"score_against must be 'all' or 'retained'; got {score_against!r}.", argument="score_against"
        )
    scale: list[dict[int, float]] = [{} for _ in range(concept_means.shape[1])]
    weights = np.asarray(counts, dtype=np.float64).copy()
    if score_against == "retained" and len(removed) > 1:
        weights[removed] = 0.0
        if weights.sum() <= 0:
            raise ParameterError(
                "unlearn must keep at least one fitted concept with score_against='retained'.",
                argument="unlearn",
            )
    for c, (pct, gamma) in zip(removed, points, strict=True):
        pct = pct if percentile is None else percentile
        gamma = gamma if multiplier is None else multiplier
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not np.isfinite(float(gamma)):
            raise ParameterError(f"multiplier must be a finite number; got {gamma!r}.", argument="multiplier")
        w = weights.copy()
        w[c] = 1.0  # feature_scores ignores the target's own weight
        for s, feats in enumerate(select_features(feature_scores(concept_means, c, counts=w), pct)):
            for i in feats:
                v = float(gamma) * float(concept_means[c, s, i])
                if abs(v) >= abs(scale[s].get(int(i), 0.0)):
                    scale[s][int(i)] = v
    return [
        (np.array(sorted(d), dtype=np.int64), np.array([d[i] for i in sorted(d)], dtype=np.float64))
        for d in scale
    ]
