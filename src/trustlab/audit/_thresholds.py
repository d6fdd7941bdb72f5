"""The audit's fixed check thresholds, in the layer below both the sections and their renderers.

A section judges its checks against these and its renderer draws them; neither imports
the other for them.
"""

from __future__ import annotations

__all__ = ["MAX_DIFFERENCE", "MAX_MISSING_RATE"]

MAX_MISSING_RATE = 0.2
"""Data section: the largest share of missing values a column may have."""

MAX_DIFFERENCE = 0.1
"""Fairness section: the largest demographic-parity or equalized-odds difference across groups."""
