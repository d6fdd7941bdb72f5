"""trustlab.lm.internals and report: each measurement equals a brute-force recomputation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from trustlab.errors import DataError, ParameterError
from trustlab.lm import ModelConfig, build_model, get_recipe, make_data, run_with_hooks, save_model
from trustlab.lm.internals import attention_summary, early_exit, massive_values, saturation_layers
from trustlab.lm.report import inspect_model


@pytest.fixture(scope="module")
def three_block():
    return build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=3, n_heads=2), seed=1)


@pytest.fixture(scope="module")
def ids():
    return np.random.default_rng(0).integers(0, 12, size=(4, 9))


def test_massive_values_find_an_injected_query_dimension(three_block, ids):
    m = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=3, n_heads=2), seed=1)
    with torch.no_grad():
        m.model.layers[1].self_attn.q_proj.weight[8 + 3] *= 40.0  # head 1, dimension 3 of block 1
    mv = massive_values(m, ids)
    assert mv.massive["q"][1, 1, 3] and mv.massive["q"].sum() == 1
    assert mv.massive["k"].sum() == 0 and mv.massive["v"].sum() == 0
    assert mv.counts()["q"][1].tolist() == [0, 1]
    # the norms are the L2 norms over batch and sequence of the hooked projections
    q = run_with_hooks(m, ids, ["blocks.2.attn.q"])["blocks.2.attn.q"]
    np.testing.assert_allclose(mv.norms["q"][2], torch.sqrt((q**2).sum(dim=(0, 2))).numpy(), rtol=1e-5)
    assert mv.concentration()["q"][1, 1] > 5 > mv.concentration()["q"][1, 0]
    with pytest.raises(ParameterError):
        massive_values(m, ids, lam=0.5)


def test_saturation_layers_equal_brute_force(three_block, ids):
    sat = saturation_layers(three_block, ids, k=3)
    names = [f"blocks.{i}.logit_lens" for i in range(3)]
    out = run_with_hooks(three_block, ids, names)
    lens = [out[n].reshape(-1, 12) for n in names]
    final = out["logits"].reshape(-1, 12)
    for p in range(final.shape[0]):
        order = torch.argsort(final[p], descending=True)
        for r in range(3):
            holds = [
                int(torch.argsort(lens[layer][p], descending=True)[r]) == int(order[r]) for layer in range(3)
            ]
            expected = next(layer for layer in range(3) if all(holds[layer:]))
            assert sat.layers[p, r] == expected
    rate = np.mean([np.all(np.diff(row) >= 0) for row in sat.layers])
    assert sat.in_order_rate() == pytest.approx(rate)


def test_early_exit_equals_the_stability_rule(three_block, ids):
    ex = early_exit(three_block, ids)
    names = [f"blocks.{i}.logit_lens" for i in range(3)]
    out = run_with_hooks(three_block, ids, names)
    top = np.stack([out[n][:, :-1].argmax(-1).reshape(-1).numpy() for n in names])
    exits = [
        next((layer for layer in (1, 2) if top[layer - 1, p] == top[layer, p]), 2)
        for p in range(top.shape[1])
    ]
    assert ex.mean_exit_layer == pytest.approx(np.mean(exits))
    full = out["logits"][:, :-1].argmax(-1).reshape(-1).numpy()
    target = ids[:, 1:].reshape(-1)
    assert ex.accuracy_full == pytest.approx(np.mean(full == target))
    assert ex.agreement == pytest.approx(np.mean(top[exits, np.arange(len(exits))] == full))
    with pytest.raises(DataError):
        early_exit(three_block, [[1]])


def test_attention_summary_equals_direct_statistics(three_block, ids):
    a = attention_summary(three_block, ids)
    p = run_with_hooks(three_block, ids, ["blocks.2.attn.pattern"])["blocks.2.attn.pattern"]
    rows = p[:, 1, 1:, :]  # head 1, queries 1..8
    ent = -(rows * torch.log(rows.clamp_min(1e-12))).sum(-1).mean()
    assert a.entropy[2, 1] == pytest.approx(float(ent), rel=1e-5)
    assert a.first_token[2, 1] == pytest.approx(float(rows[..., 0].mean()), rel=1e-5)
    prev = np.mean([float(p[b, 1, t, t - 1]) for b in range(4) for t in range(1, 9)])
    assert a.previous_token[2, 1] == pytest.approx(prev, rel=1e-5)
    selfw = np.mean([float(p[b, 1, t, t]) for b in range(4) for t in range(1, 9)])
    assert a.self_token[2, 1] == pytest.approx(selfw, rel=1e-5)


def test_report_html_and_json_on_the_trained_model(sorting_model, tmp_path):
    model, tok, _ = sorting_model
    test, _ = make_data(get_recipe("micro-llama-sorting"), split="test")
    rep = inspect_model(model, test.tokens[:32], label="micro")
    html_path, json_path = rep.save(tmp_path / "r")
    data = json.loads(json_path.read_text())
    assert data["n_layers"] == 2 and data["n_tokens"] == 32 * 13
    assert 0 <= data["early_exit"]["accuracy_full"] <= 1 and len(data["saturation"]["mean_layers"]) == 3
    rope = data["massive_values"]["rope"]  # the Llama's RoPE profile: one share per frequency pair
    d_half = model.config.hidden_size // model.config.num_attention_heads // 2
    assert rope["length"] == 13 and len(rope["rotation"]) == d_half == len(rope["energy_share"]["q"])
    assert sum(rope["energy_share"]["k"]) == pytest.approx(1, abs=1e-3) and rope["rotation"][0] == 13
    text = html_path.read_text()
    for section in ("Massive values", "RoPE frequencies", "Top-k saturation", "Early exit", "Attention"):
        assert section in text
    assert "<script" not in text
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep")
    with pytest.raises(ParameterError):
        rep.save(tmp_path / "busy")
    # the CLI on the checkpoint folder with a corpus of number tokens
    from typer.testing import CliRunner

    from trustlab.cli import app

    save_model(model, tmp_path / "ckpt", tok)
    corpus = tmp_path / "c.txt"
    corpus.write_text(" ".join(map(str, test.tokens[:20].reshape(-1).tolist())))
    res = CliRunner().invoke(
        app, ["lm", "report", str(tmp_path / "ckpt"), "--corpus", str(corpus), "--out", str(tmp_path / "o")]
    )
    assert res.exit_code == 0, res.output
    assert "report written" in res.output and (tmp_path / "o" / "report.json").is_file()
    res = CliRunner().invoke(
        app, ["lm", "report", str(tmp_path / "ckpt"), "--corpus", str(tmp_path / "none.txt")]
    )
    assert res.exit_code == 2 and "error (--corpus)" in res.output
