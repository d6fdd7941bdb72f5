"""LR schedules on a lab language model vs the fitted convex bound (Schaipp et al., ICML 2025; 000-12)."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.errors import TrustlabError
from trustlab.theory import lm_schedule_study, schedule, schedule_bound
from trustlab.theory.lr_lm import bound_terms


def test_bound_terms_equal_schedule_bound_on_the_truncated_rates() -> None:
    s = schedule("wsd", 60)
    a, b = bound_terms(s, 0.2, [10, 60])
    for t, at, bt in zip((10, 60), a, b, strict=True):
        ref = schedule_bound(s[:t], 0.2, distance=1.5, gradient_bound=0.7)
        assert np.isclose(1.5**2 * at + 0.7**2 * bt, ref.value, rtol=1e-12)


def test_bound_terms_show_the_cooldown_drop() -> None:
    """The bound falls faster during WSD's cooldown than over the same steps at constant rate."""
    t = np.arange(2, 1001)
    wsd = np.add(*bound_terms(schedule("wsd", 1000), 0.05, t))
    const = np.add(*bound_terms(schedule("constant", 1000), 0.05, t))
    assert np.allclose(wsd[:790], const[:790])
    assert (wsd[798] - wsd[-1]) > 5 * (const[798] - const[-1])


def test_bad_input() -> None:
    with pytest.raises(TrustlabError, match="checkpoints"):
        bound_terms(schedule("cosine", 10), 0.1, [1, 5])
    with pytest.raises(TrustlabError, match="gamma"):
        bound_terms(schedule("cosine", 10), -0.1, [5])
    with pytest.raises(TrustlabError, match="schedules"):
        lm_schedule_study([0.01], schedules=("linear",), steps=10)
    with pytest.raises(TrustlabError, match="gammas"):
        lm_schedule_study([0.01, 0.0], steps=10)
