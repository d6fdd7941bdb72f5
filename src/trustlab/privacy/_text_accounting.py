"""Cape's accounting: the worst-case per-token epsilon of a (bucketised) exponential-mechanism draw.

Private module of :mod:`trustlab.privacy.text`; the derivation is in docs/privacy/cape.md.

References
----------
Wu, Dai, Wang, Yan. "Cape: Context-Aware Prompt Perturbation Mechanism with Differential
Privacy". ICML 2025.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from trustlab._validation import check_epsilon
from trustlab.errors import ParameterError

__all__ = ["cape_epsilon", "em_epsilon_for"]


# --------------------------------------------------------------------------- accounting
def _log_bound(em_epsilon: float, n: int, n_buckets: int | None) -> float:
    """Worst-case log probability ratio of one token's draw over utility vectors in [0, D]."""
    h = em_epsilon / 2.0  # log E, E = exp(em_epsilon / 2): the largest bucket weight
    if n_buckets is None:  # plain exponential mechanism over n candidates
        if n == 1:
            return 0.0
        ln1 = math.log(n - 1)
        return h + np.logaddexp(0.0, ln1 + h) - np.logaddexp(h, ln1)
    k_max = min(n_buckets, n)
    if k_max == 1:  # one bucket: the uniform draw
        return 0.0
    # most likely: alone in a bucket of weight E beside one bucket of weight 1 -> E / (E + 1)
    # least likely: in a bucket of n - k + 1 tokens of weight 1 beside k - 1 buckets of weight E
    k = np.arange(1, k_max + 1, dtype=float)
    with np.errstate(divide="ignore"):
        least = np.log(n - k + 1) + np.logaddexp(0.0, np.log(k - 1) + h)
    return float(h - np.logaddexp(0.0, h) + least.max())


def cape_epsilon(em_epsilon: float, vocab_size: int, n_buckets: int | None = 50) -> float:
    """The per-token privacy of a draw whose exponential mechanism runs at ``em_epsilon``.

    A worst case over all pairs of utility vectors in ``[0, sensitivity]`` (the bounded-range
    argument), so it holds for any context. With buckets it covers the bucket-size term that
    the paper calls ``epsilon' = ln(max |b_i| / min |b_j|)`` together with the change in the
    set of non-empty buckets.

    Parameters
    ----------
    em_epsilon : float
        The exponential mechanism's parameter (the paper's ``epsilon``), >= 0.
    vocab_size : int
        Number of candidate tokens.
    n_buckets : int or None, default 50
        Buckets of the draw; None for the plain exponential mechanism.

    Returns
    -------
    float
        The pure-DP epsilon of one token's release.

    Examples
    --------
    >>> round(cape_epsilon(2.0, 1000, None), 3)  # plain: at most em_epsilon
    1.998
    >>> round(cape_epsilon(2.0, 1000, 50), 2)  # bucketised: the bucket sizes cost ~ln(vocab)
    11.44
    """
    if not (isinstance(em_epsilon, int | float) and math.isfinite(em_epsilon) and em_epsilon >= 0):
        raise ParameterError(
            f"em_epsilon must be a finite number >= 0, got {em_epsilon!r}.", argument="em_epsilon"
        )
    return float(_log_bound(float(em_epsilon), _vocab(vocab_size), _buckets(n_buckets)))


def em_epsilon_for(epsilon: float, vocab_size: int, n_buckets: int | None = 50) -> float:
    """The largest exponential-mechanism parameter whose :func:`cape_epsilon` is <= ``epsilon``.

    Parameters
    ----------
    epsilon : float
        The per-token guarantee wanted.
    vocab_size : int
        Number of candidate tokens.
    n_buckets : int or None, default 50
        Buckets of the draw; None for the plain exponential mechanism.

    Returns
    -------
    float

    Raises
    ------
    ParameterError
        When even ``em_epsilon = 0`` costs more than ``epsilon``: a bucketised draw over ``n``
        tokens costs at least ``ln(k (n - k + 1) / 2)`` with ``k = min(n_buckets, n)`` (the
        bucket sizes alone reveal that much); the message says how to fix it.

    Examples
    --------
    >>> em = em_epsilon_for(12.0, 1000, 50)
    >>> round(em, 3), cape_epsilon(em, 1000, 50) <= 12.0
    (2.911, True)
    """
    return _em_for(check_epsilon(epsilon), _vocab(vocab_size), _buckets(n_buckets))


@lru_cache(maxsize=256)
def _em_for(epsilon: float, n: int, nb: int | None) -> float:
    floor = _log_bound(0.0, n, nb)
    if floor >= epsilon:
        raise ParameterError(
            f"epsilon = {epsilon:g} is below the {floor:.3g} that a draw over {n} tokens in "
            f"{nb} buckets costs at any strength (the bucket sizes reveal ~ln(vocab_size)); raise "
            "epsilon, use fewer buckets, or n_buckets=None for the plain exponential mechanism.",
            argument="epsilon",
        )
    lo, hi = 0.0, max(2.0 * epsilon, 1.0)
    while _log_bound(hi, n, nb) <= epsilon:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:  # bisection: lo always satisfies the bound
        mid = 0.5 * (lo + hi)
        if _log_bound(mid, n, nb) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def _vocab(vocab_size: Any) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int | np.integer) or vocab_size < 1:
        raise ParameterError(
            f"vocab_size must be an integer >= 1, got {vocab_size!r}.", argument="vocab_size"
        )
    return int(vocab_size)


def _buckets(n_buckets: Any) -> int | None:
    if n_buckets is None:
        return None
    if isinstance(n_buckets, bool) or not isinstance(n_buckets, int | np.integer) or n_buckets < 1:
        raise ParameterError(
            f"n_buckets must be an integer >= 1 or None (plain exponential mechanism), got {n_buckets!r}.",
            argument="n_buckets",
        )
    return int(n_buckets)
