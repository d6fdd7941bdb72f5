"""A sorting Llama trained with a known circuit (an InterpBench-style ground truth for edge AUROC).

MIB [1]_ measures circuit discovery against InterpBench's IOI model [2]_, trained with strict
interchange intervention training (SIIT) so that a chosen set of components implements the task
and every other component is causally idle. This module trains the lab's 2-block Llama on "the
first sorted value" (the minimum of six values, read at the separator) with the three SIIT losses,
each a cross-entropy at the separator:

- behaviour: the model's answer on the base input is its minimum;
- interchange (IIT): with the output of the aligned head (the high-level variable ``min``) taken from a
  source input, the answer is the *source's* minimum;
- strictness: with the output of every component outside the circuit taken from a source input
  (resample ablation), the answer is still the base's minimum.

The circuit's edges (the ground truth) are those between its nodes, ``input`` and ``logits``.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
.. [2] Gupta, Arcuschin, Kwa, Garriga-Alonso. "InterpBench: Semi-Synthetic Transformers for Evaluating
   Mechanistic Interpretability Techniques". NeurIPS 2024 Datasets and Benchmarks.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ParameterError
from trustlab.lm._mib_graph import EdgeGraph, _weights, edge_graph, graph_forward

__all__ = ["SIITCircuit", "circuit_edges", "siit_sorting_model", "train_siit"]


@dataclass(frozen=True)
class SIITCircuit:
    """The known circuit of a model trained by :func:`siit_sorting_model`.

    Attributes
    ----------
    nodes : tuple of str
        Components allowed to matter (besides ``input`` and ``logits``).
    aligned : str
        The node interchange-trained to hold the high-level variable ``min``.
    edges : ndarray of int
        Indices of the circuit's edges: those between ``input``, ``nodes`` and ``logits`` (the ground
        truth for :func:`trustlab.lm.mib.edge_auroc`).
    losses : ndarray of float, shape (steps, 3)
        Behaviour, IIT and strictness cross-entropies per step.

    See Also
    --------
    siit_sorting_model : builds it.
    """

    nodes: tuple[str, ...]
    aligned: str
    edges: np.ndarray
    losses: np.ndarray


def circuit_edges(graph: EdgeGraph, nodes: tuple[str, ...]) -> np.ndarray:
    """Indices of the edges whose source and destination both belong to ``input``, ``nodes`` or ``logits``."""
    keep = {"input", "logits", *nodes}
    out = [
        i for i, name in enumerate(graph.edge_names) if {p.split("<")[0] for p in name.split("->")} <= keep
    ]
    return np.asarray(out, dtype=np.int64)


def _batch(
    rng: np.random.Generator, n: int, n_items: int, n_values: int
) -> tuple[torch.Tensor, torch.Tensor]:
    values = rng.integers(0, n_values, size=(n, n_items))
    ids = np.concatenate([values, np.full((n, 1), n_values)], axis=1)
    return torch.as_tensor(ids), torch.as_tensor(values.min(axis=1))


def train_siit(
    model: Any,
    nodes: tuple[str, ...],
    aligned: str,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    n_items: int,
    n_values: int,
    seed: int,
) -> SIITCircuit:
    """Train ``model`` in place with the behaviour, IIT and strictness losses (one batch each per step)."""
    graph = edge_graph(model)
    src = {name: i for i, name in enumerate(graph.sources)}
    idle = [src[s] for s in graph.sources if s != "input" and s not in nodes]
    rng = np.random.default_rng(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    device = next(model.parameters()).device
    ones = torch.as_tensor(graph.valid, dtype=torch.float32, device=device)
    strict_mask, iit_mask = ones.clone(), ones.clone()
    strict_mask[idle] = 0.0
    iit_mask[src[aligned]] = 0.0
    trace = []
    model.train()
    for _ in range(steps):
        (base, y_b), (source, y_s) = (_batch(rng, batch_size, n_items, n_values) for _ in range(2))
        base, source, y_b, y_s = base.to(device), source.to(device), y_b.to(device), y_s.to(device)
        pos = torch.full((batch_size,), n_items, device=device)
        w = _weights(model)  # re-read every step: the unpacked weights may be copies of the parameters
        with torch.no_grad():
            _, acts_s, _ = graph_forward(model, graph, source, pos, weights=w)
        logits, _, _ = graph_forward(model, graph, base, pos, weights=w)
        iit, _, _ = graph_forward(model, graph, base, pos, mask=iit_mask, corrupt=acts_s, weights=w)
        strict, _, _ = graph_forward(model, graph, base, pos, mask=strict_mask, corrupt=acts_s, weights=w)
        ce = torch.nn.functional.cross_entropy
        parts = (ce(logits, y_b), ce(iit, y_s), ce(strict, y_b))
        opt.zero_grad()
        sum(parts, torch.zeros((), device=device)).backward()
        opt.step()
        trace.append([float(p.detach()) for p in parts])
    model.eval()
    return SIITCircuit(tuple(nodes), aligned, circuit_edges(graph, tuple(nodes)), np.asarray(trace))


@validate_params(
    {
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "n_items": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_values": [Interval(numbers.Integral, 3, None, closed="left")],
        "d_model": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def siit_sorting_model(
    *,
    nodes: Any = ("a0.h0", "m1"),
    aligned: str = "a0.h0",
    steps: int = 300,
    batch_size: int = 64,
    lr: float = 3e-3,
    n_items: int = 6,
    n_values: int = 12,
    d_model: int = 32,
    random_state: Any = 0,
) -> tuple[Any, SIITCircuit]:
    """A 2-block, 2-head Llama trained with SIIT on the first sorted value: a model with a known circuit.

    InterpBench's recipe [2]_ on the lab's task: every step draws a base and a source batch of
    ``v1 .. vn SEP`` inputs and sums three cross-entropies at the separator: the answer (the minimum)
    on the base input; the *source's* minimum with the ``aligned`` node's output taken from the source
    (interchange intervention training of the variable ``min``); the base's minimum with every node
    outside ``nodes`` resample-ablated (strictness). AdamW, no weight decay; full-sequence outputs are
    swapped, as InterpBench does for its heads.

    Parameters
    ----------
    nodes : tuple of str, default=("a0.h0", "m1")
        The circuit's components (source names of :func:`trustlab.lm.mib.edge_graph`, heads and MLPs).
    aligned : str, default="a0.h0"
        The component aligned to ``min``; one of ``nodes``.
    steps, batch_size, lr : int, int, float, default=300, 64, 3e-3
        Training steps, pairs per step, AdamW's learning rate.
    n_items, n_values : int, default=6, 12
        Values per input and their range (the separator is ``n_values``).
    d_model : int, default=32
        Width (the lab's ``micro-llama-sorting`` shape otherwise).
    random_state : int, Generator or None, default=0
        Seeds the initialisation and the batches.

    Returns
    -------
    model : transformers.LlamaForCausalLM
        The trained model (eval mode).
    circuit : SIITCircuit
        Its known circuit and the loss traces.

    Examples
    --------
    >>> model, circuit = siit_sorting_model(steps=2)
    >>> len(circuit.edges), circuit.losses.shape  # 8 of the 46 edges join input, a0.h0, m1 and logits
    (8, (2, 3))
    """
    from trustlab.lm import ModelConfig, build_model

    graph_names = ["input"] + [f"a{layer}.h{h}" for layer in range(2) for h in range(2)] + ["m0", "m1"]
    items = [nodes] if isinstance(nodes, str) else list(nodes)
    if not items or any(n not in graph_names or n == "input" for n in items) or len(set(items)) != len(items):
        raise ParameterError(
            f"nodes must be distinct components among {', '.join(graph_names[1:])}, got {nodes!r}.",
            argument="nodes",
        )
    if aligned not in items:
        raise ParameterError(f"aligned must be one of nodes {items}, got {aligned!r}.", argument="aligned")
    seed = int(np.random.default_rng(random_state).integers(2**31 - 1))
    torch.manual_seed(seed)
    config = ModelConfig("llama", vocab_size=n_values + 1, d_model=d_model, n_layers=2, n_heads=2, max_len=32)
    model = build_model(config)
    circuit = train_siit(
        model,
        tuple(items),
        aligned,
        steps=int(steps),
        batch_size=int(batch_size),
        lr=float(lr),
        n_items=int(n_items),
        n_values=int(n_values),
        seed=seed,
    )
    return model, circuit
