"""Tests of the samplers: exponential-mechanism selection, discrete Gaussian, Bernoulli."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustlab.errors import ParameterError
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.samplers import bernoulli, discrete_gaussian, exponential_select


@pytest.mark.parametrize("size", [3, 20000])
def test_frequencies_match(size):
    logw = np.full(size, -np.inf)
    logw[[0, size - 1]] = [0.0, np.log(3.0)]
    draws = np.array([exponential_select(logw) for _ in range(1200)])
    assert set(np.unique(draws)) <= {0, size - 1}
    p = np.mean(draws == size - 1)
    assert abs(p - 0.75) < 5 * np.sqrt(0.75 * 0.25 / 1200)


def test_bad_input():
    for bad in ([], [np.nan], [np.inf], [-np.inf]):
        with pytest.raises(ParameterError):
            exponential_select(bad)


def test_discrete_gaussian_pmf():
    scale, n = 1.5, 40_000
    draws = discrete_gaussian(scale, n)
    assert draws.dtype == np.int64
    support = np.arange(-40, 41)
    weights = np.exp(-(support**2) / (2 * scale**2))
    pmf = dict(zip(support.tolist(), weights / weights.sum(), strict=True))
    # cells: each k with |k| <= 4 (expected count >= 170) and the two tails pooled
    cells = [[k] for k in range(-4, 5)] + [list(range(-40, -4)), list(range(5, 41))]
    for cell in cells:
        p = sum(pmf[k] for k in cell)
        freq = np.isin(draws, cell).mean()
        # within 5 binomial standard errors of the exact probability
        assert abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n), (cell[:2], freq, p)


def test_discrete_gaussian_count_audit_within_claim():
    # A count with discrete Gaussian noise of scale 2 is rho = 1/8 zCDP, hence
    # (rho + 2 sqrt(rho log(1/delta)), delta)-DP with delta = 1e-5: epsilon ~ 1.84.
    rho, delta = 1 / 8, 1e-5
    eps = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    res = audit_epsilon(lambda c: c + discrete_gaussian(2.0, 1)[0], 100, 101, n_trials=3000, delta=delta)
    assert res.epsilon_lower <= eps
    # the auditor has power against a mechanism with a tenth of the noise
    bad = audit_epsilon(lambda c: c + discrete_gaussian(0.2, 1)[0], 100, 101, n_trials=3000, delta=delta)
    assert bad.epsilon_lower > eps


def test_bernoulli_rates_and_bad_input():
    n = 20_000
    for p in (0.1, 0.5, 0.73):
        rate = bernoulli(p, n).mean()
        assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n)
    with pytest.raises(ParameterError) as info:
        bernoulli(1.5, 3)
    assert info.value.argument == "prob"
    with pytest.raises(ParameterError):
        discrete_gaussian(-1.0, 3)
