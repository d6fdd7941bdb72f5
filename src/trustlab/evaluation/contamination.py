"""Planted contamination: the overlap statistics' check on a user's own corpus sizes (catalog 001-03).

Zhang et al. (ICML 2025 position paper, "Language model developers should report train-test
overlap") ask developers to publish the n-gram overlap of each test set with the training data.
:func:`simulate_contamination` is the check beside :func:`~trustlab.evaluation.train_test_overlap`:
it builds a corpus of random words, plants a chosen share of the test instances in it verbatim
and another share as a copied prefix, and compares what the overlap statistics find with what
was planted. The closed forms it checks: every planted instance whose copy holds at least ``n``
tokens is flagged; a prefix of ``k`` tokens of an ``L``-token instance overlaps in
``(k - n + 1) / (L - n + 1)`` of its n-grams (0 when ``k < n``); a clean instance is flagged by
chance with probability at most ``(L - n + 1) * n_train_ngrams / V**n`` (union bound over
uniform random words from a vocabulary of ``V``).

See ``docs/evaluation/overlap.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import ParameterError
from trustlab.evaluation.overlap import OverlapReport, train_test_overlap

__all__ = ["ContaminationSimulation", "simulate_contamination"]

_POS_INT = Interval(numbers.Integral, 1, None, closed="left")
_RATE = Interval(numbers.Real, 0, 1, closed="both")


@dataclass(frozen=True)
class ContaminationSimulation:
    """Planted versus detected contamination of one simulated corpus.

    Attributes
    ----------
    planted : numpy.ndarray
        Per test instance: 0 clean, 1 planted verbatim, 2 planted as a prefix.
    report : OverlapReport
        What :func:`~trustlab.evaluation.train_test_overlap` found.
    prefix_length : int
        Tokens of each planted prefix.
    predicted_rate : float
        Share of test instances the statistics must flag: the verbatim share, plus the prefix
        share when ``prefix_length >= n``.
    detected_rate : float
        Share flagged (``report.contamination_rate``).
    predicted_prefix_fraction : float
        ``(k - n + 1) / (L - n + 1)``: overlap fraction of a planted prefix (0 when ``k < n``).
    chance_bound : float
        Union bound on the probability that a clean instance is flagged by chance.

    See Also
    --------
    simulate_contamination : builds it.
    """

    planted: np.ndarray
    report: OverlapReport
    prefix_length: int
    predicted_rate: float
    detected_rate: float
    predicted_prefix_fraction: float
    chance_bound: float

    @property
    def planted_rate(self) -> float:
        """Share of test instances planted in the corpus (verbatim or as a prefix)."""
        return float(np.mean(self.planted > 0))

    @property
    def missed(self) -> int:
        """Planted instances the statistics should flag but did not (0 when the theory holds)."""
        must = (self.planted == 1) | ((self.planted == 2) & (self.predicted_prefix_fraction > 0))
        return int(np.sum(must & ~self.report.contaminated))

    @property
    def false_positives(self) -> int:
        """Clean instances flagged."""
        return int(np.sum((self.planted == 0) & self.report.contaminated))

    @property
    def prefix_fraction_error(self) -> float:
        """Largest ``|measured - predicted|`` overlap fraction over the planted prefixes (0 if none)."""
        frac = self.report.overlap_fraction[self.planted == 2]
        return float(np.max(np.abs(frac - self.predicted_prefix_fraction))) if frac.size else 0.0


@validate_params(
    {
        "n_test": [_POS_INT],
        "test_length": [_POS_INT],
        "n_train": [_POS_INT],
        "train_length": [_POS_INT],
        "vocabulary": [Interval(numbers.Integral, 2, None, closed="left")],
        "verbatim_rate": [_RATE],
        "prefix_rate": [_RATE],
        "prefix_length": [_POS_INT, None],
        "n": [_POS_INT],
    }
)
def simulate_contamination(
    *,
    n_test: int = 400,
    test_length: int = 40,
    n_train: int = 50,
    train_length: int = 2000,
    vocabulary: int = 5000,
    verbatim_rate: float = 0.1,
    prefix_rate: float = 0.1,
    prefix_length: int | None = None,
    n: int = 13,
    random_state: Any = 0,
) -> ContaminationSimulation:
    """Plant test instances in a random-word corpus and measure what the overlap statistics find.

    ``n_train`` training documents and ``n_test`` test instances of uniform random words from a
    vocabulary of ``vocabulary`` words; ``round(verbatim_rate * n_test)`` randomly chosen test
    instances are appended whole to a training document, ``round(prefix_rate * n_test)`` others
    (fewer if the two roundings exceed ``n_test``)
    by their first ``prefix_length`` tokens. Zhang et al. (ICML 2025) ask for the overlap
    statistics of :func:`~trustlab.evaluation.train_test_overlap`; this is their planted check
    (the defaults are ``tests/evaluation/test_overlap.py``'s claim).

    Parameters
    ----------
    n_test : int, default 400
        Test instances.
    test_length : int, default 40
        Tokens per test instance; at least ``n``.
    n_train : int, default 50
        Training documents.
    train_length : int, default 2000
        Random tokens per training document, before the planted copies.
    vocabulary : int, default 5000
        Words the random text is drawn from.
    verbatim_rate : float, default 0.1
        Share of test instances planted whole.
    prefix_rate : float, default 0.1
        Share planted as a prefix; ``verbatim_rate + prefix_rate <= 1``.
    prefix_length : int, optional
        Tokens of each planted prefix, at most ``test_length`` (default ``test_length // 2``).
    n : int, default 13
        n-gram length (13: GPT-3, HELM).
    random_state : None, int or numpy.random.Generator, default 0
        Seed for the words and the choice of planted instances.

    Returns
    -------
    ContaminationSimulation

    Raises
    ------
    ParameterError
        For a non-positive size, a rate outside [0, 1], rates summing above 1, ``test_length <
        n`` or ``prefix_length > test_length`` (naming the argument).

    References
    ----------
    Zhang, A. K., Klyman, K., Mai, Y., Levine, Y., Zhang, Y., Bommasani, R. & Liang, P. (2025).
    Language model developers should report train-test overlap. ICML (position paper).

    Examples
    --------
    >>> sim = simulate_contamination(n_test=50, n_train=5, train_length=200, random_state=0)
    >>> sim.detected_rate == sim.predicted_rate == 0.2, sim.missed, sim.false_positives
    (True, 0, 0)
    """
    if test_length < n:
        raise ParameterError(
            f"test_length ({test_length}) must be at least n ({n}): shorter instances have no n-gram.",
            argument="test_length",
        )
    k = test_length // 2 if prefix_length is None else int(prefix_length)
    if k > test_length:
        raise ParameterError(
            f"prefix_length ({k}) must be at most test_length ({test_length}).", argument="prefix_length"
        )
    if verbatim_rate + prefix_rate > 1 + 1e-12:
        raise ParameterError(
            f"verbatim_rate + prefix_rate must be at most 1, got {verbatim_rate + prefix_rate:g}; "
            "lower prefix_rate.",
            argument="prefix_rate",
        )
    n_verbatim = round(verbatim_rate * n_test)
    n_prefix = min(round(prefix_rate * n_test), n_test - n_verbatim)
    rng = make_generator(random_state)
    words = np.array([f"w{i}" for i in range(vocabulary)])
    test = [rng.choice(words, test_length) for _ in range(n_test)]
    train = [list(rng.choice(words, train_length)) for _ in range(n_train)]
    order = rng.permutation(n_test)
    planted = np.zeros(n_test, dtype=np.int8)
    planted[order[:n_verbatim]] = 1
    planted[order[n_verbatim : n_verbatim + n_prefix]] = 2
    for j, i in enumerate(order[: n_verbatim + n_prefix]):
        train[j % n_train].extend(test[i] if planted[i] == 1 else test[i][:k])
    report = train_test_overlap([" ".join(d) for d in train], [" ".join(t) for t in test], n=n)
    grams = test_length - n + 1
    prefix_fraction = max(k - n + 1, 0) / grams
    must = n_verbatim + (n_prefix if prefix_fraction > 0 else 0)
    log_chance = math.log(grams * max(report.n_train_ngrams, 1)) - n * math.log(vocabulary)
    chance = math.exp(min(log_chance, 0.0))
    return ContaminationSimulation(
        planted=planted,
        report=report,
        prefix_length=k,
        predicted_rate=must / n_test,
        detected_rate=report.contamination_rate,
        predicted_prefix_fraction=prefix_fraction,
        chance_bound=chance,
    )
