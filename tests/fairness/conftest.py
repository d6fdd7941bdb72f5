"""Shared synthetic data for the fairness tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest


def _diverse_members(n: int, n_members: int, seed: int, member_sd_1: float = 0.8) -> tuple:
    """Members whose errors are shared in group 0 and independent in group 1.

    Each member's logit is ``(2y - 1) + shared + own`` with total noise s.d. 1.3 in
    both groups, so every member is equally accurate in both groups; only the split
    of the noise between the shared and the member-specific part differs (member s.d.
    0.2 in group 0, ``member_sd_1`` in group 1), i.e. the members' diversity.
    """
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    y = rng.binomial(1, 0.5, n)
    member_sd = np.where(a == 1, member_sd_1, 0.2)
    shared_sd = np.sqrt(1.3**2 - member_sd**2)
    z = (2 * y - 1) + rng.normal(size=n) * shared_sd + rng.normal(size=(n_members, n)) * member_sd
    return 1 / (1 + np.exp(-z)), y, a


@pytest.fixture
def diverse_members() -> Callable[..., tuple]:
    return _diverse_members
