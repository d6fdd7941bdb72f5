"""Baseline purifications that TSC is compared with: plain fine-tuning and fine-pruning.

Private helpers for the claim tests and the benchmark (not exported). Both use only the
clean samples TSC gets.

* Fine-tuning: Adam on cross-entropy over the clean samples.
* Fine-pruning (Liu, Dolan-Gavitt, Garg, RAID 2018): units of the last hidden layer are
  pruned in increasing order of their mean activation on the clean samples (the
  backdoor hides in units clean data leaves dormant) while the clean-sample accuracy
  stays within ``max_drop`` of the original, then the pruned network is fine-tuned.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from trustlab.security._backdoor_layers import _activation, read_chain
from trustlab.security._nets import require_torch
from trustlab.security._nets import train as _train

__all__ = ["fine_prune", "fine_tune"]


def fine_tune(
    model: Any,
    X: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 100,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
) -> Any:
    """A fine-tuned copy of ``model`` (Adam, cross-entropy) on the clean samples."""
    return _train(copy.deepcopy(model), X, y, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed)


def fine_prune(
    model: Any,
    X: np.ndarray,
    y: np.ndarray,
    *,
    max_drop: float = 0.05,
    epochs: int = 100,
    lr: float = 1e-3,
    batch_size: int = 32,
    seed: int = 0,
) -> tuple[Any, int]:
    """Fine-pruning: prune dormant last-hidden units, fine-tune; return the model and units pruned."""
    torch = require_torch()
    out = copy.deepcopy(model).eval()
    chain = read_chain(out, "fine_prune")
    k = len(chain.weights) - 2
    Xt = torch.as_tensor(X, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.int64)
    order = np.argsort(_activation(out, chain, k, Xt).mean(0).numpy(), kind="stable")
    layer = chain.layers[chain.weights[k]]
    mask = torch.ones(layer.weight.shape[0])
    shape = (-1,) + (1,) * (layer.weight.ndim - 1)

    def apply_mask() -> None:
        with torch.no_grad():
            layer.weight.mul_(mask.view(shape))
            layer.bias.mul_(mask)

    def accuracy() -> float:
        with torch.no_grad():
            return float((out(Xt).argmax(1) == yt).float().mean())

    base = accuracy()
    pruned = 0
    for unit in order[:-1]:
        saved = (layer.weight[unit].clone(), layer.bias[unit].clone())
        mask[unit] = 0.0
        apply_mask()
        if accuracy() < base - max_drop:
            mask[unit] = 1.0
            with torch.no_grad():
                layer.weight[unit], layer.bias[unit] = saved
            break
        pruned += 1
    _train(out, X, y, epochs=epochs, lr=lr, batch_size=batch_size, seed=seed, after_step=apply_mask)
    return out, pruned
