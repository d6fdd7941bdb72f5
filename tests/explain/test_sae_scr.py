"""SAEBench's spurious correlation removal (explain/_sae_scr.py) on hand-built autoencoders.

The activations carry two independent binary concepts, each on two axes (one a value, as an
SAE's ReLU latents carry "male" and "female" separately), the spurious one twice as strong,
plus 28 noise axes. An autoencoder whose latents are the axes holds the spurious concept's
directions exactly: ablating its two latents removes the concept from the biased probe.
"""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.errors import DataError, ParameterError
from trustlab.explain.sae_data import make_bios_corpus
from trustlab.explain.sae_metrics import SCRResult, spurious_correlation_removal


class LinearSAE:
    """f(x) = relu(x @ E) (or x @ E when ``signed``), x_hat = f @ W_dec_ + b_dec_."""

    def __init__(self, E: np.ndarray, D: np.ndarray, signed: bool = False) -> None:
        self.E, self.W_dec_, self.b_dec_, self.signed = E, D, np.zeros(D.shape[1]), signed

    def transform(self, X: np.ndarray) -> np.ndarray:
        Z = np.asarray(X, dtype=float) @ self.E
        return Z if self.signed else np.maximum(Z, 0.0)


N = 1200
CLEAN = LinearSAE(np.eye(32), np.eye(32))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    t, s = rng.integers(0, 2, N), rng.integers(0, 2, N)
    X = np.c_[np.c_[t, 1 - t, 2 * s, 2 - 2 * s] + rng.normal(0, 0.3, (N, 4)), rng.normal(0, 0.3, (N, 28))]
    return X, t, s, spurious_correlation_removal(CLEAN, X, t, s)


def test_sae_holding_the_spurious_direction_scores_near_one_and_random_latents_near_zero(data) -> None:
    X, t, s, r = data
    assert isinstance(r, SCRResult)
    # default ablation sizes: SAEBench's up to the dictionary size; the headline is n = 20
    assert list(r.scores.index) == [2, 5, 10, 20] and r.score == r.scores.loc[20, "scr"]
    # the biased probe reads the stronger, spurious concept: chance on the target
    assert r.direction == "ablate_spurious"
    assert abs(r.base_accuracy["target"] - 0.5) < 0.1 and r.oracle_accuracy["target"] > 0.95
    assert sorted(r.latents["spurious"][:2]) == [2, 3] and sorted(r.latents["target"][:2]) == [0, 1]
    # held-out accuracy over n_test rows: one standard error is at most sqrt(0.25 / n_test)
    se = np.sqrt(0.25 / r.n_test) / (r.oracle_accuracy["target"] - r.base_accuracy["target"])
    assert r.scores.loc[2, "scr"] > 1 - 3 * se
    # ablating random latents: about zero on average
    rand = [
        spurious_correlation_removal(
            CLEAN, X, t, s, n_values=[2], selection="random", random_state=k
        ).scores.loc[2, "scr"]
        for k in range(5)
    ]
    assert abs(np.mean(rand)) < 0.15 and r.scores.loc[2, "scr"] - np.mean(rand) > 0.7


def test_entangled_latents_remove_less(data) -> None:
    X, t, s, clean = data
    rng = np.random.default_rng(1)
    Q = np.eye(32)
    Q[:4, :4] = np.linalg.qr(rng.normal(size=(4, 4)))[0]  # every latent mixes both concepts
    mixed = spurious_correlation_removal(LinearSAE(Q, Q.T, signed=True), X, t, s, n_values=[2])
    assert mixed.score < clean.scores.loc[2, "scr"] - 0.3


def test_bad_input_names_the_argument(data) -> None:
    X, t, s, _ = data
    sae = CLEAN
    cases = [
        (dict(sae=object()), ParameterError, "sae"),
        (dict(y_spurious=np.zeros(N)), DataError, "y_spurious"),
        (dict(y_spurious=t), DataError, "y_spurious"),  # no row where the two concepts differ
        (dict(y_target=t[:10]), DataError, "y_target"),
        (dict(X=X[:, :5]), DataError, "X"),
        (dict(n_values=[0]), ParameterError, "n_values"),
        (dict(n_values=[33]), ParameterError, "n_values"),
        (dict(n_values="a"), ParameterError, "n_values"),
        (dict(selection="best"), ParameterError, "selection"),
        (dict(test_size=1.5), ParameterError, "test_size"),
    ]
    for change, error, name in cases:
        kwargs = dict(sae=sae, X=X, y_target=t, y_spurious=s) | change
        with pytest.raises(error) as info:
            spurious_correlation_removal(**kwargs)
        assert info.value.argument == name, (change, info.value)


def test_bios_corpus_concepts_are_independent_and_carried_by_the_words() -> None:
    c = make_bios_corpus(400, random_state=0)
    assert len(c.texts) == 400
    cells = np.bincount(2 * c.profession + c.gender, minlength=4)
    assert cells.min() > 400 / 4 - 3 * np.sqrt(400 * 3 / 16)  # each cell about a quarter
    for text, p, g in zip(c.texts, c.profession, c.gender, strict=True):
        words = set(text.replace(".", " ").replace(",", " ").lower().split())
        assert ({"he", "his"} & words) if g == 0 else ({"she", "her"} & words)
        assert ("nurse" in words) == bool(p)
