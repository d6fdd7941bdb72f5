"""Tests of trustlab.privacy.audit: the empirical epsilon lower bound."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.errors import ParameterError
from trustlab.privacy.audit import audit_epsilon, clopper_pearson
from trustlab.privacy.samplers import discrete_laplace


def test_clopper_pearson():
    lo, hi = clopper_pearson(50, 100, 0.05)
    assert lo == pytest.approx(0.3983, abs=1e-3) and hi == pytest.approx(0.6017, abs=1e-3)
    assert clopper_pearson(0, 10, 0.05)[0] == 0.0 and clopper_pearson(10, 10, 0.05)[1] == 1.0


def _count(data, scale):
    return int(data) + int(discrete_laplace(scale, 1)[0])


def test_correct_mechanism_passes():
    # The noise is unseeded and every threshold event of a discrete Laplace count is tight
    # (ratio exactly e^1), so the bound exceeds 1 whenever a Clopper-Pearson bound misses. At the
    # default alpha = 0.05 that happened in 0.45% of 2,000 simulated audits. alpha = 1e-4: the exact
    # false-alarm chance on any tight event, maximised over its probability, is <= 8.7e-6 at 1,000
    # evaluation runs (a double binomial sum over both counts).
    res = audit_epsilon(lambda d: _count(d, 1.0), 0, 1, n_trials=2000, alpha=1e-4)
    assert res.epsilon_lower <= 1.0


def test_broken_mechanism_is_caught():
    # Claims eps=1 for a sensitivity-4 query but scales noise for sensitivity 1:
    # true epsilon is 4; the audit's lower bound must exceed the claim.
    res = audit_epsilon(lambda d: _count(4 * d, 1.0), 0, 1, n_trials=2000)
    assert res.epsilon_lower > 1.0


def test_bad_input():
    with pytest.raises(ParameterError) as info:
        audit_epsilon(1, 0, 1)
    assert info.value.argument == "mechanism"
    with pytest.raises(ParameterError):
        audit_epsilon(lambda d: d, 0, 1, n_trials=5)
    with pytest.raises(ParameterError) as info:
        audit_epsilon(lambda d: np.zeros(2), 0, 1, n_trials=20)
    assert info.value.argument == "statistic"
    with pytest.raises(ParameterError):
        audit_epsilon(lambda d: d, 0, 1, alpha=2.0)
