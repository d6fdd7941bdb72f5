"""Algorithm 3 of PTA (fresh subsets per token) and its amplification by subsampling (row 002-10)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from trustlab.errors import BudgetExceededError, ParameterError
from trustlab.privacy import Accountant
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.calibration import analytic_gaussian_epsilon
from trustlab.privacy.dp_icl import dp_icl_sigma, generate_dp_demonstrations, step_sensitivity
from trustlab.privacy.dp_icl_subsampling import (
    draw_subsets,
    poisson_subsampled_epsilon,
    subsampled_epsilon,
    subsampled_sigma,
)


def _fake_lm(contexts):
    """As in test_dp_icl: a context holding token 3 (the replaced demonstration) puts all its mass
    on token 1, any other context all on token 0 (the worst case: disjoint one-hot vectors)."""
    out = np.zeros((len(contexts), 4))
    for r, c in enumerate(contexts):
        out[r, 1 if 3 in c else 0] = 1.0
    return out


def _release(private, *, epsilon=2.0, delta=1e-5, max_tokens=1, n_subsets=1, model=_fake_lm, **kw):
    return generate_dp_demonstrations(
        model,
        private,
        epsilon=epsilon,
        delta=delta,
        label_prompts=[[0]],
        max_tokens=max_tokens,
        top_k=2,
        method="baseline",
        n_subsets=n_subsets,
        **kw,
    )


@pytest.mark.claims
def test_claim_exact_subsampled_accounting():
    # 8 tokens, each on 2 of 10 demonstrations (q = 0.2): the charged epsilon is the PLD's for
    # exactly this noise, below what the same noise gives without subsampling
    acc = Accountant(2.0, 1e-5)
    rel = _release([[2]] * 10, max_tokens=4, n_demonstrations=2, n_subsets=2, accountant=acc)
    sens, sigma = step_sensitivity(2), rel.noise_scale
    assert rel.measure == "approximate" and rel.parameters["sampling_rate"] == pytest.approx(0.2)
    assert rel.parameters["n_steps"] == 8 and rel.parameters["n_subsets"] == 2
    assert sigma == subsampled_sigma(2.0, 1e-5, n=10, sample_size=2, n_steps=8, sensitivity=sens)
    pld = subsampled_epsilon(sigma, 1e-5, n=10, sample_size=2, n_steps=8, sensitivity=sens)
    assert 2.0 * 0.99 <= pld <= 2.0  # sigma calibrated to 0.1%: epsilon met, and not over-noised
    lower = poisson_subsampled_epsilon(sigma, 1e-5, q=0.2, n_steps=8, sensitivity=sens)
    assert 0.9 * pld <= lower <= pld  # the paper's Poisson/add-remove figure: a realisable lower bound
    unsampled = analytic_gaussian_epsilon(sigma, 1e-5, math.sqrt(8) * sens)
    assert unsampled > 2.5 * pld  # the same noise without amplification spends far more
    assert sigma < 0.35 * dp_icl_sigma(2.0, 1e-5, 8, 2)
    assert acc.spent_epsilon == pytest.approx(2.0) and acc.spent_delta == pytest.approx(1e-5)
    with pytest.raises(BudgetExceededError):  # nothing left: refused before any noise is drawn
        _release([[2]] * 10, n_subsets=None, accountant=acc)


@pytest.mark.parametrize(
    ("n", "size", "sigma"),
    [
        (30, 5, 3.5),  # the concept benchmark's setting at eps = 1
        pytest.param(10, 4, 2.0, marks=pytest.mark.slow),
        pytest.param(1600, 20, 0.9, marks=pytest.mark.slow),  # the paper's GINC rate (M N = 20 of 1600)
    ],
)
def test_pld_lies_between_the_poisson_lower_bound_and_the_rdp_bound(n, size, sigma):
    # two independent upper bounds for the same event (symmetric PLD of C_q and Wang et al.'s RDP
    # for sampling without replacement under replace-one) and one realisable lower bound
    args = {"n": n, "sample_size": size, "n_steps": 24, "sensitivity": math.sqrt(2)}
    pld = subsampled_epsilon(sigma, 1e-3, **args)
    rdp = subsampled_epsilon(sigma, 1e-3, method="rdp", **args)
    lower = poisson_subsampled_epsilon(sigma, 1e-3, q=size / n, n_steps=24, sensitivity=math.sqrt(2))
    assert lower <= pld <= rdp, (lower, pld, rdp)
    assert pld <= 1.15 * lower  # measured 1.03-1.07: the PLD is nearly tight


def test_no_subsampling_reduces_to_the_gaussian_dp_calibration():
    # q = 1 (all demonstrations every token): the PLD calibration recovers the analytic Gaussian's
    s = subsampled_sigma(1.0, 1e-3, n=30, sample_size=30, n_steps=24, sensitivity=step_sensitivity(14))
    assert s == pytest.approx(dp_icl_sigma(1.0, 1e-3, 24, 14), rel=5e-3)


def test_subsets_come_from_the_os_csprng_not_a_seed():
    # reseeding every generator Python and numpy offer must not repeat a draw
    draws = []
    for _ in range(2):
        random.seed(0)
        np.random.seed(0)  # noqa: NPY002 (the legacy global generator is the one a bug would reuse)
        draws.append(draw_subsets(10_000, 4, 3))
    assert draws[0] != draws[1]
    assert all(len({i for sub in d for i in sub}) == 12 for d in draws)  # without replacement


def test_every_token_draws_fresh_subsets():
    seen = []

    def recording_lm(contexts):
        seen.append(tuple(tuple(c) for c in contexts[2:]))  # the private prompts of this token
        return _fake_lm(contexts)

    _release([[10 + i] for i in range(10)], max_tokens=4, n_demonstrations=2, n_subsets=2, model=recording_lm)
    assert len(seen) == 8 and len(set(seen)) >= 3  # 2 of 10 per token: all 8 alike has probability 1e-13


@pytest.mark.claims
@pytest.mark.slow  # 3,200 releases (about 2 s)
def test_claim_audit_subsampled_token_on_worst_case_neighbours(audit_trials):
    # replace-one worst case: every demonstration sends its subset to token 0, the replaced one to
    # token 1; 1 subset of 1 drawn from 4 per token (q = 1/4), epsilon 1 for the token
    res = audit_epsilon(
        lambda d: _release(d, epsilon=1.0).value[0][-1],
        [[2]] * 4,
        [[2]] * 3 + [[3]],
        n_trials=audit_trials(1600),
        delta=1e-5,
        events=("value",),
    )
    assert res.epsilon_lower <= 1.0, res


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [({"n_subsets": 0}, "n_subsets"), ({"n_subsets": 3, "shots": 2}, "n_subsets")],
)
def test_bad_subsampling_input_names_the_argument(kwargs, argument):
    with pytest.raises(ParameterError) as info:
        _release([[2]] * 5, **kwargs)
    assert info.value.argument == argument
    with pytest.raises(ParameterError) as info:
        subsampled_epsilon(1.0, 1e-5, n=5, sample_size=2, n_steps=1, sensitivity=1.0, method="prv")
    assert info.value.argument == "method"
