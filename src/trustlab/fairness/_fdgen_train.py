"""FDGen's training loop in torch (row 003-04); imported by graph_generation only when fitting."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from trustlab._adam import Adam
from trustlab._threads import one_thread

__all__ = ["FittedGenerator", "train_generator"]

_DTYPE = torch.float32


@dataclass
class FittedGenerator:
    """What training leaves: edge probabilities, feature means and scales, the final terms."""

    edge_probabilities: np.ndarray
    latent: np.ndarray
    feature_means: np.ndarray | None
    feature_scale: np.ndarray | None
    loss_curve: list[float]
    feature_bias: float
    structural_bias: float


class _Fixed:
    """The fixed training tensors: adjacency, masks, group indicators and counts."""

    def __init__(self, dense: np.ndarray, x: np.ndarray | None, codes: np.ndarray) -> None:
        n = dense.shape[0]
        k = int(codes.max()) + 1
        self.n = n
        self.adj = torch.tensor(dense, dtype=_DTYPE)
        self.offdiag = 1.0 - torch.eye(n, dtype=_DTYPE)
        self.onehot = torch.nn.functional.one_hot(torch.as_tensor(codes, dtype=torch.long), k).to(_DTYPE)
        sizes = np.bincount(codes, minlength=k).astype(float)
        self.sizes = torch.tensor(sizes, dtype=_DTYPE)
        self.shares = self.sizes / n
        self.within_pairs = torch.tensor(sizes * (sizes - 1), dtype=_DTYPE)
        self.out_pairs = torch.tensor(sizes * (n - sizes), dtype=_DTYPE)
        self.n_edges = float(dense.sum() / 2)
        self.density = float(dense.sum() / (n * (n - 1)))
        self.x: torch.Tensor | None = None
        if x is not None:
            self.x = torch.tensor(x, dtype=_DTYPE)
            sd = x.std(axis=0)
            self.x_sd = torch.tensor(np.where(sd > 0, sd, 1.0), dtype=_DTYPE)


def _objective(
    t: _Fixed,
    params: list[torch.Tensor],
    feature_weight: float,
    structure_weight: float,
) -> tuple[torch.Tensor, float, float]:
    """Per-node loss: Bernoulli NLL of A + Gaussian NLL of X + weighted feature and structural terms."""
    z, b = params[0], params[1]
    n = t.n
    logits = z @ z.T + b[:, None] + b[None, :]
    soft = torch.nn.functional.softplus(logits)  # -log(1 - P)
    loss = ((soft - t.adj * logits) * t.offdiag).sum() / 2  # each unordered pair once
    prob = torch.exp(logits - soft) * t.offdiag
    block = t.onehot.T @ prob @ t.onehot
    within = torch.diagonal(block) / t.within_pairs
    out = (block.sum(dim=1) - torch.diagonal(block)) / t.out_pairs
    r_s = (t.shares * ((within - out) / t.density) ** 2).sum()
    loss = loss + structure_weight * t.n_edges * r_s
    r_f = 0.0
    if t.x is not None:
        w, c = params[2], params[3]
        mu = z @ w + c
        # fixed unit scale in standardised units: a learned tau collapses (the per-node latent
        # memorises the features, tau -> 0.01 sd) and the unbounded likelihood swamps both terms
        nll = 0.5 * ((t.x - mu) / t.x_sd) ** 2
        d = t.x.shape[1]
        group_mu = (t.onehot.T @ mu) / t.sizes[:, None]
        gap = (group_mu - mu.mean(dim=0)) / t.x_sd
        r_f_t = (t.shares * (gap**2).sum(dim=1)).sum() / d
        loss = loss + nll.sum() + feature_weight * n * d * r_f_t
        r_f = float(r_f_t.detach())
    return loss / n, r_f, float(r_s.detach())


def train_generator(
    dense: np.ndarray,
    x: np.ndarray | None,
    codes: np.ndarray,
    z0: np.ndarray,
    b0: np.ndarray,
    *,
    feature_weight: float,
    structure_weight: float,
    n_epochs: int,
    learning_rate: float,
) -> FittedGenerator:
    """Full-batch Adam on FDGen's objective from the given initial latent vectors and offsets."""
    with one_thread():
        t = _Fixed(dense, x, codes)
        params = [
            torch.tensor(z0, dtype=_DTYPE, requires_grad=True),
            torch.tensor(b0, dtype=_DTYPE, requires_grad=True),
        ]
        if x is not None:
            design = np.column_stack([z0, np.ones(len(z0))])
            w0 = np.linalg.lstsq(design, x, rcond=None)[0]
            params += [
                torch.tensor(w0[:-1], dtype=_DTYPE, requires_grad=True),
                torch.tensor(w0[-1], dtype=_DTYPE, requires_grad=True),
            ]
        adam = Adam(params, learning_rate)
        curve: list[float] = []
        for _ in range(n_epochs):
            loss, _, _ = _objective(t, params, feature_weight, structure_weight)
            adam.step(torch.autograd.grad(loss, params))
            curve.append(float(loss.detach()))
        with torch.no_grad():
            _, r_f, r_s = _objective(t, params, feature_weight, structure_weight)
            z, b = params[0], params[1]
            prob = torch.sigmoid(z @ z.T + b[:, None] + b[None, :]).double().numpy()
            np.fill_diagonal(prob, 0.0)
            means = scale = None
            if x is not None:
                means = (z @ params[2] + params[3]).double().numpy()
                # tau: the maximum-likelihood scale given the fitted means (RMS residual), floored
                scale = np.maximum(np.sqrt(((x - means) ** 2).mean(axis=0)), 1e-3 * t.x_sd.double().numpy())
        return FittedGenerator(
            edge_probabilities=prob,
            latent=z.detach().double().numpy(),
            feature_means=means,
            feature_scale=scale,
            loss_curve=curve,
            feature_bias=r_f,
            structural_bias=r_s,
        )
