"""trustlab.lm.mib_causal: attention-head sites on MIB's causal-variable track."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.errors import ParameterError
from trustlab.lm._mib_featurizers import collect, intervened_logits, out_projection
from trustlab.lm.hooks import _layout, run_with_hooks
from trustlab.lm.mib_causal import causal_variable_localization, sorting_pairs

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra threads only contend


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_head_sites_are_the_slices_of_the_output_projections_input(tiny_models, arch) -> None:
    # A head site is head h's output before W_O: the heads' vectors side by side times W_O (plus its bias)
    # are the attention output, and adding delta to head h moves that output by delta @ W_O[h rows].
    model = tiny_models[arch].eval()
    lay = _layout(model)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 10, (3, 6), generator=gen)
    pos = np.array([5, 2, 4])
    rows = np.arange(3)
    layer = len(lay.layers) - 1
    sites = [(layer, h) for h in range(lay.n_heads)]
    got, _ = collect(model, ids.numpy(), pos, sites)
    proj = out_projection(lay, layer)
    w = proj.weight.T if isinstance(proj, torch.nn.Linear) else proj.weight  # (H * d_head, d)
    bias = proj.bias if getattr(proj, "bias", None) is not None else torch.zeros(w.shape[1])
    z = torch.as_tensor(np.concatenate([got[s] for s in sites], axis=1), dtype=w.dtype)
    attn_out = run_with_hooks(model, ids, [f"blocks.{layer}.attn_out"])[f"blocks.{layer}.attn_out"]
    torch.testing.assert_close(z @ w + bias, attn_out[rows, pos], atol=1e-5, rtol=1e-5)
    delta = torch.randn(3, lay.d_head, generator=gen)
    head = 1
    via_head = intervened_logits(model, ids, torch.as_tensor(pos), (layer, head), delta)
    moved = delta @ w[head * lay.d_head : (head + 1) * lay.d_head]
    t_rows, t_pos = torch.as_tensor(rows), torch.as_tensor(pos)

    def edit(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[t_rows, t_pos] = x[t_rows, t_pos] + moved
        return x

    ref = run_with_hooks(model, ids, [], edits={f"blocks.{layer}.attn_out": edit})["logits"][t_rows, t_pos]
    torch.testing.assert_close(via_head, ref, atol=1e-5, rtol=1e-5)


def test_head_sites_score_per_head_and_refuse_bad_heads(tiny_models) -> None:
    model = tiny_models["llama"]
    tr, te = sorting_pairs(8, n_items=4, seed=0), sorting_pairs(8, n_items=4, seed=1)
    res = causal_variable_localization(model, tr, te, methods=["full"], heads="all", filter_correct=False)
    n_layers, n_heads = len(_layout(model).layers), _layout(model).n_heads
    assert res.iia.shape == (1, n_layers * n_heads) and res.heads is not None
    assert res.layers.tolist() == [layer for layer in range(n_layers) for _ in range(n_heads)]
    assert res.n_features[0, 0] == _layout(model).d_head
    assert list(res.to_frame().columns) == ["method", "layer", "head", "iia", "train_iia", "n_features"]
    for bad in ([(0, n_heads)], [(n_layers, 0)], [], "some", [[0, 1, 2]]):
        with pytest.raises(ParameterError, match="heads"):
            causal_variable_localization(model, tr, te, methods=["full"], heads=bad, filter_correct=False)
    with pytest.raises(ParameterError, match="not both"):
        causal_variable_localization(model, tr, te, methods=["full"], heads="all", layers=[0])


@pytest.mark.claims
def test_claim_the_minimum_reaches_the_separator_through_one_block_zero_head(sorting_model) -> None:
    # The 2x2 sorting Llama: moving head a0.h1's output at the separator moves the minimum for most pairs;
    # the block-1 heads carry none of it (the minimum is already in the stream), and a random 4-dim subspace
    # of a head's 16 dims moves almost nothing. Measured (249 test pairs): a0.h0 0.181, a0.h1 0.643,
    # block 1 0.000; random subspace <= 0.048. Tolerances: 3 binomial standard errors at 249 pairs (~0.09).
    model = sorting_model[0]
    tr, te = sorting_pairs(64, variable="min", seed=0), sorting_pairs(256, variable="min", seed=1)
    res = causal_variable_localization(model, tr, te, methods=["full", "random"], heads="all")
    full, rand = res.iia
    site = {(int(a), int(b)): j for j, (a, b) in enumerate(zip(res.layers, res.heads, strict=True))}
    assert full[site[(0, 1)]] > 0.5 and full[site[(0, 1)]] > full[site[(0, 0)]] + 0.2
    assert full[site[(1, 0)]] < 0.03 and full[site[(1, 1)]] < 0.03
    assert rand.max() < 0.1


@pytest.mark.claims
@pytest.mark.slow  # six featurizers at four head sites, an SAE per site: ~10 s CPU
def test_claim_head_sites_das_compact_sae_not_better_than_neurons_slow(sorting_model) -> None:
    # MIB's findings at head sites of the 2x2 sorting Llama, variable `min` (measured, 249 test pairs):
    # at a0.h1 full 0.643, DBM 0.643 (16 of 16 dims), PCA 0.643, SAE 0.635, DAS 0.582 from 4 of 16 dims,
    # random 4-dim subspace 0.000; block-1 heads 0.000 for every featurizer.
    model = sorting_model[0]
    tr, te = sorting_pairs(256, variable="min", seed=0), sorting_pairs(256, variable="min", seed=1)
    res = causal_variable_localization(model, tr, te, heads="all")
    iia = {m: row for m, row in zip(res.methods, res.iia, strict=True)}
    j = next(k for k, (a, b) in enumerate(zip(res.layers, res.heads, strict=True)) if (a, b) == (0, 1))
    late = res.layers == 1
    assert all(row[late].max() < 0.03 for row in iia.values())
    assert iia["das"][j] > iia["full"][j] - 0.1 and res.n_features[res.methods.index("das"), j] == 4
    assert iia["dbm-sae"][j] <= iia["dbm"][j] + 0.03 and iia["dbm-sae"].mean() <= iia["dbm"].mean() + 0.03
    assert iia["random"][j] < 0.1 and iia["das"][j] > iia["random"][j] + 0.4
