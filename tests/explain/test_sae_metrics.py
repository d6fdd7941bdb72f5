"""SAEBench metrics (explain/sae_metrics.py) on hand-built autoencoders whose values are known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from trustlab.errors import DataError, ParameterError
from trustlab.explain.sae_metrics import (
    core_metrics,
    feature_absorption,
    feature_recovery,
    k_sparse_probing,
    loss_recovered,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "sae-metrics.md"


class LinearSAE:
    """f(x) = relu(x @ E) (or x @ E when ``signed``), x_hat = f @ W_dec_ + b_dec_."""

    def __init__(self, E: np.ndarray, D: np.ndarray, signed: bool = False) -> None:
        self.E, self.W_dec_, self.b_dec_, self.signed = E, D, np.zeros(D.shape[1]), signed

    def transform(self, X: np.ndarray) -> np.ndarray:
        Z = np.asarray(X, dtype=float) @ self.E
        return Z if self.signed else np.maximum(Z, 0.0)


def test_core_metrics_exact_values() -> None:
    X = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    ident = LinearSAE(np.eye(3), np.eye(3))
    m = core_metrics(ident, X)
    assert m["fvu"] == 0.0 and m["cosine"] == 1.0 and m["mse"] == 0.0
    assert m["l0"] == 0.8 and m["dead_fraction"] == 0.0 and m["dense_fraction"] == 1.0
    assert m["mean_max_cosine"] == 0.0
    half = LinearSAE(np.eye(3), 0.5 * np.eye(3))  # x_hat = x / 2: error 1/4 of sum x^2
    m = core_metrics(half, X)
    total = ((X - X.mean(0)) ** 2).sum()
    assert m["fvu"] == pytest.approx(0.25 * (X**2).sum() / total) and m["cosine"] == pytest.approx(1.0)
    dead = LinearSAE(np.c_[np.eye(3), np.zeros(3)], np.r_[np.eye(3), [[1.0, 1.0, 0.0]]])
    m = core_metrics(dead, X)
    assert m["dead_fraction"] == 0.25
    assert m["mean_max_cosine"] == pytest.approx((2 * np.sqrt(0.5) + 0.0 + np.sqrt(0.5)) / 4)


def test_k_sparse_probing_finds_the_concept_latent() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    Z = np.c_[rng.random((400, 5)), y * (1 + rng.random(400)), 0.3 * y + rng.random(400)]
    table = k_sparse_probing(Z, y, ks=[1, 2])
    assert table["latents"].iloc[0] == [5] and table["accuracy"].iloc[0] == 1.0
    assert table["latents"].iloc[1] == [5, 6]
    with pytest.raises(DataError) as info:
        k_sparse_probing(Z, np.ones(400))
    assert info.value.argument == "y" and "one value" in str(info.value)
    with pytest.raises(ParameterError) as info:
        k_sparse_probing(Z, y, ks=[0])
    assert info.value.argument == "ks"


def _absorbing_world(n: int = 2000, seed: int = 0):
    """Parent p = e0; child c = e1 fires only with p. The SAE has a 'parent' latent along p that
    is silent whenever the child fires, and a 'child' latent along (p + c)/sqrt(2): full absorption
    on every child row, none on parent-only rows."""
    rng = np.random.default_rng(seed)
    parent = rng.random(n) < 0.5
    child = parent & (rng.random(n) < 0.3)
    X = np.c_[parent, child, rng.normal(0, 0.01, n)].astype(float)

    class Absorbing(LinearSAE):
        def transform(self, X: np.ndarray) -> np.ndarray:
            X = np.asarray(X, dtype=float)
            has_child = X[:, 1] > 0.5
            z0 = np.where(has_child, 0.0, np.maximum(X[:, 0], 0))
            z1 = np.where(has_child, np.sqrt(2) * X[:, 1], 0.0)
            return np.c_[z0, z1]

    D = np.array([[1.0, 0.0, 0.0], [np.sqrt(0.5), np.sqrt(0.5), 0.0]])
    return X, parent, child, Absorbing(np.zeros((3, 2)), D)


def test_feature_absorption_exact_on_a_hand_built_absorber() -> None:
    X, parent, _, sae = _absorbing_world()
    r = feature_absorption(sae, X, parent, probe_direction=[1.0, 0.0, 0.0], max_k=1, test_size=0.5)
    assert r.main_latents == (0,)
    # evaluated rows: held-out parent rows; child rows are fully absorbed, the others not at all
    share_child = float(np.mean(r.fractions == 1.0))
    assert set(np.unique(r.fractions)) <= {0.0, 1.0}
    assert r.mean_absorption_fraction == pytest.approx(share_child)
    assert r.full_absorption_rate == pytest.approx(share_child)
    assert abs(share_child - 0.3) < 4 * np.sqrt(0.21 / r.n_evaluated)
    # with splits allowed, the child latent joins the main latents and absorption vanishes
    r10 = feature_absorption(sae, X, parent, probe_direction=[1.0, 0.0, 0.0], test_size=0.5)
    assert r10.main_latents == (0, 1) and r10.mean_absorption_fraction == 0.0
    # the logistic ground-truth probe (SAEBench's default) agrees with the true direction
    r_lr = feature_absorption(sae, X, parent, max_k=1, test_size=0.5)
    assert r_lr.mean_absorption_fraction == pytest.approx(r.mean_absorption_fraction, abs=0.05)


def test_feature_absorption_bad_input() -> None:
    X, parent, _, sae = _absorbing_world(200)
    with pytest.raises(DataError) as info:
        feature_absorption(sae, X, np.zeros(200))
    assert info.value.argument == "y"
    with pytest.raises(DataError) as info:
        feature_absorption(sae, X, parent, probe_direction=[0.0, 0.0, 0.0])
    assert info.value.argument == "probe_direction"
    with pytest.raises(ParameterError) as info:
        feature_absorption(object(), X, parent)
    assert info.value.argument == "sae"


def test_feature_recovery() -> None:
    T = np.eye(4)[:3]
    r = feature_recovery(LinearSAE(np.eye(4), np.eye(4)[[2, 0, 1, 3]]), T)
    assert r["mmcs"] == 1.0 and r["best_latent"].tolist() == [1, 2, 0]
    with pytest.raises(DataError):
        feature_recovery(LinearSAE(np.eye(4), np.eye(4)), np.eye(3))


def test_loss_recovered_is_one_for_a_perfect_reconstruction() -> None:
    pytest.importorskip("transformers")
    from trustlab.lm import ModelConfig, build_model

    model = build_model(ModelConfig("gpt2", vocab_size=12, d_model=8, n_layers=1, n_heads=2, max_len=8))
    ids = np.random.default_rng(0).integers(0, 12, (4, 8))
    perfect = LinearSAE(np.eye(8), np.eye(8), signed=True)
    r = loss_recovered(model, ids, "blocks.0.resid_post", perfect)
    assert r["ce_sae"] == pytest.approx(r["ce_orig"], abs=1e-5)
    assert r["score"] == pytest.approx(1.0, abs=1e-3) or abs(r["ce_zero"] - r["ce_orig"]) < 1e-3
    null = LinearSAE(np.zeros((8, 8)), np.eye(8), signed=True)  # reconstructs 0: the zero ablation
    r = loss_recovered(model, ids, "blocks.0.resid_post", null)
    assert r["ce_sae"] == pytest.approx(r["ce_zero"], abs=1e-5)
    with pytest.raises(DataError):
        loss_recovered(model, ids[:, :1], "blocks.0.resid_post", perfect)


def test_docs_example_runs(docs_printout) -> None:
    docs_printout(PAGE)


def test_tpp_high_for_disentangled_latents_and_low_for_mixed_ones() -> None:
    from trustlab.explain.sae_metrics import targeted_probe_perturbation

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 2000)
    X = np.eye(4)[labels] + rng.normal(0, 0.05, (2000, 4))
    clean = targeted_probe_perturbation(LinearSAE(np.eye(4), np.eye(4)), X, labels, k=1)
    # ablating class i's latent removes its feature: probe i misses its class, the others barely move
    assert clean["latents"] == {0: [0], 1: [1], 2: [2], 3: [3]}
    assert clean["score"] > 0.15
    Q, _ = np.linalg.qr(rng.normal(size=(4, 4)))  # latents mixing all classes
    mixed = targeted_probe_perturbation(LinearSAE(Q, Q.T, signed=True), X, labels, k=1)
    assert mixed["score"] < clean["score"] - 0.1
    with pytest.raises(DataError) as info:
        targeted_probe_perturbation(LinearSAE(np.eye(4), np.eye(4)), X, np.zeros(2000))
    assert info.value.argument == "labels"
    with pytest.raises(ParameterError) as info:
        targeted_probe_perturbation(LinearSAE(np.eye(4), np.eye(4)), X, labels, k=5)
    assert info.value.argument == "k"


@settings(max_examples=8, deadline=None)
@given(row=st.integers(0, 59), col=st.integers(0, 3), bad=st.sampled_from([np.nan, np.inf, -np.inf]))
def test_every_array_metric_refuses_non_finite_activations_and_a_one_valued_target(row, col, bad) -> None:
    """Activations with NaN or inf, and a target with one value: a TrustlabError naming the argument."""
    from trustlab.explain.sae_metrics import spurious_correlation_removal, targeted_probe_perturbation

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = np.arange(60) % 2
    sae = LinearSAE(np.eye(4), np.eye(4))
    Xb = X.copy()
    Xb[row, col] = bad
    calls = {
        "core_metrics": lambda A, t: core_metrics(sae, A),
        "k_sparse_probing": lambda A, t: k_sparse_probing(sae.transform(A) if t is y else A, t),
        "feature_absorption": lambda A, t: feature_absorption(sae, A, t),
        "targeted_probe_perturbation": lambda A, t: targeted_probe_perturbation(sae, A, t, k=2),
        "spurious_correlation_removal": lambda A, t: spurious_correlation_removal(sae, A, t, 1 - y),
    }
    for name, call in calls.items():
        with pytest.raises(DataError) as info:
            call(Xb, y)
        assert info.value.argument in ("X", "Z") and "NaN" in str(info.value), name
        if name != "core_metrics":
            with pytest.raises(DataError) as info:
                call(X, np.zeros(60, dtype=int))
            assert info.value.argument in ("y", "labels", "y_target"), name
