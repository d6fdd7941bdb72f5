"""Fixed-point arithmetic of the ZKP-amenable LIME: exactly rounded tables, quantisation, exact sums.

Inputs, labels, weights and coefficients are integers at scale ``2^f``; the kernel
``exp`` and ``sqrt`` and the Gaussian inverse CDF are tables whose entries are rounded
exactly (40-digit decimals), so prover and verifier compute the same integers.
"""

from __future__ import annotations

import decimal
import functools
import math
import statistics

import numpy as np

__all__ = ["div_round", "exact", "exp_table", "gauss_table", "quantize", "round_int", "sqrt_fixed"]

_DEC = decimal.Context(prec=40)


def round_half_up(value: decimal.Decimal) -> int:
    return int(value.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def exp_table(dist2: np.ndarray, s: int, sigma2: decimal.Decimal) -> np.ndarray:
    """``round(exp(-(dist2 / s) / sigma^2) * s)`` for each fixed-point squared distance, exactly."""
    uniq = np.unique(dist2)
    vals = {}
    for v in uniq.tolist():
        arg = -(decimal.Decimal(int(v)) / s) / sigma2
        vals[v] = round_half_up(_DEC.exp(arg) * s)
    return np.array([vals[v] for v in dist2.tolist()], dtype=np.int64)


def sqrt_fixed(v: np.ndarray, s: int) -> np.ndarray:
    """``round(sqrt(v / s) * s)`` in integers: ``round(sqrt(v * s))``."""
    return np.array([(math.isqrt(4 * int(a) * s) + 1) // 2 for a in v.tolist()], dtype=np.int64)


@functools.lru_cache(maxsize=8)
def gauss_table(s: int) -> np.ndarray:
    """``round(Phi^-1((u + 1/2) / 256) * s)`` for each byte ``u`` (cached, read-only)."""
    nd = statistics.NormalDist()
    table = np.array([math.floor(nd.inv_cdf((u + 0.5) / 256) * s + 0.5) for u in range(256)], dtype=np.int64)
    table.flags.writeable = False
    return table


def quantize(x: np.ndarray, s: int) -> np.ndarray:
    return np.floor(np.asarray(x, dtype=float) * s + 0.5).astype(np.int64)


def exact(a: np.ndarray) -> np.ndarray:
    """Python-int (object) copy when sums of products of entries of ``a`` could overflow int64.

    Entries up to ``2^24`` keep int64: a product is below ``2^48`` and a sum of up to
    ``2^14`` of them (``d <= 64`` features, ``n <= 10^4`` samples) below ``2^62``.
    """
    a = np.asarray(a)
    if a.dtype == object or (a.size and int(np.abs(a).max()) > 2**24):
        return a.astype(object)
    return a


def round_int(v: float) -> int:
    return math.floor(v + 0.5)


def div_round(a: int, n: int) -> int:
    """``round(a / n)`` for Python ints, halves up."""
    return (2 * a + n) // (2 * n)
