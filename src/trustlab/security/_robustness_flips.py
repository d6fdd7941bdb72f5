"""Searches for a label flip inside an L-inf box: projected gradient, or a black-box search.

Both return, per row, whether some point found inside the box ``|delta_j| <= r_j`` (only on
the perturbed columns) changes the predicted label. A search can miss a flip that exists
(the shares are lower bounds of the true flip rates); for a binary logistic regression
the first step (the box corner against the score's sign) is exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from trustlab._stats import wilson
from trustlab.security._nets import require_torch

__all__ = ["gradient_flips", "search_flips", "wilson"]


def gradient_flips(logits_fn: Any, X: np.ndarray, radius: np.ndarray, *, n_steps: int) -> np.ndarray:
    """Projected gradient ascent of the cross-entropy to the clean prediction in the box.

    Step 0 jumps to the box corner ``x + r * sign(grad)`` (FGSM at full radius, exact for a
    binary linear model); then ``n_steps`` steps of size ``2.5 r / n_steps`` with projection
    (Madry et al. 2018). A row flips when any iterate's argmax differs from the clean one.
    """
    torch = require_torch()
    x0 = torch.as_tensor(np.array(X, dtype=np.float64))
    r = torch.as_tensor(np.asarray(radius, dtype=np.float64)).reshape(1, -1).expand_as(x0)
    with torch.no_grad():
        clean = logits_fn(x0.to(torch.float32) if _wants_float32(logits_fn) else x0).argmax(dim=1)
    flipped = torch.zeros(len(x0), dtype=torch.bool)
    delta = torch.zeros_like(x0)
    step = 2.5 * r / max(n_steps, 1)
    for t in range(n_steps + 1):
        d = delta.clone().requires_grad_(True)
        xin = x0 + d
        out = logits_fn(xin.to(torch.float32) if _wants_float32(logits_fn) else xin)
        flipped |= (out.argmax(dim=1) != clean).detach()
        loss = torch.nn.functional.cross_entropy(out, clean, reduction="sum")
        (g,) = torch.autograd.grad(loss, d)
        with torch.no_grad():
            delta = r * g.sign() if t == 0 else delta + step * g.sign()
            delta = torch.maximum(torch.minimum(delta, r), -r)
    with torch.no_grad():
        xin = x0 + delta
        out = logits_fn(xin.to(torch.float32) if _wants_float32(logits_fn) else xin)
        flipped |= out.argmax(dim=1) != clean
    return flipped.numpy()


def _wants_float32(fn: Any) -> bool:
    torch = require_torch()
    return isinstance(fn, torch.nn.Module)


def _perturbed(X: Any, cols: list[Any], delta: np.ndarray, reps: int) -> Any:
    """``reps`` copies of each row of X (row-major), with ``delta`` added on ``cols``."""
    if isinstance(X, pd.DataFrame):
        big = X.iloc[np.repeat(np.arange(len(X)), reps)].reset_index(drop=True).copy()
        for j, c in enumerate(cols):
            big[c] = big[c].to_numpy(dtype=float) + delta[:, j]
        return big
    base = np.repeat(np.asarray(X, dtype=float), reps, axis=0)
    base[:, cols] += delta
    return base


def search_flips(
    model: Any,
    X: Any,
    cols: list[Any],
    radius: np.ndarray,
    *,
    n_random: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Black-box search with ``predict`` (and ``predict_proba`` when there is one).

    Candidates per row: the 2d single-coordinate box extremes ``x +- r_j e_j`` (a
    finite-difference secant of the predicted class's probability across the box), the
    corner against that secant's sign, and ``n_random`` uniformly drawn box corners.
    """
    n, d = len(X), len(cols)
    clean = np.asarray(model.predict(X))
    eye = np.eye(d) * radius.reshape(1, -1)
    single = np.concatenate([eye, -eye])  # (2d, d)
    offsets = np.tile(single, (n, 1))
    preds = np.asarray(model.predict(_perturbed(X, cols, offsets, 2 * d))).reshape(n, 2 * d)
    flipped = (preds != clean[:, None]).any(axis=1)
    corners = []
    if hasattr(model, "predict_proba"):
        proba = np.asarray(model.predict_proba(_perturbed(X, cols, offsets, 2 * d)))
        classes = list(getattr(model, "classes_", []))
        idx = np.array([classes.index(c) if c in classes else 0 for c in clean])
        p = proba.reshape(n, 2 * d, -1)[np.arange(n), :, idx]  # (n, 2d) prob of the clean class
        secant = p[:, :d] - p[:, d:]
        corners.append(-np.sign(secant) * radius.reshape(1, -1))
    if n_random:
        signs = rng.choice([-1.0, 1.0], size=(n, n_random, d))
        corners.append((signs * radius.reshape(1, 1, -1)).reshape(n, n_random * d).reshape(n * n_random, d))
    if corners:
        parts = []
        if hasattr(model, "predict_proba"):
            parts.append(corners[0][:, None, :])
        if n_random:
            parts.append(corners[-1].reshape(n, n_random, d))
        cand = np.concatenate(parts, axis=1)
        reps = cand.shape[1]
        preds = np.asarray(model.predict(_perturbed(X, cols, cand.reshape(n * reps, d), reps)))
        flipped |= (preds.reshape(n, reps) != clean[:, None]).any(axis=1)
    return flipped
