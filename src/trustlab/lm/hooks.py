"""Named hook points for any ``transformers`` causal LM, through plain torch forward hooks.

The points follow TransformerLens's naming [1]_, for block ``i``:

- ``blocks.{i}.resid_pre`` / ``blocks.{i}.resid_post``: the residual stream entering / leaving
  the block, ``(batch, seq, d_model)``;
- ``blocks.{i}.attn_out`` / ``blocks.{i}.mlp_out``: what attention / the MLP (or mixture of
  experts) adds to the stream;
- ``blocks.{i}.attn.q``, ``.k``, ``.v``: the projections, ``(batch, heads, seq, d_head)``, taken
  at the projection's output, i.e. *before* rotary position embedding where the model has it;
- ``blocks.{i}.attn.pattern``: attention weights ``(batch, heads, query, key)`` (the forward pass
  runs with eager attention while it is recorded);
- ``blocks.{i}.logit_lens``: ``lm_head(final_norm(resid_post))`` [2]_, ``(batch, seq, vocab)``;
  the last block's equals the model's logits.

The layout (blocks, attention, MLP, projections, final norm, unembedding) is found by the
module names ``transformers`` uses (``layers``/``h``, ``self_attn``/``attn``, ``q_proj``..., or a
fused ``c_attn``/``qkv_proj``), so GPT-2, Llama, Mistral, Mixtral, Qwen2 and their kin work;
a model whose layout is not recognised raises :class:`~trustlab.errors.ModelError`.

References
----------
.. [1] Nanda, Bloom. "TransformerLens". 2022, github.com/TransformerLensOrg/TransformerLens.
.. [2] nostalgebraist. "interpreting GPT: the logit lens". LessWrong, 2020.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from trustlab._validation import check_token_ids, context_length
from trustlab.errors import DataError, ModelError, ParameterError

__all__ = ["HOOK_KINDS", "hook_points", "run_with_hooks"]

HOOK_KINDS = (
    "resid_pre",
    "resid_post",
    "attn_out",
    "mlp_out",
    "attn.q",
    "attn.k",
    "attn.v",
    "attn.pattern",
    "logit_lens",
)
_NAME = re.compile(r"^blocks\.(\d+)\.(" + "|".join(re.escape(k) for k in HOOK_KINDS) + r")$")
_ATTN = ("self_attn", "attn", "attention", "self_attention")
_MLP = ("mlp", "block_sparse_moe", "feed_forward", "ffn")
_NORM = ("norm", "ln_f", "final_layernorm", "final_layer_norm", "ln_final")
_FUSED = ("c_attn", "qkv_proj", "Wqkv")


@dataclass(frozen=True)
class _Layout:
    layers: list[Any]
    attn: list[Any]
    mlp: list[Any]
    norm: Any
    head: Any
    n_heads: int
    n_kv: int
    d_head: int
    max_len: int | None


def _child(module: Any, names: tuple[str, ...]) -> Any:
    for name in names:
        sub = getattr(module, name, None)
        if isinstance(sub, torch.nn.Module):
            return sub
    return None


def _layout(lm: Any) -> _Layout:
    model: Any = lm  # kept as Any: transformers' attributes are not on torch.nn.Module
    if not isinstance(lm, torch.nn.Module) or not hasattr(lm, "config"):
        raise ModelError(
            f"model must be a transformers causal LM, got {type(model).__name__}.", argument="model"
        )
    cfg: Any = model.config
    n_layers = getattr(cfg, "num_hidden_layers", None)
    base = getattr(model, "base_model", model)
    lists = [m for m in base.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n_layers]
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    norm = _child(base, _NORM)
    if not lists or head is None or norm is None:
        raise ModelError(
            f"model {type(model).__name__}: its blocks, final norm or unembedding were not found; hook "
            "points need a decoder-only transformers model (GPT-2, Llama, Mistral, Mixtral, Qwen2 ...).",
            argument="model",
        )
    layers = list(lists[0])
    attn = [_child(layer, _ATTN) for layer in layers]
    mlp = [_child(layer, _MLP) for layer in layers]
    if any(a is None for a in attn) or any(m is None for m in mlp):
        raise ModelError(
            f"model {type(model).__name__}: a block has no recognisable attention or MLP module.",
            argument="model",
        )
    n_heads = int(cfg.num_attention_heads)
    n_kv = int(getattr(cfg, "num_key_value_heads", None) or n_heads)
    d_head = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads)
    return _Layout(layers, attn, mlp, norm, head, n_heads, n_kv, d_head, context_length(model))


def hook_points(model: Any) -> list[str]:
    """Every hook point name of a causal LM, block by block.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM.

    Returns
    -------
    list of str
        ``blocks.{i}.{kind}`` for every block ``i`` and every kind of :data:`HOOK_KINDS`.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=16, n_layers=2, n_heads=2))
    >>> hook_points(m)[:3]
    ['blocks.0.resid_pre', 'blocks.0.resid_post', 'blocks.0.attn_out']
    """
    lay = _layout(model)
    return [f"blocks.{i}.{k}" for i in range(len(lay.layers)) for k in HOOK_KINDS]


def _parse(names: Iterable[str], n_layers: int) -> list[tuple[str, int, str]]:
    out = []
    for name in names:
        match = _NAME.match(name) if isinstance(name, str) else None
        if match is None or int(match.group(1)) >= n_layers:
            raise ParameterError(
                f"names: unknown hook point {name!r}; valid names are blocks.{{i}}.{{kind}} with i in "
                f"0..{n_layers - 1} and kind one of {', '.join(HOOK_KINDS)}.",
                argument="names",
            )
        out.append((name, int(match.group(1)), match.group(2)))
    return out


def _ids(input_ids: Any, lay: _Layout, vocab: int) -> torch.Tensor:
    ids = torch.as_tensor(check_token_ids(input_ids, "input_ids", vocab=vocab))
    if lay.max_len is not None and ids.shape[1] > int(lay.max_len):
        raise DataError(
            f"input_ids have {ids.shape[1]} tokens, longer than the model's context "
            f"({lay.max_len}); cut them.",
            argument="input_ids",
        )
    return ids


def _first(x: Any) -> Any:
    return x[0] if isinstance(x, tuple | list) else x


def _split_fused(out: torch.Tensor, lay: _Layout) -> tuple[torch.Tensor, ...]:
    sizes = [lay.n_heads * lay.d_head, lay.n_kv * lay.d_head, lay.n_kv * lay.d_head]
    return tuple(torch.split(out, sizes, dim=-1))


def _heads(x: torch.Tensor, n: int, d: int) -> torch.Tensor:
    return x.reshape(*x.shape[:-1], n, d).transpose(-3, -2)  # (batch, heads, seq, d_head)


def _unheads(x: torch.Tensor) -> torch.Tensor:
    x = x.transpose(-3, -2)
    return x.reshape(*x.shape[:-2], -1)


def _qkv_hooks(
    attn: Any,
    i: int,
    kinds: set[str],
    lay: _Layout,
    store: dict[str, torch.Tensor],
    edits: dict[str, Callable],
) -> list[Any]:
    handles = []
    counts = {"q": lay.n_heads, "k": lay.n_kv, "v": lay.n_kv}
    fused = _child(attn, _FUSED)
    if fused is not None:

        def fused_hook(mod: Any, args: Any, out: torch.Tensor) -> torch.Tensor | None:
            parts = list(_split_fused(out, lay))
            changed = False
            for j, letter in enumerate("qkv"):
                name = f"blocks.{i}.attn.{letter}"
                h = _heads(parts[j], counts[letter], lay.d_head)
                if name in edits:
                    h = edits[name](h)
                    parts[j] = _unheads(h)
                    changed = True
                if f"attn.{letter}" in kinds:
                    store[name] = h.detach()
            return torch.cat(parts, dim=-1) if changed else None

        return [fused.register_forward_hook(fused_hook)]
    for letter in "qkv":
        proj = getattr(attn, f"{letter}_proj", None)
        if not isinstance(proj, torch.nn.Module):
            raise ModelError(
                f"model: block {i}'s attention has no {letter}_proj or fused projection; attn.q/k/v are not "
                "available for this architecture.",
                argument="model",
            )

        def hook(mod: Any, args: Any, out: torch.Tensor, letter: str = letter) -> torch.Tensor | None:
            name = f"blocks.{i}.attn.{letter}"
            h = _heads(out, counts[letter], lay.d_head)
            new = None
            if name in edits:
                h = edits[name](h)
                new = _unheads(h)
            if f"attn.{letter}" in kinds:
                store[name] = h.detach()
            return new

        handles.append(proj.register_forward_hook(hook))
    return handles


def _block_hooks(
    i: int, kinds: set[str], lay: _Layout, store: dict[str, torch.Tensor], edits: dict[str, Callable]
) -> list[Any]:
    handles = []
    layer, attn, mlp = lay.layers[i], lay.attn[i], lay.mlp[i]
    pre_name = f"blocks.{i}.resid_pre"
    if "resid_pre" in kinds or pre_name in edits:

        def pre(mod: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
            x = args[0] if args else kwargs["hidden_states"]
            changed = None
            if pre_name in edits:
                x = edits[pre_name](x)
                changed = ((x, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})
            if "resid_pre" in kinds:
                store[pre_name] = x.detach()
            return changed

        handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))

    def output_hook(kind: str) -> Callable:
        name = f"blocks.{i}.{kind}"

        def hook(mod: Any, args: Any, out: Any) -> Any:
            x = _first(out)
            new = None
            if name in edits:
                x = edits[name](x)
                new = (x, *out[1:]) if isinstance(out, tuple) else x
            if kind == "resid_post" and "logit_lens" in kinds:
                store[f"blocks.{i}.logit_lens"] = lay.head(lay.norm(x)).detach()
            if kind in kinds:
                store[name] = x.detach()
            return new

        return hook

    if kinds & {"resid_post", "logit_lens"} or f"blocks.{i}.resid_post" in edits:
        handles.append(layer.register_forward_hook(output_hook("resid_post")))
    if "attn_out" in kinds or "attn.pattern" in kinds or f"blocks.{i}.attn_out" in edits:
        attn_hook = output_hook("attn_out")

        def attn_wrapper(mod: Any, args: Any, out: Any) -> Any:
            if "attn.pattern" in kinds:
                weights = out[1] if isinstance(out, tuple) and len(out) > 1 else None
                if weights is None:
                    raise ModelError(
                        f"model: block {i}'s attention returned no weights; attn.pattern needs "
                        "eager attention.",
                        argument="model",
                    )
                store[f"blocks.{i}.attn.pattern"] = weights.detach()
            return attn_hook(mod, args, out)

        handles.append(attn.register_forward_hook(attn_wrapper))
    if "mlp_out" in kinds or f"blocks.{i}.mlp_out" in edits:
        handles.append(mlp.register_forward_hook(output_hook("mlp_out")))
    if kinds & {"attn.q", "attn.k", "attn.v"} or any(e.startswith(f"blocks.{i}.attn.") for e in edits):
        handles += _qkv_hooks(attn, i, kinds, lay, store, edits)
    return handles


@torch.no_grad()
def run_with_hooks(
    model: Any,
    input_ids: Any,
    names: Iterable[str],
    *,
    edits: dict[str, Callable[[torch.Tensor], torch.Tensor]] | None = None,
) -> dict[str, torch.Tensor]:
    """One forward pass that records the named hook points (and optionally edits some).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM (any, not only the lab's).
    input_ids : array-like of int, shape (batch, seq) or (seq,)
        Token ids, within the model's vocabulary and context.
    names : iterable of str
        Hook points to record (see :func:`hook_points`).
    edits : dict, optional
        ``{name: f}``: replaces the value at hook point ``name`` by ``f(value)`` during the pass
        (an ablation or patch); allowed for every kind but ``attn.pattern`` and ``logit_lens``.
        Recorded values are the edited ones.

    Returns
    -------
    dict of str to torch.Tensor
        The recorded tensors (detached, on the model's device), plus ``"logits"`` (the model's output).

    Raises
    ------
    ParameterError
        An unknown hook point (the message lists the valid names).
    DataError
        Ids outside the vocabulary, a sequence longer than the context, or a non-finite
        activation (NaN or inf).

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("gpt2", vocab_size=10, d_model=16, n_layers=2, n_heads=2))
    >>> out = run_with_hooks(m, [[1, 2, 3]], ["blocks.1.attn.q", "blocks.0.attn.pattern"])
    >>> tuple(out["blocks.1.attn.q"].shape), tuple(out["blocks.0.attn.pattern"].shape)
    ((1, 2, 3, 8), (1, 2, 3, 3))
    """
    lay = _layout(model)
    names = [names] if isinstance(names, str) else list(names)
    edits = dict(edits or {})
    parsed = _parse([*names, *edits], len(lay.layers))
    for name, _, kind in parsed[len(names) :]:
        if kind in ("attn.pattern", "logit_lens") or not callable(edits[name]):
            raise ParameterError(
                f"edits: {name!r} cannot be edited, or its value is not callable; edit any kind but "
                "attn.pattern and logit_lens, with a function of the tensor.",
                argument="edits",
            )
    ids = _ids(input_ids, lay, int(model.get_input_embeddings().num_embeddings))
    by_layer: dict[int, set[str]] = {}
    for _, i, kind in parsed[: len(names)]:
        by_layer.setdefault(i, set()).add(kind)
    for _, i, _ in parsed[len(names) :]:
        by_layer.setdefault(i, set())
    store: dict[str, torch.Tensor] = {}
    handles: list[Any] = []
    want_pattern = any("attn.pattern" in k for k in by_layer.values())
    previous = getattr(model.config, "_attn_implementation", None)
    was_training = model.training
    needs_eval = any(m.training for m in model.modules())
    try:
        if want_pattern and previous != "eager":
            model.set_attn_implementation("eager")
        if needs_eval:  # transformers' train()/eval() cost ~1 ms: only when a module trains
            model.eval()
        for i, kinds in sorted(by_layer.items()):
            handles += _block_hooks(i, kinds, lay, store, edits)
        device = next(model.parameters()).device
        out = model(input_ids=ids.to(device), output_attentions=want_pattern)
    finally:
        for h in handles:
            h.remove()
        if want_pattern and previous not in (None, "eager"):
            model.set_attn_implementation(previous)
        if needs_eval:
            model.train(was_training)
    result = {name: store[name] for name in names}
    result["logits"] = out.logits.detach()
    for name, value in result.items():
        # one float64 reduction: finite exactly when every entry is (a float32/16 sum cannot
        # overflow float64), 7x cheaper than isfinite(value).all() on the logits
        if not torch.isfinite(value.sum(dtype=torch.float64)):
            raise DataError(
                f"the activation at {name!r} holds NaN or inf: the model's weights or inputs are broken "
                "(check the checkpoint, or the dtype: use float32).",
                argument="model",
            )
    return result
