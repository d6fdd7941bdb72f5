"""Tests of trustlab.privacy.boxplot (DPBoxplot) and its plotting helper."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustlab.errors import DataError, ParameterError
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.boxplot import boxplot_distance, dp_boxplot_stats, grouped_dp_boxplot
from trustlab.privacy.boxplot_plot import plot_dp_boxplot

RNG = np.random.default_rng(0)


def _ordered(s):
    return s.whisker_lo <= s.q1 <= s.median <= s.q3 <= s.whisker_hi


@pytest.mark.parametrize("method", ["dpboxplot", "jointexp", "expmech", "unbounded"])
@pytest.mark.parametrize("n", [300, 3000])
def test_ordered_inside_bounds_full_budget(method, n):
    x = RNG.normal(size=n)
    s = dp_boxplot_stats(x, 1.0, (-50, 50), method=method)
    assert _ordered(s)
    assert -50 <= s.whisker_lo and s.whisker_hi <= 50
    assert s.epsilon == 1.0
    assert sum(r.epsilon for r in s.releases) == pytest.approx(1.0)


def test_nonprivate_path():
    x = RNG.normal(size=1000)
    s = dp_boxplot_stats(x, math.inf, (-50, 50))
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    assert (s.q1, s.median, s.q3) == (q1, med, q3)
    assert s.whisker_hi == min(q3 + 1.5 * (q3 - q1), x.max())
    assert s.share_hi == np.mean(x > s.whisker_hi)


def test_normal_whiskers_and_shares():
    x = RNG.normal(size=20000)
    s = dp_boxplot_stats(x, 1.0, (-50, 50))
    # Population fences are +-2.698 and shares 0.0035; the tolerance covers the
    # quartile noise at n=20000 (sd of an order statistic ~0.01) and Laplace(2/(n 0.125)).
    assert abs(s.whisker_hi - 2.698) < 0.15 and abs(s.whisker_lo + 2.698) < 0.15
    assert abs(s.share_hi - 0.0035) < 0.01


def test_add_remove_needs_n():
    with pytest.raises(ParameterError) as info:
        dp_boxplot_stats(RNG.normal(size=100), 1.0, (-5, 5), neighbouring="add_remove")
    assert info.value.argument == "n"
    s = dp_boxplot_stats(RNG.normal(size=100), 1.0, (-5, 5), neighbouring="add_remove", n=100)
    assert _ordered(s)


def test_grouped_and_plot():
    x = np.concatenate([RNG.normal(size=500), RNG.normal(5, 1, size=500)])
    g = np.array(["a"] * 500 + ["b"] * 500)
    stats = grouped_dp_boxplot(x, g, 1.0, (-20, 20))
    assert list(stats) == ["a", "b"]
    assert stats["b"].median - stats["a"].median > 4
    assert any("2 epsilon" in n for n in stats["a"].notes)
    ax = plot_dp_boxplot(stats, title="t", xlabel="group", ylabel="y")
    assert ax.get_title() == "t" and ax.get_xlabel() == "group" and ax.get_ylabel() == "y"
    from matplotlib.figure import Figure

    ax2 = Figure().add_subplot()
    assert plot_dp_boxplot(stats["a"], ax=ax2) is ax2
    with pytest.raises(ParameterError):
        plot_dp_boxplot({})
    with pytest.raises(DataError) as info:
        grouped_dp_boxplot(x, g, 1.0, (-20, 20), min_group_size=600)
    assert info.value.argument == "groups"
    with pytest.raises(DataError):
        grouped_dp_boxplot(x, g[:10], 1.0, (-20, 20))


def test_distance():
    x = RNG.normal(size=1000)
    a = dp_boxplot_stats(x, math.inf, (-50, 50))
    assert boxplot_distance(a, a) == {"location": 0, "scale": 0, "skewness": 0, "tails": 0}


def test_audit_boxplot_within_claim():
    x = np.clip(RNG.normal(size=300), -5, 5)
    x2 = x.copy()
    x2[np.argmin(x)] = 5.0
    res = audit_epsilon(lambda d: dp_boxplot_stats(d, 1.0, (-5, 5)).q1, x, x2, n_trials=600)
    assert res.epsilon_lower <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"bounds": (2, 1)}, "bounds"),
        ({"x": []}, "x"),
        ({"x": [np.nan, 1.0]}, "x"),
        ({"quantile_weight": 1.0}, "quantile_weight"),
        ({"c": 0}, "c"),
        ({"lam": 2}, "lam"),
        ({"method": "x"}, "method"),
        ({"gap_rule": "x"}, "gap_rule"),
        ({"n_min": 0}, "n_min"),
        ({"base": 0.5}, "base"),
    ],
)
def test_bad_input(kwargs, arg):
    args = {"x": [1.0, 2.0, 3.0], "epsilon": 1.0, "bounds": (0, 5)} | kwargs
    with pytest.raises((DataError, ParameterError)) as info:
        dp_boxplot_stats(**args)
    assert info.value.argument == arg


def _mae(stats, ref):
    return np.mean(np.abs(stats.five - ref.five))


@pytest.mark.claims
def test_claim_dpboxplot_beats_naive_and_improves_with_n():
    """Lognormal, n=10,000, eps=1, 50 seeds: DPBoxplot's quartile+whisker MAE < naive's."""
    errs: dict[tuple[str, int], list[float]] = {}
    for seed in range(50):
        rng = np.random.default_rng(seed)
        for n in (2000, 10000):
            x = rng.lognormal(size=n)
            ref = dp_boxplot_stats(x, math.inf, (0, 100))
            for method in ("dpboxplot", "expmech"):
                if n == 2000 and method == "expmech":
                    continue
                s = dp_boxplot_stats(x, 1.0, (0, 100), method=method, random_state=seed)
                errs.setdefault((method, n), []).append(_mae(s, ref))
    dp10 = np.mean(errs[("dpboxplot", 10000)])
    naive10 = np.mean(errs[("expmech", 10000)])
    dp2 = np.mean(errs[("dpboxplot", 2000)])
    assert dp10 < naive10, (dp10, naive10)
    assert dp10 < dp2, (dp10, dp2)
