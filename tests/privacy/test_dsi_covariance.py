"""The covariance ``dsi_release`` actually applies meets every DSI constraint (issue 10).

A transposed Cholesky factor in the sampler keeps the trace (so energy tests pass)
but changes the covariance's shape; on the tests' 10-degree example ``L L' = L' L``
hides it. Here the standard normals ``dsi_release`` draws are replaced by unit
vectors (a test-only hook on the sampler), so each release returns one column of
the linear map ``M`` it applies: the noise covariance is exactly ``M M'``. Every
reference must then satisfy ``compositions * Delta_i' (M M')^+ Delta_i <= (b_i / max b)
mu*^2`` where ``mu*`` is computed here, independently of trustlab's calibration and
accountant, from Balle and Wang's exact Gaussian profile (or the paper's RDP
conversion): a halved accountant sensitivity fails it as surely as a wrong factor.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from trustlab.privacy import _dsi_noise
from trustlab.privacy.dsi import dsi_gaussian_covariance, dsi_release

TOL = 1e-6


def _mu_star(epsilon: float, delta: float, accounting: str) -> float:
    """Largest mu = sensitivity / sigma of one (epsilon, delta) Gaussian release (independent code)."""
    if accounting == "rdp":  # the paper's conversion: eps = mu^2 / 2 + sqrt(2 ln(1/delta)) mu
        return brentq(lambda u: u * u / 2 + math.sqrt(2 * math.log(1 / delta)) * u - epsilon, 1e-12, 1e3)

    def profile(mu: float) -> float:
        return norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * norm.cdf(-mu / 2 - epsilon / mu) - delta

    return brentq(profile, 1e-9, 1e3, xtol=1e-15)


def _applied_map(monkeypatch, target, refs, **kwargs):
    """Columns of the linear map dsi_release applies to its standard normals (sigma_m included)."""
    state = {"t": 0}

    def unit_draws(scale, size):
        out = np.zeros(size)
        out[state["t"]] = scale  # gaussian(scale, size) stands for scale * z; z := e_t
        return out

    monkeypatch.setattr(_dsi_noise, "gaussian", unit_draws)
    first = dsi_release(target, refs, **kwargs)
    cols = [first.value - target]
    for t in range(1, first.parameters["rank"]):
        state["t"] = t
        cols.append(dsi_release(target, refs, **kwargs).value - target)
    return np.column_stack(cols), first


def _worst_ratio(M, diffs, budgets, compositions, mu_star):
    """max_i compositions * Delta_i' (M M')^+ Delta_i / ((b_i / max b) mu*^2); inf if outside the span."""
    coef, *_ = np.linalg.lstsq(M, diffs.T, rcond=None)
    resid = np.linalg.norm(M @ coef - diffs.T, axis=0)
    if np.any(resid > 1e-8 * np.maximum(np.linalg.norm(diffs, axis=1), 1e-300)):
        return math.inf
    rho2 = np.sum(coef**2, axis=0)
    rel = budgets / budgets.max()
    return float(np.max(compositions * rho2 / (rel * mu_star**2)))


CASES = [
    # seed, m references, dimension d, compositions, accounting, random budgets
    (0, 12, 5, 1, "analytic", False),
    (1, 12, 5, 3, "analytic", True),
    (2, 3, 8, 1, "rdp", False),
    (3, 7, 7, 2, "analytic", False),
    (4, 20, 3, 1, "analytic", True),
    (5, 6, 12, 4, "rdp", True),
]


@pytest.mark.parametrize(("seed", "m", "d", "k", "accounting", "random_budgets"), CASES)
def test_applied_covariance_meets_every_constraint(monkeypatch, seed, m, d, k, accounting, random_budgets):
    rng = np.random.default_rng(seed)
    target = rng.normal(size=d)
    diffs = rng.normal(size=(m, d)) * rng.exponential(size=(m, 1))
    budgets = rng.uniform(0.2, 3.0, size=m) if random_budgets else np.ones(m)
    eps, delta = 1.0, 1e-5
    kwargs = {
        "epsilon": eps,
        "delta": delta,
        "compositions": k,
        "accounting": accounting,
        "budgets": budgets if random_budgets else None,
    }
    M, rel = _applied_map(monkeypatch, target, target - diffs, **kwargs)
    mu_star = _mu_star(eps, delta, accounting)
    ratio = _worst_ratio(M, diffs, budgets, k, mu_star)
    assert ratio <= 1 + TOL, ratio
    # and it is tight: the optimal covariance makes the largest constraint active
    assert ratio >= 1 - 1e-3, ratio
    # the energy the release reports is the trace of the covariance it applied
    assert np.sum(M**2) == pytest.approx(rel.parameters["noise_energy"], rel=1e-9)


def test_transposed_factor_would_fail_on_a_random_instance():
    # The test above has the power to see a transposed Cholesky factor: the same trace, but
    # on this 12 x 5 instance the largest constraint becomes ~1.06 (the issue measured 1.063).
    rng = np.random.default_rng(0)
    diffs = rng.normal(size=(12, 5)) * rng.exponential(size=(12, 1))
    noise = dsi_gaussian_covariance(diffs)
    sigma_m = 1.0 / _mu_star(1.0, 1e-5, "analytic")
    good = sigma_m * (noise.basis @ noise.chol)
    transposed = sigma_m * (noise.basis @ noise.chol.T)
    if noise.floor_basis.shape[1]:
        floor = sigma_m * noise.floor_std * noise.floor_basis
        good, transposed = np.hstack([good, floor]), np.hstack([transposed, floor])
    ones = np.ones(12)
    mu_star = _mu_star(1.0, 1e-5, "analytic")
    assert _worst_ratio(good, diffs, ones, 1, mu_star) <= 1 + TOL
    assert np.sum(good**2) == pytest.approx(np.sum(transposed**2))
    assert _worst_ratio(transposed, diffs, ones, 1, mu_star) > 1.03


def test_release_value_is_target_plus_the_applied_map(monkeypatch):
    # With the unit draws the release is exactly target + sigma_m B L e_t: no other noise is added.
    rng = np.random.default_rng(9)
    target = rng.normal(size=4)
    diffs = rng.normal(size=(3, 4))
    M, rel = _applied_map(monkeypatch, target, target - diffs, epsilon=1.0)
    noise = dsi_gaussian_covariance(diffs)
    expected = rel.parameters["noise_multiplier"] * (noise.basis @ noise.chol)
    assert np.allclose(M[:, : noise.basis.shape[1]], expected, atol=1e-9)
