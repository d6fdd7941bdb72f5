"""Small numerical helpers shared across pillars (private): a Wilson interval and a 64-bit mixer."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

__all__ = ["splitmix64", "wilson"]


def wilson(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n`` (NaNs for ``n <= 0``).

    Examples
    --------
    >>> [round(v, 4) for v in wilson(5, 100)]
    [0.0215, 0.1118]
    """
    if n <= 0:
        return math.nan, math.nan
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def splitmix64(h: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective avalanche mix of ``uint64`` words (wraps mod 2**64)."""
    with np.errstate(over="ignore"):
        h = h ^ (h >> np.uint64(30))
        h = h * np.uint64(0xBF58476D1CE4E5B9)
        h = h ^ (h >> np.uint64(27))
        h = h * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))
