"""The Ahmadian-Cohen single-batch attack on a cardinality estimator (a simulation)."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError


@dataclass(frozen=True)
class AttackResult:
    """What :func:`attack_standard_estimator` found.

    Attributes
    ----------
    scores : ndarray
        Suspicion score of each ground key (higher: more likely a low-rank key).
    ground : ndarray of int64
        The ground keys, aligned with ``scores``.
    over_set : ndarray of int64
        The ``2k`` most suspicious keys (the set meant to be over-estimated).
    under_set : ndarray of int64
        The other ground keys (meant to be under-estimated).
    over_ratio : float
        ``estimate(over_set) / len(over_set)``.
    under_ratio : float
        ``estimate(under_set) / len(under_set)``.
    baseline_over_ratio : float
        The same ratio for a random ground subset of the same size as ``over_set``.
    baseline_under_ratio : float
        The same ratio for its complement.
    identified_fraction : float
        Fraction of the ground set's true bottom-k keys inside ``over_set`` (NaN when no
        ``ranks`` oracle was given; chance level is ``2k / n_ground``).
    n_queries : int
        Queries issued (the batch, plus the four evaluation queries).

    See Also
    --------
    attack_standard_estimator : builds it.
    """

    scores: np.ndarray
    ground: np.ndarray
    over_set: np.ndarray
    under_set: np.ndarray
    over_ratio: float
    under_ratio: float
    baseline_over_ratio: float
    baseline_under_ratio: float
    identified_fraction: float
    n_queries: int


def _call(estimate_fn: Callable[[np.ndarray], Any], keys: np.ndarray) -> float:
    answer = estimate_fn(keys)
    try:
        value = float(answer)
    except (TypeError, ValueError):
        value = float("nan")
    if not np.isfinite(value) or value <= 0:
        raise DataError(
            f"estimate_fn returned {answer!r} for a non-empty set; it must return a positive finite count.",
            argument="estimate_fn",
        )
    return value


@validate_params(
    {
        "estimate_fn": [callable],
        "n_ground": [Interval(numbers.Integral, 4, 10**7, closed="both")],
        "n_queries": [Interval(numbers.Integral, 2, 10**7, closed="both")],
        "k": [Interval(numbers.Integral, 2, 2**31, closed="both")],
        "random_state": ["random_state"],
        "score": [Options({"contrast", "ac"})],
        "ranks": [callable, None],
    }
)
def attack_standard_estimator(
    estimate_fn: Callable[[np.ndarray], Any],
    *,
    n_ground: int,
    n_queries: int,
    k: int,
    random_state: Any = None,
    score: str = "contrast",
    ranks: Callable[[np.ndarray], np.ndarray] | None = None,
) -> AttackResult:
    """Attack a cardinality estimator with one batch of random queries (Ahmadian & Cohen).

    The attack of [2]_ (their Algorithm 1), which [1]_ takes as the reason robust estimators
    are needed: fix a ground set of ``n_ground`` keys, query ``n_queries`` random subsets
    (each key in with probability 1/2), score each key by the answers of the queries that
    contain it, and sort. Low-rank keys raise the answers of the queries they are in, so
    the ``2k`` most suspicious keys form a set the estimator grossly over-estimates and
    the rest one it under-estimates. Only the post-processing is adaptive; O(k) queries
    break the standard bottom-k estimator.

    Scores: ``"contrast"`` (default, trustlab's lower-variance choice) is the mean of
    ``log(answer)`` over the queries containing the key minus the mean over the others;
    ``"ac"`` is the paper's rule, minus the mean of the sufficient statistic ``1/answer``
    (proportional to ``tau_k``) over the queries containing the key. This is a simulation
    of an adversary: its randomness is a seeded NumPy generator.

    Parameters
    ----------
    estimate_fn : callable
        ``estimate_fn(keys)`` answers the number of distinct keys of an int64 array, e.g.
        ``lambda keys: sketch.sketch(keys).estimate()`` or a robust estimator's
        ``estimate``.
    n_ground : int
        Size of the ground set (the paper's ``n_0``; e.g. ``16 k``).
    n_queries : int
        Queries in the batch (``O(k)`` suffices against the standard estimator).
    k : int
        The sketch size (the over set has ``2k`` keys).
    random_state : None, int or numpy Generator, default None
        Seeds the attacker's query sets.
    score : {"contrast", "ac"}, default "contrast"
        Scoring rule (see above).
    ranks : callable or None, default None
        A rank oracle (``sketch.ranks``) used only to report ``identified_fraction``.

    Returns
    -------
    AttackResult
        The over/under sets and the estimator's ratios on them, beside random sets of the
        same sizes.

    Examples
    --------
    >>> from trustlab.privacy.sketches import BottomKSketch
    >>> s = BottomKSketch(16, salt=0)
    >>> res = attack_standard_estimator(
    ...     lambda keys: s.sketch(keys).estimate(), n_ground=256, n_queries=256, k=16,
    ...     random_state=0, ranks=s.ranks)
    >>> bool(res.over_ratio > 2 * res.baseline_over_ratio)
    True

    References
    ----------
    .. [1] E. Cohen, M. Singhal, U. Stemmer, "Breaking the Quadratic Barrier: Robust
       Cardinality Sketches for Adaptive Queries", ICML 2025 (PMLR 267).
    .. [2] S. Ahmadian, E. Cohen, "Unmasking Vulnerabilities: Cardinality Sketches under
       Adaptive Inputs", ICML 2024 (PMLR 235).
    """
    rng = make_generator(random_state)
    n0, m, k = int(n_ground), int(n_queries), int(k)
    if 2 * k >= n0:
        raise DataError(
            f"n_ground={n0} must exceed 2k={2 * k} (the over set holds 2k keys); use about 16k.",
            argument="n_ground",
        )
    base = int(rng.integers(0, 2**62 - n0))
    ground = np.arange(base, base + n0, dtype=np.int64)
    sum_in = np.zeros(n0)
    n_in = np.zeros(n0)
    total = 0.0
    for _ in range(m):
        mask = rng.random(n0) < 0.5
        if not mask.any():
            continue
        answer = _call(estimate_fn, ground[mask])
        y = np.log(answer) if score == "contrast" else -1.0 / answer
        sum_in[mask] += y
        n_in[mask] += 1
        total += y
    n_out = m - n_in
    mean_in = np.divide(sum_in, n_in, out=np.zeros(n0), where=n_in > 0)
    if score == "contrast":
        mean_out = np.divide(total - sum_in, n_out, out=np.zeros(n0), where=n_out > 0)
        scores = mean_in - mean_out
    else:
        scores = mean_in
    order = np.argsort(-scores, kind="stable")
    over, under = ground[np.sort(order[: 2 * k])], ground[np.sort(order[2 * k :])]
    pick = np.zeros(n0, dtype=bool)
    pick[rng.choice(n0, size=2 * k, replace=False)] = True
    over_ratio = _call(estimate_fn, over) / over.size
    under_ratio = _call(estimate_fn, under) / under.size
    base_over = _call(estimate_fn, ground[pick]) / (2 * k)
    base_under = _call(estimate_fn, ground[~pick]) / (n0 - 2 * k)
    identified = float("nan")
    if ranks is not None:
        true_low = ground[np.argsort(np.asarray(ranks(ground)), kind="stable")[:k]]
        identified = float(np.isin(true_low, over).mean())
    return AttackResult(
        scores=scores,
        ground=ground,
        over_set=over,
        under_set=under,
        over_ratio=over_ratio,
        under_ratio=under_ratio,
        baseline_over_ratio=base_over,
        baseline_under_ratio=base_under,
        identified_fraction=identified,
        n_queries=m + 4,
    )
