"""Torch GNN backbones for UPGNET's pipeline: GCN, GraphSAGE and GAT (private module).

UPGNET (He, Li, Tang and Su, "Going Deeper into Locally Differentially Private Graph Neural
Networks", ICML 2025, Sec. 5.1) evaluates its two layers with three backbones: GCN (Kipf
and Welling, ICLR 2017), GraphSAGE (Hamilton, Ying and Leskovec, NeurIPS 2017) and GAT
(Velickovic et al., ICLR 2018). The copy of the paper read does not give their settings
(its App. F.1 is not in it), so each takes its own paper's settings for transductive
citation graphs, all two layers, full batch, Adam, a fixed number of epochs, no early
stopping and no model selection (the paper trains 500 iterations and picks the model on
validation loss). The three share one training loop (:func:`fit_torch_backbone`); every
random draw (initialisation, dropout) comes from a local torch generator seeded with
``seed``, so a run is deterministic for its seed on one machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from trustlab._adam import Adam

__all__ = ["BACKBONES", "fit_torch_backbone"]

# Published settings per backbone: hidden units (per head for GAT), heads, dropout, learning
# rate, L2 weight decay and the layers it applies to, epochs.
BACKBONES: dict[str, dict[str, Any]] = {
    # Kipf and Welling (2017), Sec. 5.2: 16 hidden, dropout 0.5, lr 0.01, L2 5e-4 on layer 1.
    "gcn": {"hidden": 16, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4, "epochs": 200},
    # Hamilton et al. (2017) use the mean aggregator with neighbour sampling on large inductive
    # graphs; on a small transductive graph the full neighbourhood is averaged (no sampling) and
    # the GCN's width and regularisation are kept, as LPGNN (Sajadmanesh and Gatica-Perez, 2021)
    # does for its three backbones.
    "sage": {"hidden": 16, "dropout": 0.5, "lr": 0.01, "weight_decay": 5e-4, "epochs": 200},
    # Velickovic et al. (2018), Sec. 3.3 (transductive): 8 heads x 8 hidden features, ELU,
    # dropout 0.6 on both layers' inputs and on the attention coefficients, lr 0.005, L2 5e-4;
    # one output head. They train until validation loss stops improving (patience 100); here a
    # fixed 200 epochs.
    "gat": {"hidden": 8, "heads": 8, "dropout": 0.6, "lr": 0.005, "weight_decay": 5e-4, "epochs": 200},
}


def propagation(adjacency: Any) -> sp.csr_matrix:
    """``S = D^-1/2 (A + I) D^-1/2``, the GCN propagation with self-loops."""
    a = sp.csr_matrix(adjacency, dtype=float)
    a = a - sp.diags(a.diagonal()) + sp.eye(a.shape[0])
    deg = np.asarray(a.sum(axis=1)).ravel()
    return sp.csr_matrix(sp.diags(deg**-0.5) @ a @ sp.diags(deg**-0.5))


def standardise(x: np.ndarray, train_idx: np.ndarray) -> np.ndarray:
    """Centre and scale each column by the training nodes' mean and standard deviation.

    A column constant on the training nodes (common for sparse bag-of-words features such as
    Cora's) is only centred: dividing by a vanishing deviation would blow it up by ~1e12.
    """
    sd = x[train_idx].std(axis=0)
    return (x - x[train_idx].mean(axis=0)) / np.where(sd > 1e-12, sd, 1.0)


def _sparse(m: sp.spmatrix) -> Any:
    import torch

    c = sp.coo_matrix(m)
    index = torch.as_tensor(np.vstack([c.row, c.col]), dtype=torch.long)
    return torch.sparse_coo_tensor(
        index, torch.tensor(c.data, dtype=torch.float32), c.shape, check_invariants=True
    ).coalesce()


def _mean_neighbours(adjacency: Any) -> sp.csr_matrix:
    """Row-normalised adjacency without self-loops: row ``v`` averages ``v``'s neighbours (0 if none)."""
    a = sp.csr_matrix(adjacency, dtype=float)
    a = sp.csr_matrix(a - sp.diags(a.diagonal()))
    a.eliminate_zeros()
    a.data[:] = 1.0
    deg = np.asarray(a.sum(axis=1)).ravel()
    return sp.csr_matrix(sp.diags(np.where(deg > 0, 1.0 / np.maximum(deg, 1.0), 0.0)) @ a)


def _gat_layer(
    h: Any, w: Any, att_src: Any, att_dst: Any, src: Any, dst: Any, drop: Callable[[Any], Any]
) -> Any:
    """One GAT layer on an edge list (self-loops included): ``(n, heads, out)``.

    ``e_uv = LeakyReLU_0.2(a_src . W h_u + a_dst . W h_v)``, softmax over the sources ``u`` of
    each target ``v``, dropout on the coefficients, then ``sum_u alpha_uv W h_u`` per head.
    """
    import torch

    n, heads, out = h.shape[0], att_src.shape[0], att_src.shape[1]
    z = (h @ w).view(n, heads, out)
    e = torch.nn.functional.leaky_relu((z * att_src).sum(-1)[src] + (z * att_dst).sum(-1)[dst], 0.2)
    peak = torch.full((n, heads), -torch.inf).scatter_reduce(
        0, dst[:, None].expand(-1, heads), e, reduce="amax", include_self=True
    )
    w_e = torch.exp(e - peak[dst])
    norm = torch.zeros(n, heads).index_add(0, dst, w_e)
    alpha = drop(w_e / norm[dst])
    return torch.zeros(n, heads, out).index_add(0, dst, alpha[..., None] * z[src])


def fit_torch_backbone(
    model: str,
    adjacency: Any,
    features: np.ndarray,
    y: np.ndarray,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    *,
    hidden: int | None = None,
    heads: int | None = None,
    epochs: int | None = None,
    lr: float | None = None,
    weight_decay: float | None = None,
    dropout: float | None = None,
    seed: int = 0,
    standardise_features: bool = True,
) -> float:
    """Train a two-layer ``"gcn"``, ``"sage"`` or ``"gat"`` full-batch in torch; test accuracy.

    - ``"gcn"``: ``S relu(S X W1) W2`` with ``S`` the propagation with self-loops (Kipf and
      Welling, 2017); L2 on the first layer.
    - ``"sage"``: GraphSAGE-mean (Hamilton et al., 2017, Algorithm 1 with the mean
      aggregator): ``h_v' = W [h_v || mean_{u in N(v)} h_u]`` (written as ``h_v W_self +
      mean(h_u) W_neigh``), ReLU after the first layer, the full neighbourhood averaged (no
      sampling; an isolated node's neighbour mean is 0); L2 on every weight.
    - ``"gat"``: two graph-attention layers (Velickovic et al., 2018): ``heads`` heads of
      ``hidden`` features concatenated, ELU, then one head to the classes; attention over each
      node's neighbours and itself; L2 on every parameter.

    Features are standardised on the training nodes first (``standardise_features``; the
    rectified LDP reports need it, binary bag-of-words features lose accuracy by it).
    Keyword arguments left at ``None``
    take the backbone's published settings (:data:`BACKBONES`). ``seed`` drives the
    initialisation (Glorot uniform, zero biases) and every dropout mask through a local torch
    generator, so the result is deterministic for ``seed``.
    """
    import torch

    cfg = {**BACKBONES[model]}
    for key, value in (
        ("hidden", hidden),
        ("heads", heads),
        ("epochs", epochs),
        ("lr", lr),
        ("weight_decay", weight_decay),
        ("dropout", dropout),
    ):
        if value is not None:
            cfg[key] = value
    p_drop = float(cfg["dropout"])
    raw = np.asarray(features, dtype=float)
    x = torch.tensor(standardise(raw, train_idx) if standardise_features else raw, dtype=torch.float32)
    labels = torch.as_tensor(np.asarray(y), dtype=torch.long)
    n_classes = int(labels.max()) + 1  # a node without a label (-1) must be in neither index
    gen = torch.Generator().manual_seed(int(seed))

    def init(*shape: int) -> torch.Tensor:  # Glorot uniform on the last two dimensions
        bound = (6.0 / (shape[-2] + shape[-1])) ** 0.5
        return ((torch.rand(*shape, generator=gen) * 2 - 1) * bound).requires_grad_()

    def zeros(*shape: int) -> torch.Tensor:
        return torch.zeros(*shape, requires_grad=True)

    training = [True]

    def drop(h: torch.Tensor) -> torch.Tensor:
        if not training[0] or p_drop == 0:
            return h
        return h * (torch.rand(h.shape, generator=gen) >= p_drop) / (1 - p_drop)

    d, hid = x.shape[1], int(cfg["hidden"])
    forward: Callable[[], torch.Tensor]
    if model == "gcn":
        s = _sparse(propagation(adjacency))
        w1, b1, w2, b2 = init(d, hid), zeros(hid), init(hid, n_classes), zeros(n_classes)
        params, decayed = [w1, b1, w2, b2], [w1]

        def forward() -> torch.Tensor:
            h = torch.relu(torch.sparse.mm(s, drop(x) @ w1) + b1)
            return torch.sparse.mm(s, drop(h) @ w2) + b2

    elif model == "sage":
        m = _sparse(_mean_neighbours(adjacency))
        ws1, wn1, b1 = init(d, hid), init(d, hid), zeros(hid)
        ws2, wn2, b2 = init(hid, n_classes), init(hid, n_classes), zeros(n_classes)
        params, decayed = [ws1, wn1, b1, ws2, wn2, b2], [ws1, wn1, ws2, wn2]

        def forward() -> torch.Tensor:
            h0 = drop(x)  # one mask for the node and its neighbours' view of it
            h = torch.relu(h0 @ ws1 + torch.sparse.mm(m, h0 @ wn1) + b1)
            h = drop(h)
            return h @ ws2 + torch.sparse.mm(m, h @ wn2) + b2

    else:
        n_heads = int(cfg["heads"])
        a = sp.coo_matrix(sp.csr_matrix(adjacency) != 0)
        keep = a.row != a.col
        loops = np.arange(x.shape[0])
        src = torch.as_tensor(np.concatenate([a.row[keep], loops]), dtype=torch.long)
        dst = torch.as_tensor(np.concatenate([a.col[keep], loops]), dtype=torch.long)
        w1, as1, ad1, b1 = (
            init(d, n_heads * hid),
            init(n_heads, hid),
            init(n_heads, hid),
            zeros(n_heads * hid),
        )
        w2, as2, ad2, b2 = (
            init(n_heads * hid, n_classes),
            init(1, n_classes),
            init(1, n_classes),
            zeros(n_classes),
        )
        params = [w1, as1, ad1, b1, w2, as2, ad2, b2]
        decayed = params

        def forward() -> torch.Tensor:
            h = _gat_layer(drop(x), w1, as1, ad1, src, dst, drop).reshape(x.shape[0], -1) + b1
            h = torch.nn.functional.elu(h)
            return _gat_layer(drop(h), w2, as2, ad2, src, dst, drop)[:, 0, :] + b2

    adam = Adam(params, float(cfg["lr"]))  # torch.optim's first step is slow to load
    tr, te = torch.as_tensor(np.asarray(train_idx)), torch.as_tensor(np.asarray(test_idx))
    wd = float(cfg["weight_decay"])
    for _ in range(int(cfg["epochs"])):
        loss = torch.nn.functional.cross_entropy(forward()[tr], labels[tr])
        loss = loss + wd * 0.5 * sum((p**2).sum() for p in decayed)
        adam.step(torch.autograd.grad(loss, params))
    training[0] = False
    with torch.no_grad():
        return float((forward()[te].argmax(1) == labels[te]).float().mean())
