"""Tests of the exponential-mechanism selection sampler."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.errors import ParameterError
from trustlab.privacy.samplers import exponential_select


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
