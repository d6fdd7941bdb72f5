"""MixBridge's feature metrics on the lab's images: an FID-like distance and a CLIP-like target similarity.

The paper (Qin et al., ICML 2025, Tables 1-2) scores a backdoored bridge's *utility* by FID of
its benign outputs and its *specificity* by MSE and by CLIP similarity of the triggered outputs
to the attacker's target (ASR = CLIP > 0.7). With no Inception network or CLIP for 8x8 images,
both metrics here read one shipped feature map: the image tower of the vision lab's tiny CLIP
(:func:`~trustlab.vision.tiny_clip.tiny_clip`, a 64-d embedding trained contrastively on
digits and shapes). :func:`fid_like` is the Frechet distance between Gaussian fits of two sets
of those features (the FID formula, :func:`~trustlab.unlearning.saeuron.frechet_distance`);
:func:`target_similarity` the mean cosine between paired features (the CLIP score's form).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab.errors import DataError, ParameterError
from trustlab.unlearning.saeuron import frechet_distance
from trustlab.vision.classifiers import require_torch

__all__ = ["fid_like", "lab_features", "target_similarity"]


@functools.lru_cache(maxsize=1)
def _image_tower() -> Any:
    from trustlab.vision.tiny_clip import tiny_clip

    return tiny_clip().image_encoder  # frozen, eval mode: safe to share


def lab_features(images: Any) -> np.ndarray:
    """Tiny-CLIP image embeddings of 8x8 images in [0, 1] (the lab's stand-in for Inception/CLIP).

    Parameters
    ----------
    images : array-like of shape (n, 1, 8, 8) or (n, 8, 8)
        Images in [0, 1].

    Returns
    -------
    numpy.ndarray of float64, shape (n, 64)
        The image tower's output (before the CLIP normalisation).

    Examples
    --------
    >>> from trustlab.security.mixbridge_lab import digits_sr_pairs
    >>> X0, _ = digits_sr_pairs("test", 3)
    >>> lab_features(X0).shape
    (3, 64)
    """
    torch = require_torch()
    x = np.asarray(images, dtype=np.float32)
    if x.ndim == 4 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 3 or x.shape[1:] != (8, 8) or len(x) == 0 or not np.all(np.isfinite(x)):
        raise DataError(
            f"images must be a finite (n, 1, 8, 8) or (n, 8, 8) array in [0, 1]; got shape {x.shape}.",
            argument="images",
        )
    with torch.no_grad():
        out = _image_tower()(torch.as_tensor(np.ascontiguousarray(x)))
    return out.numpy().astype(np.float64)


def _features(images: Any, features: Callable[[Any], Any] | None, name: str) -> np.ndarray:
    if features is not None and not callable(features):
        raise ParameterError(
            f"features must be None (the lab's tiny-CLIP image tower) or a callable images -> (n, p) "
            f"array; got {type(features).__name__}.",
            argument="features",
        )
    f = np.asarray((features or lab_features)(images), dtype=np.float64)
    if f.ndim != 2 or not np.all(np.isfinite(f)):
        raise DataError(
            f"features of {name} must be a finite (n, p) array; got shape {f.shape}.", argument=name
        )
    return f


def fid_like(images_a: Any, images_b: Any, *, features: Callable[[Any], Any] | None = None) -> float:
    """Frechet distance between Gaussian fits of two image sets' features (FID on the lab's features).

    ``|m_a - m_b|^2 + tr(S_a + S_b - 2 (S_a S_b)^(1/2))`` of the feature means and covariances
    (Heusel et al., 2017). The paper reports FID of the benign outputs to the clean images
    (Inception features); here the features are :func:`lab_features` unless ``features`` is
    given. Values are on the scale of those features, not comparable with published FIDs.

    Parameters
    ----------
    images_a, images_b : array-like
        Two image sets, at least two each (many more than the 64 feature dimensions for a
        stable covariance: the shipped figures use 150).
    features : callable, optional
        Maps an image set to an ``(n, p)`` array; default :func:`lab_features`.

    Returns
    -------
    float
        Non-negative; 0 for identical sets.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.random.default_rng(0).normal(size=(4000, 2))
    >>> round(fid_like(a, a + [3.0, 0.0], features=lambda x: x), 2)
    9.0
    """
    fa, fb = _features(images_a, features, "images_a"), _features(images_b, features, "images_b")
    for name, f in (("images_a", fa), ("images_b", fb)):
        if len(f) < 2:
            raise DataError(
                f"{name} must hold at least two images (a covariance); got {len(f)}.", argument=name
            )
    if fa.shape[1] != fb.shape[1]:
        raise DataError(
            f"images_a and images_b must give features of one size; got {fa.shape[1]} and {fb.shape[1]}.",
            argument="images_b",
        )
    return frechet_distance(fa, fb)


def target_similarity(outputs: Any, targets: Any, *, features: Callable[[Any], Any] | None = None) -> float:
    """Mean cosine similarity of paired features: output ``i`` against target ``i`` (a CLIP-type score).

    The paper's CLIP score of a triggered output is the cosine of its CLIP image embedding
    with the intended target's; here the embeddings are :func:`lab_features` unless
    ``features`` is given.

    Parameters
    ----------
    outputs, targets : array-like of the same length
        Generated images and, row by row, the image each should match.
    features : callable, optional
        Maps an image set to an ``(n, p)`` array; default :func:`lab_features`.

    Returns
    -------
    float
        In [-1, 1]; 1 when every output's features point along its target's.

    Examples
    --------
    >>> import numpy as np
    >>> round(target_similarity([[1.0, 0.0], [0.0, 2.0]], [[2.0, 0.0], [1.0, 1.0]], features=np.asarray), 4)
    0.8536
    """
    a = _features(outputs, features, "outputs")
    b = _features(targets, features, "targets")
    if a.shape != b.shape:
        raise DataError(
            f"outputs and targets must pair row by row; their features have shapes {a.shape} and {b.shape}.",
            argument="targets",
        )
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    if np.any(na == 0) or np.any(nb == 0):
        raise DataError("a zero feature vector has no direction; cosine is undefined.", argument="outputs")
    return float(((a * b).sum(1) / (na * nb)).mean())
