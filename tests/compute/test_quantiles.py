"""DP quantiles and boxplots from merged counts (trustlab.compute.quantiles) against the in-process calls.

(a) The sufficient statistic merged over random partitionings (empty partitions, ties,
values at the bounds, NaN, +-inf) is exactly the state of the whole column and exactly
what the in-process mechanism builds from the rows. (b) With the secure samplers
replaced by one seeded stand-in for both runs, the in-process and the from-counts
releases are identical, and so are the log-weights JointExp hands to its selection.
(c) The ledgers are identical. (e) An empirical audit of the from-counts path at a
worst-case neighbour, and a canary mutant (noise drawn per partition) it catches.
"""

from __future__ import annotations

import itertools
import math
from functools import reduce

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trustlab.privacy._boxplot_core as bx
import trustlab.privacy._boxplot_grouped as bg
import trustlab.privacy._grid as grid_module
import trustlab.privacy._jointexp as jx
from trustlab.compute.backend import compute
from trustlab.compute.quantiles import (
    BeyondWhiskers,
    QuantileCounts,
    dp_boxplot_of_counts,
    dp_quantiles_of_counts,
    grouped_dp_boxplot_of_counts,
    grouped_dp_boxplot_on,
    grouped_dp_boxplots_on,
)
from trustlab.errors import TrustlabError
from trustlab.privacy._grid import GridCounts, QuantileGrid, sorted_clipped
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.boxplot import dp_boxplot_stats, grouped_dp_boxplot
from trustlab.privacy.quantiles import dp_quantiles

BOUNDS = (-4.0, 4.0)


def _column(kind: str, n: int = 3001, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "normal":
        x = rng.normal(0, 1.5, n)
    elif kind == "tied":
        x = np.full(n, 1.25)
    elif kind == "bounds":
        x = rng.choice([BOUNDS[0], BOUNDS[1], 0.0], n)
    else:  # "hostile": NaN, +-inf, beyond the bounds, ties
        x = rng.choice([np.nan, np.inf, -np.inf, 9.0, -9.0, 0.5, 0.5000001], n)
        x[: n // 2] = rng.normal(size=n // 2)
    return x


def _split_merge(stat, df: pd.DataFrame, seed: int):
    """Partial states over a random partitioning (some partitions empty), merged in a random order."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, len(df) + 1, size=rng.integers(1, 12)))
    cuts = np.concatenate([[0], cuts, cuts[:2], [len(df)]])  # repeated cuts: empty partitions
    cuts.sort()
    parts = [stat.partial(df.iloc[a:b]) for a, b in itertools.pairwise(cuts)]
    order = rng.permutation(len(parts))
    return stat.finalize(reduce(stat.merge, [parts[i] for i in order]))


def _same_summary(a, b) -> None:
    assert (a.n, a.missing) == (b.n, b.missing)
    assert a.grid == b.grid
    for side in ("upper", "lower"):
        sa, sb = getattr(a, side), getattr(b, side)
        np.testing.assert_array_equal(sa.codes, sb.codes)
        np.testing.assert_array_equal(sa.counts, sb.counts)


@pytest.mark.parametrize("kind", ["normal", "tied", "bounds", "hostile"])
def test_state_merges_to_the_whole_column_on_any_partitioning(kind):
    x = _column(kind)
    df = pd.DataFrame({"x": x, "g": np.random.default_rng(1).choice(["a", "b", None], x.size)})
    stat = QuantileCounts("x", BOUNDS, base=1.001)
    whole = compute(stat, df)
    for seed in range(4):
        _same_summary(_split_merge(stat, df, seed), whole)
    # ... and it is what the in-process mechanism reads from the rows
    present = x[~np.isnan(x)]
    assert whole.grid == GridCounts.from_sorted(sorted_clipped(present, *BOUNDS), QuantileGrid(BOUNDS, 2**20))
    assert (whole.n, whole.missing) == (present.size, x.size - present.size)
    grouped = QuantileCounts("x", BOUNDS, base=1.001, group="g", categories=["a", "b"])
    g_whole = compute(grouped, df)
    for seed in range(3):
        for a, b in zip(_split_merge(grouped, df, seed).groups, g_whole.groups, strict=True):
            _same_summary(a, b)
    assert sum(s.n for s in g_whole.groups) == whole.n


@pytest.mark.parametrize("kind", ["normal", "tied", "bounds", "hostile"])
def test_bucket_counts_answer_the_scan_exactly(kind):
    z = sorted_clipped(_column(kind)[~np.isnan(_column(kind))], *BOUNDS)
    s = compute(QuantileCounts("x", BOUNDS, base=1.001), pd.DataFrame({"x": z}))
    lo, hi = BOUNDS
    ks = np.arange(0, 12000, 7)
    up_edges = np.expm1((ks + 1) * math.log(1.001)) + lo
    lo_edges = np.expm1((ks + 1) * math.log(1.001)) + (-hi)
    np.testing.assert_array_equal(
        np.searchsorted(s.upper, up_edges, side="left"), np.searchsorted(z, up_edges, side="left")
    )
    np.testing.assert_array_equal(
        np.searchsorted(s.lower, -lo_edges, side="right"), np.searchsorted(z, -lo_edges, side="right")
    )


class Seeded:
    """Seeded stand-ins for every secure sampler, recording JointExp's logits.

    Each draw is a function of its request alone (a generator seeded by the request's
    bytes), so two runs that make the same requests get the same draws, in any order.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.logits: list[np.ndarray] = []
        self.scales: list[float] = []

        def rng(*parts: object) -> np.random.Generator:
            key = b"|".join(
                np.asarray(p).tobytes() if isinstance(p, np.ndarray) else repr(p).encode() for p in parts
            )
            return np.random.default_rng(list(key[-4000:]) or [0])

        def uniform(high, size):
            return rng("u", int(high), int(size)).integers(0, int(high), size=int(size), dtype=np.int64)

        def select(flat):
            flat = np.asarray(flat, dtype=float)
            self.logits.append(flat.copy())
            return int(np.argmax(flat + rng("s", flat).gumbel(size=flat.size)))

        def noise(values, scale):
            self.scales.append(float(scale))
            v = np.asarray(values, dtype=np.int64)
            return v + rng("n", v, float(scale)).integers(-2, 3, size=v.shape)

        monkeypatch.setattr(grid_module, "uniform_int", uniform)
        monkeypatch.setattr(jx, "uniform_int", uniform)
        monkeypatch.setattr(jx, "exponential_select", select)
        for module in (bx, bg):
            monkeypatch.setattr(module, "add_discrete_laplace", noise)

    def run(self, fn):
        self.logits, self.scales = [], []
        out = fn()
        return out, self.logits, self.scales


def _ledger(acc: Accountant):
    return [(e.description, e.mechanism, e.epsilon, e.delta) for e in acc.ledger()]


def _same_logits(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b) > 0
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("kind", ["normal", "tied", "hostile"])
@pytest.mark.parametrize("method", ["jointexp", "independent"])
def test_quantiles_from_counts_equal_the_in_process_release(monkeypatch, kind, method):
    x = _column(kind, n=1500)
    s = _split_merge(QuantileCounts("x", BOUNDS, resolution=2**16), pd.DataFrame({"x": x}), 3)
    seeded = Seeded(monkeypatch)
    acc_a, acc_b = Accountant(5.0), Accountant(5.0)
    q = [0.1, 0.5, 0.9]
    a, la, _ = seeded.run(
        lambda: dp_quantiles(x, q, 1.0, BOUNDS, method=method, resolution=2**16, accountant=acc_a)
    )
    b, lb, _ = seeded.run(lambda: dp_quantiles_of_counts(s, q, 1.0, method=method, accountant=acc_b))
    _same_logits(la, lb)
    np.testing.assert_array_equal(a.value, b.value)
    assert (a.epsilon, a.mechanism, a.parameters, a.description) == (
        b.epsilon,
        b.mechanism,
        b.parameters,
        b.description,
    )
    assert _ledger(acc_a) == _ledger(acc_b) and len(_ledger(acc_a)) == 1


def _beyond_of(x: np.ndarray):
    def beyond(lo, hi):
        counts = compute(BeyondWhiskers("x", {0: (lo, hi)}), pd.DataFrame({"x": x}), chunksize=700)
        return tuple(counts[0])

    return beyond


@pytest.mark.parametrize("kind", ["normal", "tied", "hostile"])
@pytest.mark.parametrize(
    "options",
    [
        {},  # dpboxplot, released n (add/remove)
        {"n": 3001.0},
        {"neighbouring": "replace"},
        {"method": "expmech", "n_min": 10},
        {"method": "unbounded"},
    ],
)
def test_boxplot_from_counts_equals_the_in_process_boxplot(monkeypatch, kind, options):
    x = _column(kind)
    s = _split_merge(QuantileCounts("x", BOUNDS, base=1.001), pd.DataFrame({"x": x}), 5)
    seeded = Seeded(monkeypatch)
    acc_a, acc_b = Accountant(5.0), Accountant(5.0)
    a, la, sa = seeded.run(lambda: dp_boxplot_stats(x, 2.0, BOUNDS, accountant=acc_a, **options))
    b, lb, sb = seeded.run(lambda: dp_boxplot_of_counts(s, _beyond_of(x), 2.0, accountant=acc_b, **options))
    if options.get("method") != "unbounded":
        _same_logits(la, lb)
    assert sa == sb  # every noise draw at the same scale
    assert a == b  # five numbers, shares, n, releases and notes
    assert _ledger(acc_a) == _ledger(acc_b)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"neighbouring": "replace"},
        # ~8 s CPU: the slow profile checks declared counts too
        pytest.param({"counts": {"a": 900, "b": 1500, "c": 20}}, marks=pytest.mark.slow),
    ],
)
def test_grouped_boxplot_from_counts_equals_the_in_process_figure(monkeypatch, options):
    rng = np.random.default_rng(4)
    n = 3000
    x = np.concatenate([rng.normal(0, 1, n), [np.nan, np.inf, -np.inf]])
    g = rng.choice(["a", "b", "c", None], x.size, p=[0.3, 0.5, 0.01, 0.19]).astype(object)
    df = pd.DataFrame({"x": x, "g": g})
    cats = ["a", "b", "c"]
    if "counts" in options:
        options = {**options, "other_label": None}
    stat = QuantileCounts("x", BOUNDS, base=1.001, group="g", categories=cats)
    s = _split_merge(stat, df, 6)

    def beyond(w):
        return compute(BeyondWhiskers("x", w, group="g", categories=cats), df, chunksize=999)

    seeded = Seeded(monkeypatch)
    acc_a, acc_b = Accountant(5.0), Accountant(5.0)
    a, la, sa = seeded.run(
        lambda: grouped_dp_boxplot(x, g, 2.0, BOUNDS, categories=cats, accountant=acc_a, **options)
    )
    b, lb, sb = seeded.run(lambda: grouped_dp_boxplot_of_counts(s, beyond, 2.0, accountant=acc_b, **options))
    _same_logits(la, lb)
    assert sa == sb
    assert list(a) == list(b) and all(a[k] == b[k] for k in a)
    assert (a.sizes, a.too_small, a.releases, a.notes) == (b.sizes, b.too_small, b.releases, b.notes)
    assert _ledger(acc_a) == _ledger(acc_b)
    c, _, _ = seeded.run(
        lambda: grouped_dp_boxplot_on(df, "x", "g", cats, 2.0, BOUNDS, chunksize=1234, **options)
    )
    assert all(a[k] == c[k] for k in a) and a.releases == c.releases


def test_several_figures_in_two_passes_equal_the_in_process_figures(monkeypatch):
    rng = np.random.default_rng(8)
    n = 4000
    df = pd.DataFrame(
        {
            "x": rng.normal(0, 1, n),
            "y": rng.exponential(1, n),
            "g": rng.choice(["a", "b"], n).astype(object),
            "h": rng.choice(["u", "v", "w"], n).astype(object),
        }
    )
    figs = [
        {
            "column": "x",
            "group": "g",
            "categories": ["a", "b"],
            "epsilon": 1.0,
            "bounds": BOUNDS,
            "description": "x by g",
        },
        {
            "column": "y",
            "group": "h",
            "categories": ["u", "v", "w"],
            "epsilon": 0.5,
            "bounds": (0.0, 8.0),
            "resolution": 2**12,
            "counts": {"u": 1300, "v": 1300, "w": 1300, "(missing or other)": 0},
        },
    ]
    seeded = Seeded(monkeypatch)
    acc_a, acc_b = Accountant(5.0), Accountant(5.0)

    def in_process():
        out = []
        for f in figs:
            kw = {k: v for k, v in f.items() if k not in ("column", "group", "epsilon", "bounds")}
            x, g = df[f["column"]].to_numpy(dtype=float), df[f["group"]].to_numpy()
            out.append(grouped_dp_boxplot(x, g, f["epsilon"], f["bounds"], accountant=acc_a, **kw))
        return out

    a, la, sa = seeded.run(in_process)
    b, lb, sb = seeded.run(lambda: grouped_dp_boxplots_on(df, figs, chunksize=1500, accountant=acc_b))
    assert sorted(sa) == sorted(sb) and len(la) == len(lb)
    for fa, fb in zip(a, b, strict=True):
        assert list(fa) == list(fb) and all(fa[k] == fb[k] for k in fa)
        assert fa.releases == fb.releases
    assert _ledger(acc_a) == _ledger(acc_b)


def test_public_parameters_refused_with_clear_errors():
    s = compute(QuantileCounts("x", BOUNDS), pd.DataFrame({"x": [0.0, 1.0]}))
    with pytest.raises(TrustlabError, match=r"base=1\.001"):
        dp_boxplot_of_counts(s, lambda lo, hi: (0, 0), 1.0)
    with pytest.raises(TrustlabError, match="epsilon"):
        dp_quantiles_of_counts(s, [0.5], math.inf)
    sb = compute(QuantileCounts("x", BOUNDS, base=1.001), pd.DataFrame({"x": [0.0, 1.0]}))
    with pytest.raises(TrustlabError, match="resolution"):
        dp_boxplot_of_counts(sb, lambda lo, hi: (0, 0), 1.0, resolution=8)
    with pytest.raises(TrustlabError, match="categories"):
        QuantileCounts("x", BOUNDS, group="g")
    with pytest.raises(TrustlabError, match="bounds"):
        QuantileCounts("x", (1.0, 0.0))


@settings(max_examples=25, deadline=None)
@given(
    q=st.one_of(st.lists(st.floats(allow_nan=True), max_size=3), st.text(max_size=3), st.none()),
    eps=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.text(max_size=2)),
    bounds=st.one_of(st.tuples(st.floats(), st.floats()), st.none(), st.text(max_size=2)),
    resolution=st.one_of(st.integers(-3, 2**41), st.floats(), st.none()),
)
def test_fuzz_only_trustlab_errors(q, eps, bounds, resolution):
    df = pd.DataFrame({"x": [0.0, 1.0, np.nan, np.inf]})
    try:
        s = compute(QuantileCounts("x", bounds, resolution=resolution, base=1.001), df)
        dp_quantiles_of_counts(s, q, eps)
        dp_boxplot_of_counts(s, lambda lo, hi: (0, 0), eps)
    except TrustlabError:
        pass


@settings(max_examples=20, deadline=None)
@given(
    cats=st.one_of(st.lists(st.one_of(st.none(), st.text(max_size=2), st.integers()), max_size=3), st.none()),
    eps=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=2)),
    figure=st.dictionaries(
        st.sampled_from(["column", "group", "categories", "epsilon", "bounds", "counts", "n"]), st.integers()
    ),
)
def test_fuzz_grouped_only_trustlab_errors(cats, eps, figure):
    df = pd.DataFrame({"x": [0.0, 1.0, np.nan, np.inf], "g": ["a", None, "b", "a"]})
    try:
        stat = QuantileCounts("x", BOUNDS, base=1.001, group="g", categories=cats)
        s = compute(stat, df)
        grouped_dp_boxplot_of_counts(s, lambda w: {i: (0, 0) for i in w}, eps)
    except TrustlabError:
        pass
    try:
        grouped_dp_boxplots_on(df, [figure, {"categories": cats, "epsilon": eps}])
    except TrustlabError:
        pass


# ---- (e) empirical privacy audit of the from-counts path ------------------------------------


def test_audit_quantile_from_counts_at_a_bound_neighbour():
    # 10 records, half at each bound of a grid of 8 steps; the neighbour moves one record
    # from the lower bound to the upper one, across every grid point (replace-one). The
    # exponential mechanism's realised loss here is small (0.0 measured at eps 1 and 2;
    # 4x the budget gives 0.6), so this checks that the from-counts path adds no leak
    # (e.g. a data-dependent branch or a value on the output); the outlier-share audit
    # below has the power to catch a mis-scaled budget.
    x = np.array([0.0] * 5 + [8.0] * 5)
    neighbour = x.copy()
    neighbour[0] = 8.0
    eps = 2.0
    stat = QuantileCounts("x", (0.0, 8.0), resolution=8)
    summaries = [compute(stat, pd.DataFrame({"x": d}), chunksize=3) for d in (x, neighbour)]

    def mech(i):
        return float(dp_quantiles_of_counts(summaries[i], [0.5], eps).value[0])

    res = audit_epsilon(mech, 0, 1, n_trials=800, alpha=0.01, events=("threshold", "value", "low_bits"))
    assert res.epsilon_lower <= eps, res


def test_audit_boxplot_outlier_share_from_counts(monkeypatch, audit_trials):
    # The quantiles fixed (as tests/privacy/test_boxplot_audit.py does), so the claim is the
    # outlier counts' epsilon: one record beyond the fence, counted in a second pass.
    monkeypatch.setattr(bx, "scan", lambda z, level, e, a, *r, mirrored=False, **k: 2.0 if mirrored else 9.0)
    monkeypatch.setattr(bx, "jointexp_values", lambda *a, **k: np.array([-0.7, 0.0, 0.7]))
    rng = np.random.default_rng(0)
    data = np.concatenate([np.clip(rng.normal(size=190), -1.9, 1.9), np.full(10, 8.0)])
    neighbour = np.append(data, 7.5)
    eps = 8.0  # (1 - 7/8) * 8 = 1 to the pair of counts

    stat = QuantileCounts("x", (-50.0, 50.0), base=1.001)
    inputs = [(compute(stat, pd.DataFrame({"x": d}), chunksize=64), _beyond_of(d)) for d in (data, neighbour)]
    events = ("threshold", "value", "low_bits")

    def mech(i, spend=eps):
        return dp_boxplot_of_counts(inputs[i][0], inputs[i][1], spend, n=200, n_min=100).share_hi

    # alpha = 1e-4, as in tests/privacy/test_boxplot_audit.py: the share's count is a tight discrete
    # Laplace release (ratio e^1 on threshold events), so at 0.01 a correct release failed about 2e-3
    # of runs (exact binomial sums over 500 evaluation runs); at 1e-4 <= 6.1e-6. The canary keeps
    # its power there: above 1 in 20,000 simulated audits (0.01% quantile 1.13; 0.45% fell at 0.01).
    res = audit_epsilon(mech, 0, 1, n_trials=audit_trials(1000), alpha=1e-4, events=events)
    assert res.epsilon_lower <= 1.0, res
    if not audit_trials.full:  # the canary: slow profile
        return

    # Canary (mutant "epsilon not halved": the counts drawn with twice their share,
    # 2 where 1 is claimed): the same audit flags it, so the assertion above can fail.
    res = audit_epsilon(lambda i: mech(i, 2 * eps), 0, 1, n_trials=1000, alpha=1e-4, events=events)
    assert res.epsilon_lower > 1.0, res
