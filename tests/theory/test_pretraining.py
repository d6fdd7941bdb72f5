"""Pre-training and transfer lower online SGD's sample complexity (Jones-McCormick et al., 2025; 000-18)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp

from trustlab import theory
from trustlab.errors import TrustlabError
from trustlab.theory import (
    information_exponent,
    pca_overlap,
    sample_complexity,
    simulate_sample_complexity,
    simulate_spiked_sample_complexity,
    spiked_sample_complexity,
)

HE3 = [0.0, 0.0, 0.0, 1 / np.sqrt(6)]


def test_information_exponent_and_bad_links() -> None:
    assert information_exponent([0, 1]) == 1
    assert information_exponent([1, 0, 2, 5]) == 2
    with pytest.raises(TrustlabError, match="link"):
        information_exponent([3.0, 0.0])
    with pytest.raises(TrustlabError, match="dimension"):
        sample_complexity(HE3, 0)
    with pytest.raises(TrustlabError, match="initial_overlap"):
        sample_complexity(HE3, 10, init="transfer")
    with pytest.raises(TrustlabError, match="dimensions"):
        simulate_sample_complexity(HE3, [16, -4])
    with pytest.raises(TrustlabError, match="spike"):
        pca_overlap(-1.0, 0.5)


@pytest.mark.parametrize(
    ("k", "exponent", "log_factor"), [(1, 1.0, False), (2, 1.0, True), (3, 2.0, False), (4, 3.0, False)]
)
def test_effective_dynamics_give_the_random_start_rates(k: int, exponent: float, log_factor: bool) -> None:
    link = np.zeros(k + 1)
    link[k] = 1.0
    dims = np.array([400, 1600, 6400])
    samples = np.array([sample_complexity(link, int(d)).samples for d in dims])
    xs = np.log(dims) + (np.log(np.log(dims)) if log_factor else 0)
    slope = np.polyfit(xs, np.log(samples), 1)[0]
    assert sample_complexity(link, 100).exponent == exponent
    assert abs(slope - exponent) < 0.05
    warm = np.array(
        [sample_complexity(link, int(d), init="transfer", initial_overlap=0.3).samples for d in dims]
    )
    assert np.allclose(warm / dims, warm[0] / dims[0])  # exactly linear in d from a fixed overlap


@pytest.mark.claims
def test_pca_start_has_the_bbp_overlap() -> None:
    """Pre-training's start: the top eigenvector's squared overlap matches the BBP limit (MC error)."""
    rng = np.random.default_rng(0)
    d, n, spike, reps = 80, 320, 1.0, 30
    v = np.zeros(d)
    v[0] = 1.0
    overlaps = []
    for _ in range(reps):
        z = rng.standard_normal((n, d))
        z[:, 0] *= np.sqrt(1 + spike)
        overlaps.append(np.linalg.eigh(z.T @ z)[1][0, -1] ** 2)
    se = np.std(overlaps, ddof=1) / np.sqrt(reps)
    # finite-d correction of the limit is O(d^{-1/2}) ~ 0.05 of the fluctuation scale; allow 4 SE + 0.02
    assert abs(np.mean(overlaps) - pca_overlap(spike, d / n)) < 4 * se + 0.02
    assert pca_overlap(0.3, d / n) == 0.0


@pytest.mark.claims
@pytest.mark.slow  # reason: the overlap chains of 2 x 5 x 32 SGD runs, up to ~6e5 steps, ~70 s
def test_transfer_start_is_linear_and_random_start_is_quadratic_in_d() -> None:
    """Isotropic inputs, He3 (k = 3): d^1 from a transferred start, d^{k-1} = d^2 from a random one.

    Each start runs at the effective dynamics' step (``sample_complexity(..., step_scale=0.6)``); the
    overlap chain is exact in law for SGD (``test_overlap_chain_has_the_law_of_full_sgd``), so d up to 64.
    """
    dims = [16, 24, 32, 48, 64]
    kw = {"init": "transfer", "initial_overlap": 0.3}
    hot = [sample_complexity(HE3, d, step_scale=0.6, **kw).step_size for d in dims]  # type: ignore[arg-type]
    cold_steps = [sample_complexity(HE3, d, step_scale=0.6).step_size for d in dims]
    warm = simulate_spiked_sample_complexity(
        HE3, dims, spike=0.0, step_size=hot, threshold=0.5, n_runs=32, **kw
    )
    cold = simulate_spiked_sample_complexity(
        HE3, dims, spike=0.0, step_size=cold_steps, threshold=0.5, n_runs=32, budget_factor=6
    )
    assert np.all(warm.success_rate == 1) and np.all(cold.success_rate > 0.6)
    assert abs(warm.log_exponent - 1.0) < 3 * warm.log_exponent_se + 0.05
    # the random start's median counts only the runs that finish; 0.1 allows for the O(log d) prefactor
    assert abs(cold.log_exponent - 2.0) < 3 * cold.log_exponent_se + 0.1
    assert cold.log_exponent > warm.log_exponent + 2 * np.hypot(cold.log_exponent_se, warm.log_exponent_se)


# --- the exponential-gain setting: a spike along the target traps random starts -----------------


@pytest.mark.claims
def test_spiked_closed_form_trap_edge_and_growth_rates() -> None:
    """Closed form: a trapped start needs exp(c d) samples (log-samples / d -> c), a PCA start O(d)."""
    cold = spiked_sample_complexity(HE3, 64)
    warm = spiked_sample_complexity(HE3, 64, init="pretrained")
    assert (cold.growth, warm.growth) == ("exponential", "linear")
    assert 0.4 < cold.trap_edge < warm.initial_overlap < 0.8 <= cold.drift_end
    # log(samples) / d -> c from a trapped start; samples / d -> const beyond the trap
    big = [spiked_sample_complexity(HE3, d) for d in (6144, 12288)]
    rate = (np.log(big[1].samples) - np.log(big[0].samples)) / 6144
    assert abs(rate / big[0].escape_rate - 1) < 0.1
    lin = [
        spiked_sample_complexity(HE3, d, init="transfer", initial_overlap=0.7).samples for d in (6144, 12288)
    ]
    assert abs(lin[1] / lin[0] - 2) < 0.1
    # the trap is the spike's, not the step's: with a vanishing step only the spiked model keeps it
    assert spiked_sample_complexity(HE3, 64, step_size=1e-4).trap_edge > 0.1
    assert spiked_sample_complexity(HE3, 64, step_size=1e-4, spike=0.0).trap_edge < 0.02


def test_spiked_bad_input() -> None:
    with pytest.raises(TrustlabError, match="unlabeled_ratio"):
        spiked_sample_complexity(HE3, 64, init="pretrained", unlabeled_ratio=4.0)
    with pytest.raises(TrustlabError, match="step_size"):
        spiked_sample_complexity(HE3, 64, step_size=0.05)
    with pytest.raises(TrustlabError, match="initial_overlap"):
        spiked_sample_complexity(HE3, 64, init="transfer")
    with pytest.raises(TrustlabError, match="step_size"):
        simulate_spiked_sample_complexity(HE3, [8, 16], step_size=[0.01])
    with pytest.raises(TrustlabError, match="dimensions"):
        simulate_spiked_sample_complexity(HE3, [2, 16])


@pytest.mark.slow  # reason: 2 x 64 SGD runs to ~3e3 steps at d = 16, ~10 s
def test_overlap_chain_has_the_law_of_full_sgd() -> None:
    """The overlap chain is exact in law: its recovery times match full d-dimensional SGD's (KS test)."""
    kw = {"n_runs": 64, "n_bootstrap": 10, "spike": 0.25, "threshold": 0.8}
    chain = simulate_spiked_sample_complexity(HE3, [12, 16], random_state=1, **kw)
    full = simulate_spiked_sample_complexity(HE3, [12, 16], method="full", random_state=2, **kw)
    for a, b in zip(chain.run_samples, full.run_samples, strict=True):
        assert ks_2samp(a, b).pvalue > 0.01


@pytest.mark.claims
@pytest.mark.slow  # reason: ~1e5 overlap-chain steps for 4 x 48 runs, ~45 s
def test_spike_trap_random_start_grows_faster_than_pretrained_start() -> None:
    """Exponential-gain setting: random starts are trapped (samples ~ exp(c d)), PCA starts are not (~ d)."""
    dims = [24, 48, 72, 96]
    cold = simulate_spiked_sample_complexity(HE3, dims, n_runs=48)
    warm = simulate_spiked_sample_complexity(HE3, dims, init="pretrained", n_runs=48)
    # PCA starts at small d: the BBP overlap has not concentrated and some land in the trap (29 % at d = 24)
    assert np.all(cold.success_rate == 1) and np.all(warm.success_rate > 0.6)
    gap = cold.log_exponent - warm.log_exponent
    assert gap > 3 * np.hypot(cold.log_exponent_se, warm.log_exponent_se)
    ratio = cold.median_samples / warm.median_samples
    assert ratio[-1] > 2 * ratio[0]  # the gain itself grows with d
    # closed form (diffusion limit, mean first passage): the median lies within a factor 4 of it
    med, pred = cold.median_samples, cold.predicted_samples
    assert np.all((med > pred / 4) & (med < pred))


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        ("dimension", lambda v: theory.sample_complexity(HE3, v)),
        ("dimension", lambda v: theory.spiked_sample_complexity(HE3, v)),
        ("dimensions", lambda v: theory.simulate_sample_complexity(HE3, [v, 8])),
        ("n_runs", lambda v: theory.simulate_sample_complexity(HE3, [4, 8], n_runs=v)),
        ("n_bootstrap", lambda v: theory.simulate_sample_complexity(HE3, [4, 8], n_bootstrap=v)),
        ("dimensions", lambda v: theory.simulate_spiked_sample_complexity(HE3, [v, 8])),
        ("n_runs", lambda v: theory.simulate_spiked_sample_complexity(HE3, [4, 8], n_runs=v)),
        ("n_bootstrap", lambda v: theory.simulate_spiked_sample_complexity(HE3, [4, 8], n_bootstrap=v)),
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
