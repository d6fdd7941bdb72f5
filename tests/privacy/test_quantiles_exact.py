"""Exactness of the DP quantile mechanisms against their definition.

Every reference here is computed from the definition of the mechanism -- the
exponential mechanism over m-tuples of fine grid positions, utility
``-sum_j |#{records in gap j} - (q_j - q_{j-1}) n|`` of the sorted tuple, each record
at a uniform sub-position of its grid cell -- by enumeration, never from the
forward recursion the library uses. Statistical tolerances come from the number of
draws (McDiarmid's inequality for the total-variation distance).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.special import logsumexp

import trustlab.privacy._jointexp as je
from trustlab.privacy.quantiles import dp_quantiles, jointexp_sensitivity

# --------------------------------------------------------------------------------------
# Brute force from the definition


def _candidate_utilities(fine: np.ndarray, levels, n_fine: int):
    """All unordered m-tuples of fine positions, their sorted version and utility."""
    n, m = fine.size, len(levels)
    targets = np.diff(np.concatenate([[0.0], levels, [1.0]])) * n
    tuples = np.array(list(itertools.product(range(n_fine), repeat=m)))
    srt = np.sort(tuples, axis=1)
    below = (fine[None, None, :] < srt[:, :, None]).sum(axis=2)  # records strictly below each output
    counts = np.diff(
        np.concatenate([np.zeros((len(srt), 1)), below, np.full((len(srt), 1), n)], axis=1), axis=1
    )
    return srt, below, -np.abs(counts - targets).sum(axis=1)


def exact_output_distribution(cells, levels, epsilon, neighbouring, n_cells, jitter):
    """P(sorted output grid indices) by enumerating every jitter and every candidate tuple."""
    cells = np.asarray(cells, dtype=np.int64)
    a = epsilon / (2.0 * jointexp_sensitivity(levels, neighbouring))
    dist: Counter = Counter()
    for u in itertools.product(range(jitter), repeat=cells.size):
        fine = cells * jitter + np.asarray(u)
        srt, _, util = _candidate_utilities(fine, levels, n_cells * jitter)
        w = np.exp(a * (util - util.max()))
        w /= w.sum()
        for key, p in zip(map(tuple, srt // jitter), w, strict=True):
            dist[key] += p / jitter**cells.size
    return dict(dist)


def _tv(p: dict, q: dict) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def _tv_tolerance(p: dict, draws: int, alpha: float = 1e-4) -> float:
    """E[TV] bound (Jensen) plus McDiarmid deviation at level alpha (TV has 1/N differences)."""
    expected = 0.5 * sum(math.sqrt(v * (1 - v) / draws) for v in p.values())
    return expected + math.sqrt(math.log(1 / alpha) / (2 * draws))


# Tied samples from {1, 2, 3}; grid 0..4 (resolution 4, step 1), two sub-positions per cell.
# Epsilons chosen so that JointExp at 2x epsilon and JointExp without the tie-breaking
# jitter (the zero-weight-tie defect) are both at total-variation distance >= 0.13.
_SLOW = pytest.mark.slow  # ~5 s CPU each: the fast profile keeps one case per neighbouring relation
BRUTE_CASES = [
    ([1.0, 1.0, 1.0, 2.0, 3.0], [0.5], 2.0, "replace", 3000),
    pytest.param([1.0, 1.0, 1.0, 2.0, 3.0], [0.5], 1.0, "add_remove", 3000, marks=_SLOW),
    pytest.param([1.0, 1.0, 2.0, 2.0, 3.0, 3.0], [0.25, 0.5, 0.75], 4.0, "replace", 1500, marks=_SLOW),
    ([1.0, 1.0, 1.0, 2.0, 3.0], [0.25, 0.5, 0.75], 4.0, "add_remove", 1500),
]


@pytest.mark.parametrize(("x", "levels", "eps", "nb", "draws"), BRUTE_CASES)
def test_output_distribution_matches_brute_force(x, levels, eps, nb, draws):
    exact = exact_output_distribution(np.asarray(x, dtype=int), levels, eps, nb, n_cells=5, jitter=2)
    # the defects this test exists for are far away from the exact distribution
    assert _tv(exact, exact_output_distribution(np.asarray(x, dtype=int), levels, 2 * eps, nb, 5, 2)) > 0.1
    assert _tv(exact, exact_output_distribution(np.asarray(x, dtype=int), levels, eps, nb, 5, 1)) > 0.07
    seen: Counter = Counter()
    for _ in range(draws):
        v = dp_quantiles(x, levels, eps, (0, 4), neighbouring=nb, resolution=4, _jitter=2).value
        assert np.array_equal(v, np.round(v))  # integer grid
        seen[tuple(int(c) for c in v)] += 1
    empirical = {k: c / draws for k, c in seen.items()}
    assert set(empirical) <= set(exact)
    assert _tv(empirical, exact) < _tv_tolerance(exact, draws)


# --------------------------------------------------------------------------------------
# Deterministic: the weights the sampler is handed equal the definition's


def _final_marginal_from_definition(fine, levels, epsilon, neighbouring, n_fine):
    """log P(rank of the largest output = r, number of outputs sharing that rank = k)."""
    _, below, util = _candidate_utilities(np.asarray(fine), levels, n_fine)
    a = epsilon / (2.0 * jointexp_sensitivity(levels, neighbouring))
    logw = a * util
    r_last = below[:, -1]
    k_last = (below == r_last[:, None]).sum(axis=1)
    out = {}
    for key in set(zip(k_last.tolist(), r_last.tolist(), strict=True)):
        mask = (k_last == key[0]) & (r_last == key[1])
        out[key] = logsumexp(logw[mask])
    total = logsumexp(list(out.values()))
    return {k: v - total for k, v in out.items()}


class _Recorder:
    """Wraps ``_pick``: keeps the (run length, rank) -> log weight map of every top-level draw."""

    def __init__(self, monkeypatch):
        self.calls: list[dict] = []
        real = je.pick

        def pick(parts, flat):
            weights = {}
            for k, start, w in parts:
                for i, v in enumerate(w):
                    weights[(k, start + i)] = v
            self.calls.append(weights)
            return real(parts, flat)

        monkeypatch.setattr(je, "pick", pick)


def _normalised(weights: dict) -> dict:
    total = logsumexp(list(weights.values()))
    return {k: v - total for k, v in weights.items()}


@pytest.mark.parametrize("neighbouring", ["replace", "add_remove"])
@pytest.mark.parametrize("eps", [0.3, 3.0, 40.0])
@pytest.mark.parametrize("levels", [[0.5], [0.2, 0.5, 0.9], [0.3, 0.35, 0.4]])
def test_final_weights_equal_definition(monkeypatch, neighbouring, eps, levels):
    # distinct cells, no jitter (one sub-position per cell): the fine grid is the grid
    x = [1.0, 2.0, 4.0, 5.0, 8.0, 9.0]
    rec = _Recorder(monkeypatch)
    dp_quantiles(x, levels, eps, (0, 11), neighbouring=neighbouring, resolution=11, _jitter=1)
    got = _normalised(rec.calls[0])
    ref = _final_marginal_from_definition(np.asarray(x, dtype=int), levels, eps, neighbouring, 12)
    for key, v in got.items():
        if key in ref:
            assert v == pytest.approx(ref[key], abs=1e-9), key
        else:
            assert v == -np.inf, key
    assert set(ref) <= set(got)


def test_independent_method_uses_epsilon_over_m_per_level(monkeypatch):
    """Each level's exponential mechanism gets epsilon / m (the declared split), not epsilon."""
    x = [1.0, 2.0, 4.0, 5.0, 8.0, 9.0]
    levels = [0.2, 0.5, 0.9]
    rec = _Recorder(monkeypatch)
    rel = dp_quantiles(x, levels, 3.0, (0, 11), method="independent", resolution=11, _jitter=1)
    assert rel.parameters["epsilon_per_selection"] == pytest.approx(1.0)
    assert len(rec.calls) == 3
    for level, weights in zip(levels, rec.calls, strict=True):
        ref = _final_marginal_from_definition(np.asarray(x, dtype=int), [level], 1.0, "replace", 12)
        got = _normalised(weights)
        assert {k: round(v, 9) for k, v in got.items() if np.isfinite(v)} == {
            k: round(v, 9) for k, v in ref.items()
        }


def test_jointexp_records_the_declared_epsilon(monkeypatch):
    seen = []
    real = je.joint_exp_ranks

    def spy(fine, levels, epsilon, sensitivity):
        seen.append((levels.size, epsilon, sensitivity))
        return real(fine, levels, epsilon, sensitivity)

    monkeypatch.setattr(je, "joint_exp_ranks", spy)
    rel = dp_quantiles(np.arange(50.0), [0.25, 0.5, 0.75], 0.7, (0, 50))
    assert seen == [(3, 0.7, 2.0)] and rel.epsilon == 0.7 and rel.parameters["sensitivity"] == 2.0
    seen.clear()
    dp_quantiles(np.arange(50.0), [0.25, 0.5, 0.75], 0.9, (0, 50), method="independent")
    assert seen == [(1, pytest.approx(0.3), 2.0)] * 3


# --------------------------------------------------------------------------------------
# The log-space convolution against a direct sum


def _direct_transition(prev, plo, lo, hi, a, target):
    p = np.arange(plo, plo + prev.size)
    out = []
    for r in range(lo, hi + 1):
        m = (p < r) & np.isfinite(prev)
        out.append(logsumexp(prev[m] - a * np.abs(r - p[m] - target)) if m.any() else -np.inf)
    return np.array(out)


@pytest.mark.parametrize("seed", range(6))
def test_transition_matches_direct_sum(seed):
    rng = np.random.default_rng(seed)
    for _ in range(15):
        width = int(rng.integers(1, 400))
        a = float(10 ** rng.uniform(-4, 1.5))
        target = float(rng.choice([rng.uniform(0, 1), rng.uniform(0, 50), rng.uniform(0, 600)]))
        plo = int(rng.integers(0, 40))
        prev = -a * np.abs(np.arange(width) - rng.uniform(0, width)) + rng.normal(0, 3, width)
        prev[rng.random(width) < 0.15] = -np.inf
        lo = max(0, plo + int(rng.integers(-30, 500)))
        hi = lo + int(rng.integers(0, 400))
        got = je.transition(prev, plo, lo, hi, a, target)
        ref = _direct_transition(prev, plo, lo, hi, a, target)
        assert np.array_equal(np.isfinite(got), np.isfinite(ref))
        fin = np.isfinite(ref)
        # relative error of each weight: a few ulps of its own logarithm (measured over
        # 600 such cases: 2.1e-14 where |log w| < 10, 4.1e-15 |log w| beyond)
        assert np.all(np.abs(got[fin] - ref[fin]) <= 1e-13 + 1e-14 * np.abs(ref[fin]))


# --------------------------------------------------------------------------------------
# Truncation of far ranks


@pytest.mark.parametrize("levels", [[0.25, 0.5, 0.75], [0.3, 0.5, 0.7], [0.3, 0.31, 0.32]])
def test_window_truncation_changes_no_probability(monkeypatch, levels):
    # n large enough that each level's window (about 12,000 ranks at epsilon 1) truncates;
    # with [0.3, 0.5, 0.7] the windows overlap and runs of levels in one interval
    # (utility below -6,000) are left out as well; with [0.3, 0.31, 0.32] runs are kept.
    # Distinct grid cells and one sub-position per cell make both runs see the same data.
    x = np.sort(np.random.default_rng(3).choice(2**20, size=30000, replace=False)).astype(float)
    kwargs = {"resolution": 2**20, "_jitter": 1}
    rec = _Recorder(monkeypatch)
    dp_quantiles(x, levels, 1.0, (0, 2**20), **kwargs)
    first = len(rec.calls)  # the final draw and one per earlier level
    monkeypatch.setattr(je, "MARGIN_NATS", 1e9)  # no truncation at all
    dp_quantiles(x, levels, 1.0, (0, 2**20), **kwargs)
    windowed, full = _normalised(rec.calls[0]), _normalised(rec.calls[first])
    assert len(full) > len(windowed)
    # Truncation removes tuples of total probability below exp(-1400): an absolute change.
    # Entries that are not themselves astronomically small keep their probability to
    # float precision; tiny ones may lose part of their (tiny) mass, never gain.
    for key, v in windowed.items():
        if full[key] > -1300:
            assert v == pytest.approx(full[key], abs=1e-9)
        else:
            assert v <= full[key] + 1e-9
    outside = [v for k, v in full.items() if k not in windowed]
    assert logsumexp(outside) < -1400


def test_heavy_collisions_widen_the_window_instead_of_failing():
    # no jitter: every record of a tie collides, so the ranks inside the tie have no
    # grid point; the window around the target is widened until it holds the mass
    x = [2.0] * 400 + [3.0] * 400
    for eps in (10.0, 1000.0):
        v = dp_quantiles(x, [0.25, 0.5, 0.75], eps, (0, 10), resolution=10, _jitter=1).value
        assert np.all((v >= 0) & (v <= 10)) and np.all(np.diff(v) >= 0)
