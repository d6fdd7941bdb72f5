"""The edge graph of a causal LM and its edge-patched forward pass (the substrate of :mod:`trustlab.lm.mib`).

A transformer seen as edges between residual-stream writers and readers, as in edge attribution
patching [1]_ and the MIB benchmark's circuit track [2]_: sources are ``input`` (token and learned
position embeddings), every attention head ``a{l}.h{h}`` and every MLP ``m{l}``; destinations are
the query / key / value inputs of every head (``a{l}.h{h}<q>`` ...), every MLP input and the
``logits``. An edge joins each source to each destination downstream of it.

:func:`graph_forward` recomputes the model block by block from its own weights so that every
destination can read its own mixture of live and counterfactual source outputs: with every edge
in the circuit it equals the model's forward pass. GPT-2 and the Llama family (Llama, Mistral,
Qwen2, Mixtral) are supported; module discovery reuses :mod:`trustlab.lm.hooks`.

References
----------
.. [1] Syed, Rager, Conmy. "Attribution Patching Outperforms Automated Circuit Discovery".
   BlackboxNLP 2024.
.. [2] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.errors import ModelError, ParameterError
from trustlab.lm.hooks import _first, _layout

__all__ = ["EdgeGraph", "edge_graph", "graph_forward", "prune_mask"]

_FAMILY = {"gpt2": "gpt2", "llama": "llama", "mistral": "llama", "qwen2": "llama", "mixtral": "llama"}


@dataclass(frozen=True)
class EdgeGraph:
    """Nodes and edges of a transformer's residual-stream graph.

    Attributes
    ----------
    n_layers, n_heads : int
        Blocks and attention heads per block.
    sources : tuple of str
        Source nodes in topological order: ``input``, then per block its heads and its MLP.
    dests : tuple of str
        Destination nodes: per block the heads' ``<q>``, ``<k>``, ``<v>`` inputs and the MLP input,
        then ``logits``.
    valid : ndarray of bool, shape (n_sources, n_dests)
        ``valid[u, d]``: source ``u`` lies upstream of destination ``d`` (an edge).
    edges : ndarray of int, shape (n_edges, 2)
        ``(source, dest)`` index pairs of the edges, row-major.
    """

    n_layers: int
    n_heads: int
    sources: tuple[str, ...]
    dests: tuple[str, ...]
    valid: np.ndarray
    edges: np.ndarray

    @property
    def n_edges(self) -> int:
        """Number of edges."""
        return len(self.edges)

    @property
    def edge_names(self) -> list[str]:
        """Edge names as the benchmark writes them, e.g. ``a0.h1->a1.h0<q>``."""
        return [f"{self.sources[u]}->{self.dests[d]}" for u, d in self.edges]

    def n_upstream(self, dest: int) -> int:
        """Number of sources upstream of destination index ``dest``."""
        return int(self.valid[:, dest].sum())

    def dest_owner(self) -> np.ndarray:
        """For each destination, the index of the source node it feeds (``-1`` for ``logits``)."""
        h = self.n_heads
        owner = np.full(len(self.dests), -1)
        for layer in range(self.n_layers):
            base_d, base_s = layer * (3 * h + 1), 1 + layer * (h + 1)
            for j in range(3 * h):
                owner[base_d + j] = base_s + j % h
            owner[base_d + 3 * h] = base_s + h
        return owner

    def mask(self, edge_ids: Any) -> np.ndarray:
        """A ``(n_sources, n_dests)`` 0/1 matrix holding the given edges (indices into :attr:`edges`)."""
        out = np.zeros(self.valid.shape)
        ids = np.asarray(edge_ids, dtype=np.int64).reshape(-1)
        out[self.edges[ids, 0], self.edges[ids, 1]] = 1.0
        return out


def _graph_shape(n_layers: int, n_heads: int) -> EdgeGraph:
    sources = ["input"]
    dests: list[str] = []
    n_up: list[int] = []
    for layer in range(n_layers):
        prev = len(sources)
        for letter in "qkv":
            dests += [f"a{layer}.h{h}<{letter}>" for h in range(n_heads)]
            n_up += [prev] * n_heads
        sources += [f"a{layer}.h{h}" for h in range(n_heads)]
        dests.append(f"m{layer}")
        n_up.append(len(sources))
        sources.append(f"m{layer}")
    dests.append("logits")
    n_up.append(len(sources))
    valid = np.arange(len(sources))[:, None] < np.asarray(n_up)[None, :]
    edges = np.argwhere(valid)
    return EdgeGraph(n_layers, n_heads, tuple(sources), tuple(dests), valid, edges)


def _family(model: Any) -> str:
    kind = getattr(getattr(model, "config", None), "model_type", None)
    if kind not in _FAMILY:
        raise ModelError(
            f"model: edge-level circuit discovery supports GPT-2 and Llama-family causal LMs "
            f"({', '.join(_FAMILY)}), got model_type {kind!r}.",
            argument="model",
        )
    return _FAMILY[kind]


def edge_graph(model: Any) -> EdgeGraph:
    """The edge graph of a GPT-2 or Llama-family causal LM.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model.

    Returns
    -------
    EdgeGraph
        Its nodes and edges.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("gpt2", vocab_size=10, d_model=16, n_layers=2, n_heads=2))
    >>> g = edge_graph(m); g.n_edges, g.edge_names[0]
    (46, 'input->a0.h0<q>')
    """
    _family(model)
    lay = _layout(model)
    if lay.n_heads * lay.d_head != int(model.config.hidden_size):
        raise ModelError("model: heads times head width must equal the model width.", argument="model")
    return _graph_shape(len(lay.layers), lay.n_heads)


def _proj(mod: Any, d_in: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W, b)`` with ``y = x @ W + b`` for a Linear or a GPT-2 Conv1D."""
    weight = mod.weight
    w = weight.T if isinstance(mod, torch.nn.Linear) else weight
    if w.shape[0] != d_in:
        raise ModelError("model: an attention projection has an unexpected shape.", argument="model")
    bias = getattr(mod, "bias", None)
    return w, (bias if bias is not None else torch.zeros(w.shape[1], dtype=w.dtype, device=w.device))


@dataclass
class _Weights:
    family: str
    lay: Any
    embed: Any
    pos: Any
    rotary: Any
    norm1: list[Any]
    norm2: list[Any]
    qkv: list[list[tuple[torch.Tensor, torch.Tensor]]]  # per layer q, k, v: W (d, H, dh), b (H, dh)
    out: list[tuple[torch.Tensor, torch.Tensor]]  # per layer W_O (H, dh, d), b_O (d,)
    scale: list[float]


def _weights(model: Any) -> _Weights:
    family = _family(model)
    lay = _layout(model)
    d, h, dh, kv = int(model.config.hidden_size), lay.n_heads, lay.d_head, lay.n_kv
    group = h // kv
    qkv, out, scale, norm1, norm2 = [], [], [], [], []
    for i, (layer, attn) in enumerate(zip(lay.layers, lay.attn, strict=True)):
        if family == "gpt2":
            w, b = _proj(attn.c_attn, d)
            parts = [(w[:, j * d : (j + 1) * d], b[j * d : (j + 1) * d]) for j in range(3)]
            wo, bo = _proj(attn.c_proj, d)
            s = dh**-0.5 if getattr(attn, "scale_attn_weights", True) else 1.0
            if getattr(attn, "scale_attn_by_inverse_layer_idx", False):
                s /= float(i + 1)
            norm1.append(layer.ln_1)
            norm2.append(layer.ln_2)
        else:
            parts = [_proj(getattr(attn, f"{x}_proj"), d) for x in "qkv"]
            wo, bo = _proj(attn.o_proj, h * dh)
            s = float(getattr(attn, "scaling", dh**-0.5))
            norm1.append(layer.input_layernorm)
            norm2.append(layer.post_attention_layernorm)
        heads = []
        for j, (w, b) in enumerate(parts):
            n = h if j == 0 else kv
            w3, b2 = w.reshape(d, n, dh), b.reshape(n, dh)
            if j > 0 and group > 1:  # ungroup grouped-query attention: one K/V input per query head
                idx = torch.arange(h, device=w.device) // group
                w3, b2 = w3[:, idx], b2[idx]
            heads.append((w3, b2))
        qkv.append(heads)
        out.append((wo.reshape(h, dh, d), bo))
        scale.append(s)
    base = getattr(model, "base_model", model)
    pos = getattr(base, "wpe", None) if family == "gpt2" else None
    rotary = getattr(base, "rotary_emb", None) if family == "llama" else None
    if family == "llama" and rotary is None:
        raise ModelError("model: no rotary embedding module found (rotary_emb).", argument="model")
    return _Weights(family, lay, model.get_input_embeddings(), pos, rotary, norm1, norm2, qkv, out, scale)


def _rotate(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _mix(
    live: list[torch.Tensor],
    cols: slice,
    mask: torch.Tensor | None,
    corrupt: torch.Tensor | None,
    bias: torch.Tensor,
) -> torch.Tensor:
    """Inputs of the destinations ``cols``: live sources on circuit edges, counterfactual ones off it."""
    stacked = torch.stack(live, dim=2)  # (b, p, u, d)
    n = stacked.shape[2]
    width = cols.stop - cols.start
    if mask is None or corrupt is None:
        total = stacked.sum(2, keepdim=True)
        return total.expand(-1, -1, width, -1) + bias
    cor = corrupt[:, :, :n]
    if mask.ndim == 3:  # one circuit per batch row
        mixed = torch.einsum("bpud,bue->bped", stacked - cor, mask[:, :n, cols])
    else:
        mixed = torch.einsum("bpud,ue->bped", stacked - cor, mask[:n, cols])
    return mixed + cor.sum(2, keepdim=True) + bias


def graph_forward(
    model: Any,
    graph: EdgeGraph,
    ids: torch.Tensor,
    positions: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    corrupt: torch.Tensor | None = None,
    embed_override: torch.Tensor | None = None,
    keep_inputs: bool = False,
    weights: Any = None,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Run the model edge by edge: destination ``d`` reads live source ``u`` iff ``mask[u, d] = 1``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        GPT-2 or Llama-family causal LM.
    graph : EdgeGraph
        Its graph (:func:`edge_graph`).
    ids : LongTensor, shape (batch, seq)
        Token ids.
    positions : LongTensor, shape (batch,)
        Position whose logits are returned, per row.
    mask : Tensor, shape (n_sources, n_dests) or (batch, n_sources, n_dests), optional
        Circuit (0/1), or one per row; ``None``: every edge live.
    corrupt : Tensor, shape (batch, seq, n_sources, d_model), optional
        Source outputs of the counterfactual run (needed with ``mask``).
    embed_override : Tensor, shape (batch, seq, d_model), optional
        Replaces the ``input`` node's output (EAP-IG's interpolated embeddings).
    keep_inputs : bool, default=False
        Also return each destination group's input tensor (for gradients).
    weights : optional
        The model's unpacked weights, reused across calls.

    Returns
    -------
    logits : Tensor, shape (batch, vocab)
        Logits at ``positions``.
    acts : Tensor, shape (batch, seq, n_sources, d_model)
        Every source node's output in this run.
    inputs : list of Tensor
        Destination inputs per group (``(batch, seq, n, d_model)``), when ``keep_inputs``.
    """
    w = _weights(model) if weights is None else weights
    h = graph.n_heads
    x0 = w.embed(ids) if embed_override is None else embed_override
    if w.pos is not None and embed_override is None:
        x0 = x0 + w.pos(torch.arange(ids.shape[1], device=ids.device))[None]
    live: list[torch.Tensor] = [x0]
    kept: list[torch.Tensor] = []
    bias = torch.zeros_like(x0[:, :, None, :])
    seq = ids.shape[1]
    causal = torch.ones(seq, seq, dtype=torch.bool, device=ids.device).tril()
    cos_sin = None
    if w.rotary is not None:
        pos_ids = torch.arange(seq, device=ids.device)[None].expand(ids.shape[0], -1)
        cos_sin = w.rotary(x0, pos_ids)
    for layer in range(graph.n_layers):
        base = layer * (3 * h + 1)
        xa = _mix(live, slice(base, base + 3 * h), mask, corrupt, bias)  # (b, p, 3h, d)
        if keep_inputs:
            kept.append(xa)
        na = w.norm1[layer](xa)
        q, k, v = (
            torch.einsum("bphd,dhe->bhpe", na[:, :, j * h : (j + 1) * h], wj) + bj[None, :, None]
            for j, (wj, bj) in enumerate(w.qkv[layer])
        )
        if cos_sin is not None:
            cos, sin = (t[:, None].to(q.dtype) for t in cos_sin)
            q, k = q * cos + _rotate(q) * sin, k * cos + _rotate(k) * sin
        scores = torch.einsum("bhqe,bhke->bhqk", q, k) * w.scale[layer]
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
        z = torch.einsum("bhqk,bhke->bqhe", scores.softmax(-1), v)
        wo, bo = w.out[layer]
        heads = torch.einsum("bqhe,hed->bqhd", z, wo)
        live += list(heads.unbind(2))
        bias = bias + bo
        xm = _mix(live, slice(base + 3 * h, base + 3 * h + 1), mask, corrupt, bias)
        if keep_inputs:
            kept.append(xm)
        live.append(_first(w.lay.mlp[layer](w.norm2[layer](xm[:, :, 0]))))
    n_d = len(graph.dests)
    xf = _mix(live, slice(n_d - 1, n_d), mask, corrupt, bias)
    if keep_inputs:
        kept.append(xf)
    rows = torch.arange(ids.shape[0], device=ids.device)
    final = xf[rows, positions, 0]
    logits = w.lay.head(w.lay.norm(final))
    return logits, torch.stack(live, dim=2), kept


def prune_mask(graph: EdgeGraph, mask: np.ndarray) -> np.ndarray:
    """Drop circuit edges that cannot change the output (MIB's pruning before evaluation).

    An edge stays if its source is reachable from ``input`` through circuit edges and its
    destination's node reaches ``logits`` through circuit edges. Removing the others leaves the
    patched output unchanged: an unreachable source already outputs its counterfactual value.

    Parameters
    ----------
    graph : EdgeGraph
        The graph.
    mask : ndarray, shape (n_sources, n_dests)
        A circuit (nonzero = in).

    Returns
    -------
    ndarray of float
        The pruned circuit.
    """
    m = (np.asarray(mask) != 0) & graph.valid
    owner = graph.dest_owner()
    reach = np.zeros(len(graph.sources), dtype=bool)
    reach[0] = True
    for s in range(1, len(graph.sources)):
        cols = np.flatnonzero(owner == s)
        reach[s] = bool((m[:, cols] & reach[:, None]).any())
    useful_dest = np.zeros(len(graph.dests), dtype=bool)
    useful_dest[owner == -1] = True
    useful_src = np.zeros(len(graph.sources), dtype=bool)
    for s in range(len(graph.sources) - 1, -1, -1):
        useful_src[s] = bool((m[s] & useful_dest).any())
        if s > 0:
            useful_dest[owner == s] = useful_src[s]
    return (m & reach[:, None] & useful_dest[None, :]).astype(float)


def check_names(graph: EdgeGraph, names: Any) -> np.ndarray:
    """Edge indices of the given edge names; an unknown name is a :class:`ParameterError`."""
    lookup = {n: i for i, n in enumerate(graph.edge_names)}
    out = []
    for name in [names] if isinstance(names, str) else list(names):
        if name not in lookup:
            raise ParameterError(
                f"edges: unknown edge {name!r}; edges are 'SOURCE->DEST' with sources input, a{{l}}.h{{h}}, "
                f"m{{l}} and destinations a{{l}}.h{{h}}<q|k|v>, m{{l}}, logits for l < {graph.n_layers}, "
                f"h < {graph.n_heads}, the source upstream of the destination "
                "(see edge_graph(model).edge_names).",
                argument="edges",
            )
        out.append(lookup[name])
    return np.asarray(out, dtype=np.int64)
