"""Noise samplers that are safe against floating-point attacks.

All noise comes from OpenDP's samplers (Rust, cryptographically secure
randomness, exact sampling): the discrete Laplace on integers and OpenDP's
floating-point-safe continuous Laplace and Gaussian. NumPy's samplers are never
used for privacy noise (Mironov, CCS 2012, shows how their rounding leaks).

OpenDP's randomness cannot be seeded, by design: DP noise is not reproducible
run to run, while everything else in trustlab is.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from trustlab._validation import check_positive_int
from trustlab.errors import ParameterError

__all__ = ["bernoulli", "discrete_gaussian", "discrete_laplace", "exponential_select", "gaussian", "laplace"]


@lru_cache(maxsize=1)
def _dp() -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def _check_scale(scale: float) -> float:
    scale = float(scale)
    if not np.isfinite(scale) or scale < 0:
        raise ParameterError(f"noise scale must be finite and >= 0, got {scale}.", argument="scale")
    return scale


def discrete_laplace(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` independent discrete Laplace (two-sided geometric) integers.

    The probability of ``k`` is proportional to ``exp(-|k| / scale)``. Adding it to
    an integer query of L1 sensitivity ``s`` gives ``s / scale``-DP.

    References
    ----------
    Canonne, Kamath, Steinke. "The Discrete Gaussian for Differential Privacy".
    NeurIPS 2020 (the exact sampler OpenDP implements).
    """
    scale = _check_scale(scale)
    size = check_positive_int(size, "size", minimum=0)
    if size == 0:
        return np.zeros(0, dtype=np.int64)
    dp = _dp()
    meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=scale)
    return np.asarray(meas([0] * size), dtype=np.int64)


def discrete_gaussian(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` independent discrete Gaussian integers (OpenDP's exact sampler).

    The probability of ``k`` is proportional to ``exp(-k**2 / (2 scale**2))``. Adding it
    to an integer query of L2 sensitivity ``s`` gives ``rho``-zCDP with
    ``rho = s**2 / (2 scale**2)`` (convert with
    :class:`~trustlab.privacy.accounting.Accountant` ``spend_zcdp``).

    References
    ----------
    Canonne, Kamath, Steinke. "The Discrete Gaussian for Differential Privacy".
    NeurIPS 2020.

    Examples
    --------
    >>> discrete_gaussian(0.0, 3).tolist()
    [0, 0, 0]
    """
    scale = _check_scale(scale)
    size = check_positive_int(size, "size", minimum=0)
    if size == 0 or scale == 0.0:
        return np.zeros(size, dtype=np.int64)
    dp = _dp()
    meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=scale)
    return np.asarray(meas([0] * size), dtype=np.int64)


def laplace(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` floating-point-safe continuous Laplace values (OpenDP)."""
    scale = _check_scale(scale)
    size = check_positive_int(size, "size", minimum=0)
    if size == 0:
        return np.zeros(0)
    dp = _dp()
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=scale
    )
    return np.asarray(meas([0.0] * size), dtype=float)


def gaussian(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` floating-point-safe Gaussian values of std ``scale`` (OpenDP)."""
    scale = _check_scale(scale)
    size = check_positive_int(size, "size", minimum=0)
    if size == 0:
        return np.zeros(0)
    dp = _dp()
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float), scale=scale
    )
    return np.asarray(meas([0.0] * size), dtype=float)


def bernoulli(prob: float, size: int) -> np.ndarray:
    """Draw ``size`` independent exact Bernoulli(``prob``) coins (OpenDP), as booleans.

    OpenDP's bit-vector randomized response replaces each bit by a fair coin with
    probability ``f``, so it flips the bit with probability ``f / 2``: starting from
    ones and flipping with probability ``1 - prob`` (exact in floating point for
    ``prob >= 1/2``, Sterbenz), or from zeros and flipping with probability ``prob``,
    gives exact Bernoulli draws. This is the coin of randomized response.

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
    dp = _dp()
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
    dp = _dp()
    # OpenDP's noisy max under zCDP adds exactly sampled Gumbel noise; with scale 1 the
    # arg-max of ``log_weights + Gumbel`` is an exact draw from the categorical
    # distribution proportional to ``exp(log_weights)`` (the exponential mechanism).
    return dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.linf_distance(T=float),
        dp.zero_concentrated_divergence(),
        scale=1.0,
    )


_BLOCK = 2048


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

    For long vectors the index is drawn in two exact Gumbel-max stages: a block of
    ``2048`` entries with probability proportional to the block's total weight (a
    floating-point log-sum-exp), then an entry inside the block.

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
    if logw.size <= 4 * _BLOCK:
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
    b = _gumbel_argmax(block_logw)
    return b * _BLOCK + _gumbel_argmax(blocks[b])
