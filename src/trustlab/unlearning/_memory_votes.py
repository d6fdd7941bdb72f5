"""Vote aggregation of a kNN memory: one pass of running sums gives the prediction for every k.

Geirhos et al., "Towards flexible perception with visual memory" (ICML 2025): the
neighbour at rank ``r`` (counted from 0) with label ``c``, distance ``d`` and record
weight ``w`` adds ``w * omega(r, d)`` to class ``c``'s score. The leader changes only on a
strictly larger score, so ties keep the class that reached the maximum first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError

AGGREGATORS = ("rank", "plurality", "distance", "softmax")


def vote_weights(
    aggregator: str,
    distances: np.ndarray,
    *,
    offset: float = 2.0,
    exponent: float = 1.0,
    temperature: float = 0.07,
    power: float = 1.0,
) -> np.ndarray:
    """``omega(r, d)`` for every (query, rank) cell of ``distances`` (shape ``(n, k)``)."""
    n, k = distances.shape
    if aggregator == "rank":
        return np.broadcast_to((np.arange(k, dtype=float) + offset) ** -exponent, (n, k)).copy()
    if aggregator == "plurality":
        return np.ones((n, k))
    if aggregator == "distance":
        return np.exp(-power * distances)
    # softmax: exp((1 - d) / tau), shifted per query by its nearest distance (a common
    # factor of the row: argmax and normalised scores are unchanged, overflow is not).
    nearest = distances[:, :1] if k else np.zeros((n, 1))
    return np.exp(-(distances - nearest) / temperature)


def running_vote(codes: np.ndarray, omega: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Predictions for k = 1..K and the final class scores.

    Parameters
    ----------
    codes : (n, K) int array
        Neighbour label codes in ``[0, n_classes)``, nearest first.
    omega : (n, K) float array
        Non-negative vote of each neighbour (rule weight times record weight).
    n_classes : int
        Number of classes.

    Returns
    -------
    predictions : (n, K) int array
        ``predictions[:, k - 1]`` is the prediction with the ``k`` nearest neighbours.
    scores : (n, n_classes) float array
        The class scores with all ``K`` neighbours.
    """
    n, k = codes.shape
    scores = np.zeros((n, n_classes))
    leader = np.zeros(n, dtype=np.int64)
    best = np.full(n, -np.inf)
    predictions = np.empty((n, k), dtype=np.int64)
    rows = np.arange(n)
    for r in range(k):
        c = codes[:, r]
        scores[rows, c] += omega[:, r]
        value = scores[rows, c]
        lead = value > best
        leader[lead] = c[lead]
        best[lead] = value[lead]
        predictions[:, r] = leader
    return predictions, scores


def _positive(value: Any, name: str, *, minimum: float = 0.0, closed: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ParameterError(f"{name} must be a number, got {type(value).__name__}.", argument=name)
    x = float(value)
    ok = x >= minimum if closed else x > minimum
    if not (ok and np.isfinite(x)):
        bound = f">= {minimum:g}" if closed else f"> {minimum:g}"
        raise ParameterError(f"{name} must be a finite number {bound}, got {value!r}.", argument=name)
    return x


def vote_inputs(
    labels: Any, distances: Any, weights: Any, *, need_distances: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """Validate the public vote functions' arrays; returns (classes, codes, distances, weights, was_1d)."""
    if isinstance(labels, str | bytes) or labels is None:
        raise DataError("labels must be an array of neighbour labels, nearest first.", argument="labels")
    try:
        lab = np.asarray(labels, dtype=object if not hasattr(labels, "dtype") else None)
    except (TypeError, ValueError) as exc:
        raise DataError(f"labels must be a rectangular array ({exc}).", argument="labels") from None
    was_1d = lab.ndim == 1
    if was_1d:
        lab = lab[None, :]
    if lab.ndim != 2 or lab.shape[1] == 0 or lab.shape[0] == 0:
        raise DataError(
            f"labels must have shape (n_queries, k) or (k,) with k >= 1, got shape {np.shape(labels)}.",
            argument="labels",
        )
    try:
        classes, codes = np.unique(lab.ravel(), return_inverse=True)
    except TypeError:
        raise DataError(
            "labels must be mutually comparable (all numbers or all strings).", argument="labels"
        ) from None
    codes = codes.reshape(lab.shape)
    if need_distances or distances is not None:
        if distances is None:
            raise DataError(
                "this rule needs the neighbours' distances; pass distances=.", argument="distances"
            )
        dist = check_numeric_array(distances, "distances")
        dist = dist[None, :] if dist.ndim == 1 else dist
        if dist.shape != lab.shape:
            raise DataError(
                f"distances must have the shape of labels {lab.shape}, got {dist.shape}.",
                argument="distances",
            )
    else:
        dist = np.zeros(lab.shape)
    if weights is None:
        w = np.ones(lab.shape)
    else:
        w = check_numeric_array(weights, "weights")
        w = w[None, :] if w.ndim == 1 else w
        if w.shape != lab.shape:
            raise DataError(
                f"weights must have the shape of labels {lab.shape}, got {w.shape}.", argument="weights"
            )
        if np.any(w < 0):
            raise DataError("weights must be >= 0 (0 silences a record).", argument="weights")
    return classes, codes, dist, w, was_1d


def public_vote(
    aggregator: str,
    labels: Any,
    distances: Any,
    weights: Any,
    *,
    offset: float = 2.0,
    exponent: float = 1.0,
    temperature: float = 0.07,
    power: float = 1.0,
) -> np.ndarray:
    """Shared body of the public ``*_vote`` functions."""
    need = aggregator in ("distance", "softmax")
    if aggregator == "rank":
        offset = _positive(offset, "offset", minimum=0.1, closed=True)
        exponent = _positive(exponent, "exponent")
    elif aggregator == "softmax":
        temperature = _positive(temperature, "temperature")
    elif aggregator == "distance":
        power = _positive(power, "power", closed=True)
    classes, codes, dist, w, was_1d = vote_inputs(labels, distances, weights, need_distances=need)
    omega = vote_weights(
        aggregator, dist, offset=offset, exponent=exponent, temperature=temperature, power=power
    )
    predictions, _ = running_vote(codes, omega * w, classes.size)
    out = classes[predictions]
    return out[0] if was_1d else out
