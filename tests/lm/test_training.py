"""trustlab.lm.training: the loop learns, is deterministic for a seed, and rejects mismatched data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.errors import DataError, ParameterError
from trustlab.lm import (
    ModelConfig,
    TrainConfig,
    build_model,
    evaluate_loss,
    get_recipe,
    make_data,
    sorting_task,
    train_model,
)


def test_trained_model_sorts_far_better_than_chance(sorting_model):
    model, _tok, res = sorting_model
    test, _ = make_data(get_recipe("micro-llama-sorting"), split="test")
    loss = evaluate_loss(model, test)
    # chance over the 12 values is ln 12 = 2.48 nats; the first steps start there
    assert res.losses[:3].mean() > 2.2
    assert loss < 0.8 and res.losses[-10:].mean() < 0.8
    # greedy accuracy on the sorted half
    ids = torch.as_tensor(test.tokens[:200])
    pred = model(ids).logits.argmax(-1)[:, :-1]
    mask = torch.as_tensor(test.loss_mask[:200])[:, 1:]
    acc = (pred == ids[:, 1:])[mask].float().mean().item()
    assert acc > 0.6, acc


def test_schedule_warmup_then_cosine_and_clip():
    cfg = TrainConfig(steps=101, lr=1.0, warmup=10, min_lr_ratio=0.1)
    lrs = np.array([cfg.lr_at(s) for s in range(101)])
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert lrs[10] == pytest.approx(1.0) and lrs[100] == pytest.approx(0.1)
    assert lrs[55] == pytest.approx(0.55)
    assert np.all(np.diff(lrs[10:]) <= 1e-12)


def test_deterministic_for_a_seed_and_leaves_global_rng_alone():
    data = sorting_task(64, 3, n_values=5, seed=0)
    cfg = ModelConfig("mixtral", vocab_size=6, d_model=16, n_layers=1, n_heads=2, n_experts=2, top_k=1)
    runs = []
    for seed in (1, 1, 2):
        m = build_model(cfg)
        torch.manual_seed(123)
        res = train_model(m, data, TrainConfig(steps=4, batch_size=8, seed=seed))
        runs.append((res.losses, m.lm_head.weight.detach().clone(), torch.rand(1)))
    assert np.array_equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert not np.array_equal(runs[0][0], runs[2][0])
    assert torch.equal(runs[0][2], runs[2][2])  # the caller's torch generator is untouched


def test_mismatched_or_bad_data_is_a_data_error():
    m = build_model(ModelConfig("gpt2", vocab_size=5, d_model=16, n_layers=1, n_heads=2, max_len=8))
    with pytest.raises(DataError, match="tokenizer does not match") as info:
        train_model(m, sorting_task(4, 2, n_values=8), TrainConfig(steps=1))
    assert info.value.argument == "data"
    with pytest.raises(DataError, match="longer than the model's context"):
        train_model(m, sorting_task(4, 5, n_values=3), TrainConfig(steps=1))
    with pytest.raises(DataError):
        train_model(m, "not data", TrainConfig(steps=1))  # type: ignore[arg-type]
    with pytest.raises(DataError, match="became"):
        train_model(m, sorting_task(8, 2, n_values=3), TrainConfig(steps=2, lr=1e30, grad_clip=1e30))


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"steps": 0}, "steps"),
        ({"warmup": 5, "steps": 5}, "warmup"),
        ({"lr": -1.0}, "lr"),
        ({"weight_decay": 2}, "weight_decay"),
    ],
)
def test_bad_train_config_names_the_field(kwargs, argument):
    with pytest.raises(ParameterError) as info:
        TrainConfig(**kwargs)
    assert info.value.argument == argument
