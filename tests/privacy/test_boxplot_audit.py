"""Empirical privacy audit of the DP boxplot's outlier shares (trustlab.privacy.boxplot)."""

from __future__ import annotations

import numpy as np

from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.boxplot import dp_boxplot_stats
from trustlab.privacy.samplers import laplace

EPS = 16.0  # total; the upper share gets (1 - 7/8) * 16 / 2 = 1.0
SIDE_EPS = (1 - 7 / 8) * EPS / 2
BOUNDS = (-50.0, 50.0)


def _neighbours():
    """Two samples of n=200 (public n, replace-one) that differ in one record.

    189 values in [-1.9, 1.9], ten outliers at 8 and one record that sits at 2.0
    (inside the upper whisker, whose fence is near 3) in ``data`` and at 7.5
    (beyond it) in ``neighbour``. Both positions lie above every quartile's target
    rank, and the extreme qmax is near 8 in both (the outliers), so the quartiles,
    extremes and whiskers have the same distribution up to weights far below
    float64 resolution next to the modes; the upper share is released in both and
    its count differs by exactly one: the audit isolates the share's release.
    """
    rng = np.random.default_rng(0)
    body = np.clip(rng.normal(size=189), -1.9, 1.9)
    data = np.concatenate([body, np.full(10, 8.0), [2.0]])
    neighbour = data.copy()
    neighbour[-1] = 7.5
    return data, neighbour


def test_audit_upper_outlier_share_within_its_epsilon():
    data, neighbour = _neighbours()
    res = audit_epsilon(
        lambda d: dp_boxplot_stats(d, EPS, BOUNDS).share_hi,
        data,
        neighbour,
        n_trials=600,
        alpha=0.001,
    )
    # The bound holds with confidence 1 - alpha = 0.999, so a correct mechanism fails
    # this test with probability <= 0.1% (OpenDP's noise cannot be seeded). With 300
    # evaluation runs per input the bound can certify up to about log(300 / 7) ~ 3.8;
    # the canary below shows that the audit flags the same rule with noise for the
    # wrong sensitivity.
    assert res.epsilon_lower <= SIDE_EPS


def test_audit_catches_a_share_with_noise_for_the_wrong_sensitivity():
    # Canary: the share rule with Laplace scale 1/(n eps_o) instead of 2/(n eps_o),
    # i.e. epsilon 2.0 where 1.0 is claimed. The same audit must flag it, otherwise
    # the test above could not fail.
    n, eps_o = 200, (1 - 7 / 8) * EPS
    res = audit_epsilon(
        lambda count: count / n + float(laplace(1.0 / (n * eps_o), 1)[0]),
        10,
        11,
        n_trials=6000,
        alpha=0.001,
    )
    assert res.epsilon_lower > SIDE_EPS
