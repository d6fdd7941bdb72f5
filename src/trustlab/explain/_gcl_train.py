"""The training loop of fuzzy-boundary graph contrastive learning (row 004-06; private module).

One loop for both arms: GRACE (Zhu et al., 2020: two views by edge dropping and feature
masking, a two-layer GCN encoder, a projection head, the symmetric InfoNCE with inter- and
intra-view negatives) and, after ``warmup`` epochs, the fuzzy-boundary terms of Lin et al.
(ICML 2025) as reconstructed in docs/explain/fuzzy-boundary-gcl.md: fuzzy c-means memberships
of the embeddings to ``K`` centres, the fuzzy boundary (the alpha-cut of the memberships, wider
than the crisp argmax regions), *construction* (co-members of a fuzzy boundary become soft
positives and are no longer pushed apart) and *contraction* (members are pulled to their
centre, weighted by membership^m). With the fuzzy weights 0 the loop is GRACE, step for step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from threadpoolctl import threadpool_limits

from trustlab._adam import Adam
from trustlab._threads import one_thread

__all__ = ["GCLConfig", "GCLFit", "encode", "fuzzy_memberships", "train_gcl"]

_EPS = 1e-12


@dataclass(frozen=True)
class GCLConfig:
    """Hyper-parameters of one run (validated by the estimator)."""

    n_components: int
    hidden_dim: int
    projection_dim: int
    n_epochs: int
    learning_rate: float
    weight_decay: float
    temperature: float
    drop_edge: tuple[float, float]
    mask_feature: tuple[float, float]
    n_clusters: int
    fuzzifier: float
    alpha: float
    construction_weight: float
    contraction_weight: float
    warmup: int
    seed: int
    backbone: str = "grace"
    pretrain: int = 0


@dataclass(frozen=True)
class GCLFit:
    """What a run returns: encoder weights, final embeddings and fuzzy state, the loss curve."""

    weights: list[np.ndarray]
    embedding: np.ndarray
    centers: np.ndarray | None
    membership: np.ndarray | None
    loss_curve: np.ndarray


Graph = torch.Tensor  # the propagation matrix: dense up to _DENSE_MAX nodes, else sparse COO

# Dense propagation (n x n float32) is faster on CPUs for small graphs; above this many nodes the
# propagation and the node features go sparse (Cora, 2,708 nodes: 0.57 s an epoch instead of 0.80).
_DENSE_MAX = 1000


def _edges(adjacency: sp.csr_matrix) -> torch.Tensor:
    """The undirected edges ``i < j`` as a ``(2, m)`` long tensor."""
    upper = sp.triu(adjacency, k=1).tocoo()
    return torch.as_tensor(np.vstack([upper.row, upper.col]), dtype=torch.long)


def _graph(edges: torch.Tensor, n: int) -> Graph:
    """``D^-1/2 (A + I) D^-1/2`` of the undirected ``edges`` (the GCN propagation with self-loops)."""
    loops = torch.arange(n)
    rows = torch.cat([edges[0], edges[1], loops])
    cols = torch.cat([edges[1], edges[0], loops])
    inv = torch.bincount(rows, minlength=n).to(torch.float32).rsqrt()
    values = inv[rows] * inv[cols]
    if n <= _DENSE_MAX:
        return torch.zeros(n, n).index_put_((rows, cols), values)
    index = torch.stack([rows, cols])
    return torch.sparse_coo_tensor(index, values, (n, n), check_invariants=True).coalesce()


def _propagate(g: Graph, h: torch.Tensor) -> torch.Tensor:
    """``g @ h`` for a dense or sparse ``g``."""
    return torch.sparse.mm(g, h) if g.is_sparse else g @ h


def _gcn(
    g: Graph,
    x: torch.Tensor,
    w: list[torch.Tensor],
    keep: torch.Tensor | None = None,
    linear_out: bool = False,
) -> torch.Tensor:
    """Two GCN layers with ReLU after each (GRACE's encoder): ``relu(S relu(S X W1) W2)``.

    ``linear_out=True`` drops the last ReLU: ``S relu(S X W1) W2``, the encoder of the graph
    auto-encoder (Kipf & Welling, 2016). ``keep`` (0/1 per feature column) masks features as
    ``X diag(keep) W1 = X (keep * W1)``: the same products as masking ``X``, without copying it
    (and ``X`` may stay sparse).
    """
    w0 = w[0] if keep is None else w[0] * keep[:, None]
    h = torch.relu(_propagate(g, _propagate(x, w0)) + w[1])
    out = _propagate(g, h @ w[2]) + w[3]
    return out if linear_out else torch.relu(out)


def encode(
    adjacency: sp.csr_matrix, features: np.ndarray, weights: list[np.ndarray], linear_out: bool = False
) -> np.ndarray:
    """The trained encoder on a graph (no augmentation): node embeddings ``(n, n_components)``."""
    w = [torch.tensor(v) for v in weights]
    g = _graph(_edges(adjacency), adjacency.shape[0])
    with torch.no_grad():
        x = torch.tensor(features, dtype=torch.float32)
        return _gcn(g, x, w, linear_out=linear_out).numpy().astype(float)


def _reconstruction_target(edges: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """GAE's target ``A + I`` (dense), its positive-class weight and normaliser (Kipf & Welling, 2016).

    ``pos_weight = (n^2 - sum(A + I)) / sum(A + I)`` balances the few edges against the many
    non-edges, and ``norm = n^2 / (2 (n^2 - sum(A + I)))`` scales the loss, as in the authors' code.
    """
    loops = torch.arange(n)
    rows = torch.cat([edges[0], edges[1], loops])
    cols = torch.cat([edges[1], edges[0], loops])
    label = torch.zeros(n, n).index_put_((rows, cols), torch.ones(rows.shape[0]))
    total, ones = float(n * n), float(rows.shape[0])
    return label, torch.tensor((total - ones) / ones), total / (2.0 * (total - ones))


def _reconstruction_loss(z: torch.Tensor, target: tuple[torch.Tensor, torch.Tensor, float]) -> torch.Tensor:
    """GAE's loss: weighted binary cross-entropy of ``sigmoid(z z^T)`` against ``A + I``."""
    label, pos_weight, norm = target
    logits = z @ z.T
    return norm * torch.nn.functional.binary_cross_entropy_with_logits(logits, label, pos_weight=pos_weight)


def fuzzy_memberships(z: torch.Tensor, centers: torch.Tensor, fuzzifier: float) -> torch.Tensor:
    """Fuzzy c-means memberships ``u_ik = 1 / sum_j (d_ik / d_ij)^(2/(m-1))`` (rows sum to 1).

    ``d`` is the Euclidean distance between the L2-normalised embedding and centre.
    """
    d2 = torch.cdist(z, centers).pow(2).clamp_min(_EPS)
    logits = -torch.log(d2) / (fuzzifier - 1.0)  # u_ik proportional to d_ik^(-2/(m-1))
    return torch.softmax(logits, dim=1)


def _fcm_centers(z: torch.Tensor, u: torch.Tensor, fuzzifier: float) -> torch.Tensor:
    """The fuzzy c-means centre update ``c_k = sum_i u_ik^m z_i / sum_i u_ik^m``, renormalised."""
    um = u.pow(fuzzifier)
    c = um.T @ z / um.sum(0).clamp_min(_EPS)[:, None]
    return torch.nn.functional.normalize(c, dim=1)


def _drop_edges(edges: torch.Tensor, p: float, gen: torch.Generator) -> torch.Tensor:
    """Each undirected edge kept with probability ``1 - p`` (both directions together)."""
    return edges[:, torch.rand(edges.shape[1], generator=gen) >= p]


def _feature_mask(d: int, p: float, gen: torch.Generator) -> torch.Tensor:
    """Feature columns kept (1) or zeroed (0, with probability ``p``): one mask for all nodes, as GRACE."""
    return (torch.rand(d, generator=gen) >= p).to(torch.float32)


def _project(h: torch.Tensor, w: list[torch.Tensor]) -> torch.Tensor:
    """GRACE's projection head: ``fc2(elu(fc1(h)))``, then L2-normalised."""
    out = torch.nn.functional.elu(h @ w[4] + w[5]) @ w[6] + w[7]
    return torch.nn.functional.normalize(out, dim=1)


def _contrast(
    z1: torch.Tensor, z2: torch.Tensor, tau: float, weight: torch.Tensor | None, co: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """GRACE's symmetric InfoNCE, and the construction term when ``co`` is given (per anchor).

    GRACE: ``l(u_i, v_i) = -log e^{s_ii'} / (e^{s_ii'} + sum_{k!=i} w_ik (e^{s(u_i,v_k)} + e^{s(u_i,u_k)}))``
    with ``s = cosine / tau``, averaged over both directions; ``weight = None`` (``w = 1``) is GRACE.
    Construction: soft-positive InfoNCE across views, ``-sum_k S_ik log p_ik / sum_k S_ik`` with
    ``S = co`` the co-membership of the fuzzy boundaries and ``p_ik`` the softmax over view-2 nodes
    of ``s(u_i, v_k)``: members of one fuzzy boundary are bridged.
    """
    s12 = z1 @ z2.T / tau
    e12, e11, e22 = torch.exp(s12), torch.exp(z1 @ z1.T / tau), torch.exp(z2 @ z2.T / tau)
    pos = e12.diagonal()
    if weight is not None:
        e12, e11, e22 = e12 * weight, e11 * weight, e22 * weight
    off12, off21 = e12.sum(1) - e12.diagonal(), e12.sum(0) - e12.diagonal()
    denom1 = pos + off12 + e11.sum(1) - e11.diagonal()
    denom2 = pos + off21 + e22.sum(1) - e22.diagonal()
    grace = 0.5 * (torch.log(denom1) + torch.log(denom2)) - s12.diagonal()
    if co is None:
        return grace, None
    mass = co.sum(1)
    logp1, logp2 = torch.log_softmax(s12, dim=1), torch.log_softmax(s12.T, dim=1)
    build = -0.5 * ((co * logp1).sum(1) + (co * logp2).sum(1)) / mass.clamp_min(_EPS) * (mass > 0)
    return grace, build


def _init(fan_in: int, fan_out: int, gen: torch.Generator) -> torch.Tensor:
    bound = (6.0 / (fan_in + fan_out)) ** 0.5  # Glorot uniform, as torch_geometric's GCNConv
    return (torch.rand(fan_in, fan_out, generator=gen) * 2 - 1) * bound


def _kmeans_centers(z: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import KMeans

    with threadpool_limits(1):
        c = KMeans(k, n_init=10, random_state=seed).fit(z).cluster_centers_
    return c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), _EPS)


def train_gcl(adjacency: sp.csr_matrix, features: np.ndarray, cfg: GCLConfig) -> GCLFit:
    """Train the encoder; the fuzzy terms switch on after ``cfg.warmup`` epochs when weighted."""
    with one_thread():  # small dense matrices: one thread is fastest and spares busy cores
        return _train(adjacency, features, cfg)


def _train(adjacency: sp.csr_matrix, features: np.ndarray, cfg: GCLConfig) -> GCLFit:
    gen = torch.Generator().manual_seed(cfg.seed)
    x = torch.tensor(features, dtype=torch.float32)
    d_in, n = x.shape[1], x.shape[0]
    if n > _DENSE_MAX and np.count_nonzero(features) < 0.1 * features.size:
        x = x.to_sparse().coalesce()  # bag-of-words features (Cora: 1.3 % non-zero)
    dims = [(d_in, cfg.hidden_dim), (cfg.hidden_dim, cfg.n_components)]
    proj = [(cfg.n_components, cfg.projection_dim), (cfg.projection_dim, cfg.n_components)]
    params: list[torch.Tensor] = []
    for fi, fo in dims + proj:
        params += [_init(fi, fo, gen).requires_grad_(), torch.zeros(fo, requires_grad=True)]
    adam = Adam(params, cfg.learning_rate)
    pre_adam = Adam(params[:4], cfg.learning_rate)
    edges = _edges(adjacency)
    s_full = _graph(edges, n)
    fuzzy = cfg.construction_weight > 0 or cfg.contraction_weight > 0
    gae = cfg.backbone == "gae"
    target = _reconstruction_target(edges, n) if gae else None
    centers: torch.Tensor | None = None
    membership: torch.Tensor | None = None
    losses = np.empty(cfg.n_epochs)
    eye = torch.eye(n, dtype=torch.bool)
    for epoch in range(cfg.n_epochs):
        h_full = _gcn(s_full, x, params, linear_out=gae) if gae or (fuzzy and epoch >= cfg.warmup) else None
        loss_rec = torch.zeros(())
        if target is not None and h_full is not None:
            loss_rec = _reconstruction_loss(h_full, target)
        if epoch < cfg.pretrain:  # GAE pre-training: reconstruction alone, no views, no contrast
            grads = torch.autograd.grad(loss_rec, params[:4])
            if cfg.weight_decay > 0:
                grads = tuple(
                    g + cfg.weight_decay * p.detach() for g, p in zip(grads, params[:4], strict=True)
                )
            pre_adam.step(grads)  # the encoder alone; fine-tuning starts a fresh Adam (pre-train, then tune)
            losses[epoch] = float(loss_rec.detach())
            continue
        s1 = _graph(_drop_edges(edges, cfg.drop_edge[0], gen), n)
        s2 = _graph(_drop_edges(edges, cfg.drop_edge[1], gen), n)
        m1, m2 = _feature_mask(d_in, cfg.mask_feature[0], gen), _feature_mask(d_in, cfg.mask_feature[1], gen)
        h1, h2 = _gcn(s1, x, params, m1, gae), _gcn(s2, x, params, m2, gae)
        z1, z2 = _project(h1, params), _project(h2, params)
        weight = co = None
        loss_fuzzy = torch.zeros(())
        if fuzzy and epoch >= cfg.warmup and h_full is not None:
            h = torch.nn.functional.normalize(h_full, dim=1)
            if centers is None:  # the crisp clusters of the warmed-up (GRACE) embedding
                centers = torch.tensor(_kmeans_centers(h.detach().numpy(), cfg.n_clusters, cfg.seed))
                centers = centers.to(torch.float32)
            u = fuzzy_memberships(h.detach(), centers, cfg.fuzzifier)
            boundary = u * (u >= cfg.alpha)  # the fuzzy boundary: alpha-cut, wider than argmax
            co = (boundary @ boundary.T).masked_fill(eye, 0.0).clamp(0.0, 1.0)
            weight = 1.0 - co  # co-members of a fuzzy boundary are not pushed apart
            dist2 = torch.cdist(h, centers).pow(2)
            loss_fuzzy = cfg.contraction_weight * (boundary.pow(cfg.fuzzifier) * dist2).sum(1).mean()
            centers = _fcm_centers(h.detach(), u, cfg.fuzzifier)  # one fuzzy c-means step per epoch
            membership = u
        grace, build = _contrast(z1, z2, cfg.temperature, weight, co if cfg.construction_weight > 0 else None)
        loss = grace.mean() + loss_fuzzy + loss_rec
        if build is not None:
            loss = loss + cfg.construction_weight * build.mean()
        grads = torch.autograd.grad(loss, params)
        if cfg.weight_decay > 0:
            grads = tuple(g + cfg.weight_decay * p.detach() for g, p in zip(grads, params, strict=True))
        adam.step(grads)
        losses[epoch] = float(loss.detach())
    weights = [p.detach().numpy().copy() for p in params[:4]]
    embedding = encode(adjacency, features, weights, linear_out=gae)
    if centers is not None:
        h = torch.nn.functional.normalize(torch.tensor(embedding, dtype=torch.float32), dim=1)
        membership = fuzzy_memberships(h, centers, cfg.fuzzifier)
    return GCLFit(
        weights=weights,
        embedding=embedding,
        centers=None if centers is None else centers.numpy().astype(float),
        membership=None if membership is None else membership.numpy().astype(float),
        loss_curve=losses,
    )
