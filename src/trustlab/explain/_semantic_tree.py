"""Composition trees, property-map training and validation tuning of semantic trajectory models.

Helpers of :mod:`trustlab.explain.semantic_ode` (catalog row 004-01; Kacprzyk, Piskorz and van der
Schaar, "Skip the Equations", ICML 2025). The validation tuning follows the authors' released code:
an 80/20 split of the training trajectories picks the composition tree's depth (the depth whose
tree, fitted on the 80 %, has the smallest mean *regret* on the 20 %: score of the predicted
composition minus the sample's best score) and each property map's optimiser settings (the
authors' search ranges, learning rate in [1e-4, 1] and weight decay in [1e-5, 1e-2], log-uniform;
the map kept is the one of the epoch with the smallest validation loss).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

__all__ = ["adam_property_map", "grow_tree", "leaves", "split_train_val", "tune_tree_depth"]

LR_RANGE = (1e-4, 1.0)
WEIGHT_DECAY_RANGE = (1e-5, 1e-2)


def grow_tree(scores: np.ndarray, x: np.ndarray, idx: np.ndarray, depth: int, est: Any) -> dict:
    """The composition tree: greedy splits that lower the summed score of each leaf's best composition."""
    total = scores[idx].sum(axis=0)
    node: dict[str, Any] = {"composition": int(total.argmin()), "n": len(idx)}
    cost = float(total.min())
    if depth >= est.max_depth or len(idx) < 2 * est.min_samples_leaf or cost <= 0:
        return node
    best: tuple[float, int, float] | None = None
    for f in range(x.shape[1]):
        order = idx[np.argsort(x[idx, f], kind="stable")]
        xs = x[order, f]
        left = np.cumsum(scores[order], axis=0)
        k = np.arange(est.min_samples_leaf, len(order) - est.min_samples_leaf + 1)
        k = k[xs[k - 1] < xs[k]]
        if not len(k):
            continue
        split_cost = left[k - 1].min(axis=1) + (total - left[k - 1]).min(axis=1)
        i = int(split_cost.argmin())
        if best is None or split_cost[i] < best[0]:
            best = (float(split_cost[i]), f, float((xs[k[i] - 1] + xs[k[i]]) / 2))
    if best is None or (cost - best[0]) / cost < est.min_relative_gain_to_split:
        return node
    _, f, thr = best
    node.update(feature=f, threshold=thr)
    node["left"] = grow_tree(scores, x, idx[x[idx, f] <= thr], depth + 1, est)
    node["right"] = grow_tree(scores, x, idx[x[idx, f] > thr], depth + 1, est)
    return node


def leaves(
    node: dict, x: np.ndarray, idx: np.ndarray, path: tuple = ()
) -> Iterator[tuple[tuple, dict, np.ndarray]]:
    """Each leaf's path (0 left, 1 right), node and the rows of ``x`` (among ``idx``) that reach it."""
    if "feature" not in node:
        yield path, node, idx
        return
    go_left = x[idx, node["feature"]] <= node["threshold"]
    yield from leaves(node["left"], x, idx[go_left], (*path, 0))
    yield from leaves(node["right"], x, idx[~go_left], (*path, 1))


def split_train_val(n: int, generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The authors' split: a random 80 % of the rows for training, the rest for validation."""
    train = np.sort(generator.choice(n, int(0.8 * n), replace=False))
    return train, np.setdiff1d(np.arange(n), train)


def tune_tree_depth(
    scores: np.ndarray, x: np.ndarray, est: Any, generator: np.random.Generator
) -> tuple[int, dict]:
    """The depth in ``0..est.max_depth`` with the smallest validation regret, and the regret per depth.

    Regret of a sample: its score under the composition its leaf picks minus its smallest score.
    """
    train, val = split_train_val(len(x), generator)
    best_regret = scores[val].min(axis=1)
    regrets: dict[int, float] = {}
    for depth in range(est.max_depth + 1):
        proxy = SimpleNamespace(
            max_depth=depth,
            min_samples_leaf=est.min_samples_leaf,
            min_relative_gain_to_split=est.min_relative_gain_to_split,
        )
        tree = grow_tree(scores[train], x[train], np.arange(len(train)), 0, proxy)
        chosen = np.empty(len(val), dtype=int)
        for _, leaf, rows in leaves(tree, x[val], np.arange(len(val))):
            chosen[rows] = leaf["composition"]
        regrets[depth] = float(np.mean(scores[val, chosen] - best_regret))
    return min(regrets, key=lambda d: (regrets[d], d)), regrets


def adam_property_map(
    loss_fn: Any,
    theta0: np.ndarray,
    *,
    n_epochs: int,
    learning_rate: float,
    weight_decay: float,
    val_loss_fn: Any = None,
) -> tuple[np.ndarray, float]:
    """Adam on the property-map coefficients; returns the best coefficients and their loss.

    ``loss_fn(theta)`` is the training loss (a torch scalar). Best means the smallest training loss,
    or, with ``val_loss_fn``, the smallest validation loss over the epochs (the authors' best-checkpoint
    rule). Adam is written out: torch.optim's first use imports torch._dynamo, seconds of CPU.
    """
    theta = torch.tensor(theta0, requires_grad=True)
    m1, m2 = torch.zeros_like(theta), torch.zeros_like(theta)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    best, best_loss = theta.detach().clone(), np.inf
    for step in range(1, n_epochs + 2):
        theta.grad = None
        loss = loss_fn(theta)
        value = float(loss.detach())
        if val_loss_fn is not None:
            with torch.no_grad():
                monitored = float(val_loss_fn(theta))
        else:
            monitored = value
        if monitored < best_loss:
            best, best_loss = theta.detach().clone(), monitored
        if step > n_epochs or not np.isfinite(value):
            break
        loss.backward()
        with torch.no_grad():
            assert theta.grad is not None
            g = theta.grad + weight_decay * theta
            m1.mul_(beta1).add_(g, alpha=1 - beta1)
            m2.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            step_size = learning_rate / (1 - beta1**step)
            theta -= step_size * m1 / ((m2 / (1 - beta2**step)).sqrt() + eps)
    return best.numpy(), best_loss
