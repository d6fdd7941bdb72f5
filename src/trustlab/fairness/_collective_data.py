"""Synthetic product-evaluation data for the collective-action experiments (like the paper's car ratings)."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator

#: Cardinalities of :func:`make_product_ratings`' columns: model, fuel, warranty,
#: safety, country, sunroof.
PRODUCT_CARDINALITIES = (4, 4, 4, 5, 5, 2)
#: A signal on that data: an SUV (1), diesel (1), 10-year warranty (3), 4 stars (3),
#: with a sunroof (1); the country stays free, so the signal has 5 cells.
PRODUCT_SIGNAL = {0: 1, 1: 1, 2: 3, 3: 3, 5: 1}


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_product_ratings(
    n_samples: int = 100_000, *, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic product evaluations like the paper's car-rating data (smaller).

    Columns (cardinalities :data:`PRODUCT_CARDINALITIES`): model (sedan, SUV, coupe,
    truck; SUV 45%), fuel (gasoline, diesel, electric, hybrid), warranty (3, 5, 7, 10
    years), safety (1-5 stars), country (C1-C5), sunroof (no, yes). SUVs are mostly
    diesel (80%), 10-year warranty (90%) and 4 stars (70%). A score adds safety, fuel
    (electric 4, hybrid 3, else 1), warranty (2-5) and a draw from {1, 3, 4}; 5% of
    products score 0. SUVs made in C2 score 13 (60%), 0 (30%) or 2 (10%). Labels:
    0 = excellent (score >= 13), 1 = good (>= 8), 2 = average (>= 2), 3 = poor.

    Parameters
    ----------
    n_samples : int, default 100000
        Number of products.
    random_state : int, numpy Generator or None
        Seed.

    Returns
    -------
    X : numpy.ndarray of shape (n_samples, 6)
        Integer category codes.
    y : numpy.ndarray of shape (n_samples,)
        Ratings 0-3.

    Examples
    --------
    >>> X, y = make_product_ratings(1000, random_state=0)
    >>> X.shape, sorted(set(y.tolist())) == [0, 1, 2, 3]
    ((1000, 6), True)
    """
    rng = make_generator(random_state)
    n = n_samples
    model = rng.choice(4, n, p=[0.3, 0.45, 0.2, 0.05])
    suv = model == 1

    def skewed(card: int, favourite: int, p: float) -> np.ndarray:
        base = rng.integers(0, card, n)
        fav = np.where(rng.random(n) < p, favourite, rng.integers(0, card, n))
        return np.where(suv, fav, base)

    fuel = skewed(4, 1, 0.8)
    warranty = skewed(4, 3, 0.9)
    safety = skewed(5, 3, 0.7)
    country = rng.integers(0, 5, n)
    sunroof = rng.integers(0, 2, n)
    score = safety + 1 + np.array([1, 1, 4, 3])[fuel] + warranty + 2 + rng.choice([1, 3, 4], n)
    score = np.where(rng.random(n) < 0.05, 0, score)
    special = suv & (country == 1)
    u = rng.random(n)
    score = np.where(special, np.where(u < 0.6, 13, np.where(u < 0.9, 0, 2)), score)
    y = np.select([score >= 13, score >= 8, score >= 2], [0, 1, 2], 3)
    X = np.column_stack([model, fuel, warranty, safety, country, sunroof]).astype(np.int64)
    return X, y.astype(np.int64)
