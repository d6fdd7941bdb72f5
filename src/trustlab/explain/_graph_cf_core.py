"""GIST's pieces (row 003-10): graph checks, Laplacian spectra, the backtracking optimisation.

Private module of :mod:`trustlab.explain.graph_counterfactual`. Graphs are dense symmetric 0/1
adjacency matrices (one per graph, sizes may differ); a batch is zero-padded to the largest
graph, the padding nodes isolated (each adds a zero Laplacian eigenvalue, which is how spectra
of graphs of different sizes are compared).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from trustlab.errors import DataError, ModelError
from trustlab.fairness._graph_gen_inputs import check_adjacency

__all__ = [
    "backtrack",
    "check_graph",
    "check_graphs",
    "laplacian_spectrum",
    "oracle_predict",
    "pad_graphs",
    "pad_spectra",
    "reachable",
    "spectra",
]


def check_graph(graph: Any, name: str = "graphs", *, connected: bool = True) -> np.ndarray:
    """One connected simple undirected graph as a dense float 0/1 adjacency matrix.

    The checks of :func:`trustlab.fairness._graph_gen_inputs.check_adjacency` (square, 0/1,
    symmetric, no self-loops, no NaN, at least one edge, at least 4 nodes), then connectivity:
    a counterfactual of a disconnected graph mixes explanations of its components.
    """
    if isinstance(graph, np.ndarray | list) and _plain_graph(graph):
        a = np.asarray(graph, dtype=float)
    else:
        a = check_adjacency(graph, name).toarray()
    if not connected:
        return a
    reach = reachable(a)
    if not reach.all():
        raise DataError(
            f"{name}: a graph is disconnected ({int(reach.sum())} of {a.shape[0]} nodes reachable from "
            "node 0); pass each connected component as its own graph.",
            argument=name,
        )
    return a


def reachable(a: np.ndarray) -> np.ndarray:
    """Boolean mask of the nodes reachable from node 0 (all True: the graph is connected)."""
    reach = np.zeros(a.shape[0], dtype=bool)
    reach[0] = True
    for _ in range(a.shape[0]):
        grown = reach | a[reach].any(axis=0)
        if grown.sum() == reach.sum():
            break
        reach = grown
    return reach


def _plain_graph(graph: Any) -> bool:
    """Whether ``graph`` is already a square 0/1 symmetric array with edges and an empty diagonal.

    The fast path for dense arrays (the oracle sees many candidate graphs); anything else goes
    through ``check_adjacency``, which says what is wrong.
    """
    try:
        a = np.asarray(graph, dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(
        a.ndim == 2
        and a.shape[0] == a.shape[1] >= 4
        and np.all((a == 0) | (a == 1))
        and np.array_equal(a, a.T)
        and not np.diag(a).any()
        and a.any()
    )


def check_graphs(graphs: Any, name: str = "graphs", *, connected: bool = True) -> list[np.ndarray]:
    """A non-empty list of graphs (adjacency matrices or networkx graphs), each checked."""
    if isinstance(graphs, np.ndarray) and graphs.ndim == 3:
        graphs = list(graphs)
    if (
        isinstance(graphs, str | bytes | np.ndarray)
        or not isinstance(graphs, Sequence)
        or (len(graphs) and np.ndim(graphs[0]) == 1 and not hasattr(graphs[0], "nodes"))
    ):
        raise DataError(
            f"{name} must be a list of adjacency matrices (or networkx graphs), got "
            f"{type(graphs).__name__}; wrap a single graph as [graph].",
            argument=name,
        )
    if len(graphs) == 0:
        raise DataError(f"{name} is empty; pass at least one graph.", argument=name)
    return [check_graph(g, name, connected=connected) for g in graphs]


def laplacian_spectrum(adjacency: np.ndarray, size: int | None = None) -> np.ndarray:
    """Ascending eigenvalues of ``L = D - A``, zero-padded at the front to ``size`` (isolated nodes)."""
    a = np.asarray(adjacency, dtype=float)
    return spectra([a], a.shape[0] if size is None else size)[0]


def spectra(graphs: Sequence[np.ndarray], size: int) -> np.ndarray:
    """``(B, size)`` ascending Laplacian spectra of graphs padded with isolated nodes to ``size``.

    One batched LAPACK call: padding nodes are isolated, so each padded spectrum is the graph's
    own spectrum preceded by zeros.
    """
    a, _ = pad_graphs(graphs, size)
    lap = np.einsum("bij->bi", a)[:, :, None] * np.eye(size) - a
    return np.clip(np.linalg.eigvalsh(lap), 0.0, None)


def pad_spectra(spec: np.ndarray, size: int) -> np.ndarray:
    """Spectra ``(B, m)`` padded at the front with zeros to ``(B, size)``."""
    return np.concatenate([np.zeros((spec.shape[0], size - spec.shape[1])), spec], axis=1)


def pad_graphs(graphs: Sequence[np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(B, size, size)`` zero-padded adjacency and the ``(B, size)`` mask of real nodes."""
    a = np.zeros((len(graphs), size, size))
    mask = np.zeros((len(graphs), size))
    for i, g in enumerate(graphs):
        a[i, : len(g), : len(g)] = g
        mask[i, : len(g)] = 1.0
    return a, mask


def oracle_predict(oracle: Any, graphs: list[np.ndarray]) -> np.ndarray:
    """The oracle's labels of ``graphs``: ``oracle.predict(graphs)`` or ``oracle(graphs)``."""
    out = oracle.predict(graphs) if hasattr(oracle, "predict") else oracle(graphs)
    labels = np.asarray(out)
    if labels.shape != (len(graphs),):
        raise ModelError(
            f"oracle returned shape {labels.shape} for {len(graphs)} graphs; it must return one label "
            "per graph.",
            argument="oracle",
        )
    return labels


def backtrack(
    inputs: Sequence[np.ndarray],
    overshot: Sequence[np.ndarray],
    alphas: Sequence[float],
    *,
    steps: int,
    learning_rate: float,
    margin: float,
    n_samples: int = 0,
    seed: int = 0,
) -> list[list[list[np.ndarray]]]:
    """Minimise GIST's objective per pair, from the overshot graph, along a decreasing ``alpha`` path.

    For each pair (input ``G``, overshot counterfactual ``G'``) the edge weights
    ``W = sigmoid(theta)`` (symmetric, zero diagonal, on ``G'``'s nodes) minimise

        ``(1 - alpha) * mean|spec(L_W) - spec(L_G)| + alpha * BCE(W, A_G')``

    (style: the input's Laplacian spectrum; content: the overshot graph's edges), starting from
    ``theta = margin * (2 A_G' - 1)`` at the first ``alpha`` and warm-started from the previous
    optimum at each next one (a continuation path from the counterfactual content back towards
    the input's style). Returns, per pair and per ``alpha``, the thresholded graph ``W > 1/2``
    followed by ``n_samples`` graphs whose edges are independent Bernoulli draws of ``W`` (the
    authors' generator samples its output edges from its probabilities; a relaxed optimum whose
    weights moved towards 1/2 without crossing it is thereby reachable). Draws come from a torch
    generator seeded with ``seed``. All pairs are optimised at once (their losses add up; Adam is
    element-wise, so this equals separate runs).
    """
    import torch

    from trustlab._adam import Adam

    size = max(max(len(g) for g in inputs), max(len(g) for g in overshot))
    target = torch.as_tensor(spectra(inputs, size))
    a_np, m_np = pad_graphs(overshot, size)
    content, mask = torch.as_tensor(a_np), torch.as_tensor(m_np)
    pairs = mask[:, :, None] * mask[:, None, :] * (1.0 - torch.eye(size, dtype=content.dtype))
    theta = (margin * (2.0 * content - 1.0)).requires_grad_()
    adam = Adam([theta], learning_rate)
    out: list[list[list[np.ndarray]]] = [[] for _ in inputs]
    n_pairs = pairs.sum(dim=(1, 2))
    gen = torch.Generator().manual_seed(int(seed))
    with threadpool_limits(1):
        for alpha in alphas:
            for _ in range(steps):
                logits = (theta + theta.transpose(1, 2)) / 2
                w = torch.sigmoid(logits) * pairs
                lap = torch.diag_embed(w.sum(-1)) - w
                spec = torch.linalg.eigvalsh(lap)
                style = (spec - target).abs().mean(-1)
                bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, content, reduction="none")
                content_loss = (bce * pairs).sum(dim=(1, 2)) / n_pairs
                loss = ((1.0 - alpha) * style + alpha * content_loss).sum()
                (grad,) = torch.autograd.grad(loss, [theta])
                adam.step([grad])
            with torch.no_grad():
                logits = (theta + theta.transpose(1, 2)) / 2
                draws = [logits > 0]
                for _ in range(n_samples):
                    u = torch.triu(torch.rand(logits.shape, generator=gen, dtype=logits.dtype), 1)
                    draws.append(u + u.transpose(1, 2) < torch.sigmoid(logits))
                graphs = [(d.double() * pairs).numpy() for d in draws]
            for i, g in enumerate(overshot):
                out[i].append([d[i, : len(g), : len(g)].copy() for d in graphs])
    return out
