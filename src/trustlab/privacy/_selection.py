"""Exact selection samplers: uniform integers, Bernoulli coins and the exponential mechanism's draw.

Public through :mod:`trustlab.privacy.samplers`. Uniform integers come from the
operating system's cryptographically secure generator by rejection sampling (exact);
Bernoulli coins and the Gumbel-max draw of :func:`exponential_select` come from
OpenDP's exact samplers. Nothing here is seeded.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import numpy as np

from trustlab._validation import check_positive_int
from trustlab.errors import ParameterError
from trustlab.privacy._opendp import opendp

__all__ = ["bernoulli", "exponential_select", "uniform_int"]


def uniform_int(high: int, size: int) -> np.ndarray:
    """Draw ``size`` exact uniform integers in ``0 .. high - 1`` from the OS's secure generator.

    Rejection sampling on 64-bit words from :func:`os.urandom` (the same source
    OpenDP's samplers use): every value has probability exactly ``1 / high``, with no
    floating point involved. Mechanisms use it for the randomness that is part of the
    mechanism but is not additive noise (breaking ties, a grid point inside a chosen
    interval); it cannot be seeded.

    Parameters
    ----------
    high : int
        Number of values, ``1 <= high <= 2**62``.
    size : int
        Number of draws.

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> uniform_int(1, 3).tolist()
    [0, 0, 0]
    """
    if isinstance(high, bool) or not isinstance(high, int | np.integer) or not (1 <= int(high) <= 2**62):
        raise ParameterError(f"high must be an integer in [1, 2**62], got {high!r}.", argument="high")
    return uniform_below(int(high), check_positive_int(size, "size", minimum=0))


def uniform_below(high: int, size: int) -> np.ndarray:
    """:func:`uniform_int` without argument checks (``1 <= high <= 2**62``, ``size >= 0``), for hot loops."""
    if high == 1 or size == 0:
        return np.zeros(size, dtype=np.int64)
    bits = (high - 1).bit_length()
    mask = np.uint64((1 << bits) - 1)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        # a word is kept with probability high / 2**bits (> 1/2): draw what is missing, plus ~10%
        count = need if high & (high - 1) == 0 else int(need * 1.1 * (1 << bits) / high) + 16
        words = np.frombuffer(os.urandom(8 * count), dtype=np.uint64) & mask
        ok = words[words < np.uint64(high)][:need]
        out[filled : filled + ok.size] = ok.astype(np.int64)
        filled += ok.size
    return out


def bernoulli(prob: float, size: int) -> np.ndarray:
    """Draw ``size`` independent exact Bernoulli(``prob``) coins (OpenDP), as booleans.

    OpenDP's bit-vector randomized response replaces each bit by a fair coin with
    probability ``f``, so it flips the bit with probability ``f / 2``: starting from
    ones and flipping with probability ``1 - prob`` (exact in floating point for
    ``prob >= 1/2``, Sterbenz), or from zeros and flipping with probability ``prob``,
    gives exact Bernoulli draws. This is the coin of randomized response.

    Parameters
    ----------
    prob : float
        Probability of ``True``, in ``[0, 1]``.
    size : int
        Number of coins, ``>= 0``.

    Returns
    -------
    numpy.ndarray of bool
        ``size`` independent coins (unseeded).

    Examples
    --------
    >>> bernoulli(1.0, 3).tolist()
    [True, True, True]
    """
    prob = float(prob)
    if not (0.0 <= prob <= 1.0):
        raise ParameterError(f"prob must lie in [0, 1], got {prob}.", argument="prob")
    size = check_positive_int(size, "size", minimum=0)
    if prob <= 0.0 or size == 0:
        return np.zeros(size, dtype=bool)
    if prob >= 1.0:
        return np.ones(size, dtype=bool)
    dp = opendp()
    start_ones = prob >= 0.5
    flip = (1.0 - prob) if start_ones else prob
    meas = dp.m.make_randomized_response_bitvec(
        dp.bitvector_domain(max_weight=size), dp.discrete_distance(), f=2.0 * flip
    )
    bits = np.packbits(np.full(size, 1 if start_ones else 0, dtype=np.uint8))
    out = np.unpackbits(np.frombuffer(meas(bits.tobytes()), dtype=np.uint8))[:size]
    return out.astype(bool)


@lru_cache(maxsize=1)
def _gumbel_max() -> Any:
    dp = opendp()
    # OpenDP's noisy max under zCDP adds exactly sampled Gumbel noise; with scale 1 the
    # arg-max of ``log_weights + Gumbel`` is an exact draw from the categorical
    # distribution proportional to ``exp(log_weights)`` (the exponential mechanism).
    return dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.linf_distance(T=float),
        dp.zero_concentrated_divergence(),
        scale=1.0,
    )


_DIRECT = 256
_BLOCK = 64


def _gumbel_argmax(log_weights: np.ndarray) -> int:
    finite = np.flatnonzero(np.isfinite(log_weights))
    if finite.size == 0:
        raise ParameterError("log_weights has no finite entry.", argument="log_weights")
    if finite.size == 1:
        return int(finite[0])
    scores = log_weights[finite]
    scores = scores - scores.max()
    return int(finite[int(_gumbel_max()(scores.tolist()))])


def exponential_select(log_weights: Any) -> int:
    """Draw an index ``i`` with probability proportional to ``exp(log_weights[i])``.

    This is the selection step of the exponential mechanism: pass
    ``log_weights = epsilon * utility / (2 * sensitivity)`` (plus the log of a base
    measure such as an interval length). The draw is the arg-max of the scores plus
    Gumbel noise sampled exactly by OpenDP (``make_noisy_max`` under zCDP, scale 1),
    so no floating-point sampler of NumPy is involved. Entries equal to ``-inf`` have
    probability 0.

    Vectors longer than 256 entries are drawn in exact stages: a block of 64 entries
    with probability proportional to its total weight (a floating-point log-sum-exp),
    then an entry inside it (``P(block) P(i | block) = P(i)``), recursively, so that each
    Gumbel-max draw through OpenDP sees at most a few hundred scores.

    Parameters
    ----------
    log_weights : array-like of float
        Non-empty log-weights (unnormalised log-probabilities); ``-inf`` allowed,
        NaN and ``+inf`` not, and at least one entry must be finite.

    Returns
    -------
    int
        The drawn index into the flattened ``log_weights``.

    Raises
    ------
    ParameterError
        When ``log_weights`` is empty, holds NaN or ``+inf``, or has no finite entry.

    References
    ----------
    McSherry, Talwar. "Mechanism Design via Differential Privacy". FOCS 2007.

    Examples
    --------
    >>> exponential_select([0.0, -float("inf")])
    0
    """
    logw = np.asarray(log_weights, dtype=float).ravel()
    if logw.size == 0:
        raise ParameterError("log_weights must be non-empty.", argument="log_weights")
    if np.isnan(logw).any() or np.isposinf(logw).any():
        raise ParameterError("log_weights must not contain NaN or +inf.", argument="log_weights")
    return _staged_select(logw)


def _staged_select(logw: np.ndarray) -> int:
    if logw.size <= _DIRECT:
        return _gumbel_argmax(logw)
    n_blocks = -(-logw.size // _BLOCK)
    padded = np.full(n_blocks * _BLOCK, -np.inf)
    padded[: logw.size] = logw
    blocks = padded.reshape(n_blocks, _BLOCK)
    peak = blocks.max(axis=1)
    ok = np.isfinite(peak)
    block_logw = np.full(n_blocks, -np.inf)
    with np.errstate(under="ignore"):
        block_logw[ok] = peak[ok] + np.log(np.exp(blocks[ok] - peak[ok, None]).sum(axis=1))
    b = _staged_select(block_logw)
    return b * _BLOCK + _gumbel_argmax(blocks[b])
