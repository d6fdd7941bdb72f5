"""Approximation rate of looped transformers (Xu & Sato, ICML 2025; 001-13)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab import theory
from trustlab.errors import TrustlabError
from trustlab.theory import default_target, estimate_moduli, looped_rate, simulate_looped
from trustlab.theory.looped_transformers import commutator_target, flow_target


@pytest.mark.claims
def test_rate_matches_theorem_3_6_and_falls_with_loops() -> None:
    n, d = 3, 2
    r = np.array([10, 100, 1000, 10**4, 10**6])
    rates = [looped_rate(int(k), n, d, p=2.0) for k in r]
    for k, rate in zip(r, rates, strict=True):
        delta = ((k - n) / 2) ** (-1 / ((n + 1) * d + 1))
        assert np.isclose(rate.delta, delta)
        expected = np.sqrt(n * d) * (delta * np.sqrt(d) + 2 * delta * np.sqrt(n * d)) + n * delta
        assert np.isclose(rate.total, expected)
    totals = np.array([x.total for x in rates])
    assert np.all(np.diff(totals) < 0)
    # Lipschitz moduli: the modulus term falls like r^{-1/((N+1)d+1)}
    slope = np.polyfit(np.log(r - n), np.log([x.modulus_term for x in rates]), 1)[0]
    assert np.isclose(slope, -1 / ((n + 1) * d + 1), atol=1e-9)


@pytest.mark.claims
@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_claim_error_falls_with_loops_and_timestep_modulation_lowers_it() -> None:
    """Section 5: more loops lower the error; the timestep-modulated block lowers it further.

    The sequence-to-sequence function is the time-1 map of a token ODE whose field changes with
    time (``flow_target``); 3 seeds x r in {1, 2, 4}, 600 Adam steps each (about 1 min CPU).
    Measured: slope of log MSE on log r -0.92 +- 0.16 (plain) and -1.69 +- 0.18 (TMLT);
    log(MSE_TMLT / MSE_plain) at r >= 2 -0.80 +- 0.10 (-55 %). The standard errors come from the
    seeds (OLS over the 9 (r, seed) points; 6 paired differences), so each check is a 3-SE test.
    """
    pytest.importorskip("torch")
    sim = simulate_looped([1, 2, 4], target="flow", steps=600, n_seeds=3)
    assert sim.plain_slope + 3 * sim.plain_slope_se < 0
    assert sim.timestep_slope + 3 * sim.timestep_slope_se < 0
    gain = np.log(sim.timestep[1:] / sim.plain[1:]).ravel()
    assert gain.mean() + 3 * gain.std(ddof=1) / np.sqrt(gain.size) < 0
    # at r = 1 the encoding is one constant: the timestep and constant-scale models coincide
    assert np.array_equal(sim.timestep[0], sim.constant[0])


def test_moduli_of_known_functions() -> None:
    """Token-wise maps have no contextual modulus; averaging maps have both; Lipschitz bounds hold."""
    deltas = [0.05, 0.2]
    tokenwise = estimate_moduli(lambda x: 3 * x, 4, 2, deltas, n_samples=400)
    assert np.all(tokenwise.contextual == 0)
    assert np.all(tokenwise.sequence <= 3 * np.array(deltas) + 1e-12)
    assert np.all(tokenwise.token > 0)
    mean = estimate_moduli(
        lambda x: np.broadcast_to(x.mean(axis=1, keepdims=True), x.shape), 4, 2, deltas, n_samples=400
    )
    assert np.all(mean.contextual > 0) and np.all(mean.token > 0)
    target = estimate_moduli(default_target, 6, 2, deltas, n_samples=400)
    assert np.all(target.sequence >= np.maximum(target.contextual, target.token))
    assert np.all(np.diff(target.token) > 0)


def test_flow_target_is_permutation_equivariant_and_time_dependent() -> None:
    x = np.random.default_rng(1).uniform(0, 1, (50, 5, 2))
    perm = np.array([3, 0, 4, 1, 2])
    y = flow_target(x)
    assert y.shape == x.shape
    assert np.allclose(flow_target(x[:, perm]), y[:, perm])
    # the field moves tokens by O(1)
    assert 0.1 < np.abs(y - x).mean() < 3
    assert not np.allclose(flow_target(x, autonomous=True), y)
    # RK4 has converged: 8x more steps change the map by < 1e-4 (squared error ~1e-11)
    assert np.abs(flow_target(x, n_steps=256) - y).max() < 1e-4


def test_commutator_target_is_a_group_commutator() -> None:
    """Four phases whose averaged field is zero: identity without the push, O(0.1) moves with it."""
    x = np.random.default_rng(2).uniform(0, 1, (200, 4, 2))
    perm = np.array([2, 0, 3, 1])
    y = commutator_target(x)
    assert y.shape == x.shape
    assert np.allclose(commutator_target(x[:, perm]), y[:, perm])
    # rotation by +pi/2 then -pi/2 with no push between them: the identity
    assert np.allclose(commutator_target(x, gain=0.0), x)
    assert 0.05 < np.abs(y - x).mean() < 0.5
    # the pushes are converged RK4: 4x more steps change the map by < 1e-4
    assert np.abs(commutator_target(x, n_steps=64) - y).max() < 1e-4
    with pytest.raises(TrustlabError, match="x"):
        commutator_target(np.zeros((2, 3, 3)))
    with pytest.raises(TrustlabError, match="gain"):
        commutator_target(x, gain=-1.0)


@pytest.mark.usefixtures("one_torch_thread")
def test_simulate_looped_shapes_and_ablation() -> None:
    """At one loop the timestep encoding is a constant: TMLT and the ablation are the same run."""
    pytest.importorskip("torch")
    sim = simulate_looped([1, 2], steps=3, batch_size=8, width=8, n_seeds=2, n_test=64)
    assert sim.plain.shape == sim.timestep.shape == sim.constant.shape == (2, 2)
    assert np.array_equal(sim.timestep[0], sim.constant[0])
    assert not np.array_equal(sim.timestep[1], sim.constant[1])
    assert np.all(sim.plain > 0) and sim.target_variance > 0


def test_bad_input() -> None:
    with pytest.raises(TrustlabError, match="loops"):
        looped_rate(3, 5, 1)
    with pytest.raises(TrustlabError, match="tokens"):
        looped_rate(10, 0, 1)
    with pytest.raises(TrustlabError, match="deltas"):
        estimate_moduli(default_target, 3, 2, [0.1, -0.1])
    with pytest.raises(TrustlabError, match="target"):
        simulate_looped([1, 2], target="sudoku", steps=1)
    with pytest.raises(TrustlabError, match="width"):
        simulate_looped([1, 2], width=9, steps=1)
    with pytest.raises(TrustlabError, match="loops"):
        simulate_looped([0, 2], steps=1)
    with pytest.raises(TrustlabError, match="dim"):
        simulate_looped([1, 2], dim=3, steps=1)
    with pytest.raises(TrustlabError, match="x"):
        flow_target(np.zeros((2, 3, 3)))


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        ("loops", lambda v: theory.looped_rate(v, 2, 2)),
        ("tokens", lambda v: theory.looped_rate(10, v, 2)),
        ("dim", lambda v: theory.looped_rate(10, 2, v)),
        ("tokens", lambda v: theory.estimate_moduli(theory.default_target, v, 2, [0.1], n_samples=10)),
        ("dim", lambda v: theory.estimate_moduli(theory.default_target, 2, v, [0.1], n_samples=10)),
        ("n_samples", lambda v: theory.estimate_moduli(theory.default_target, 2, 2, [0.1], n_samples=v)),
        ("n_steps", lambda v: theory.flow_target(np.zeros((1, 2, 2)), n_steps=v)),
        ("loops", lambda v: theory.simulate_looped([v], steps=1)),
        *[
            (name, lambda v, name=name: theory.simulate_looped([1], **{"steps": 1, name: v}))
            for name in ("tokens", "dim", "width", "steps", "batch_size", "n_seeds", "n_test")
        ],
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
