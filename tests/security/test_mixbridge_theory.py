"""Numerical checks of the re-derived Theorem 4.2 of MixBridge (Qin et al., ICML 2025) on I2SB's closed forms.

The derivation is in docs/security/mixbridge.md ("Theorem 4.2, re-derived"). Tasks k (benign,
trigger 1, ...) with shares w_k train one network f(x_t, t) on I2SB's regression target
y = (x_t - x0) / s_fwd_t, x_t = mu0 x0 + mu1 x1 + sigma eps. Claims checked here:

(a) the pooled minimiser is f* = sum_k pi_k(x_t) f_k*, pi_k the posterior task probability
    w_k p_k,t(x_t) / sum_j w_j p_j,t(x_t), f_k* the task's own (expert) minimiser;
(b) its clean-image estimate x0_hat = x_t - s_fwd f* is the pi-weighted blend of the experts';
(c) the pooled marginal's score is sum_k pi_k grad log p_k,t (an arithmetic mixture); the
    weighted geometric mean prod_k p_k,t^{w_k} has score sum_k w_k grad log p_k,t, equal to it
    exactly where pi_k = w_k (the tasks indistinguishable at x_t) and not elsewhere.
Gaussian tasks in one dimension make every conditional law closed-form.
"""

from __future__ import annotations

import numpy as np

from trustlab.vision.bridge import I2SBSchedule

# three heterogeneous tasks: clean-image means a_k, input means b_k, shares w_k (the paper's
# per-sample split: one quarter per task; three tasks here keep the check small)
A = np.array([0.0, 1.5, -1.2])
B = np.array([0.2, 0.6, -0.3])
W = np.array([0.5, 0.25, 0.25])
TAU = 0.3  # within-task standard deviation of x0 and of x1 (independent)
T = 500  # a mid-trajectory step of the default 1000-step schedule


def _coefficients(t: int = T) -> tuple[float, float, float, float]:
    s = I2SBSchedule()
    mu0, mu1, sigma = (float(a[t]) for a in s.marginal())
    return mu0, mu1, sigma, float(s.std_fwd[t])


def _task_laws(x: np.ndarray, t: int = T) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per task: density p_k,t(x), E_k[x0 | x_t = x] and the score d/dx log p_k,t(x); shape (K, n)."""
    mu0, mu1, sigma, _ = _coefficients(t)
    m = mu0 * A + mu1 * B
    v = (mu0**2 + mu1**2) * TAU**2 + sigma**2
    d = x[None, :] - m[:, None]
    dens = np.exp(-(d**2) / (2 * v)) / np.sqrt(2 * np.pi * v)
    ex0 = A[:, None] + mu0 * TAU**2 / v * d  # Gaussian conditioning: Cov(x0, x_t) / Var(x_t)
    return dens, ex0, -d / v


def _posterior(dens: np.ndarray) -> np.ndarray:
    joint = W[:, None] * dens
    return joint / joint.sum(0, keepdims=True)


def test_pooled_minimiser_is_the_posterior_weighted_sum_of_the_experts() -> None:
    # Monte Carlo of the pooled training distribution; bin x_t and compare the bin means of the
    # regression target with the closed form (a) averaged over the same bin
    rng = np.random.default_rng(0)
    mu0, mu1, sigma, sf = _coefficients()
    n = 400_000
    k = rng.choice(len(W), size=n, p=W)
    x0 = A[k] + TAU * rng.standard_normal(n)
    x1 = B[k] + TAU * rng.standard_normal(n)
    xt = mu0 * x0 + mu1 * x1 + sigma * rng.standard_normal(n)
    y = (xt - x0) / sf
    edges = np.linspace(-0.9, 1.2, 15)
    idx = np.digitize(xt, edges) - 1
    dens, ex0, _ = _task_laws(xt)
    f_star = (xt - (_posterior(dens) * ex0).sum(0)) / sf
    worst = 0.0
    for b in range(len(edges) - 1):
        sel = idx == b
        assert sel.sum() > 2000
        resid = y[sel] - f_star[sel]
        se = resid.std() / np.sqrt(sel.sum())
        worst = max(worst, abs(resid.mean()) / se)
    # 14 bins: |z| < 4 each (family-wise false alarm < 1e-3 under the claim)
    assert worst < 4.0
    # and the constant-weight ("geometric") drift sum_k w_k f_k* misses it by many standard errors
    f_geo = (xt - (W[:, None] * ex0).sum(0)) / sf
    sel = (idx >= 0) & (idx < len(edges) - 1)
    gap = np.abs(np.bincount(idx[sel], weights=(y - f_geo)[sel]) / np.bincount(idx[sel]))
    assert gap.max() > 0.2


def test_clean_image_estimate_is_a_blend_of_the_targets_where_tasks_overlap() -> None:
    # (b): x0_hat = sum_k pi_k E_k[x0 | x_t]; at the state where the benign task and trigger 1
    # are equally likely, the single network's estimate lies strictly between their targets
    _, _, _, sf = _coefficients()
    grid = np.linspace(-1.0, 1.5, 2001)
    dens, ex0, _ = _task_laws(grid)
    pi = _posterior(dens)
    f_star = (grid - (pi * ex0).sum(0)) / sf
    x0_hat = grid - sf * f_star
    np.testing.assert_allclose(x0_hat, (pi * ex0).sum(0), atol=1e-12)
    j = int(np.argmin(np.abs(pi[0] - pi[1]) + (pi[2] > 0.05)))
    assert abs(pi[0, j] - pi[1, j]) < 0.01 and pi[2, j] < 0.05
    lo, hi = sorted((ex0[0, j], ex0[1, j]))
    assert lo + 0.3 * (hi - lo) < x0_hat[j] < hi - 0.3 * (hi - lo)  # far from either target


def test_pooled_score_is_the_mixture_and_meets_the_geometric_mean_only_where_pi_equals_w() -> None:
    # the benign task and trigger 1 alone (shares 2/3, 1/3): in one dimension pi = w at one state
    grid = np.linspace(-1.0, 1.5, 5001)
    dens, _, scores = (a[:2] for a in _task_laws(grid))
    w = W[:2, None] / W[:2].sum()
    pi = w * dens / (w * dens).sum(0, keepdims=True)
    log_mix = np.log((w * dens).sum(0))
    log_geo = (w * np.log(dens)).sum(0)  # unnormalised: the constant has no gradient
    h = grid[1] - grid[0]
    fd_mix, fd_geo = np.gradient(log_mix, h), np.gradient(log_geo, h)
    inner = slice(2, -2)
    np.testing.assert_allclose(fd_mix[inner], (pi * scores).sum(0)[inner], atol=1e-5)
    np.testing.assert_allclose(fd_geo[inner], (w * scores).sum(0)[inner], atol=1e-5)
    diff = np.abs(fd_mix - fd_geo)[inner]
    dev = np.abs(pi - w).sum(0)[inner]
    assert dev.min() < 5e-3  # the grid passes within one step of the crossing
    # they agree where the posterior is the prior and differ by O(1) where the tasks separate
    assert diff[np.argmin(dev)] < 0.01 * diff.max()
    assert diff.max() > 1.0
