"""FineXtract's clique clustering of generations and the extraction score (see finextract.py).

References
----------
X. Wu, J. Zhang, Z. S. Wu, "Leveraging Model Guidance to Extract Training Data from
Personalized Diffusion Models", ICML 2025 (arXiv:2410.03039).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError
from trustlab.vision.classifiers import check_images

__all__ = ["DIGITS_THRESHOLD", "ClusterResult", "ExtractionScore", "cluster_generations", "extraction_score"]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]

DIGITS_THRESHOLD = 0.075
"""Per-pixel RMS distance (pixels in [0, 1]) under which a candidate counts as an extracted
8x8 digit: below the 1st percentile (0.078-0.087) of the distance from a real digit to the
nearest *other* digit of its class in scikit-learn's digits."""


@dataclass(frozen=True)
class ClusterResult:
    """The clique clustering of generations.

    Attributes
    ----------
    representatives : numpy.ndarray of int
        Index (into the generations) of each kept clique's member nearest its mean feature,
        largest clique first.
    sizes : numpy.ndarray of int
        The kept cliques' sizes.
    threshold : float
        The similarity threshold the scan stopped at (edges join pairs at or above it).
    n_cliques : int
        Cliques at that threshold (at least ``n_clusters``; the largest ``n_clusters`` kept).

    See Also
    --------
    cluster_generations : returns it.
    """

    representatives: np.ndarray
    sizes: np.ndarray
    threshold: float
    n_cliques: int


def _clique_partition(adj: np.ndarray) -> list[list[int]]:
    """Greedy: take a maximum clique, remove it, repeat until no node is left.

    Done per connected component (cliques never span two, so the cliques are the same as
    on the whole graph); singletons and complete components need no search.
    """
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(len(adj)))
    rows, cols = np.nonzero(np.triu(adj, 1))
    graph.add_edges_from(zip(rows.tolist(), cols.tolist(), strict=True))
    parts: list[list[int]] = []
    for nodes in sorted((sorted(c) for c in nx.connected_components(graph)), key=lambda c: c[0]):
        sub = graph.subgraph(nodes).copy()
        while sub.number_of_nodes():
            n = sub.number_of_nodes()
            if sub.number_of_edges() == n * (n - 1) // 2:
                clique = list(sub.nodes)
            else:
                clique, _ = nx.max_weight_clique(sub, weight=None)
            parts.append(sorted(clique))
            sub.remove_nodes_from(clique)
    return sorted(parts, key=lambda c: (-len(c), c[0]))


def _default_features(images: np.ndarray) -> np.ndarray:
    return images.reshape(len(images), -1).astype(np.float64)


@validate_params({"n_clusters": _POS_INT})
def cluster_generations(
    images: Any, n_clusters: int, *, features: Callable[[np.ndarray], Any] | None = None
) -> ClusterResult:
    """FineXtract's clustering: the ``n_clusters`` largest cliques of a similarity graph.

    Cosine similarities of the images' features; the threshold starts at the 25th
    percentile of the pairwise similarities (rounded down to 0.01) and rises by 0.01. At
    each threshold the graph joining pairs at or above it is split greedily into cliques
    (the largest, removed, again); the scan stops at the first threshold with at least
    ``n_clusters`` cliques. Each of the largest ``n_clusters`` cliques is represented by its
    member nearest the clique's mean feature.

    Parameters
    ----------
    images : array-like of shape (n, C, H, W)
        Generations in [0, 1]; ``n >= n_clusters``.
    n_clusters : int
        ``N0``, the number of images to extract (the size of the fine-tuning set, or a guess).
    features : callable, optional
        Maps the image array to ``(n, d)`` features (the paper uses SSCD copy-detection
        embeddings); default the raw pixels.

    Returns
    -------
    ClusterResult

    Examples
    --------
    >>> imgs = np.repeat(np.eye(4, 64).reshape(4, 1, 8, 8), 3, axis=0)
    >>> cluster_generations(imgs, 4).sizes.tolist()
    [3, 3, 3, 3]
    """
    arr = check_images(images, "images")
    if len(arr) < n_clusters:
        raise DataError(
            f"images holds {len(arr)} generations, fewer than n_clusters={n_clusters}; generate more.",
            argument="images",
        )
    feats = np.asarray(features(arr) if features is not None else _default_features(arr), dtype=np.float64)
    if feats.ndim != 2 or len(feats) != len(arr) or not np.all(np.isfinite(feats)):
        raise DataError(
            "features must return finite (n, d) features, one row per image.", argument="features"
        )
    norms = np.linalg.norm(feats, axis=1, keepdims=True)
    unit = feats / np.where(norms > 0, norms, 1.0)
    sim = unit @ unit.T
    np.fill_diagonal(sim, 0.0)
    off = sim[np.triu_indices(len(sim), 1)] if len(sim) > 1 else np.zeros(1)
    k_low = math.floor(float(np.quantile(off, 0.25)) / 0.01 + 1e-9)
    k = max(k_low, math.floor(float(off.max()) / 0.01 + 1e-9) + 1)  # above every pair: all singletons
    parts = [[i] for i in range(len(sim))]
    while k > k_low:  # downward: the first threshold (from below) with >= n_clusters cliques
        lower = _clique_partition(sim >= (k - 1) * 0.01 - 1e-12)
        if len(lower) < n_clusters:
            break
        k, parts = k - 1, lower
    thr = k * 0.01
    order = sorted(range(len(parts)), key=lambda i: -len(parts[i]))[:n_clusters]
    reps, sizes = [], []
    for i in order:
        members = np.asarray(parts[i])
        centre = feats[members].mean(axis=0)
        reps.append(int(members[np.argmin(np.linalg.norm(feats[members] - centre, axis=1))]))
        sizes.append(len(members))
    return ClusterResult(np.asarray(reps), np.asarray(sizes), round(thr, 2), len(parts))


@dataclass(frozen=True)
class ExtractionScore:
    """How many training images a set of candidates recovers.

    Attributes
    ----------
    distances : numpy.ndarray
        For each training image, the per-pixel RMS distance to its nearest candidate.
    extracted : numpy.ndarray of bool
        ``distances < threshold``.
    rate : float
        The share extracted (the paper's extraction success rate, with a pixel distance in
        place of its SSCD similarity).
    threshold : float
        The distance threshold.

    See Also
    --------
    extraction_score : returns it.
    """

    distances: np.ndarray
    extracted: np.ndarray
    rate: float
    threshold: float


@validate_params({"threshold": [Interval(numbers.Real, 0, None, closed="neither")]})
def extraction_score(
    candidates: Any, training_images: Any, *, threshold: float = DIGITS_THRESHOLD
) -> ExtractionScore:
    """Score candidates against the true fine-tuning images (nearest-candidate distance).

    Parameters
    ----------
    candidates : array-like of shape (k, C, H, W)
        Extracted images in [0, 1].
    training_images : array-like of shape (n, C, H, W)
        The fine-tuning images in [0, 1].
    threshold : float, default=0.075
        Per-pixel RMS distance under which an image counts as extracted (see
        :data:`DIGITS_THRESHOLD` for why 0.075 on 8x8 digits).

    Returns
    -------
    ExtractionScore

    Examples
    --------
    >>> train = np.zeros((2, 1, 8, 8)); train[1] += 1
    >>> extraction_score(np.zeros((1, 1, 8, 8)), train).rate
    0.5
    """
    cand = check_images(candidates, "candidates")
    train = check_images(training_images, "training_images")
    if cand.shape[1:] != train.shape[1:]:
        raise DataError(
            f"candidates have image shape {cand.shape[1:]} but training_images {train.shape[1:]}; pass both "
            "at the same resolution.",
            argument="candidates",
        )
    c = cand.reshape(len(cand), -1).astype(np.float64)
    t = train.reshape(len(train), -1).astype(np.float64)
    d2 = (t**2).sum(1)[:, None] + (c**2).sum(1)[None, :] - 2 * t @ c.T
    dist = np.sqrt(np.maximum(d2, 0.0).min(axis=1) / c.shape[1])
    hit = dist < threshold
    return ExtractionScore(dist, hit, float(hit.mean()), float(threshold))
