"""LR schedules vs the non-smooth convex bound (Schaipp et al., ICML 2025; 000-12)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab import theory
from trustlab.errors import TrustlabError
from trustlab.theory import LR_SCHEDULES as SCHEDULES
from trustlab.theory import schedule, schedule_bound, simulate_schedules

GAMMAS = np.geomspace(0.002, 0.2, 9)


@pytest.fixture(scope="module")
def sim():
    return simulate_schedules(1000, GAMMAS, n_runs=40, random_state=0)


def test_bound_is_a_over_gamma_plus_b_gamma_and_matches_a_direct_sum() -> None:
    s = schedule("cosine", 50)
    b = schedule_bound(s, 0.3, distance=2.0, gradient_bound=1.5)
    eta = 0.3 * s
    direct = (4.0 + 2.25 * np.sum(eta**2)) / (2 * eta.sum())
    for k in range(len(s) - 1):
        direct += 2.25 / 2 * eta[k] / (eta[k + 1 :].sum() * eta[k:].sum()) * np.sum(eta[k:] ** 2)
    assert np.isclose(b.value, direct, rtol=1e-12)
    grid = np.geomspace(b.optimal_gamma / 3, b.optimal_gamma * 3, 201)
    values = [schedule_bound(s, g, distance=2.0, gradient_bound=1.5).value for g in grid]
    assert np.isclose(grid[int(np.argmin(values))], b.optimal_gamma, rtol=0.02)


def test_cooldown_removes_the_log_factor() -> None:
    """Constant schedule's optimal bound grows like sqrt(log T)/sqrt(T); cooldown's like 1/sqrt(T)."""
    ts = np.array([100, 1000, 10000])
    const = np.array([schedule_bound(schedule("constant", int(t))).optimal_value for t in ts]) * np.sqrt(ts)
    cool = np.array([schedule_bound(schedule("cooldown", int(t))).optimal_value for t in ts]) * np.sqrt(ts)
    assert np.all(np.diff(const) > 0.05 * const[0])
    assert np.ptp(cool) < 0.05 * cool[0]


def test_bad_input() -> None:
    with pytest.raises(TrustlabError, match="schedule"):
        schedule_bound([0.1, -0.2, 0.3])
    with pytest.raises(TrustlabError, match="schedule"):
        schedule_bound([0.1, 0.0])
    with pytest.raises(TrustlabError, match="steps"):
        schedule("cosine", 0)
    with pytest.raises(TrustlabError, match="gammas"):
        simulate_schedules(10, [0.1, -1.0])
    with pytest.raises(TrustlabError, match="name"):
        schedule("linear", 10)


@pytest.mark.claims
def test_bound_holds_and_tracks_measured_suboptimality(sim) -> None:
    assert sim.schedules == SCHEDULES
    assert np.all(sim.measured <= sim.bound + 3 * sim.standard_error)
    assert sim.rank_correlation > 0.7
    # predicted optimal base rate within one grid step (x1.78) of the measured best
    step = GAMMAS[1] / GAMMAS[0]
    ratio = sim.best_gamma / sim.optimal_gamma
    assert np.all((ratio > 1 / step) & (ratio < step))
    # cosine wants the largest base rate, in the bound and in the measurements
    i = SCHEDULES.index("cosine")
    assert sim.optimal_gamma[i] == sim.optimal_gamma.max()
    assert sim.best_gamma[i] == sim.best_gamma.max()


def test_extending_training_lowers_the_predicted_optimal_rate_by_about_sqrt_of_the_factor() -> None:
    """The bound's schedule-extension rule: gamma*(4T) / gamma*(T) ~ 1/2 for every schedule shape."""
    for name in ("constant", "cooldown", "cosine", "wsd"):
        short = schedule_bound(schedule(name, 500)).optimal_gamma
        long = schedule_bound(schedule(name, 2000)).optimal_gamma
        assert 0.4 < long / short < 0.55


@pytest.mark.claims
@pytest.mark.slow  # reason: trains 4 x 8 x 4 small torch MLPs for 2000 SGD steps (~15 s)
def test_mlp_schedules_follow_the_bounds_ordering() -> None:
    """On a trained MLP: every cooldown schedule beats constant at its tuned rate, and constant's
    best rate is the smallest, as the bound predicts (gamma* constant < cooldown, wsd < cosine)."""
    from trustlab.theory import train_mlp_schedules

    grid = np.geomspace(0.005, 0.5, 9)
    run = train_mlp_schedules(2000, grid, random_state=0)
    best = run.loss.min(axis=1)
    c = SCHEDULES.index("constant")
    assert np.all(np.delete(best, c) < 0.8 * best[c])
    assert run.best_gamma[c] == run.best_gamma.min()
    opt = [schedule_bound(schedule(n, 2000)).optimal_gamma for n in SCHEDULES]
    assert opt[c] == min(opt) and opt[SCHEDULES.index("cosine")] == max(opt)


@pytest.mark.claims
def test_bound_reproduces_the_cooldown_length_dependence_and_ranks_cosine_with_wsd() -> None:
    # The paper's cooldown-length simulation (authors' scripts/cooldown_length.py: T = 400,
    # D = G = 1, linear cooldown to 0 = our "cooldown" shape): the tuned bound falls as the
    # cooldown lengthens, with diminishing returns, and the tuned base rate rises. Against cosine
    # to 0 (scripts/schedule_comparison.py) a 20 % cooldown is within 10 % of cosine and ~40 %
    # matches it: the bound ranks the two level, it does not predict WSD-20 % beating cosine.
    # Deterministic (no sampling), so the thresholds are the computed values with margin.
    fracs = [0.05, 0.1, 0.2, 0.4, 0.6, 0.8]
    tuned = [schedule_bound(schedule("cooldown", 400, cooldown=f)) for f in fracs]
    values = np.array([b.optimal_value for b in tuned])
    rates = np.array([b.optimal_gamma for b in tuned])
    assert np.all(np.diff(values) < 0) and np.all(np.diff(rates) > 0)
    # diminishing returns: the bound falls 12x faster per unit of cooldown from 5 to 20 % than from 40 to 80 %
    assert (values[0] - values[2]) / 0.15 > 5 * (values[3] - values[5]) / 0.4
    cosine = schedule_bound(schedule("cosine", 400)).optimal_value
    ratio = values / cosine
    assert 1.02 < ratio[2] < 1.10  # 20 % cooldown: 1.057
    assert 0.98 < ratio[3] < 1.02  # 40 %: 1.004
    assert schedule_bound(schedule("wsd", 400)).optimal_value / cosine > 1.0  # 1 - sqrt, 20 %: 1.037


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        ("steps", lambda v: theory.schedule("cosine", v)),
        ("steps", lambda v: theory.simulate_schedules(v, [0.1], n_runs=2)),
        ("dimension", lambda v: theory.simulate_schedules(10, [0.1], dimension=v, n_runs=2)),
        ("n_runs", lambda v: theory.simulate_schedules(10, [0.1], n_runs=v)),
        ("steps", lambda v: theory.train_mlp_schedules(v, [0.1])),
        ("width", lambda v: theory.train_mlp_schedules(5, [0.1], width=v)),
        ("dimension", lambda v: theory.train_mlp_schedules(5, [0.1], dimension=v)),
        ("batch_size", lambda v: theory.train_mlp_schedules(5, [0.1], batch_size=v)),
        ("n_seeds", lambda v: theory.train_mlp_schedules(5, [0.1], n_seeds=v)),
    ],
    ids=lambda c: c if isinstance(c, str) else "",
)
@settings(max_examples=3, deadline=None)
@given(bad=st.integers(max_value=0))
def test_non_positive_sizes_name_the_argument(argument: str, call, bad: int) -> None:
    """Issue 34: a non-positive dimension, step or sample count raises a TrustlabError naming it."""
    with pytest.raises(TrustlabError) as info:
        call(bad)
    assert info.value.argument == argument and argument in str(info.value)
