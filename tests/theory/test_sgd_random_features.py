"""Distribution-free SGD vs random features (Karchmer & Malach, ICML 2025; 002-05): what survives.

The paper's poly(Tp/c) random-feature upper bound is reported flawed (Feldman, Kamath & Srebro,
COLT 2026); these tests check the parts that stand: bSGD as statistical queries, the SQ-dimension
lower bound on random features for parities, and an empirical SGD-to-features probe.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab import theory
from trustlab.errors import TrustlabError
from trustlab.theory import (
    bsgd_sq_resources,
    parity_feature_bound,
    simulate_bsgd_queries,
    simulate_feature_growth,
    simulate_null_oracle,
    simulate_parity_features,
)


def test_closed_forms() -> None:
    r = bsgd_sq_resources(100, 50, 0.1, batch_size=9765)
    assert (r.queries, r.tolerance, r.min_batch_size, r.simulable) == (5000, 0.1, 9765, True)
    assert r.min_batch_size == math.ceil(8 * math.log(2 * 5000 / 0.05) / 0.01)
    assert not bsgd_sq_resources(100, 50, 0.1, batch_size=9764).simulable
    assert bsgd_sq_resources(1, 1, 1.0).simulable is None
    assert math.isclose(r.open_question_size, 5000 / 0.01)
    assert "not to hold" in r.claimed_bound_status
    b = parity_feature_bound(8, 3, 16, error=0.1)
    assert (b.sq_dimension, b.features_needed, b.min_queries_per_tolerance_sq) == (56, 51, 55.0)
    assert math.isclose(b.error_lower_bound, 1 - 16 / 56)
    assert math.isclose(b.class_feature_error, (55 / 56) ** 16)
    assert parity_feature_bound(8, 3, 100).error_lower_bound == 0.0
    assert parity_feature_bound(8, 3, 5, error=0.0).features_needed == 56


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(TrustlabError, match="steps"):
        bsgd_sq_resources(0, 10, 0.1)
    with pytest.raises(TrustlabError, match="precision"):
        bsgd_sq_resources(10, 10, 0.0)
    with pytest.raises(TrustlabError, match="n_params"):
        bsgd_sq_resources(10, -1, 0.1)
    with pytest.raises(TrustlabError, match="k=5 exceeds n_bits=4"):
        parity_feature_bound(4, 5, 3)
    with pytest.raises(TrustlabError, match="n_features"):
        parity_feature_bound(4, 2, 0)
    with pytest.raises(TrustlabError, match="n_features"):
        simulate_parity_features(6, 2, [4, 0])
    with pytest.raises(TrustlabError, match="n_bits"):
        simulate_parity_features(20, 2, [4])
    with pytest.raises(TrustlabError, match="steps"):
        simulate_feature_growth(6, 2, [50, 20])
    with pytest.raises(TrustlabError, match="max_features"):
        simulate_feature_growth(6, 2, [5, 10], max_features=65)
    with pytest.raises(TrustlabError, match="k"):
        simulate_bsgd_queries(4, 6)


@pytest.mark.claims
def test_claim_random_features_obey_the_sq_dimension_bound() -> None:
    """Mean error over all C(8,3) = 56 parities >= 1 - d/N on every draw; class features match (1-1/N)^d.

    Expectations are exact (all 256 points), so the bound and Parseval (projection mass over all
    256 characters = rank) are checked to 1e-9; the class-feature closed form to 4 Monte-Carlo SE.
    """
    sizes = [16, 56, 112]
    relu = simulate_parity_features(8, 3, sizes, n_draws=20, random_state=1)
    assert relu.parseval_error < 1e-9
    assert np.all(relu.min_gap >= -1e-9)
    # random ReLU features put little mass on degree 3: far above the bound (a finding, 20+ SE)
    assert np.all(relu.mean_error - relu.bound > 20 * relu.error_se)
    assert np.allclose(relu.degree_mass.sum(axis=1), relu.mean_rank, atol=1e-6)
    assert np.all(relu.mean_rank <= sizes)
    par = simulate_parity_features(8, 3, sizes, features="parity", n_draws=100, random_state=2)
    assert np.all(par.min_gap >= -1e-9) and par.parseval_error < 1e-9
    assert np.all(np.abs(par.mean_error - par.predicted) <= 4 * par.error_se)
    assert np.all(par.predicted >= par.bound)


@pytest.mark.claims
def test_claim_bsgd_with_the_batch_condition_answers_statistical_queries() -> None:
    """Batch gradients at b >= 8 ln(2Tp/delta)/c^2 are tolerance-c SQ answers, in >= 1 - delta of runs."""
    sim = simulate_bsgd_queries(8, 3, width=8, steps=20, precision=0.25, n_runs=20, random_state=0)
    assert sim.resources.simulable and sim.resources.queries == 20 * 80
    assert sim.valid_fraction >= sim.guaranteed_fraction - 3 * sim.valid_se
    assert np.all(sim.max_sampling_deviation <= 0.125)
    small = simulate_bsgd_queries(8, 3, width=8, steps=20, precision=0.25, batch_size=8, n_runs=5)
    assert small.guaranteed_fraction == 0.0 and small.valid_fraction < 1.0  # the condition is not idle


@pytest.mark.claims
def test_claim_target_free_answers_hide_the_parity() -> None:
    """The SQ lower bound, run: bSGD fed the adversary's target-free answers on all 56 parities of 8 bits.

    Distinguished targets never exceed the Bessel cap; the common output fits at most one of the
    rest, and its mean error is >= (U - 1)/N. At tau = c = 0.25 not one parity is distinguished in
    100 steps (p = 80), so the run carries no information on the target; at tau = 0.02 all are.
    """
    coarse = simulate_null_oracle(8, 3, steps=100, tolerance=0.25, random_state=0)
    fine = simulate_null_oracle(8, 3, steps=100, tolerance=0.02, random_state=0)
    for sim in (coarse, fine):
        assert sim.distinguished <= sim.bessel_cap <= sim.cap
        assert sim.fitted_indistinguished <= 1
        assert sim.mean_error >= sim.error_lower_bound - 1e-12
    assert coarse.distinguished == 0 and coarse.error_lower_bound == pytest.approx(55 / 56)
    assert fine.distinguished == fine.sq_dimension == 56
    with pytest.raises(TrustlabError, match="tolerance"):
        simulate_null_oracle(tolerance=0.0)


@pytest.mark.claims
def test_claim_feature_count_tracks_what_sgd_learned() -> None:
    """N*(T) for the SGD-learned function of a 3-parity on 8 bits: rises while SGD learns, then plateaus.

    The plateau is >= (1 - eps) C(8, 3), the SQ-dimension bound (it holds for each parity in
    expectation, the feature law being invariant under signed permutations of the bits); the
    approximation error falls as a power law in N (slope < 0 by more than 3 SE).
    """
    g = simulate_feature_growth(random_state=0, steps=(25, 50, 100, 200, 400, 800, 1600, 3200))
    need = g.features_needed
    assert g.target_error[-1] < 0.01 and g.target_error[0] > 0.9
    assert np.all(np.isfinite(need))
    assert need[-1] >= parity_feature_bound(8, 3, 1, error=g.error).features_needed
    assert need[-1] > 2 * need[0]
    assert abs(need[-1] - need[-2]) <= 0.05 * need[-1]  # no growth once learned
    assert g.error_exponent + 3 * g.error_exponent_se < 0
    assert np.isfinite(g.fitted_exponent) and g.exponent_se > 0


@pytest.mark.claims
@pytest.mark.slow
def test_claim_feature_count_plateaus_across_sgd_seeds() -> None:
    """Four SGD seeds: once the parity is learned (error < 0.02), N* stays within 5 % while T grows 4x.

    Measured (error 0.25, 5 feature draws): plateaus 146, 176, 179, 160 for seeds 0-3, all above the
    SQ-dimension bound 42; before learning N* is 19-43.
    """
    bound = parity_feature_bound(8, 3, 1, error=0.25).features_needed
    for seed in range(4):
        g = simulate_feature_growth(steps=(25, 50, 100, 200, 400, 800, 1600, 3200), random_state=seed)
        learned = g.target_error < 0.02
        assert learned[-3:].all() and not learned[:3].any()
        plateau = g.features_needed[learned]
        assert np.all(plateau >= bound)
        assert plateau.max() - plateau.min() <= 0.05 * plateau.max()
        assert np.all(2 * g.features_needed[:3] < plateau.min())  # T <= 100: not yet learned


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        ("steps", lambda v: theory.bsgd_sq_resources(v, 10, 0.25)),
        ("n_params", lambda v: theory.bsgd_sq_resources(10, v, 0.25)),
        ("batch_size", lambda v: theory.bsgd_sq_resources(10, 10, 0.25, batch_size=v)),
        ("n_bits", lambda v: theory.parity_feature_bound(v, 2, 4)),
        ("k", lambda v: theory.parity_feature_bound(6, v, 4)),
        ("n_features", lambda v: theory.parity_feature_bound(6, 2, v)),
        ("n_bits", lambda v: theory.simulate_parity_features(v, 2, [4])),
        ("k", lambda v: theory.simulate_parity_features(6, v, [4])),
        ("n_features", lambda v: theory.simulate_parity_features(6, 2, [v])),
        ("n_draws", lambda v: theory.simulate_parity_features(6, 2, [4], n_draws=v)),
        *[
            (name, lambda v, name=name: theory.simulate_bsgd_queries(6, 2, **{name: v}))
            for name in ("width", "steps", "batch_size", "n_runs")
        ],
        *[
            (name, lambda v, name=name: theory.simulate_null_oracle(6, 2, **{name: v}))
            for name in ("width", "steps")
        ],
        ("steps", lambda v: theory.simulate_feature_growth(6, 2, (v, 4))),
        *[
            (name, lambda v, name=name: theory.simulate_feature_growth(6, 2, (2, 4), **{name: v}))
            for name in ("width", "batch_size", "max_features", "n_draws", "n_bootstrap")
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
