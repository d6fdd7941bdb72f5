"""Result records of the kNN memory: explanations and pruning reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class MemoryNeighbour:
    """One retrieved record of a prediction and the vote it cast.

    Attributes
    ----------
    id : int
        The record's id in the memory.
    label : Any
        Its label.
    source : Any
        Its source (``None`` when it was added without one).
    rank : int
        Its rank among the neighbours used, from 0 (excluded records skipped).
    distance : float
        Its distance to the query (``1 - cosine similarity`` or Euclidean).
    weight : float
        Its record weight: user weight times source weight times soft-pruning weight.
    vote : float
        What it added to its label's score: ``weight * omega(rank, distance)``.

    See Also
    --------
    KNNMemory.explain : builds these.
    """

    id: int
    label: Any
    source: Any
    rank: int
    distance: float
    weight: float
    vote: float


@dataclass(frozen=True)
class MemoryExplanation:
    """Why the memory predicted what it did for one query.

    Attributes
    ----------
    prediction : Any
        The predicted label (ties keep the label that reached the top score first).
    scores : dict
        Label to summed vote, for every label that received a vote.
    neighbours : tuple of MemoryNeighbour
        The ``k`` records that voted, nearest first.
    exclusions_ignored : bool
        True when every candidate record was excluded, so the exclusions were ignored
        for this query (the paper's rule).

    See Also
    --------
    KNNMemory.explain : builds these.
    """

    prediction: Any
    scores: dict[Any, float]
    neighbours: tuple[MemoryNeighbour, ...]
    exclusions_ignored: bool = False


@dataclass(frozen=True)
class PruneResult:
    """What :meth:`KNNMemory.prune` measured and changed.

    Attributes
    ----------
    mode : {"hard", "soft"}
        Hard pruning excludes records; soft pruning down-weights them.
    top_k : int
        Neighbours per self-query used for the counts.
    ids : numpy.ndarray
        The ids of the records counted (every live record).
    n_wrong : numpy.ndarray
        For each id: how often it appeared among the ``top_k`` neighbours of another
        record with a different label (self matches dropped).
    pruned_ids : numpy.ndarray
        Hard: the ids excluded (``n_wrong >= threshold``). Soft: the ids down-weighted
        (``n_wrong > 0``).
    weights : numpy.ndarray
        The pruning weight of each id (1 where unchanged; hard pruning leaves all at 1).

    See Also
    --------
    KNNMemory.prune : builds it.
    """

    mode: str
    top_k: int
    ids: np.ndarray
    n_wrong: np.ndarray
    pruned_ids: np.ndarray
    weights: np.ndarray
