"""Tests of trustlab.privacy.accounting: basic, Renyi-DP, zCDP and PLD composition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event, get_epsilon_gaussian
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from trustlab.errors import BudgetExceededError, ParameterError
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.release import Release


def _rdp(events, delta):
    acc = RdpAccountant()
    for ev, k in events:
        acc.compose(ev, k)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("k", [1, 10, 100])
def test_k_gaussians_match_dp_accounting_rdp(k):
    acc = Accountant(100.0, 1e-5, composition="rdp")
    for _ in range(k):
        acc.spend_gaussian(3.0, sensitivity=1.5, description="sum")
    ref = _rdp([(dp_event.GaussianDpEvent(2.0), k)], 1e-5)
    assert acc.spent_epsilon == pytest.approx(ref, rel=1e-12)
    assert acc.spent_delta == 1e-5
    # The ledger's marginal epsilons add up to the total.
    assert sum(e.epsilon for e in acc.ledger()) == pytest.approx(acc.spent_epsilon)


@pytest.mark.parametrize("k", [1, 10])
def test_k_gaussians_match_dp_accounting_pld(k):
    acc = Accountant(100.0, 1e-5, composition="pld")
    acc.spend_gaussian(2.0, count=k, description="k sums")
    ref = PLDAccountant()
    ref.compose(dp_event.GaussianDpEvent(2.0), k)
    assert acc.spent_epsilon == pytest.approx(ref.get_epsilon(1e-5), rel=1e-9)


def test_zcdp_adds_rho_and_converts_with_dp_accounting():
    acc = Accountant(100.0, 1e-5, composition="zcdp")
    for _ in range(10):
        acc.spend_gaussian(2.0, description="sum")  # rho = 1 / (2 * 4) each
    acc.spend_zcdp(0.25, description="extra")
    rho = 10 / 8 + 0.25
    assert acc.spent_epsilon == pytest.approx(_rdp([(dp_event.ZCDpEvent(rho), 1)], 1e-5), rel=1e-12)
    # Never worse than Bun-Steinke's conversion rho + 2 sqrt(rho log(1/delta)).
    assert acc.spent_epsilon <= rho + 2 * math.sqrt(rho * math.log(1e5))


def test_tight_beats_basic_for_many_gaussians_and_basic_matches_closed_form():
    basic = Accountant(100.0, 1e-5)
    for _ in range(50):
        basic.spend_gaussian(5.0, description="sum", delta=2e-7)
    assert basic.spent_epsilon == pytest.approx(50 * get_epsilon_gaussian(5.0, 2e-7))
    assert basic.remaining_delta == pytest.approx(0.0, abs=1e-15)
    rdp = Accountant(100.0, 1e-5, composition="rdp")
    rdp.spend_gaussian(5.0, count=50, description="sums")
    assert rdp.spent_epsilon < basic.spent_epsilon / 3


def test_refuses_to_exceed_and_keeps_state():
    acc = Accountant(1.0, 1e-6, composition="rdp")
    acc.spend_gaussian(10.0, description="first")
    before = acc.spent_epsilon
    with pytest.raises(BudgetExceededError) as info:
        acc.spend_gaussian(0.5, description="too much")
    assert info.value.argument == "epsilon"
    assert acc.spent_epsilon == before and len(acc.ledger()) == 1
    # Filling up to the total works; one more small release does not.
    n = 0
    with pytest.raises(BudgetExceededError):
        while True:
            acc.spend_gaussian(10.0, description="more")
            n += 1
    assert acc.spent_epsilon <= 1.0 and n > 0
    for comp in ("zcdp", "pld"):
        acc = Accountant(0.5, 1e-6, composition=comp)
        with pytest.raises(BudgetExceededError):
            acc.spend_gaussian(1.0, description="sigma 1 is ~5-DP")


def test_gaussian_needs_delta():
    acc = Accountant(10.0, composition="rdp")
    with pytest.raises(BudgetExceededError) as info:
        acc.spend_gaussian(2.0, description="no delta")
    assert info.value.argument == "delta"
    with pytest.raises(ParameterError) as info2:
        Accountant(10.0, 1e-5).spend_gaussian(2.0, description="basic")
    assert info2.value.argument == "delta"


@pytest.mark.parametrize("comp", ["basic", "rdp", "zcdp", "pld"])
def test_pure_dp_composition_unchanged(comp):
    # With delta = 0 every composition is basic composition for pure releases.
    acc = Accountant(1.0, composition=comp)
    acc.spend(0.25, description="a")
    acc.spend(0.5, description="b")
    assert acc.spent_epsilon == pytest.approx(0.75)
    with pytest.raises(BudgetExceededError):
        acc.spend(0.3, description="c")
    # And with delta > 0 a tight composition never reports more than basic.
    few = Accountant(1.0, 1e-6, composition=comp)
    few.spend(0.5, description="a")
    few.spend(0.5, description="b")
    assert few.spent_epsilon <= 1.0 + 1e-12


@pytest.mark.parametrize("comp", ["rdp", "zcdp", "pld"])
def test_many_small_pure_releases_compose_sublinearly(comp):
    acc = Accountant(5.0, 1e-6, composition=comp)
    for _ in range(100):
        acc.spend(0.02, description="tiny")
    assert acc.spent_epsilon < 0.8 * 2.0  # basic would be 2.0


def test_pure_rdp_matches_randomized_response_curve():
    # A pure eps release enters RDP as binary randomized response with eps (replace-one).
    from dp_accounting import NeighboringRelation

    eps = 0.1
    acc = Accountant(10.0, 1e-6, composition="rdp")
    for _ in range(40):
        acc.spend(eps, description="x")
    ref = RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    ref.compose(dp_event.RandomizedResponseDpEvent(2 / (1 + math.exp(eps)), 2), 40)
    assert acc.spent_epsilon == pytest.approx(min(4.0, ref.get_epsilon(1e-6)), rel=1e-9)


def test_children_split_and_record_with_tight_composition():
    acc = Accountant(4.0, 1e-5, composition="rdp")
    shares = acc.split({"a": 1.0, "b": 1.0})
    assert shares["a"].total_delta == pytest.approx(5e-6) and shares["b"].total_delta == pytest.approx(5e-6)
    assert acc.remaining_epsilon == pytest.approx(0.0, abs=1e-9)
    assert shares["a"].composition == "rdp"
    gauss = Release(
        0.0, 0.5, 1e-6, "Gaussian", {}, "noisy mean", measure="gaussian", sensitivity=1.0, noise_scale=4.0
    )
    shares["a"].record(gauss)
    shares["b"].record(Release(0.0, 0.3, 0.0, "discrete Laplace", {}, "count"))
    led = acc.ledger()
    assert [e.description for e in led] == ["noisy mean", "count"]
    assert led[1].epsilon == pytest.approx(0.3)
    # The Gaussian was charged by its noise, not by the release's stated epsilon.
    ref = _rdp([(dp_event.GaussianDpEvent(4.0), 1)], 5e-6)
    assert led[0].epsilon == pytest.approx(ref)


def test_spend_event_poisson_subsampled_gaussian():
    ev = dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.1)), 1000
    )
    acc = Accountant(10.0, 1e-5, composition="rdp")
    acc.spend_event(ev, description="DP-SGD, 1000 steps")
    assert acc.spent_epsilon == pytest.approx(_rdp([(ev, 1)], 1e-5))
    with pytest.raises(ParameterError) as info:
        Accountant(10.0, 1e-5, composition="pld").spend_event(ev, description="x")
    assert info.value.argument == "event"


def test_existing_basic_behaviour():
    acc = Accountant(1.0)
    data = acc.child(0.4, "data")
    data.spend(0.4, description="row count")
    assert round(acc.remaining_epsilon, 6) == 0.6
    with pytest.raises(BudgetExceededError):
        data.spend(1e-3, description="over")
    parts = acc.split({"x": 1.0, "y": 2.0})
    assert sum(p.total_epsilon for p in parts.values()) == pytest.approx(0.6)
    assert acc.composition == "basic" and acc.remaining_epsilon == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("make", "arg"),
    [
        (lambda: Accountant(0.0), "epsilon"),
        (lambda: Accountant(float("nan")), "epsilon"),
        (lambda: Accountant(1.0, 1.5), "delta"),
        (lambda: Accountant(1.0, composition="advanced"), "composition"),
        (lambda: Accountant(1.0, 1e-5, composition="rdp").spend_gaussian(-1.0, description="x"), "sigma"),
        (lambda: Accountant(1.0, 1e-5, composition="rdp").spend_gaussian(np.inf, description="x"), "sigma"),
        (
            lambda: Accountant(1.0, 1e-5, composition="rdp").spend_gaussian(
                1.0, sensitivity=0, description="x"
            ),
            "sensitivity",
        ),
        (
            lambda: Accountant(1.0, 1e-5, composition="rdp").spend_gaussian(1.0, count=0, description="x"),
            "count",
        ),
        (
            lambda: Accountant(1.0, 1e-5, composition="rdp").spend_gaussian(1.0, description="x", delta=1e-6),
            "delta",
        ),
        (lambda: Accountant(1.0, 1e-5, composition="zcdp").spend_zcdp(float("nan"), description="x"), "rho"),
        (lambda: Accountant(1.0, 1e-5, composition="pld").spend_zcdp(0.1, description="x"), "composition"),
        (lambda: Accountant(1.0, 1e-5).spend_zcdp(0.1, description="x"), "delta"),
        (lambda: Accountant(1.0, 1e-5, composition="rdp").spend_event("gauss", description="x"), "event"),
        (lambda: Accountant(1.0, 1e-5).child(0.5, "c", delta=2.0), "delta"),
        (lambda: Accountant(1.0, 1e-5, composition="rdp").child(0.5, "c", delta=1e-4), "delta"),
    ],
)
def test_bad_input(make, arg):
    with pytest.raises((ParameterError, BudgetExceededError)) as info:
        make()
    assert info.value.argument == arg


def test_pld_approximate_releases_respect_total_delta():
    acc = Accountant(10.0, 1e-6, composition="pld")
    acc.spend(0.5, 6e-7, description="a")
    with pytest.raises(BudgetExceededError) as info:
        acc.spend(0.5, 6e-7, description="b")  # deltas alone exceed the total
    assert info.value.argument == "delta"
    assert acc.spent_delta <= 1e-6


def test_laplace_event_counts_like_pure_dp():
    acc = Accountant(1.0, composition="rdp")
    acc.spend_event(dp_event.LaplaceDpEvent(2.0), description="Laplace, eps 0.5")
    assert acc.spent_epsilon == pytest.approx(0.5)


@pytest.mark.parametrize("composition", ["basic", "rdp"])
def test_record_refuses_releases_that_are_not_dp(composition):
    acc = Accountant(5.0, 1e-5, composition=composition)
    dsi_like = Release(
        0.0, 1.0, 1e-5, "DSI Gaussian", {"noise_multiplier": 3.7}, "vector", guarantee="DSI (not DP)"
    )
    assert not dsi_like.is_dp and Release(0.0, 1.0).is_dp
    with pytest.raises(ParameterError) as info:
        acc.record(dsi_like)
    assert info.value.argument == "release"
    assert acc.spent_epsilon == 0.0 and acc.ledger() == []


@pytest.mark.parametrize("composition", ["rdp", "pld", "zcdp"])
def test_grid_gaussian_releases_are_charged_by_their_epsilon_delta(monkeypatch, composition):
    # Discrete-Gaussian releases on a grid carry a grid term in their (epsilon, delta): a tight
    # accountant must not re-derive their cost from a continuous Gaussian's noise multiplier.
    from trustlab.privacy.linear_sketch import central_mod_sulq, ltm_release, make_sketch

    rel = ltm_release(np.full((20, 2), 0.1), make_sketch(4, 20, random_state=0), 1.0, 1e-6, 1.0)
    central = central_mod_sulq(np.full((20, 2), 0.1), 1, 1.0, 1e-6, 1.0)

    def refuse(*args, **kwargs):
        raise AssertionError("charged as a continuous Gaussian")

    acc = Accountant(3.0, 1e-4, composition=composition)
    monkeypatch.setattr(acc, "spend_gaussian", refuse)
    acc.record(rel)
    acc.record(central)
    assert acc.spent_epsilon <= 2.0 + 1e-9 and len(acc.ledger()) == 2
