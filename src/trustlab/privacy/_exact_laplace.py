"""Exact discrete Laplace noise in vectorised integer arithmetic (private module).

Canonne, Kamath and Steinke's samplers (NeurIPS 2020, Algorithms 1 and 2), run on
whole arrays at once with NumPy integers and the operating system's secure uniform
integers (:func:`~trustlab.privacy._selection.uniform_below`): no floating point touches
a probability, so every draw has exactly the discrete Laplace distribution
``P(k) ∝ exp(-|k| s / t)`` for the scale ``t / s`` (the float scale's exact value as
a fraction). OpenDP runs the same algorithms element by element in arbitrary
precision, ~25 us a draw; here a draw costs well under a microsecond in large
batches. :mod:`trustlab.privacy.samplers` takes this path when the scale's fraction
fits (:func:`fits`; a public property of the scale) and OpenDP's otherwise.

Every integer stays below ``2**62``: ``t <= 2**53`` and ``s <= 2**62``; a Bernoulli
loop that would pass ``2**62`` (probability below ``1 / 500!``) finishes with
:mod:`secrets`, and a geometric count whose ``U + t V`` would overflow is added in
Python integers.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np

from trustlab.privacy._selection import uniform_below

__all__ = ["add", "fits"]

_LIMIT = 1 << 62
_MAX_T = 1 << 53


def fits(scale: float) -> bool:
    """Whether ``scale = t / s`` (in lowest terms) has ``t <= 2**53`` and ``s <= 2**62``."""
    frac = Fraction(scale)
    return 0 < frac.numerator <= _MAX_T and frac.denominator <= _LIMIT


_FIRST = 4  # rounds K = 1..4 share one draw below 12 den: K divides 12
_SHARE = np.array([12, 6, 4, 3], dtype=np.int64)  # 12 / K
_SMALL = 256  # up to this many coins, the first rounds share one draw


def _bernoulli_exp(num: np.ndarray, den: int) -> np.ndarray:
    """Exact coins with ``P(True) = exp(-num / den)`` for integers ``0 <= num <= den`` (Algorithm 1).

    Draw ``A_K ~ Bernoulli(gamma / K)`` for ``K = 1, 2, ...`` until one is 0; the coin
    is 1 when that ``K`` is odd, each round a uniform draw below ``den K``. For at most
    ``_SMALL`` coins (where the number of calls, not of random words, costs) the first
    four rounds come from one draw below ``12 den`` (``A_K = [W < 12 num / K]``, exact
    as ``K`` divides 12). The choice depends on the public size only.
    """
    n = num.size
    if n <= _SMALL:  # few calls matter more than few random words
        w = uniform_below(12 * den, n * _FIRST).reshape(n, _FIRST)
        fail = w >= num[:, None] * _SHARE[None, :]
        stop = np.where(fail.any(axis=1), fail.argmax(axis=1) + 1, 0)
        live = np.flatnonzero(stop == 0)
        k = _FIRST + 1
    else:
        stop = np.zeros(n, dtype=np.int64)
        live = np.arange(n)
        k = 1
    while live.size:
        high = den * k
        if high > _LIMIT:  # P(reaching here) < 1 / (K - 1)!: finish exactly in Python integers
            for i in live.tolist():
                kk = k
                while secrets.randbelow(den * kk) < int(num[i]):
                    kk += 1
                stop[i] = kk
            break
        go_on = uniform_below(high, live.size) < num[live]
        stop[live[~go_on]] = k
        live = live[go_on]
        k += 1
    return stop % 2 == 1


def _geometric_exp1(n: int) -> np.ndarray:
    """``n`` counts of successes before the first failure of ``Bernoulli(exp(-1))`` coins.

    Four coins per element per round (all four succeed with probability ``e^-4``).
    """
    count = np.zeros(n, dtype=np.int64)
    live = np.arange(n)
    while live.size:
        coins = _bernoulli_exp(np.ones(live.size * 4, dtype=np.int64), 1).reshape(live.size, 4)
        fail = ~coins
        first = np.where(fail.any(axis=1), fail.argmax(axis=1), 4)
        count[live] += first
        live = live[first == 4]
    return count


def add(values: np.ndarray, scale: float) -> np.ndarray:
    """``values`` (flat int64) plus exact discrete Laplace noise of scale ``scale``, saturated at int64.

    Requires :func:`fits` (``scale``). Algorithm 2, looped until every slot is filled:
    ``U`` uniform on ``0 .. t-1`` kept with probability ``exp(-U / t)``, ``V`` geometric
    with ratio ``exp(-1)``, ``Y = floor((U + t V) / s)``, a fair sign ``B``, rejecting
    ``B = 1`` with ``Y = 0`` (else zero would count twice); the noise is ``(1 - 2B) Y``.
    The sum is formed exactly and only then saturated at the 64-bit limits
    (post-processing), never the noise.
    """
    frac = Fraction(scale)
    t, s = frac.numerator, frac.denominator
    size = values.size
    noise = np.empty(size, dtype=np.int64)
    big: dict[int, int] = {}  # slots whose noise needs Python integers (probability ~ e^-512)
    # a candidate survives with probability ~ (1 - 1/e) (1 - P(Y = 0) / 2): draw enough for one round
    p_zero = -math.expm1(-1.0 / scale)
    per_slot = 1.15 / ((1.0 - math.exp(-1.0)) * (1.0 - p_zero / 2.0))
    filled = 0
    while filled < size:
        m = size - filled
        u = uniform_below(t, math.ceil(m * per_slot) + 8)
        u = u[_bernoulli_exp(u, t)]
        v = _geometric_exp1(u.size)
        y = np.zeros(u.size, dtype=np.int64)
        safe = v < (_LIMIT - t) // t  # then u + t v < 2**62
        y[safe] = (u[safe] + t * v[safe]) // s
        huge = {int(i): (int(u[i]) + t * int(v[i])) // s for i in np.flatnonzero(~safe)}
        negative = uniform_below(2, u.size) == 1
        keep = ~(negative & (y == 0) & safe)
        slot = filled + np.cumsum(keep) - 1  # where each kept draw lands
        for i, mag in huge.items():
            if slot[i] < size:
                big[int(slot[i])] = -mag if negative[i] else mag
        z = np.where(negative, -y, y)[keep][:m]
        noise[filled : filled + z.size] = z
        filled += z.size
    top, bottom = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    out = values + noise  # exact unless it overflows: those slots are recomputed below
    over = (noise > 0) & (values > top - noise)
    under = (noise < 0) & (values < bottom - noise)
    out[over], out[under] = top, bottom
    for i, z in big.items():
        out[i] = min(max(int(values[i]) + z, bottom), top)
    return out
