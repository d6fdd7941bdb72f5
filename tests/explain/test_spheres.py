"""Tests of the growing-spheres sampler shared by the counterfactual search and BorderLIME."""

from __future__ import annotations

import numpy as np
from scipy import stats

from trustlab.explain._spheres import grow_rings, sample_shell, shrink_ball


def test_shell_is_uniform_in_volume() -> None:
    """Radii follow P(R <= r) = (r^k - lo^k) / (hi^k - lo^k); directions are uniform on the sphere."""
    k, lo, hi = 3, 1.0, 2.0
    Z = sample_shell(np.random.default_rng(0), 20_000, k, lo, hi)
    r = np.linalg.norm(Z, axis=1)
    assert r.min() >= lo and r.max() < hi
    cdf = lambda t: (np.clip(t, lo, hi) ** k - lo**k) / (hi**k - lo**k)  # noqa: E731
    # fixed seed; a uniform radius (the easy mistake) gives p < 1e-100 here
    assert stats.kstest(r, cdf).pvalue > 0.01
    # directions: each coordinate of Z / |Z| has mean 0 and variance 1/k (sd of the mean 0.004)
    U = Z / r[:, None]
    assert np.all(np.abs(U.mean(axis=0)) < 0.02)
    assert np.allclose((U**2).mean(axis=0), 1 / k, atol=0.01)


def test_grow_rings_stops_at_the_first_hit_and_at_its_limits() -> None:
    rng = np.random.default_rng(1)
    seen: list[float] = []

    def probe(P: np.ndarray) -> bool:
        seen.append(float(np.linalg.norm(P, axis=1).max()))
        return bool(np.any(np.linalg.norm(P, axis=1) > 1.0))

    found, lo, timed_out = grow_rings(probe, 2, rng, n=50, width=0.3)
    assert found and not timed_out and lo < 1.0 <= lo + 0.3 and seen[-1] > 1.0
    assert all(s <= 1.0 for s in seen[:-1])
    never = lambda P: False  # noqa: E731
    assert grow_rings(never, 2, rng, n=5, width=1.0, growth=2.0, max_radius=10.0) == (False, 15.0, False)
    assert grow_rings(never, 2, rng, n=5, width=1.0, max_rings=3)[:2] == (False, 3.0)
    assert grow_rings(never, 2, rng, n=5, width=1.0, deadline=0.0) == (False, 0.0, True)


def test_shrink_ball_halves_while_the_ball_holds_a_hit() -> None:
    rng = np.random.default_rng(2)
    r = shrink_ball(
        lambda P: bool(np.any(np.linalg.norm(P, axis=1) > 0.7)), 2, rng, n=200, radius=8.0, max_halvings=20
    )
    assert r == 0.5  # balls of radius 8, 4, 2, 1 hold points beyond 0.7; radius 0.5 cannot
    assert shrink_ball(lambda P: True, 2, rng, n=2, radius=1.0, max_halvings=3) == 0.125
