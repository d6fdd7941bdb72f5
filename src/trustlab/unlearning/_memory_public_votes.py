"""The public vote rules of the kNN memory (re-exported by :mod:`trustlab.unlearning.memory`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab._param_validation import validate_params
from trustlab.unlearning._memory_votes import public_vote

__all__ = ["distance_vote", "plurality_vote", "rank_vote", "softmax_vote"]

_REFERENCE = """R. Geirhos, P. Jaini, A. Stone, S. Medapati, X. Yi, G. Toderici, A. Ogale and
    J. Shlens. "Towards flexible perception with visual memory". ICML 2025 (PMLR 267)."""

_LABELS = {"labels": ["array-like"]}


@validate_params(_LABELS)
def rank_vote(labels: Any, *, weights: Any = None, offset: float = 2.0, exponent: float = 1.0) -> np.ndarray:
    """RankVoting: the neighbour at rank ``r`` (from 0) votes ``w / (r + offset) ** exponent``.

    The paper's proposed rule (default ``offset = 2``, ``exponent = 1``); distances are not
    used. One pass of running sums gives the prediction for every ``k``; ties keep the
    label that reached the top score first.

    Parameters
    ----------
    labels : array-like of shape (n_queries, K) or (K,)
        Neighbour labels, nearest first.
    weights : array-like of the shape of ``labels``, optional
        Non-negative record weights (default 1).
    offset : float, default 2.0
        ``a`` in ``1 / (r + a)``; at least 0.1.
    exponent : float, default 1.0
        ``p`` in ``(r + a) ** -p`` (the released analysis code uses 1).

    Returns
    -------
    numpy.ndarray of shape (n_queries, K) or (K,)
        Column ``k - 1`` is the prediction with the ``k`` nearest neighbours.

    References
    ----------
    {ref}

    Examples
    --------
    >>> rank_vote(["A", "B", "B"]).tolist()
    ['A', 'A', 'B']
    """
    return public_vote("rank", labels, None, weights, offset=offset, exponent=exponent)


@validate_params(_LABELS)
def plurality_vote(labels: Any, *, weights: Any = None) -> np.ndarray:
    """Plurality: every neighbour votes its weight (1 by default); ties keep the first leader.

    Parameters
    ----------
    labels : array-like of shape (n_queries, K) or (K,)
        Neighbour labels, nearest first.
    weights : array-like of the shape of ``labels``, optional
        Non-negative record weights.

    Returns
    -------
    numpy.ndarray of shape (n_queries, K) or (K,)
        The prediction for every ``k = 1..K``.

    References
    ----------
    {ref}

    Examples
    --------
    >>> plurality_vote(["A", "B", "B"]).tolist()
    ['A', 'A', 'B']
    """
    return public_vote("plurality", labels, None, weights)


@validate_params(_LABELS | {"distances": ["array-like"]})
def distance_vote(labels: Any, distances: Any, *, weights: Any = None, power: float = 1.0) -> np.ndarray:
    """DistanceVoting: a neighbour at distance ``d`` votes ``w * exp(-power * d)``.

    Parameters
    ----------
    labels : array-like of shape (n_queries, K) or (K,)
        Neighbour labels, nearest first.
    distances : array-like of the shape of ``labels``
        Their distances to the query.
    weights : array-like of the shape of ``labels``, optional
        Non-negative record weights.
    power : float, default 1.0
        ``p >= 0``; ``p = 0`` is Plurality.

    Returns
    -------
    numpy.ndarray of shape (n_queries, K) or (K,)
        The prediction for every ``k = 1..K``.

    References
    ----------
    {ref}

    Examples
    --------
    >>> distance_vote(["A", "B", "B"], [0.1, 0.2, 0.3]).tolist()
    ['A', 'A', 'B']
    """
    return public_vote("distance", labels, distances, weights, power=power)


@validate_params(_LABELS | {"distances": ["array-like"]})
def softmax_vote(
    labels: Any, distances: Any, *, weights: Any = None, temperature: float = 0.07
) -> np.ndarray:
    """SoftmaxVoting: a neighbour at cosine distance ``d`` votes ``w * exp((1 - d) / temperature)``.

    As in DINO's k-NN evaluation (``temperature = 0.07``). It tends to Plurality as the
    temperature grows and to 1-NN as it shrinks.

    Parameters
    ----------
    labels, distances, weights
        As in :func:`distance_vote` (cosine distances here).
    temperature : float, default 0.07
        ``tau > 0``.

    Returns
    -------
    numpy.ndarray
        As in :func:`distance_vote`.

    References
    ----------
    {ref}

    Examples
    --------
    >>> softmax_vote(["A", "B", "B"], [0.10, 0.11, 0.12]).tolist()
    ['A', 'A', 'B']
    """
    return public_vote("softmax", labels, distances, weights, temperature=temperature)


for _f in (rank_vote, plurality_vote, distance_vote, softmax_vote):
    _f.__doc__ = (_f.__doc__ or "").replace("{ref}", _REFERENCE)
