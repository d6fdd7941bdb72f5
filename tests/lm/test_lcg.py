"""Row 000-16: in-context prediction of LCG sequences with held-out (a, c), fixed modulus."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.errors import ParameterError
from trustlab.lm import ModelConfig, TrainConfig, build_model, lcg_sequences, lcg_split, train_model
from trustlab.lm.lcg import lcg_accuracy, lcg_data_scaling, residue_probe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def scaling(one_torch_thread):
    # m = 16: 32 full-period pairs, 24 for training, 8 held out; 128 held-out sequences.
    return lcg_data_scaling(16, [1, 24], train_config=TrainConfig(steps=100, lr=5e-3, warmup=5))


@pytest.mark.claims
def test_claim_heldout_accuracy_rises_with_the_number_of_training_pairs(scaling):
    # Tolerance: 3 standard errors over the 128 evaluated sequences (per-sequence means).
    assert scaling.n_sequences == 128
    gap = scaling.accuracy[1] - scaling.accuracy[0]
    assert gap > 3 * np.hypot(*scaling.stderr), scaling
    assert scaling.accuracy[1] > scaling.chance + 3 * scaling.stderr[1]


@pytest.mark.slow  # four models of 400 steps: about a minute
@pytest.mark.claims
def test_claim_heldout_accuracy_curve_over_pair_counts_slow():
    res = lcg_data_scaling(16, [1, 4, 12, 24], train_config=TrainConfig(steps=400, lr=3e-3, warmup=20))
    tol = 3 * np.hypot(res.stderr[:-1], res.stderr[1:])
    assert np.all(np.diff(res.accuracy) > -tol), res  # no significant drop along the curve
    assert res.accuracy[-1] - res.accuracy[0] > 3 * np.hypot(res.stderr[0], res.stderr[-1]), res


@pytest.mark.slow  # one model of 400 steps: about 20 s
@pytest.mark.claims
def test_claim_embeddings_separate_residues_after_training_slow():
    # 16 residue tokens: 14/16 correct has probability < 1e-6 at the mod-4 chance 1/4.
    train, _ = lcg_split(16, 0.25)
    cfg = ModelConfig("gpt2", vocab_size=16, d_model=32, n_layers=2, n_heads=4, max_len=12)
    untrained = residue_probe(build_model(cfg), 16, [2, 4])
    model = build_model(cfg)
    data = lcg_sequences(train, 16, 12, n_per_param=2048 // len(train), seed=2)
    train_model(model, data, TrainConfig(steps=400, lr=3e-3, warmup=20))
    probe = residue_probe(model, 16, [2, 4])
    assert probe[2] >= 14 / 16 and probe[4] >= 14 / 16, (probe, untrained)
    assert untrained[4] < 14 / 16


def test_accuracy_and_probe_shapes_and_errors():
    model = build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_len=8))
    data = lcg_sequences(np.array([[5, 3], [1, 1]]), 8, 6)
    acc = lcg_accuracy(model, data, min_position=2)
    assert acc.shape == (2,) and np.all((acc >= 0) & (acc <= 1))
    probe = residue_probe(model, 8)
    assert set(probe) == {2, 4} and all(0 <= v <= 1 for v in probe.values())
    with pytest.raises(ParameterError, match="min_position"):
        lcg_accuracy(model, data, min_position=6)
    with pytest.raises(ParameterError, match="divisors"):
        residue_probe(model, 8, [5])
    with pytest.raises(ParameterError, match="n_pairs"):
        lcg_data_scaling(16, [25])


def test_probe_finds_parity_in_constructed_embeddings():
    model = build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2, max_len=8))
    w = model.get_input_embeddings().weight.data
    w.zero_()
    w[:, 0] = torch.as_tensor((np.arange(8) % 2) * 2.0 - 1.0)
    w[:, 1] = torch.as_tensor(np.arange(8) * 0.01)
    assert residue_probe(model, 8, [2])[2] == 1.0
    assert residue_probe(model, 8, [4])[4] < 1.0  # parity alone does not separate residues mod 4
