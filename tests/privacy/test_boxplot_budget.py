"""The budget each internal release of the DP boxplot actually uses, against the declared split.

The releases' declared epsilons summing to ``epsilon`` proves nothing about the
noise: a mechanism may declare a fifth of the quantile budget and spend all of it
(a mutant that passed every test before these). Here every internal release is
intercepted where its noise is drawn or its epsilon is handed to a helper:

- the extreme scans: the discrete-Laplace scales that the boxplot's sampler draws
  inside :func:`~trustlab.privacy._durfee.scan` (threshold scale
  ``1 / e1``, query scale ``s / e2`` with ``s = 1`` under add/remove and 2 under
  replace), so ``e1 + e2`` is the epsilon the scan really spends;
- JointExp: the epsilon passed to ``jointexp_values``;
- the sample-size count and the outlier counts: the discrete-Laplace scales of the
  boxplot module (``sensitivity / scale``);

and the recovered epsilons are compared with the paper's split and with each
release's declared epsilon. The check is exact (no sampling), so a mis-scaled
release fails it every time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import trustlab.privacy._boxplot_core as bx
import trustlab.privacy._boxplot_grouped as bg
from trustlab.privacy.boxplot import DEFAULT_COUNT_WEIGHT, OTHER_LABEL, dp_boxplot_stats, grouped_dp_boxplot

W = 7 / 8


class Recorder:
    """Intercepts the boxplot's internal releases; ``spent`` lists (kind, epsilon used)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.spent: list[tuple[str, float]] = []
        self.scales: list[float] = []  # integer-noise scales of the boxplot module, in order
        self._scan: list[float] | None = None
        self.neighbouring = "add_remove"
        scan, joint = bx.scan, bx.jointexp_values
        boxplot_noise = bx.add_discrete_laplace

        def rec_scan(z, level, eps, anchor, base, neighbouring, n_public, max_buckets, mirrored=False, **kw):
            self._scan = []
            out = scan(z, level, eps, anchor, base, neighbouring, n_public, max_buckets, mirrored, **kw)
            threshold_scale, *query_scales = self._scan
            assert len(set(query_scales)) == 1, "every query of one scan has the same noise scale"
            sens = 2.0 if neighbouring == "replace" else 1.0
            self.spent.append(
                ("scan upper" if not mirrored else "scan lower", 1 / threshold_scale + sens / query_scales[0])
            )
            self._scan = None
            return out

        def rec_joint(z, bounds, levels, eps, neighbouring, **kw):
            self.spent.append((f"jointexp {len(levels)}", float(eps)))
            return joint(z, bounds, levels, eps, neighbouring, **kw)

        def rec_noise(values, scale):
            # a scan draws with the sampler the boxplot hands it (this one): kept apart
            (self.scales if self._scan is None else self._scan).append(float(scale))
            return boxplot_noise(values, scale)

        monkeypatch.setattr(bx, "scan", rec_scan)
        monkeypatch.setattr(bx, "jointexp_values", rec_joint)
        monkeypatch.setattr(bx, "add_discrete_laplace", rec_noise)

    def kinds(self, prefix: str) -> list[float]:
        return [e for k, e in self.spent if k.startswith(prefix)]


@pytest.fixture
def rec(monkeypatch):
    return Recorder(monkeypatch)


def _declared(stats, word):
    return [r.epsilon for r in stats.releases if word in r.description]


def _sample(n=3000, seed=0):
    return np.random.default_rng(seed).normal(size=n)


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_dpboxplot_spends_the_declared_split(rec, monkeypatch, neighbouring, eps):
    # both outlier counts are drawn (the whisker rule's branch is fixed, not the noise)
    monkeypatch.setattr(bx, "far", lambda *a: False)
    x = _sample()
    s = dp_boxplot_stats(x, eps, (-50, 50), n=x.size, neighbouring=neighbouring)
    eq = W * eps
    # each extreme scan: a fifth of the quantile budget, from its actual noise scales
    assert rec.kinds("scan upper") == pytest.approx([eq / 5], rel=1e-12)
    assert rec.kinds("scan lower") == pytest.approx([eq / 5], rel=1e-12)
    assert rec.kinds("jointexp 3") == pytest.approx([3 * eq / 5], rel=1e-12)
    # the outlier counts: both sides share one scale; (sensitivity of the pair) / scale
    assert len(rec.scales) == 2 and len(set(rec.scales)) == 1
    pair = (2.0 if neighbouring == "replace" else 1.0) / rec.scales[0]
    assert pair == pytest.approx((1 - W) * eps, rel=1e-12)
    # and what each release declares is what it used
    assert _declared(s, "lower extreme") == pytest.approx(rec.kinds("scan lower"))
    assert _declared(s, "upper extreme") == pytest.approx(rec.kinds("scan upper"))
    assert _declared(s, "quartiles") == pytest.approx(rec.kinds("jointexp"))
    assert _declared(s, "shares") == pytest.approx([pair])
    used = sum(e for _, e in rec.spent) + pair
    assert used == pytest.approx(eps, rel=1e-12) and s.epsilon == eps


def test_released_n_spends_its_share_and_the_rest_is_split(rec, monkeypatch):
    monkeypatch.setattr(bx, "far", lambda *a: False)
    x = _sample()
    s = dp_boxplot_stats(x, 1.0, (-50, 50))
    eps_n = 1 / rec.scales[0]  # the first integer-noise draw is the count of x
    assert eps_n == pytest.approx(bx.DEFAULT_N_WEIGHT)
    rest = 1.0 - eps_n
    assert rec.kinds("scan") == pytest.approx([W * rest / 5] * 2, rel=1e-12)
    assert rec.kinds("jointexp") == pytest.approx([3 * W * rest / 5], rel=1e-12)
    assert 1 / rec.scales[1] == pytest.approx((1 - W) * rest, rel=1e-12)
    assert _declared(s, "sample size") == pytest.approx([eps_n])
    assert sum(r.epsilon for r in s.releases) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("method", "n", "expected"),
    [
        ("jointexp", 3000, {"jointexp 5": [W]}),
        ("dpboxplot", 300, {"jointexp 5": [W]}),  # below n_min: five levels from JointExp
        ("expmech", 3000, {"jointexp 1": [W / 5] * 5}),
        ("unbounded", 3000, {"scan upper": [W / 5] * 5}),
    ],
)
def test_baselines_spend_the_declared_split(rec, method, n, expected):
    x = _sample(n)
    s = dp_boxplot_stats(x, 1.0, (-50, 50), n=n, method=method)
    for kind, eps in expected.items():
        assert rec.kinds(kind) == pytest.approx(eps, rel=1e-12)
    assert sum(e for _, e in rec.spent) == pytest.approx(W)
    assert _declared(s, "five quantiles") == pytest.approx([W])


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
def test_grouped_spends_the_declared_split(monkeypatch, neighbouring):
    rng = np.random.default_rng(0)
    x = rng.normal(size=4000)
    g = rng.choice(["a", "b"], size=4000)
    scales: list[float] = []
    boxes: list[tuple[float, str, float]] = []
    noise, single = bg.add_discrete_laplace, bg.box_quantiles

    def rec_noise(values, scale):
        scales.append(float(scale))
        return noise(values, scale)

    def rec_box(data, eps, bounds, n_given, opts, description):
        boxes.append((float(eps), opts.neighbouring, n_given))
        return single(data, eps, bounds, n_given, opts, description)

    for module in (bg, bx):  # the group sizes first, then the boxes' outlier counts
        monkeypatch.setattr(module, "add_discrete_laplace", rec_noise)
    monkeypatch.setattr(bg, "box_quantiles", rec_box)
    res = grouped_dp_boxplot(x, g, 1.0, (-20, 20), categories=["a", "b"], neighbouring=neighbouring)
    sens = 2.0 if neighbouring == "replace" else 1.0
    eps_c = sens / scales[0]  # the group-size histogram, drawn first
    assert eps_c == pytest.approx(DEFAULT_COUNT_WEIGHT)
    per_box = (1 - eps_c) / (2 if neighbouring == "replace" else 1)
    assert [b[0] for b in boxes] == pytest.approx([per_box, per_box])
    # every box is accounted under add/remove with its group's released size as n
    assert [b[1] for b in boxes] == ["add_remove", "add_remove"]
    assert [b[2] for b in boxes] == [res.sizes["a"], res.sizes["b"]]
    assert [r.epsilon for r in res.releases] == pytest.approx([eps_c, 1 - eps_c])
    assert res.categories[-1] == OTHER_LABEL


def test_recorder_sees_a_mis_scaled_scan(monkeypatch):
    """Canary: the issue's mutant (upper scan given the whole quantile budget) is visible."""
    rec = Recorder(monkeypatch)
    inner = bx.scan

    def greedy(z, level, eps, *a, mirrored=False, **kw):
        return inner(z, level, eps * (1 if mirrored else 5), *a, mirrored=mirrored, **kw)

    monkeypatch.setattr(bx, "scan", greedy)
    x = _sample()
    dp_boxplot_stats(x, 1.0, (-50, 50), n=x.size)
    assert rec.kinds("scan upper") == pytest.approx([W])
    assert not math.isclose(rec.kinds("scan upper")[0], W / 5)
