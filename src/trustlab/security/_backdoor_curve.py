"""Quadratic Bezier mode connectivity between two models (Garipov et al. 2018), TSC's second step.

Private helper of :mod:`trustlab.security.backdoor`. The curve between end points
``A`` and ``B`` (fixed) with a trainable bend ``M`` is

    theta(t) = (1 - t)^2 A + 2 t (1 - t) M + t^2 B,   t in [0, 1],

``M`` starts at ``(A + B) / 2`` and is trained by SGD (momentum 0.9, weight decay
5e-4, cosine learning-rate schedule over 100 epochs) on the expected loss along the
curve: one ``t ~ U(0, 1)`` per mini-batch, cross-entropy plus the curve regulariser
``0.5 * l2 * ||theta(t)||^2``, as in the authors' code.

BatchNorm layers: their weight and bias lie on the curve like every parameter; during
training they normalise with the mini-batch's statistics (train mode). The running
statistics of the model taken at ``t`` are then re-estimated on the clean samples (reset,
one pass in train mode, each mini-batch weighted by its size), as the authors'
``update_bn`` does before a point of the curve is evaluated.
"""

from __future__ import annotations

import copy
from typing import Any

from trustlab.security._nets import require_torch

__all__ = ["curve_point", "has_batchnorm", "update_batchnorm"]


def curve_point(
    a: Any,
    b: Any,
    X: Any,
    y: Any,
    *,
    t: float,
    epochs: int,
    lr: float,
    batch_size: int,
    l2: float,
    generator: Any,
) -> tuple[Any, float]:
    """Train the bend of the Bezier curve from ``a`` to ``b`` on ``(X, y)``; return the model at ``t``.

    Also returns the mean training loss of the last epoch.
    """
    torch = require_torch()
    from torch.func import functional_call

    pa = {k: v.detach().clone() for k, v in a.named_parameters()}
    pb = {k: v.detach().clone() for k, v in b.named_parameters()}
    bend = {k: torch.nn.Parameter((pa[k] + pb[k]) / 2) for k in pa}
    opt = torch.optim.SGD(list(bend.values()), lr=lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)

    def theta(s: float) -> dict[str, Any]:
        return {k: (1 - s) ** 2 * pa[k] + 2 * s * (1 - s) * bend[k] + s**2 * pb[k] for k in pa}

    template = copy.deepcopy(a).train()
    min_rows = 2 if has_batchnorm(template) else 1  # batch statistics need two rows
    last = 0.0
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=generator)
        total = 0.0
        for start in range(0, len(X), batch_size):
            idx = order[start : start + batch_size]
            if len(idx) < min_rows:
                continue
            s = float(torch.rand(1, generator=generator))
            params = theta(s)
            loss = torch.nn.functional.cross_entropy(functional_call(template, params, (X[idx],)), y[idx])
            total += float(loss.detach()) * len(idx)
            loss = loss + 0.5 * l2 * sum((p**2).sum() for p in params.values())
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        last = total / len(X)
    out = copy.deepcopy(a)
    with torch.no_grad():
        point = theta(t)
        for name, p in out.named_parameters():
            p.copy_(point[name])
    update_batchnorm(out, X, batch_size=batch_size)
    return out.eval(), last


def has_batchnorm(model: Any) -> bool:
    """Whether ``model`` holds a BatchNorm layer."""
    torch = require_torch()
    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())


def update_batchnorm(model: Any, X: Any, *, batch_size: int) -> None:
    """Re-estimate the running statistics of ``model``'s BatchNorm layers on ``X`` (in place).

    The statistics are reset, then averaged over one pass of mini-batches in train mode,
    each weighted by its size (momentum ``b / (seen + b)``); the layers' momenta are
    restored after. A model without BatchNorm is left as it is.
    """
    torch = require_torch()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    was_training = model.training
    for m in norms:
        m.reset_running_stats()
    model.train()
    seen = 0
    try:
        with torch.no_grad():
            for start in range(0, len(X), batch_size):
                xb = X[start : start + batch_size]
                if len(xb) < 2 and seen:  # a one-row batch has no variance: skip it
                    continue
                for m in norms:
                    m.momentum = len(xb) / (seen + len(xb))
                model(xb)
                seen += len(xb)
    finally:
        for m, momentum in zip(norms, momenta, strict=True):
            m.momentum = momentum
        model.train(was_training)
