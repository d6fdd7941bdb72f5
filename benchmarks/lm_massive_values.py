"""Massive-value disruption (row 004-10): trustlab's hook edits beside plain torch hooks.

Same model (the cached 2-block Llama of :func:`trustlab.lm.massive.load_massive_lab`), same
held-out sequences, same dimensions (the top-2 per block, head, Q and K by L2 norm over the
tokens, set to their mean). The peer is what the authors' code does: forward hooks on
``self_attn.q_proj`` / ``k_proj`` that overwrite those columns of the projection outputs, then a
plain forward pass. Agreement: the largest logit difference and the per-task accuracies.

A second table places the Q/K energy of Llama models trained on real English text among RoPE's
frequencies (:func:`trustlab.lm.massive.rope_frequency_profile`) at two context lengths: the
shipped ``small-llama-english`` (64 tokens) and, outside ``--quick``, the same recipe at 256 tokens
(800 steps, about 5 min CPU on one thread). The paper puts massive values in the frequencies that
barely turn over the context.
"""

from __future__ import annotations

import statistics
import time

import torch


def _median_time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _peer(model, ids: torch.Tensor, n_dims: int) -> torch.Tensor:
    layers = model.model.layers
    n_heads, d_head = (
        model.config.num_attention_heads,
        model.config.hidden_size // model.config.num_attention_heads,
    )
    handles, plan = [], {}
    with torch.no_grad():  # rank the dimensions on the clean pass
        store = {}
        hs = [
            getattr(layer.self_attn, f"{x}_proj").register_forward_hook(
                lambda m, a, o, key=(i, x): store.__setitem__(key, o.detach())
            )
            for i, layer in enumerate(layers)
            for x in "qk"
        ]
        model(input_ids=ids)
        for h in hs:
            h.remove()
    for key, out in store.items():
        x = out.view(*out.shape[:2], n_heads, d_head)
        top = torch.linalg.vector_norm(x, dim=(0, 1)).argsort(dim=-1, descending=True)[:, :n_dims]
        cols = (torch.arange(n_heads)[:, None] * d_head + top).ravel()
        plan[key] = (cols, out.mean(dim=(0, 1))[cols])

    def hook(m, a, o, key):
        cols, mean = plan[key]
        o = o.clone()
        o[..., cols] = mean
        return o

    for i, layer in enumerate(layers):
        for x in "qk":
            proj = getattr(layer.self_attn, f"{x}_proj")
            handles.append(proj.register_forward_hook(lambda m, a, o, key=(i, x): hook(m, a, o, key)))
    try:
        with torch.no_grad():
            return model(input_ids=ids).logits
    finally:
        for h in handles:
            h.remove()


def _acc(logits: torch.Tensor, data) -> dict[str, float]:
    ok = logits.argmax(-1).numpy()[:, :-1] == data.tokens[:, 1:]
    mask, task = data.loss_mask[:, 1:], data.latent["task"]
    return {
        t: float(ok[(task == j)[:, None] & mask].mean()) for j, t in enumerate(("contextual", "parametric"))
    }


def _english_model(length: int):
    from trustlab.lm import load_shipped
    from trustlab.lm.recipes import get_recipe, train_recipe

    if length == 64:
        model, _, _ = load_shipped("small-llama-english")
        return model, get_recipe("small-llama-english")
    recipe = get_recipe(
        {
            "model": {"arch": "llama", "d_model": 96, "n_layers": 4, "n_heads": 4, "max_len": length},
            "data": {"kind": "english", "vocab_size": 1024, "length": length},
            "train": {"steps": 800, "batch_size": 24 * 64 // length, "lr": 3e-3, "warmup": 30},
        }
    )
    return train_recipe(recipe)[0], recipe


def _frequency_rows(quick: bool) -> list[dict]:
    import numpy as np

    from trustlab._threads import one_thread
    from trustlab.lm.internals import massive_values
    from trustlab.lm.massive import rope_frequency_profile
    from trustlab.lm.recipes import make_data

    rows = []
    for length in [64] if quick else [64, 256]:
        with one_thread():
            model, recipe = _english_model(length)
            data, _ = make_data(recipe, split="test")
            mv = massive_values(model, np.asarray(data.tokens)[: 16384 // length])
        row: dict = {"context": length}
        for x in "qk":
            p = rope_frequency_profile(mv.norms[x], length=length)
            row[f"{x} share j<=4 / j>=6"] = f"{p.energy_share[:5].sum():.2f} / {p.energy_share[6:].sum():.2f}"
            row[f"{x} low-freq half"] = round(p.low_frequency_share(), 3)
            row[f"{x} turning >= 2 rad"] = round(p.share_rotating(2.0), 3)
        conc = mv.concentration()
        row["max/mean q / k / v"] = " / ".join(f"{float(conc[x].max()):.2f}" for x in "qkv")
        row["dims over lam = 5"] = int(sum(int(m.sum()) for m in mv.massive.values()))
        rows.append(row)
    return rows


def run(quick: bool = False) -> dict:
    from trustlab.lm import run_with_hooks
    from trustlab.lm.massive import contextual_parametric_task, disrupt_massive_values, load_massive_lab

    model = load_massive_lab("llama")
    repeats = 3 if quick else 7
    rows = []
    for n in [400] if quick else [400, 2000]:
        data = contextual_parametric_task(n, seed=1)
        ids = torch.as_tensor(data.tokens)

        def ours(data=data):
            edits = disrupt_massive_values(model, data.tokens, n_dims=2)
            return run_with_hooks(model, data.tokens, [], edits=edits)["logits"]

        a, b = ours(), _peer(model, ids, 2)
        rows.append(
            {
                "sequences": n,
                "trustlab s": (t_ours := _median_time(ours, repeats)),
                "torch hooks s": (t_peer := _median_time(lambda ids=ids: _peer(model, ids, 2), repeats)),
                "speed ratio (torch / trustlab)": t_peer / t_ours,
                "max |logit diff|": float((a - b).abs().max()),
                "accuracy trustlab (ctx, par)": " / ".join(f"{v:.3f}" for v in _acc(a, data).values()),
                "accuracy torch (ctx, par)": " / ".join(f"{v:.3f}" for v in _acc(b, data).values()),
            }
        )
    return {
        "title": "massive-value disruption (top-2 Q/K dims to their mean): trustlab edits vs torch hooks",
        "rows": rows,
        "notes": ["both rank the dimensions on a clean pass, then run the disrupted pass; median of repeats"],
        "tables": {
            "Q/K energy among RoPE frequencies, Llama (4 blocks, width 96, d_head 24) on English text": (
                _frequency_rows(quick)
            )
        },
    }
