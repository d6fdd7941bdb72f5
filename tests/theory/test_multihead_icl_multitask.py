"""Multi-task in-context regression (He, Pan, Chen & Yang, ICML 2025; 003-18).

The blog's setting: d 6, N 2 tasks on S_1 = {0,1,2,3}, S_2 = {2,3,4,5} (0-based), L 40,
sigma^2 0.1, beta ~ N(0, I/d).
"""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.errors import TrustlabError
from trustlab.theory import (
    MultiTaskAttention,
    debiased_gd_risk,
    multitask_pattern,
    multitask_prompts,
    separate_debiased_gd_predict,
    train_multitask_attention,
)

MASKS = np.array([[1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]], dtype=bool)
OVERLAP = MASKS.all(axis=0)


def _dedicated_pairs(gamma: float, eta: float) -> MultiTaskAttention:
    """The blog's H = 2N pattern: heads 2n, 2n+1 solve task n with +-gamma on S_n, +-mu e_n."""
    kq, ov = np.zeros((4, 8, 6)), np.zeros((4, 2, 8))
    for n in range(2):
        for h, sign in ((2 * n, 1.0), (2 * n + 1, -1.0)):
            kq[h, :6, :6] = sign * gamma * np.diag(MASKS[n].astype(float))
            ov[h, n, 6 + n] = sign * eta / (2 * gamma)
    return MultiTaskAttention(kq, ov, np.zeros(1))


def test_dedicated_pairs_are_separate_debiased_gd_and_reach_the_oracle_risk() -> None:
    """The H = 2N construction with small gamma: effective steps = eta on S_n, 0 off; its
    predictions agree with N separate debiased GD predictors (rel. MSE < 1e-3) and its risk is the
    single-task closed form on |S_n| = 4 features (4 SE, 4000 prompts)."""
    eta = debiased_gd_risk(40, 4, signal_variance=1 / 6).optimal_step_size
    model = _dedicated_pairs(0.01, eta)
    p = multitask_pattern(model)
    assert np.allclose(p.effective_step, eta * MASKS) and np.allclose(p.zero_sum, 0.0)
    assert np.allclose(p.specialisation, 1.0) and p.off_diagonal == 0.0
    x, y, xq, yq = multitask_prompts(4000, random_state=2)
    pred, gd = model.predict(x, y, xq), separate_debiased_gd_predict(x, y, xq, eta)
    assert ((pred - gd) ** 2).mean() < 1e-3 * (gd**2).mean()
    err = (gd - yq) ** 2
    oracle = debiased_gd_risk(40, 4, signal_variance=1 / 6).optimal_risk
    assert np.all(np.abs(err.mean(axis=0) - oracle) < 4 * err.std(axis=0, ddof=1) / np.sqrt(len(err)))


@pytest.mark.slow
@pytest.mark.claims
def test_claim_heads_versus_tasks_slow() -> None:
    """1500 Adam steps per model, H = 1..4 (~2 min on a busy machine). H = 1: one kernel regressor,
    the same mu for both tasks, larger omega on the shared features. H = 2: one weighted debiased
    GD, the same effective steps for both tasks (within 5 %), larger on the shared features. H = 3
    (superposition): per-task steps ~ the supports (> 0.7 on S_n, < 0.2 off), with a head whose
    mu has opposite signs across tasks. H = 4: risk within 5 % of N separate debiased GD at eta*.
    Risks fall H1 > H2 > H3 by > 3 paired SE."""
    x, y, xq, yq = multitask_prompts(20_000, random_state=5)
    oracle = debiased_gd_risk(40, 4, signal_variance=1 / 6).optimal_risk
    errs, pats = {}, {}
    for heads in (1, 2, 3, 4):
        model = train_multitask_attention(heads, steps=1500, batch_size=256, learning_rate=1e-2)
        errs[heads] = ((model.predict(x, y, xq) - yq) ** 2).mean(axis=1)
        pats[heads] = multitask_pattern(model)
    p1, p2, p3 = pats[1], pats[2], pats[3]
    assert p1.mu[0, 0] == pytest.approx(p1.mu[0, 1], rel=0.05)
    assert np.abs(p1.omega[0, OVERLAP]).mean() > 1.1 * np.abs(p1.omega[0, ~OVERLAP]).mean()
    assert p2.omega[0].mean() * p2.omega[1].mean() < 0 and np.all(p2.zero_sum < 0.05)
    assert np.allclose(p2.effective_step[0], p2.effective_step[1], rtol=0.05)
    assert p2.effective_step[0, OVERLAP].mean() > 1.05 * p2.effective_step[0, ~OVERLAP].mean()
    assert np.all(p3.effective_step[MASKS] > 0.7) and np.all(p3.effective_step[~MASKS] < 0.2)
    mixed = (p3.mu[:, 0] * p3.mu[:, 1] < 0) & (np.abs(p3.mu).min(axis=1) > 0.1 * np.abs(p3.mu).max())
    assert mixed.any()
    assert errs[4].mean() == pytest.approx(oracle, rel=0.05)  # errs: per prompt, mean over tasks
    for a, b in ((1, 2), (2, 3)):
        diff = errs[a] - errs[b]
        assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(len(diff))


def test_bad_input() -> None:
    with pytest.raises(TrustlabError, match="supports"):
        multitask_prompts(3, supports=[[0, 9]])
    with pytest.raises(TrustlabError, match="supports"):
        multitask_prompts(3, supports=[])
    with pytest.raises(TrustlabError, match="model"):
        multitask_pattern("not a model")  # type: ignore[arg-type]
    with pytest.raises(TrustlabError, match="X"):
        _dedicated_pairs(0.1, 1.0).predict(np.zeros((1, 3, 5)), np.zeros((1, 3, 2)), np.zeros((1, 5)))
    with pytest.raises(TrustlabError, match="Y"):
        separate_debiased_gd_predict(np.zeros((1, 3, 6)), np.zeros((1, 3, 3)), np.zeros((1, 6)), 1.0)
    with pytest.raises(TrustlabError, match="n_heads"):
        train_multitask_attention(0)
