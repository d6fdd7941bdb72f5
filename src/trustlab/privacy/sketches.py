"""Robust cardinality sketches for adaptive queries (catalog row 002-16).

A bottom-k distinct-count sketch with the standard estimator
(:class:`BottomKSketch`, :func:`standard_estimate`), the adaptive attack that breaks
the standard estimator after O(k) queries (:func:`attack_standard_estimator`), and the
robust Basic and Tracking estimators with per-key participation accounting
(:class:`RobustCardinalityEstimator`), after Cohen, Singhal and Stemmer, "Breaking the
Quadratic Barrier: Robust Cardinality Sketches for Adaptive Queries" (ICML 2025). See
docs/privacy/cardinality-sketches.md for what is reconstructed.
"""

from __future__ import annotations

from trustlab.privacy._sketch_attack import AttackResult, attack_standard_estimator
from trustlab.privacy._sketch_bottomk import BottomKSketch, standard_estimate
from trustlab.privacy._sketch_robust import ParticipationExceededError, RobustCardinalityEstimator

__all__ = [
    "AttackResult",
    "BottomKSketch",
    "ParticipationExceededError",
    "RobustCardinalityEstimator",
    "attack_standard_estimator",
    "standard_estimate",
]
