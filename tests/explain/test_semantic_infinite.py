"""Infinite motifs of semantic trajectory models (catalog row 004-01: the last motif to t -> infinity)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import torch

from trustlab.errors import DataError, ParameterError
from trustlab.explain._semantic_infinite import (
    INFINITE_MOTIFS,
    InfiniteCompositionShape,
    infinite_library,
    is_infinite,
)
from trustlab.explain._semantic_motifs import composition_library, transition_type
from trustlab.explain.semantic_ode import SemanticTrajectoryModel


def _violations(comp: tuple[str, ...], knots: np.ndarray, grid: np.ndarray, curve: np.ndarray) -> int:
    """Motifs whose first or second differences on a dense grid have the wrong sign."""
    bad = 0
    for j, motif in enumerate(comp):
        inside = curve[(grid > knots[j] + 1e-3) & (grid < knots[j + 1] - 1e-3)]
        inside = inside[np.isfinite(inside)]  # an accelerating motif may overflow to +-inf far out
        if len(inside) < 4:
            continue
        s1, s2 = (1.0 if motif[0] == "+" else -1.0), (1.0 if motif[1] == "+" else -1.0)
        scale = max(1.0, float(np.abs(inside).max()))
        if np.any(s1 * np.diff(inside) < -1e-12 * scale) or np.any(s2 * np.diff(inside, 2) < -1e-10 * scale):
            bad += 1
    return bad


def test_library_is_the_authors_infinite_library() -> None:
    lib = infinite_library(composition_library(3))
    assert len(lib) == 20 and all(is_infinite(c) for c in lib)
    assert ("+-", "--", "-+h") in lib and ("+-", "--", "-+f") in lib and ("++f",) in lib
    for comp in lib:
        assert all(m in ("++", "+-", "-+", "--") for m in comp[:-1])
        for a, b in pairwise(m[:2] for m in comp):
            transition_type(a, b)


def test_every_drawn_infinite_trajectory_has_its_composition_exactly() -> None:
    rng = np.random.default_rng(0)
    grid = torch.linspace(0.0, 5.0, 3001, dtype=torch.float64)
    for comp in infinite_library(composition_library(3)):
        shape = InfiniteCompositionShape([comp])
        raw = torch.as_tensor(rng.normal(0.0, 1.5, size=(8, shape.n_params)))
        zero = torch.zeros(8, dtype=torch.long)
        curve = shape.curve(raw, zero, grid.repeat(8, 1), 0.0, 1.0).numpy()
        times, values = (v.numpy() for v in shape.knots(raw, zero, 0.0, 1.0))
        # No NaN; only an accelerating motif may overflow (to +-inf, its limit) far after the window.
        assert not np.any(np.isnan(curve)) and np.all(np.isinf(times[:, -1]))
        assert np.all(np.isfinite(curve[:, grid.numpy() <= 1.0]))
        if INFINITE_MOTIFS[comp[-1]] != "exp":
            assert np.all(np.isfinite(curve))
        for r in range(8):
            assert _violations(comp, times[r], grid.numpy(), curve[r]) == 0, comp
        if INFINITE_MOTIFS[comp[-1]] == "asym":
            props = shape.properties(raw, zero, 0.0, 1.0)
            far = shape.curve(raw, zero, torch.full((8, 1), 1e7, dtype=torch.float64), 0.0, 1.0)[:, 0]
            np.testing.assert_allclose(far.numpy(), props["horizontal asymptote"].numpy(), atol=1e-6)
            half = shape.curve(raw, zero, props["half-life time"][:, None], 0.0, 1.0)[:, 0].numpy()
            start = values[:, -2]  # the infinite motif's start value
            np.testing.assert_allclose(half, (start + values[:, -1]) / 2, atol=1e-6)
        else:
            assert np.all(np.isinf(values[:, -1]))


def _asymptotic_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exponential approach to a covariate-driven horizontal asymptote, observed on [0, 3]."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    limit, gap = 0.5 + X[:, 0], 1.0 + X[:, 1]
    t = np.linspace(0.0, 3.0, 61)
    clean = limit[:, None] + gap[:, None] * np.exp(-2.0 * t[None, :])
    return X, clean + rng.normal(0.0, 0.01, clean.shape), t, clean


def test_infinite_model_extrapolates_and_reports_properties() -> None:
    X, y, t, _ = _asymptotic_data(30)
    obs = t <= 1.0 + 1e-9
    kw = {"n_epochs": 10, "score_max_iter": 10, "random_state": 0}
    model = SemanticTrajectoryModel(compositions=[("-+h",), ("-+f",)], **kw).fit(X, y[:, obs], times=t[obs])
    assert model.predict(X[:3], times=t).shape == (3, 61)
    sem = model.semantic_representation(X[:2])[0][0]
    assert sem.transitions[-1] == "infinity" and np.isinf(sem.times[-1])
    assert set(sem.properties) in ({"horizontal asymptote", "half-life time"}, {"incrementing factor"})
    finite = SemanticTrajectoryModel(compositions=[("-+",)], **kw).fit(X, y[:, obs], times=t[obs])
    assert finite.semantic_representation(X[:1])[0][0].properties == {}
    with pytest.raises(DataError, match="infinite_motifs"):
        finite.predict(X[:3], times=t)
    with pytest.raises(DataError, match="times"):
        model.predict(X[:3], times=t - 1.0)
    for bad in ([("-+h", "++")], [("x+h",)], [("--", "++f")]):
        with pytest.raises(ParameterError, match="compositions"):
            SemanticTrajectoryModel(compositions=bad, **kw).fit(X, y[:, obs], times=t[obs])
    lib = SemanticTrajectoryModel(max_motifs=2, infinite_motifs=True)._library(0)
    assert lib == infinite_library(composition_library(2))


@pytest.mark.claims
def test_claim_infinite_motifs_recover_asymptote_and_extrapolate() -> None:
    """Asymptote, half-life and the trajectory after the window, read from static features.

    n = 60 train / 40 test, noise sd 0.01, window [0, 1] of [0, 3]. The asymptote is fitted from
    about 21 noisy points per trajectory through a 12-coefficient GAM: tolerance 0.05 (five times the
    noise sd); half-life (true ln 2 / 2 = 0.347) within 10 %; extrapolation error below a third of
    carrying the last observation forward.
    """
    X, y, t, clean = _asymptotic_data(100)
    obs = t <= 1.0 + 1e-9
    model = SemanticTrajectoryModel(
        max_motifs=3, infinite_motifs=True, n_epochs=60, score_max_iter=30, random_state=0
    ).fit(X[:60], y[:60, obs], times=t[obs])
    sem = model.semantic_representation(X[60:])
    assert {s[0].composition for s in sem} == {("-+h",)}
    asymptote = np.array([s[0].properties["horizontal asymptote"] for s in sem])
    assert np.max(np.abs(asymptote - (0.5 + X[60:, 0]))) < 0.05
    half_life = np.median([s[0].properties["half-life time"] for s in sem])
    assert abs(half_life - np.log(2) / 2) < 0.1 * np.log(2) / 2
    pred = model.predict(X[60:], times=t)
    err = np.sqrt(np.mean((pred[:, ~obs] - clean[60:, ~obs]) ** 2))
    carry = np.sqrt(np.mean((y[60:, obs][:, -1:] - clean[60:, ~obs]) ** 2))
    assert err < carry / 3
