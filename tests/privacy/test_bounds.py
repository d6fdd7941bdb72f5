"""Tests of trustlab.privacy.bounds (private clipping bounds) and of dp_sum/dp_mean with bounds=None."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustlab.errors import DataError, ParameterError
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.bounds import MAX_ABS_BOUND, dp_bounds
from trustlab.privacy.statistics import dp_mean, dp_sum

N = 10_000


def _samples():
    for seed in range(8):
        rng = np.random.default_rng(seed)
        yield rng.normal(size=N), 0.0
        yield rng.lognormal(size=N), 0.0
        yield rng.normal(1000.0, 50.0, size=N), 1000.0


@pytest.mark.claims
def test_claim_estimated_range_covers_the_data_at_n_10k():
    # Durfee's scan stops early only if a noisy count beats the noisy threshold too soon.
    # With eps=1, each side has e1 = e2 = 0.25: threshold noise Lap(4), query noise Lap(8)
    # (replace-one). With probability >= 1 - 2 beta the threshold noise is above
    # -4 ln(1/beta) and the largest query noise over K scanned buckets is below
    # 8 ln(K/beta). At beta = 1e-3 and K <= 1e4 buckets (base 1.001 up to the quantile),
    # a side stops no earlier than where its count is q n - (27.6 + 147.4) = q n - 175,
    # i.e. 1.75% of n = 10,000. So coverage >= 0.98 - 2 * 0.0175 = 0.945 on each run
    # (failure probability <= 4e-3 per run, <= 0.1 over the 24 runs; realised margin is
    # much larger since the bound adds worst cases). Symmetrically a side stops by the
    # bucket whose count is q n + 4 ln(1/beta) + 8 ln(1/beta) = q n + 83, so each bound
    # lies within the 0.1% / 99.9% sample quantiles (times one bucket, factor 1.001).
    coverages = []
    for x, anchor in _samples():
        lo, hi = dp_bounds(x, 1.0, anchor=anchor).value
        inside = np.mean((x >= lo) & (x <= hi))
        coverages.append(inside)
        assert inside >= 0.945
        q_lo, q_hi = np.quantile(x, [0.001, 0.999])
        # The bucket holding a value anchor + d ends at anchor + 1.001 d + 0.001.
        assert lo >= anchor - (1.001 * max(anchor - q_lo, 0.0) + 0.001)
        assert hi <= anchor + (1.001 * max(q_hi - anchor, 0.0) + 0.001)
    # On average the range holds about the promised 98% of the data.
    assert 0.96 <= np.mean(coverages) <= 0.999


def test_release_says_what_it_charged_and_contains_the_anchor():
    x = np.random.default_rng(1).exponential(size=2000) + 5.0
    r = dp_bounds(x, 0.5, anchor=5.0, levels=(0.05, 0.95))
    lo, hi = r.value
    assert lo < 5.0 < hi
    assert r.epsilon == 0.5 and r.parameters["epsilon_per_side"] == 0.25
    assert "charged" in r.parameters["note"]
    acc = Accountant(1.0)
    acc.record(r)
    assert acc.remaining_epsilon == pytest.approx(0.5)


def test_dp_mean_with_estimated_bounds():
    x = np.random.default_rng(2).normal(5.0, 1.0, size=N)
    m, rels = dp_mean(x, None, 1.0, anchor=5.0)
    # Sum noise Lap(~6 / 0.375) over n = 1e4 and count noise ~2.7 / 1e4 relative: error
    # well below 0.02; symmetric 1%/99% clipping of a normal has no bias.
    assert abs(m - x.mean()) < 0.02
    assert [r.epsilon for r in rels] == pytest.approx([0.375, 0.25, 0.375])
    assert sum(r.epsilon for r in rels) == pytest.approx(1.0)
    assert rels[1].parameters["neighbouring"] == "add/remove one record"
    m2, rels2 = dp_mean(x, (0.0, 10.0), 1.0)
    assert len(rels2) == 2 and abs(m2 - x.mean()) < 0.02


def test_dp_sum_with_estimated_bounds():
    x = np.random.default_rng(3).uniform(10.0, 20.0, size=5000)
    r = dp_sum(x, None, 1.0, n=5000, anchor=15.0)
    lo, hi = r.parameters["bounds"]
    assert r.epsilon == 1.0 and r.parameters["bounds_epsilon"] == 0.25
    assert "estimated privately" in r.parameters["note"]
    true = np.sum(np.clip(x, lo, hi) - lo)
    # Laplace of scale (hi - lo) / 0.75 <= 14: error below 200 with prob > 1 - 1e-6.
    assert abs(r.value - true) < 200
    with pytest.raises(ParameterError) as info:
        dp_sum(x, None, 1.0)
    assert info.value.argument == "n"


def test_privacy_audit_dp_bounds():
    # One record of 100 moves from 1.0 to 50.0: counts below every edge in (1, 50)
    # change by one, right at the level-0.99 threshold. Coarse buckets keep runs fast;
    # 200 evaluation runs per input can certify epsilon up to about log(200 / 7) ~ 3.3,
    # so noise scaled for the wrong sensitivity (or bounds read off the data) is caught;
    # alpha = 0.001 keeps the chance that a correct mechanism fails at <= 0.1%.
    x = np.ones(100)
    x2 = x.copy()
    x2[0] = 50.0
    res = audit_epsilon(
        lambda d: dp_bounds(d, 1.0, base=1.5, max_buckets=40).value[1], x, x2, n_trials=400, alpha=0.001
    )
    assert res.epsilon_lower <= 1.0


def test_privacy_audit_dp_mean_estimated_bounds():
    x = np.full(60, 1.0)
    x2 = np.append(x, 30.0)  # add one record (the module's relation)
    res = audit_epsilon(
        lambda d: dp_mean(d, None, 1.0, anchor=1.0, bounds_levels=(0.1, 0.9))[0],
        x,
        x2,
        n_trials=300,
        alpha=0.001,
        statistic=lambda m: 0.0 if math.isnan(m) else m,
    )
    assert res.epsilon_lower <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"x": np.ones((3, 2))}, "x"),
        ({"x": "abc"}, "x"),
        ({"x": None}, "x"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 5e-324}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"anchor": float("inf")}, "anchor"),
        ({"anchor": "0"}, "anchor"),
        ({"anchor": 1e308}, "anchor"),
        ({"anchor": -1e300}, "anchor"),
        ({"anchor": True}, "anchor"),
        ({"levels": (0.9, 0.1)}, "levels"),
        ({"levels": (0.0, 0.9)}, "levels"),
        ({"levels": 0.5}, "levels"),
        ({"base": 1.0}, "base"),
        ({"base": float("inf")}, "base"),
        ({"base": 1.0 + 1e-17}, "base"),
        ({"neighbouring": "swap"}, "neighbouring"),
        ({"neighbouring": "add_remove"}, "n"),
        ({"n": 0}, "n"),
        ({"n": float("nan")}, "n"),
        ({"max_buckets": 0}, "max_buckets"),
        ({"max_buckets": 10**9}, "max_buckets"),
    ],
)
def test_bad_input_dp_bounds(kwargs, arg):
    args = {"x": np.arange(10.0), "epsilon": 1.0} | kwargs
    x, eps = args.pop("x"), args.pop("epsilon")
    with pytest.raises((ParameterError, DataError)) as info:
        dp_bounds(x, eps, **args)
    assert info.value.argument == arg


@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"bounds_share": 0.0}, "bounds_share"),
        ({"bounds_share": 1.0}, "bounds_share"),
        ({"count_share": 1.5}, "count_share"),
        ({"bounds_levels": (0.5, 0.5)}, "bounds_levels"),
        ({"anchor": float("nan")}, "anchor"),
        ({"x": np.ones((2, 2))}, "x"),
        ({"epsilon": 0}, "epsilon"),
        ({"resolution": 0}, "resolution"),
    ],
)
def test_bad_input_dp_mean_without_bounds(kwargs, arg):
    args = {"x": np.arange(10.0), "epsilon": 1.0} | kwargs
    x, eps = args.pop("x"), args.pop("epsilon")
    with pytest.raises((ParameterError, DataError)) as info:
        dp_mean(x, None, eps, **args)
    assert info.value.argument == arg


def test_scan_that_never_fires_returns_finite_bounds():
    # A public n far above the sample size puts the threshold (~1e6) out of reach of
    # counts <= 2 plus Lap(4) noise: both scans run to the public cap and stop there.
    lo, hi = dp_bounds([0.5, 1.5], 1.0, base=2.0, max_buckets=2000, neighbouring="add_remove", n=10**6).value
    assert (lo, hi) == (-MAX_ABS_BOUND, MAX_ABS_BOUND)
    # ... and such a range is always accepted as bounds by the sum (no data-dependent error)
    assert math.isfinite(dp_sum([0.5, 1.5], (lo, hi), 1.0).value)


def test_bounds_next_to_a_large_anchor_stay_strictly_around_it():
    # anchor + (base - 1) rounds onto the anchor in float64: the release is still a
    # valid, strictly ordered range (post-processing), usable by dp_sum.
    for _ in range(5):
        lo, hi = dp_bounds(np.full(50, 1e200), 1.0, anchor=1e200, base=1.0000001).value
        assert lo < 1e200 < hi
        assert dp_sum(np.full(50, 1e200), (lo, hi), 1.0).value >= 0


def test_private_facts_never_raise():
    # Emptiness, NaN, +-inf and stray non-numbers are facts about the private data:
    # each call releases the same structure as on clean data.
    clean = dp_bounds(np.arange(10.0), 1.0)
    for x in ([], [np.nan, 1.0], [1.0, np.inf, -np.inf], np.array([1.0, "a", None], dtype=object)):
        r = dp_bounds(x, 1.0, n=5, neighbouring="add_remove")
        assert set(r.parameters) == set(clean.parameters) and len(r.value) == 2
        lo, hi = r.value
        assert -MAX_ABS_BOUND <= lo < 0.0 < hi <= MAX_ABS_BOUND
        m, rels = dp_mean(x, None, 1.0)
        assert len(rels) == 3 and (math.isnan(m) or rels[1].value[0] <= m <= rels[1].value[1])
        assert dp_sum(x, None, 1.0, n=1).value >= 0
