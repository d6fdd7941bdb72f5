"""Row 004-10 (Jin et al., ICML 2025): massive values in Q and K of a RoPE model, and disrupting
them hurts a contextual task far more than a parametric one (random dimensions: no harm).

The lab model (2 blocks, width 64, Llama) trains once into the cache (about 20 s CPU) and is read
from there afterwards; the held-out set has 100 sequences per task, 10 scored tokens each.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.errors import DataError, ParameterError
from trustlab.lm import ModelConfig, TokenData, build_model, run_with_hooks
from trustlab.lm.massive import (
    contextual_parametric_task,
    disrupt_massive_values,
    disruption_study,
    load_massive_lab,
    rope_frequency_profile,
    rope_low_frequency,
    task_accuracy,
)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models on shared cores: one thread is fastest
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    return build_model(ModelConfig("llama", vocab_size=11, d_model=16, n_layers=2, n_heads=2, max_len=16))


def test_task_layout():
    d = contextual_parametric_task(4, n_symbols=8, length=3, seed=2)
    ctx, par = d.tokens[0], d.tokens[1]
    assert ctx[0] == 8 and ctx[4] == 10 and (ctx[1:4] == ctx[5:]).all()
    assert d.loss_mask[0].tolist() == [False] * 5 + [True] * 3
    fmap = np.random.default_rng(123).permutation(8)
    assert par[0] == 9 and (fmap[par[1:7:2]] == par[2:7:2]).all()
    assert d.loss_mask[1, 2:7:2].all() and d.loss_mask[1].sum() == 3


def test_disruption_sets_the_top_dims_to_their_mean(small):
    ids = np.random.default_rng(0).integers(0, 11, (3, 12))
    clean = run_with_hooks(small, ids, ["blocks.1.attn.q", "blocks.0.attn.k", "blocks.0.attn.v"])
    edits = disrupt_massive_values(small, ids, n_dims=2)
    assert sorted(edits) == [f"blocks.{i}.attn.{x}" for i in range(2) for x in "kq"]
    for name in ("blocks.1.attn.q", "blocks.0.attn.k"):  # one edit at a time: later blocks see the change
        x, y = clean[name], run_with_hooks(small, ids, [name], edits={name: edits[name]})[name]
        top = torch.linalg.vector_norm(x, dim=(0, 2)).argsort(dim=-1, descending=True)[:, :2]
        changed = (x != y).any(dim=(0, 2))
        for h in range(x.shape[1]):
            assert set(torch.nonzero(changed[h]).ravel().tolist()) == set(top[h].tolist())
            for d in top[h].tolist():
                assert torch.allclose(y[:, h, :, d], x[:, h, :, d].mean().expand_as(y[:, h, :, d]))
    ctrl = disrupt_massive_values(small, ids, n_dims=2, control=True, random_state=1)
    name = "blocks.1.attn.q"
    out = run_with_hooks(small, ids, [name], edits={name: ctrl[name]})[name]
    x = clean["blocks.1.attn.q"]
    top = torch.linalg.vector_norm(x, dim=(0, 2)).argsort(dim=-1, descending=True)[:, :2]
    changed = (x != out).any(dim=(0, 2))
    assert changed.sum() == 2 * x.shape[1] and not changed.gather(1, top).any()


def test_bad_input(small):
    ids = [[1, 2, 3]]
    with pytest.raises(ParameterError, match="n_dims"):
        disrupt_massive_values(small, ids, n_dims=0)
    with pytest.raises(ParameterError, match="n_dims"):
        disrupt_massive_values(small, ids, n_dims=5)
    with pytest.raises(ParameterError, match="kinds"):
        disrupt_massive_values(small, ids, kinds=("o",))
    with pytest.raises(DataError, match="task"):
        task_accuracy(small, TokenData(np.ones((2, 3), np.int64), np.ones((2, 3), bool), 11))
    with pytest.raises(ParameterError, match="arch"):
        load_massive_lab("mixtral")


def test_rope_low_frequency_half():
    assert rope_low_frequency(np.arange(16), 16).tolist() == ([False] * 4 + [True] * 4) * 2


def test_rope_frequency_profile_pairs_dims_and_agrees_with_the_low_frequency_half():
    norms = np.zeros((2, 3, 8))
    norms[..., 1] = norms[..., 5] = 1.0  # one RoPE pair (d, d + 4) at frequency index 1
    norms[0, 0, 3] = 2.0  # frequency index 3: the low-frequency half
    p = rope_frequency_profile(norms, length=100, theta=10000.0)
    total = 2 * 6 + 4
    np.testing.assert_allclose(p.energy_share, [0, 12 / total, 0, 4 / total])
    np.testing.assert_allclose(p.rotation, 100 * 10000.0 ** (-np.arange(4) / 4))
    assert p.low_frequency_share() == pytest.approx(4 / total)
    assert rope_low_frequency([3], 8)[0] and not rope_low_frequency([1, 5], 8).any()
    assert p.share_rotating(1.0) == pytest.approx(12 / total)  # index 3 turns 0.1 rad over 100 tokens


@pytest.mark.parametrize(
    ("norms", "kw", "match"),
    [
        (np.ones((2, 7)), {"length": 8}, "even head width"),
        (np.full((2, 8), np.nan), {"length": 8}, "finite"),
        (np.zeros((2, 8)), {"length": 8}, "not all zero"),
        (np.ones((2, 8)), {"length": 0}, "length"),
        (np.ones((2, 8)), {"length": 8, "theta": 1.0}, "theta"),
    ],
)
def test_rope_frequency_profile_bad_input(norms, kw, match):
    with pytest.raises((DataError, ParameterError), match=match):
        rope_frequency_profile(norms, **kw)


@pytest.mark.claims
def test_claim_disrupting_massive_qk_hurts_context_not_parameters():
    model = load_massive_lab("llama")
    s = disruption_study(model, contextual_parametric_task(200, seed=1))
    # 1,000 scored tokens per task: one standard error of an accuracy is at most 0.016.
    assert s.clean["contextual"] >= 0.95 and s.clean["parametric"] >= 0.95, s.clean
    drops = s.drops()  # measured: contextual 0.19, parametric 0.012
    assert drops["contextual"] >= 0.1 and drops["contextual"] > drops["parametric"] + 0.1, drops
    for t in ("contextual", "parametric"):  # random dimensions: measured no change
        assert s.clean[t] - s.random[t] <= 0.03, s.random
    # concentration (max/mean per head) higher in Q and K than in V: measured 2.66, 2.36 vs 1.73
    assert min(s.concentration["q"], s.concentration["k"]) > s.concentration["v"] + 0.3, s.concentration


@pytest.mark.slow  # trains a second (GPT-2) lab model, about 13 s CPU on first use
@pytest.mark.claims
def test_claim_learned_positions_have_no_qk_concentration():
    rope = disruption_study(load_massive_lab("llama"), contextual_parametric_task(400, seed=1))
    gpt2 = disruption_study(load_massive_lab("gpt2"), contextual_parametric_task(400, seed=1))
    # measured GPT-2: q 1.52, k 1.53, v 1.70; disruption drops contextual by 0.004
    assert (
        max(gpt2.concentration["q"], gpt2.concentration["k"])
        < min(rope.concentration["q"], rope.concentration["k"]) - 0.5
    )
    assert gpt2.drops()["contextual"] < rope.drops()["contextual"] - 0.1
