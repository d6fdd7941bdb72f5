"""Row 000-16, unseen-modulus setting: LCG sequences of held-out moduli predicted in context."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from trustlab.errors import ModelError, ParameterError
from trustlab.lm import ModelConfig, TrainConfig, build_model
from trustlab.lm.lcg_moduli import (
    full_period_multipliers,
    unseen_moduli_accuracy,
    unseen_moduli_model,
    unseen_moduli_task,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _period(a: int, c: int, m: int) -> int:
    x, seen = 0, {}
    for t in range(m + 1):
        if x in seen:
            return t - seen[x]
        seen[x] = t
        x = (a * x + c) % m
    return m


def test_full_period_multipliers_give_period_m_with_every_coprime_increment():
    for m in (12, 16, 27, 30, 36, 64):
        good = set(full_period_multipliers(m).tolist())
        full = {
            a for a in range(1, m) if all(_period(a, c, m) == m for c in range(1, m) if math.gcd(c, m) == 1)
        }
        assert good == full, m


def test_task_holds_out_the_test_moduli_and_follows_the_recurrence():
    task = unseen_moduli_task([32], length=12, n_a=4, n_c=4, n_test_a=4, n_test_c=8, seed=3)
    assert task.train.vocab_size == task.test.vocab_size == 38  # int(1.2 * 32)
    assert 32 not in task.train_moduli and task.train_moduli.min() == 12 and task.train_moduli.max() == 38
    for data in (task.train, task.test):
        a, c, m = (data.latent[k][:, None] for k in "acm")
        x = data.tokens
        assert np.all((a * x[:, :-1] + c) % m == x[:, 1:]) and np.all(x < m)
        assert not data.loss_mask[:, 0].any() and data.loss_mask[:, 1:].all()
    assert set(task.test.latent["m"]) == {32} and len(task.test) == 32
    assert set(task.test.latent["a"]) <= set(full_period_multipliers(32).tolist())
    assert all(math.gcd(int(c), 32) == 1 for c in task.test.latent["c"])
    # every training sequence is full-period and its modulus >= length: no number repeats inside it
    assert all(len(set(row)) == 12 for row in task.train.tokens)
    again = unseen_moduli_task([32], length=12, n_a=4, n_c=4, n_test_a=4, n_test_c=8, seed=3)
    assert np.array_equal(again.train.tokens, task.train.tokens) and again.digest() == task.digest()


def test_task_options_subset_and_exclusion():
    task = unseen_moduli_task([64], length=16, n_train_moduli=10, n_a=2, n_c=3, n_per_triple=2, seed=1)
    assert len(task.train_moduli) == 10 and 64 not in task.train_moduli
    ex = unseen_moduli_task([32], length=12, n_test_a=2, n_test_c=4, exclude_test_values=True)
    assert not set(ex.train.latent["a"]) & set(ex.test.latent["a"])
    assert not set(ex.train.latent["c"]) & set(ex.test.latent["c"])


def test_task_errors_name_the_argument():
    with pytest.raises(ParameterError, match="test_moduli"):
        unseen_moduli_task([40], length=8, max_modulus=32)
    with pytest.raises(ParameterError, match="min_modulus"):
        unseen_moduli_task([12], length=8, min_modulus=12, max_modulus=12)
    with pytest.raises(ParameterError, match="max_modulus"):
        unseen_moduli_task([16], length=8, max_modulus=2**31)
    with pytest.raises(ParameterError, match="length"):
        unseen_moduli_task([16], length=2)


class _Scripted(torch.nn.Module):
    """Predicts the true next number shifted by ``shift`` (right mod q when q divides shift)."""

    def __init__(self, task, shift):
        super().__init__()
        self.emb = torch.nn.Embedding(task.test.vocab_size, 2)
        self.next = {tuple(row[:-1]): row[1:] for row in task.test.tokens}
        self.vocab, self.shift, self.m = task.test.vocab_size, shift, task.test.latent["m"]

    def get_input_embeddings(self):
        return self.emb

    def forward(self, input_ids):
        rows = [self.next[tuple(r.tolist()[:-1])] for r in input_ids]
        nxt = (np.stack(rows) + self.shift) % self.m[:, None]
        logits = torch.zeros(*input_ids.shape, self.vocab)
        logits[:, :-1].scatter_(-1, torch.as_tensor(nxt)[..., None], 1.0)
        return SimpleNamespace(logits=logits)


def test_accuracy_counts_exact_and_residue_hits():
    task = unseen_moduli_task([16], length=10, n_test_a=4, n_test_c=8)
    exact = unseen_moduli_accuracy(_Scripted(task, 0), task)
    assert np.all(exact.accuracy == 1.0) and exact.per_modulus == {16: 1.0}
    assert all(np.all(r == 1.0) for r in exact.residue_accuracy.values())
    assert np.array_equal(exact.above_max, exact.target_above_max) and exact.above_max[0] > 0
    off = unseen_moduli_accuracy(_Scripted(task, 4), task)  # right mod 2 and 4, wrong mod 8
    assert np.all(off.accuracy == 0.0) and off.band(1) == (0.0, 0.0)
    assert np.all(off.residue_accuracy[4] == 1.0) and np.all(off.residue_accuracy[8] == 0.0)
    assert off.chance == 1 / 16 and off.n_sequences == 32 and 0.0 <= off.bigram_baseline <= 1.0


def test_accuracy_errors_and_cached_training(tmp_path):
    task = unseen_moduli_task([16], length=8, n_test_a=2, n_test_c=4)
    small = build_model(ModelConfig("gpt2", vocab_size=8, d_model=8, n_layers=1, n_heads=2))
    with pytest.raises(ModelError, match="vocabulary"):
        unseen_moduli_accuracy(small, task)
    with pytest.raises(ParameterError, match="divisors"):
        unseen_moduli_accuracy(
            build_model(ModelConfig("gpt2", vocab_size=19, d_model=8, n_layers=1, n_heads=2)), task, [1]
        )
    cfg, tcfg = (
        ModelConfig("gpt2", vocab_size=2, d_model=8, n_layers=1, n_heads=2),
        TrainConfig(steps=3, batch_size=4),
    )
    first = unseen_moduli_model(task, cfg, tcfg, cache_dir=tmp_path)
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith("lcg-um-")]
    assert (folder / "done").is_file()
    second = unseen_moduli_model(task, cfg, tcfg, cache_dir=tmp_path)  # loaded, not retrained
    for p, q in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.slow  # one model of 1000 steps trained on first use (about 75 s CPU), then cached
@pytest.mark.claims
def test_claim_unseen_modulus_predicted_in_context_slow():
    # Held out: m = 64 (as the paper's 2048 = 2^11, a prime power), 16 x 32 Hull-Dobell pairs, 512 sequences;
    # trained on the 52 moduli 24..76 other than 64. Tolerances: 3 standard errors over the 512 sequences.
    task = unseen_moduli_task([64], length=24, n_a=64, n_c=64, n_per_triple=4)
    res = unseen_moduli_accuracy(unseen_moduli_model(task), task)
    assert res.n_sequences == 512 and 64 not in task.train_moduli
    late, late_se = res.band(12)  # 12 to 23 numbers of context
    early, _ = res.band(1, 4)  # 1 to 3 numbers of context
    assert late > max(res.chance, res.bigram_baseline) + 3 * late_se, (late, res.chance, res.bigram_baseline)
    rise = res.hits[:, 11:].mean(axis=1) - res.hits[:, :3].mean(axis=1)  # paired per sequence
    assert rise.mean() > 3 * rise.std(ddof=1) / np.sqrt(len(rise)), (early, late)
    # Digit-wise: the low prime-power digits of the unseen modulus are right once their look-back fits
    # in the context (x[t+1] = x[t+1-r] mod r for r | m): mod 4 from position 4 on, against 1/4 by chance.
    mod4 = res.residue_accuracy[4]
    se4 = np.hypot(*np.sqrt(mod4[[0, 3]] * (1 - mod4[[0, 3]]) / res.n_sequences))
    assert mod4[11:].mean() >= 0.9 and res.residue_accuracy[2][11:].mean() >= 0.95, res.residue_accuracy
    assert mod4[3] - mod4[0] > 3 * se4, mod4
    # Modulus estimation from the context: the predictions exceed the largest number seen less often than
    # the true next numbers do (the model's working estimate of m is tied to the context's maximum).
    pred_up, true_up = res.above_max[:3].mean(), res.target_above_max[:3].mean()
    se_up = np.hypot(
        *np.sqrt(np.array([pred_up, true_up]) * (1 - np.array([pred_up, true_up])) / res.n_sequences)
    )
    assert true_up - pred_up > 3 * se_up, (res.above_max, res.target_above_max)
