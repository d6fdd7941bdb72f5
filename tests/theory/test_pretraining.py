"""Pre-training and transfer lower online SGD's sample complexity (Jones-McCormick et al., 2025; 000-18)."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.errors import TrustlabError
from trustlab.theory import information_exponent, pca_overlap, sample_complexity, simulate_sample_complexity

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
@pytest.mark.slow  # reason: ~1e5 online SGD steps in all, about 3 minutes on 2 busy cores
def test_transfer_start_is_linear_and_random_start_is_quadratic_in_d() -> None:
    warm = simulate_sample_complexity(
        HE3, [8, 16, 32], init="transfer", initial_overlap=0.3, step_scale=0.6, n_runs=16
    )
    cold = simulate_sample_complexity(HE3, [8, 12, 16, 24], init="random", step_scale=0.6, n_runs=16)
    assert np.all(warm.success_rate == 1)
    assert abs(warm.fitted_exponent - 1.0) < 3 * warm.exponent_se + 0.1
    assert cold.fitted_exponent > warm.fitted_exponent + 2 * np.hypot(cold.exponent_se, warm.exponent_se)
    assert cold.median_samples[-1] > 3 * warm.median_samples[-1]
