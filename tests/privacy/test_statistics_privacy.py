"""Privacy tests of trustlab.privacy.statistics and .bounds: noise scales, audits, public-only errors.

Three kinds of test:

- **The noise each internal release draws** (recorded by wrapping the sampler) is
  the noise its ``Release`` declares, and the epsilons those scales imply add up to
  the epsilon the caller was charged. A budget split that spends more than it
  declares (a share ignored, a scale halved) fails here whatever the audit's power.
- **Empirical audits** at worst-case neighbours (a record at the clipping bound, a
  value just inside a bucket edge) with threshold, exact-value and low-bit events;
  negative controls show each audit has the power to catch half the noise.
- **Errors depend on public facts only**: bad ``epsilon``/``resolution``/``bounds``/
  ``n_bins`` raise a ``ParameterError`` naming the argument; empty, NaN, infinite or
  out-of-range private values never raise and release the same structure.

OpenDP's noise cannot be seeded: every statistical assertion states its false-alarm
rate in a comment.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustlab.errors import DataError, ParameterError
from trustlab.privacy import _sums as sums_module
from trustlab.privacy import bounds as bounds_module
from trustlab.privacy import statistics as stats_module
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.bounds import MAX_ABS_BOUND, dp_bounds
from trustlab.privacy.samplers import add_discrete_laplace
from trustlab.privacy.statistics import MAX_BINS, MAX_RESOLUTION, dp_count, dp_histogram, dp_mean, dp_sum

EVENTS = ("threshold", "value", "low_bits")


class _Recorder:
    """Wraps ``add_discrete_laplace`` in the statistics (counts, sums) and bounds modules.

    Records (module, scale, shape) of each call.
    """

    def __init__(self, monkeypatch, factor: float = 1.0):
        self.calls: list[tuple[str, float, tuple[int, ...]]] = []
        modules = (("statistics", stats_module), ("statistics", sums_module), ("bounds", bounds_module))
        for name, module in modules:
            monkeypatch.setattr(module, "add_discrete_laplace", self._wrap(name, factor))

    def _wrap(self, name, factor):
        def draw(values, scale):
            self.calls.append((name, float(scale), np.shape(values)))
            return add_discrete_laplace(values, scale * factor)

        return draw

    def scan_epsilons(self, query_sensitivity: float) -> list[float]:
        """Epsilon each above-threshold scan spent: 1/threshold_scale + sensitivity/query_scale.

        A scan is one scalar threshold draw followed by one or more vector query draws
        (all at one scale); above-threshold costs e1 + e2 whatever the number of queries.
        """
        out: list[float] = []
        calls = [c for c in self.calls if c[0] == "bounds"]
        i = 0
        while i < len(calls):
            assert calls[i][2] == (), calls[i]
            thr = calls[i][1]
            j = i + 1
            query_scales = set()
            while j < len(calls) and calls[j][2] != ():
                query_scales.add(calls[j][1])
                j += 1
            assert len(query_scales) == 1, query_scales
            out.append(1.0 / thr + query_sensitivity / query_scales.pop())
            i = j
        return out

    def scalar_scales(self) -> list[float]:
        return [scale for name, scale, _ in self.calls if name == "statistics"]


# ----------------------------------------------------------------------------- the noise actually drawn


def test_count_and_histogram_draw_the_declared_scale(monkeypatch):
    rec = _Recorder(monkeypatch)
    r = dp_count(10, 0.3)
    h = dp_histogram([0, 1, 1], 4, 0.7)
    assert rec.scalar_scales() == pytest.approx([1 / 0.3, 1 / 0.7])
    assert r.parameters["scale"] == pytest.approx(1 / 0.3) and h.parameters["scale"] == pytest.approx(1 / 0.7)
    assert rec.calls[1][2] == (4,)  # one draw per public bin


def test_sum_draws_resolution_over_epsilon(monkeypatch):
    rec = _Recorder(monkeypatch)
    r = dp_sum([0.2, 0.9], (0.0, 2.0), 0.4, resolution=1000)
    assert rec.scalar_scales() == pytest.approx([1000 / 0.4])
    # declared: sensitivity (upper - lower) over scale in data units is the epsilon charged
    assert r.parameters["sensitivity"] / r.parameters["scale"] == pytest.approx(r.epsilon)
    assert r.parameters["integer_scale"] == pytest.approx(1000 / 0.4)


@pytest.mark.parametrize("count_share", [0.5, 0.2])
def test_mean_with_bounds_splits_epsilon_as_declared(monkeypatch, count_share):
    rec = _Recorder(monkeypatch)
    _, rels = dp_mean(np.linspace(0, 1, 30), (0.0, 1.0), 0.8, count_share=count_share, resolution=512)
    count_scale, sum_scale = rec.scalar_scales()
    assert count_scale == pytest.approx(1 / (0.8 * count_share))
    assert sum_scale == pytest.approx(512 / (0.8 * (1 - count_share)))
    # the epsilons implied by the noise drawn equal the ones declared, and add up to the total
    implied = [1 / count_scale, 512 / sum_scale]
    assert implied == pytest.approx([r.epsilon for r in rels])
    assert sum(implied) == pytest.approx(0.8)


def test_mean_without_bounds_spends_what_it_declares(monkeypatch):
    rec = _Recorder(monkeypatch)
    x = np.random.default_rng(0).normal(5.0, 1.0, size=500)
    _, rels = dp_mean(x, None, 1.2, anchor=5.0, count_share=0.4, bounds_share=0.3, resolution=256)
    count_scale, sum_scale = rec.scalar_scales()
    scans = rec.scan_epsilons(query_sensitivity=1.0)  # add/remove: monotone counts, sensitivity 1
    assert len(scans) == 2
    sum_eps = 1.2 * 0.7
    assert count_scale == pytest.approx(1 / (sum_eps * 0.4))
    assert sum_scale == pytest.approx(256 / (sum_eps * 0.6))
    assert scans == pytest.approx([1.2 * 0.3 / 2] * 2)
    implied = [1 / count_scale, sum(scans), 256 / sum_scale]
    assert implied == pytest.approx([r.epsilon for r in rels])
    assert sum(implied) == pytest.approx(1.2)


def test_sum_without_bounds_spends_what_it_declares(monkeypatch):
    rec = _Recorder(monkeypatch)
    x = np.random.default_rng(1).uniform(10, 20, size=300)
    r = dp_sum(x, None, 0.9, n=300, anchor=15.0, bounds_share=0.2, resolution=128)
    scans = rec.scan_epsilons(query_sensitivity=1.0)
    (sum_scale,) = rec.scalar_scales()
    assert scans == pytest.approx([0.9 * 0.2 / 2] * 2)
    assert sum(scans) == pytest.approx(r.parameters["bounds_epsilon"])
    assert 128 / sum_scale == pytest.approx(r.parameters["sum_epsilon"])
    assert sum(scans) + 128 / sum_scale == pytest.approx(r.epsilon) == pytest.approx(0.9)


@pytest.mark.parametrize(("neighbouring", "sensitivity"), [("replace", 2.0), ("add_remove", 1.0)])
def test_bounds_scans_spend_what_they_declare(monkeypatch, neighbouring, sensitivity):
    rec = _Recorder(monkeypatch)
    r = dp_bounds(np.arange(100.0), 0.6, neighbouring=neighbouring, n=100, base=1.1)
    scans = rec.scan_epsilons(query_sensitivity=sensitivity)
    assert scans == pytest.approx([0.3, 0.3])
    assert r.parameters["threshold_scale"] == pytest.approx(rec.calls[0][1])
    assert r.parameters["query_scale"] == pytest.approx(rec.calls[1][1])


# ----------------------------------------------------------------------------- empirical audits
# ALPHA = 1e-4 on each audit. The counts and sums audited are tight (a discrete Laplace value
# moved by its sensitivity: threshold events with ratio exactly e^1), so a correct release fails
# whenever a Clopper-Pearson bound misses: at the former alpha = 0.001 the exact chance over 250
# evaluation runs (the fast profile), maximised over the event's probability, was up to 7.8e-5 per
# audit, about 5e-4 for the seven fast audits; at 1e-4 it is <= 3.7e-6 per audit. The negative
# controls (noise scale halved, i.e. twice the claimed epsilon; slow profile, 1000 evaluation runs)
# keep their power: the same halved-noise count stayed above 1 in 20,000 simulated audits at
# this alpha with only 500 evaluation runs (0.01% quantile 1.13).
ALPHA = 1e-4


def _count_mech(n):
    return dp_count(n, 1.0).value


def test_audit_count_and_power(monkeypatch, audit_trials):
    res = audit_epsilon(_count_mech, 100, 101, n_trials=audit_trials(2000), alpha=ALPHA, events=EVENTS)
    assert res.epsilon_lower <= 1.0, res
    if not audit_trials.full:  # the negative control: slow profile
        return
    _Recorder(monkeypatch, factor=0.5)  # mutant: half the declared noise
    bad = audit_epsilon(_count_mech, 100, 101, n_trials=audit_trials(2000), alpha=ALPHA, events=EVENTS)
    assert bad.epsilon_lower > 1.0, bad


def test_audit_count_at_zero_with_clipping(audit_trials):
    # clipping at 0 is post-processing: 0 vs 1 (the boundary of the range) stays within epsilon
    res = audit_epsilon(_count_mech, 0, 1, n_trials=audit_trials(2000), alpha=ALPHA, events=EVENTS)
    assert res.epsilon_lower <= 1.0, res


def test_audit_histogram_one_record_added(audit_trials):
    codes = np.array([0] * 40 + [1] * 40)
    res = audit_epsilon(
        lambda c: dp_histogram(c, 3, 1.0).value[0],
        codes,
        np.append(codes, 0),
        n_trials=audit_trials(2000),
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower <= 1.0, res


def test_audit_histogram_invalid_code_is_an_absent_record(audit_trials):
    # A record whose code names no bin is treated exactly as if absent: the worst
    # neighbour of a valid record is then one bin count changing by one.
    base = np.array([0] * 40 + [1] * 40)
    res = audit_epsilon(
        lambda c: dp_histogram(c, 3, 1.0).value[2],
        np.append(base, 2),
        np.append(base, 7),
        n_trials=audit_trials(2000),
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower <= 1.0, res


def _sum_mech(x):
    return dp_sum(x, (0.0, 1.0), 1.0, resolution=64).value


def test_audit_sum_record_at_the_clipping_bound_and_power(monkeypatch, audit_trials):
    # Adding a record at the upper bound moves the sum by the full sensitivity (64 units);
    # a record far beyond the bound is clipped to the same place.
    x = np.full(50, 0.5)
    res = audit_epsilon(
        _sum_mech, x, np.append(x, 1e6), n_trials=audit_trials(2000), alpha=ALPHA, events=EVENTS
    )
    assert res.epsilon_lower <= 1.0, res
    if not audit_trials.full:  # the negative control: slow profile
        return
    _Recorder(monkeypatch, factor=0.5)
    bad = audit_epsilon(
        _sum_mech, x, np.append(x, 1.0), n_trials=audit_trials(2000), alpha=ALPHA, events=EVENTS
    )
    assert bad.epsilon_lower > 1.0, bad


def test_audit_mean_record_at_the_bound(audit_trials):
    x = np.full(30, 0.5)
    res = audit_epsilon(
        lambda d: dp_mean(d, (0.0, 1.0), 1.0, resolution=64)[0],
        x,
        np.append(x, 1.0),
        n_trials=audit_trials(1600),
        alpha=ALPHA,
        events=EVENTS,
        statistic=lambda m: -1.0 if math.isnan(m) else m,
    )
    assert res.epsilon_lower <= 1.0, res


def test_audit_bounds_value_just_inside_a_bucket_edge(audit_trials):
    # base 1.5, anchor 0: upper bucket edges 0.5, 1.25, 2.375, ... One record sits just
    # below the edge 1.25 (counted there) or exactly on it (not counted: counts are of
    # values below an edge): the one count that changes is the one the scan stops at.
    edge = 1.5**2 - 1
    x = np.append(np.full(99, 1.0), math.nextafter(edge, 0.0))
    x2 = np.append(np.full(99, 1.0), edge)
    res = audit_epsilon(
        lambda d: dp_bounds(d, 1.0, base=1.5, max_buckets=40).value[1],
        x,
        x2,
        n_trials=audit_trials(1200),
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower <= 1.0, res


# ----------------------------------------------------------------------------- public parameters only


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda: dp_sum([1.0], (0, 1), 1.0, resolution=0), "resolution"),
        (lambda: dp_sum([1.0], (0, 1), 1.0, resolution=2.5), "resolution"),
        (lambda: dp_sum([1.0], (0, 1), 1.0, resolution=2**62), "resolution"),
        (lambda: dp_sum([1.0], (0, 1), 1.0, resolution=MAX_RESOLUTION + 1), "resolution"),
        (lambda: dp_sum([1.0], (0, 1), 1.0, resolution=True), "resolution"),
        (lambda: dp_sum([1.0], (0, 1), 1.0, resolution="4096"), "resolution"),
        (lambda: dp_sum([1.0], (0, 1), 1e-9, resolution=2**32), "resolution"),
        (lambda: dp_mean([1.0], (0, 1), 1.0, resolution=0), "resolution"),
        (lambda: dp_mean([1.0], None, 1.0, resolution=-3), "resolution"),
        (lambda: dp_sum([1.0], None, 1.0, n=5, resolution=0), "resolution"),
        (lambda: dp_sum([1.0], (-1e308, 1e308), 1.0), "bounds"),
        (lambda: dp_sum([1.0], (0, MAX_ABS_BOUND * 2), 1.0), "bounds"),
        (lambda: dp_sum([1.0], (0, math.inf), 1.0), "bounds"),
        (lambda: dp_sum([1.0], (0, math.nan), 1.0), "bounds"),
        (lambda: dp_sum([1.0], (1.0, 1.0), 1.0), "bounds"),
        (lambda: dp_sum([1.0], (0, 1e-310), 1.0), "bounds"),
        (lambda: dp_sum([1.0], "01", 1.0), "bounds"),
        (lambda: dp_mean([1.0], (-1e308, 1e308), 1.0), "bounds"),
        (lambda: dp_sum([1.0], None, 1.0), "n"),
        (lambda: dp_sum([1.0], None, 1.0, n=math.nan), "n"),
        (lambda: dp_sum([1.0], None, 1.0, n=5, anchor=1e308), "anchor"),
        (lambda: dp_mean([1.0], None, 1.0, anchor=math.inf), "anchor"),
        (lambda: dp_sum([1.0], None, 1.0, n=5, bounds_share=1.0), "bounds_share"),
        (lambda: dp_mean([1.0], (0, 1), 1.0, count_share=0.0), "count_share"),
        (lambda: dp_histogram([0], 0, 1.0), "n_bins"),
        (lambda: dp_histogram([0], MAX_BINS + 1, 1.0), "n_bins"),
        (lambda: dp_histogram([0], 10**12, 1.0), "n_bins"),
        (lambda: dp_histogram([0], 2.5, 1.0), "n_bins"),
        (lambda: dp_histogram([0], True, 1.0), "n_bins"),
        (lambda: dp_count(-1, 1.0), "n"),
        (lambda: dp_count(True, 1.0), "n"),
    ],
)
def test_bad_public_parameters(call, arg):
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.argument == arg


@pytest.mark.parametrize("eps", [0, -1.0, math.nan, math.inf, 5e-324, 1e-310, 1e7, "1", None, True])
@pytest.mark.parametrize(
    "call",
    [
        lambda e: dp_count(5, e),
        lambda e: dp_histogram([0, 1], 2, e),
        lambda e: dp_sum([0.5], (0, 1), e),
        lambda e: dp_mean([0.5], (0, 1), e),
        lambda e: dp_sum([0.5], None, e, n=1),
        lambda e: dp_mean([0.5], None, e),
        lambda e: dp_bounds([0.5], e),
    ],
    ids=["count", "histogram", "sum", "mean", "sum-nobounds", "mean-nobounds", "bounds"],
)
def test_bad_epsilon(call, eps):
    with pytest.raises(ParameterError) as info:
        call(eps)
    assert info.value.argument == "epsilon"


@pytest.mark.parametrize(
    ("call", "arg"),
    [
        (lambda: dp_sum(np.ones((2, 2)), (0, 1), 1.0), "x"),
        (lambda: dp_sum("abc", (0, 1), 1.0), "x"),
        (lambda: dp_mean(None, (0, 1), 1.0), "x"),
        (lambda: dp_histogram("012", 3, 1.0), "codes"),
        (lambda: dp_histogram(np.array([["a"]]), 3, 1.0), "codes"),
    ],
)
def test_wrong_shape_or_type(call, arg):
    with pytest.raises(DataError) as info:
        call()
    assert info.value.argument == arg


def _structure(rel):
    value = rel.value
    kind = (type(value).__name__, np.shape(value), getattr(np.asarray(value), "dtype", None).kind)
    return kind, sorted(rel.parameters), rel.epsilon, rel.mechanism


@pytest.mark.parametrize(
    "private",
    [[], [np.nan], [np.inf, -np.inf], [1e300, -1e300], np.array([0.5, "x", None], dtype=object)],
    ids=["empty", "nan", "inf", "huge", "stray"],
)
def test_private_facts_release_the_same_structure(private):
    clean = [0.2, 0.7]
    assert _structure(dp_sum(private, (0, 1), 1.0)) == _structure(dp_sum(clean, (0, 1), 1.0))
    m, rels = dp_mean(private, (0, 1), 1.0)
    _, rels0 = dp_mean(clean, (0, 1), 1.0)
    assert [_structure(r) for r in rels] == [_structure(r) for r in rels0]
    assert math.isnan(m) or 0.0 <= m <= 1.0
    for noisy in (dp_mean(private, None, 1.0), dp_mean(clean, None, 1.0)):
        assert [r.description for r in noisy[1]] == [
            "mean: count",
            "mean: clipping bounds",
            "mean: clipped sum",
        ]
    assert _structure(dp_sum(private, None, 1.0, n=3)) == _structure(dp_sum(clean, None, 1.0, n=3))


def test_mean_is_nan_exactly_when_the_noisy_count_is_below_one(monkeypatch):
    # The NaN rule reads only released values: force the count's noise and check both sides.
    def fixed(offset):
        def draw(values, scale):
            return np.asarray(values) + offset

        return draw

    for module in (stats_module, sums_module):
        monkeypatch.setattr(module, "add_discrete_laplace", fixed(0))
    assert math.isnan(dp_mean([], (0, 1), 1.0)[0])  # count 0 + 0
    for module in (stats_module, sums_module):
        monkeypatch.setattr(module, "add_discrete_laplace", fixed(1))
    m, _ = dp_mean([], (2.0, 3.0), 1.0)  # count 1, sum 0 + 1 unit
    assert 2.0 <= m <= 3.0


def test_releases_stay_in_range_and_on_their_grid():
    # 300 runs of a count of 0 at eps = 0.1: without the clip about half would be negative.
    assert min(dp_count(0, 0.1).value for _ in range(300)) >= 0
    for _ in range(50):
        r = dp_sum([0.1, 0.95], (0.0, 3.0), 0.05, resolution=300)
        step = r.parameters["grid_step"]
        # the value is the float product (integer noisy units) x step, a fixed public grid
        assert r.value >= 0 and r.value == round(r.value / step) * step
        m, _ = dp_mean([0.1, 0.95], (-1.0, 3.0), 0.05)
        assert math.isnan(m) or -1.0 <= m <= 3.0
        lo, hi = dp_bounds([0.5, 1.5, 2.5], 0.5, base=2.0, max_buckets=64).value
        # bucket edges anchor +- (2**k - 1), k >= 1, as the float formula computes them (or the cap)
        edges = {MAX_ABS_BOUND, *(float(np.expm1(k * math.log(2.0))) for k in range(1, 65))}
        assert abs(lo) in edges and abs(hi) in edges
