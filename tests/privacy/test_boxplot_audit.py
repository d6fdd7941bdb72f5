"""Empirical privacy audits of the DP boxplot (trustlab.privacy.boxplot) on worst-case neighbours.

Each audit runs a release on two neighbouring inputs chosen to expose one class of
leak and searches threshold, exact-value and low-bit events; the Clopper-Pearson
lower bound on epsilon must not exceed the claim. Against the defects these were
written for, the issue measured 6.13 (float Laplace on ``count / n``, claim 1),
6.29 (exact group sizes under replace-one, claim 1) and 4.91 (a data-dependent
exception on group sizes, claim 0.5); the canaries below show that the same
audit configurations flag a share with halved noise and exact group sizes.

Where a statistic depends on one internal release only, the other releases are
fixed (monkeypatched to constants) so that the claim is that release's epsilon,
not the whole boxplot's: a sharper test.

The noise is never seeded, and the count releases audited here are tight: a discrete
Laplace count moved by its sensitivity has threshold events whose ratio is exactly
e^claim, so a correct release fails whenever a Clopper-Pearson bound misses. ALPHA = 1e-4:
the exact chance over 500 evaluation runs, maximised over the event's probability, is
<= 1.2e-5 for claims 0.5-2 (double binomial sums); at the former 0.01 it was 0.8-2.5e-3.
The canary runs at the same ALPHA: its halved-noise share stayed above 1 in 20,000
simulated audits (0.01% quantile 1.13; at 0.01 it fell to 1 or below in 0.45% of them,
the selection half then over-fitting a rare low-bit or value event).
"""

from __future__ import annotations

import numpy as np
import pytest

import trustlab.privacy._boxplot_core as bx
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.boxplot import DEFAULT_COUNT_WEIGHT, dp_boxplot_stats, grouped_dp_boxplot
from trustlab.privacy.samplers import add_discrete_laplace

EVENTS = ("threshold", "value", "low_bits")
ALPHA = 1e-4  # see the module docstring
BOUNDS = (-50.0, 50.0)


def _fixed_quantiles(monkeypatch, qmin=-2.0, quartiles=(-0.7, 0.0, 0.7), qmax=9.0):
    """Constant extremes and quartiles: fences -2.8 / 2.8, both counts always released."""
    monkeypatch.setattr(
        bx,
        "scan",
        lambda z, level, e, anchor, *a, mirrored=False, **k: -qmin if mirrored else qmax,
    )
    monkeypatch.setattr(bx, "jointexp_values", lambda *a, **k: np.array(quartiles))


def _fence_neighbours(neighbouring):
    """200 values; the neighbour has one more record beyond the upper fence (add/remove),
    or one record moved from inside the box to beyond it (replace)."""
    rng = np.random.default_rng(0)
    data = np.concatenate([np.clip(rng.normal(size=190), -1.9, 1.9), np.full(10, 8.0)])
    if neighbouring == "add_remove":
        return data, np.append(data, 7.5)
    neighbour = data.copy()
    neighbour[0] = 7.5
    return data, neighbour


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
def test_audit_outlier_share_at_a_fence_neighbour(monkeypatch, neighbouring):
    _fixed_quantiles(monkeypatch)
    data, neighbour = _fence_neighbours(neighbouring)
    eps = 8.0  # eps_o = (1 - 7/8) * 8 = 1 for the pair of counts
    # add/remove: count_hi changes by 1 at scale 1/eps_o -> 1.0; replace: by 1 at 2/eps_o -> 0.5
    claim = 1.0 if neighbouring == "add_remove" else 0.5
    res = audit_epsilon(
        lambda d: dp_boxplot_stats(d, eps, BOUNDS, n=200, n_min=100, neighbouring=neighbouring).share_hi,
        data,
        neighbour,
        n_trials=1000,
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower <= claim, res


def test_audit_catches_a_share_with_halved_noise():
    # Canary: the count beyond the whisker with half the noise it needs (the mutant
    # "outlier-share noise halved", epsilon 2 where 1 is claimed). The same audit
    # configuration must flag it, otherwise the test above could not fail.
    res = audit_epsilon(
        lambda count: int(add_discrete_laplace(count, 0.5)) / 200,
        10,
        11,
        n_trials=1000,
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower > 1.0, res


def test_audit_released_sample_size(monkeypatch):
    _fixed_quantiles(monkeypatch)
    data, neighbour = _fence_neighbours("add_remove")
    eps = 16.0  # the count of x gets 16 / 8 = 2
    res = audit_epsilon(
        lambda d: dp_boxplot_stats(d, eps, BOUNDS, n_min=100).n,
        data,
        neighbour,
        n_trials=1000,
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower <= eps * bx.DEFAULT_N_WEIGHT, res


def _groups(n=60):
    x = np.linspace(-1, 1, n)
    g = np.array(["a", "b"] * (n // 2), dtype=object)
    return x, g


def test_audit_record_moving_between_groups_under_replace():
    # the defect: stats["a"].n was 30 vs 29 every run (6.29 against 1). Boxes are
    # not drawn (min_group_size), so the statistic sees the size release alone: sizes of
    # a and b move by -1 / +1 at scale 2 / eps_c, costing eps_c in all.
    x, g = _groups()
    g2 = g.copy()
    g2[0] = "b"
    eps = 8.0
    eps_c = eps * DEFAULT_COUNT_WEIGHT

    def release(groups):
        res = grouped_dp_boxplot(
            x, groups, eps, (-1, 1), categories=["a", "b"], neighbouring="replace", min_group_size=10**9
        )
        return res.sizes["a"] - res.sizes["b"]

    res = audit_epsilon(release, g, g2, n_trials=1000, alpha=ALPHA, events=EVENTS)
    assert res.epsilon_lower <= eps_c, res


def test_audit_group_sizes_under_add_remove():
    # one record added to group a; an empty-group or small-group condition used to raise
    x, g = _groups()
    eps = 8.0
    eps_c = eps * DEFAULT_COUNT_WEIGHT

    def release(data):
        xs, gs = data
        res = grouped_dp_boxplot(xs, gs, eps, (-1, 1), categories=["a", "b", "c"], min_group_size=10**9)
        return res.sizes["a"] + 1000 * res.sizes["c"]

    res = audit_epsilon(
        release, (x, g), (np.append(x, 0.5), np.append(g, "a")), n_trials=1000, alpha=ALPHA, events=EVENTS
    )
    assert res.epsilon_lower <= eps_c, res


def test_audit_catches_exact_group_sizes():
    # Canary: publishing the exact sizes (the old behaviour) is flagged at once
    _, g = _groups()
    g2 = g.copy()
    g2[0] = "b"
    res = audit_epsilon(lambda gs: float(np.sum(gs == "a")), g, g2, n_trials=400, alpha=ALPHA, events=EVENTS)
    assert res.epsilon_lower > 1.0, res


def _five_code(s, step):
    """One number per released five-number summary (all on multiples of step / 2)."""
    idx = np.rint((s.five - BOX_BOUNDS[0]) / (step / 2))
    return float(idx @ (4 * RES + 1.0) ** np.arange(5))


BOX_BOUNDS = (0.0, 1.0)
RES = 8


def _five_neighbours():
    data = np.array([0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.5, 0.6, 0.7, 0.9])
    return data, np.append(data, 1.0)  # a record added at the upper bound


def test_audit_whole_five_number_summary():
    # n < n_min: all five levels from one JointExp (the scan path runs in the slow audit)
    data, neighbour = _five_neighbours()
    eps = 2.0
    step = (BOX_BOUNDS[1] - BOX_BOUNDS[0]) / RES
    res = audit_epsilon(
        lambda d: dp_boxplot_stats(d, eps, BOX_BOUNDS, n=10, resolution=RES),
        data,
        neighbour,
        statistic=lambda s: _five_code(s, step),
        n_trials=400,
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower <= eps, res


@pytest.mark.slow
@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
@pytest.mark.parametrize("n_min", [1000, 5])  # five levels from JointExp / two scans plus quartiles
def test_audit_whole_boxplot_thorough(neighbouring, n_min):
    data, neighbour = _five_neighbours()
    if neighbouring == "replace":
        neighbour = data.copy()
        neighbour[0] = 1.0
    eps = 2.0
    step = (BOX_BOUNDS[1] - BOX_BOUNDS[0]) / RES
    res = audit_epsilon(
        lambda d: dp_boxplot_stats(
            d, eps, BOX_BOUNDS, n=10, resolution=RES, neighbouring=neighbouring, n_min=n_min, base=1.05
        ),
        data,
        neighbour,
        statistic=lambda s: _five_code(s, step) + 1e6 * (s.share_lo + 2 * s.share_hi),
        n_trials=1200,
        alpha=ALPHA,
        events=EVENTS,
    )
    assert res.epsilon_lower <= eps, res
