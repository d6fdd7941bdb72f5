"""PGD and the class-wise feature attribution of Wei, Guo and Wang (ICML 2025): the tensor code.

Private helpers of :mod:`trustlab.security.adversarial`; inputs are already checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.security._nets import require_torch

__all__ = ["attribution_matrix", "cas_of", "distill_weight_at", "ema_update", "pgd", "soft_loss"]


def pgd(
    model: Any,
    X: Any,
    y: Any,
    *,
    eps: float,
    step_size: float,
    steps: int,
    random_start: bool,
    bounds: tuple[float, float] | None,
    generator: Any,
) -> Any:
    """L-infinity PGD (Madry et al. 2018): signed-gradient ascent on cross-entropy, projected."""
    torch = require_torch()
    was_training = model.training
    model.eval()
    delta = torch.zeros_like(X)
    if random_start:
        delta = (torch.rand(X.shape, generator=generator) * 2 - 1) * eps
    if bounds is not None:
        delta = (X + delta).clamp(*bounds) - X
    for _ in range(steps):
        delta.requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(model(X + delta), y)
        (grad,) = torch.autograd.grad(loss, delta)
        delta = (delta.detach() + step_size * grad.sign()).clamp(-eps, eps)
        if bounds is not None:
            delta = (X + delta).clamp(*bounds) - X
    model.train(was_training)
    return (X + delta).detach()


def attribution_matrix(features: Any, weight: Any, y: Any, n_classes: int) -> np.ndarray:
    """The feature attribution correlation matrix ``C`` (Algorithm 1 of the paper).

    ``A_i`` = mean over the rows of class ``i`` of ``g(x) * W[i]`` (element-wise), scaled
    to unit norm; ``C[i, j] = <A_i, A_j>``. A class without rows gets a zero row/column.
    """
    torch = require_torch()
    rows = []
    for i in range(n_classes):
        mask = y == i
        if not bool(mask.any()):
            rows.append(torch.zeros(weight.shape[1], dtype=weight.dtype))
            continue
        a = (features[mask] * weight[i]).mean(0)
        norm = a.norm()
        rows.append(a / norm if float(norm) > 0 else a)
    A = torch.stack(rows)
    return (A @ A.T).double().numpy()


def cas_of(C: np.ndarray) -> float:
    """Class attribution similarity: the sum of the positive off-diagonal entries of ``C``.

    As the authors' ``evaluate_matrix.py`` prints it (``clamp(C, 0, 1).sum() - K``, the
    diagonal being 1 for every class with rows).
    """
    off = C - np.diag(np.diag(C))
    return float(np.clip(off, 0.0, 1.0).sum())


def soft_loss(
    logits: Any,
    y: Any,
    *,
    n_classes: int,
    label_smoothing: float,
    teacher_logits: Any,
    temperature: float,
    distill_weight: float,
) -> Any:
    """Cross-entropy to (smoothed) one-hot labels, mixed with distillation to a teacher.

    ``(1 - w) CE(logits, smooth(y)) + w T^2 KL(softmax(teacher / T) || softmax(logits / T))``
    (Hinton et al. 2015; the soft-label adversarial training the paper studies).
    """
    torch = require_torch()
    F = torch.nn.functional
    hard = F.cross_entropy(logits, y, label_smoothing=label_smoothing)
    if teacher_logits is None or distill_weight == 0:
        return hard
    soft = F.kl_div(
        F.log_softmax(logits / temperature, dim=1),
        F.softmax(teacher_logits / temperature, dim=1),
        reduction="batchmean",
    )
    return (1 - distill_weight) * hard + distill_weight * temperature**2 * soft


def ema_update(teacher: Any, model: Any, decay: float) -> None:
    """One step of an exponential moving average of ``model``'s weights into ``teacher``.

    ``theta_teacher <- decay * theta_teacher + (1 - decay) * theta_model`` for every
    parameter; buffers (BatchNorm statistics) are copied. This is the self-distillation
    teacher the authors' training script carried (``--decay 0.001``: ``decay = 0.999`` per
    step) before the release removed it.
    """
    torch = require_torch()
    with torch.no_grad():
        for p_t, p in zip(teacher.parameters(), model.parameters(), strict=True):
            p_t.mul_(decay).add_(p.detach(), alpha=1.0 - decay)
        for b_t, b in zip(teacher.buffers(), model.buffers(), strict=True):
            b_t.copy_(b)


def distill_weight_at(epoch: int, weight: float, ramp: tuple[float, float] | None) -> float:
    """The distillation weight of ``epoch`` (1-based) under a linear ramp.

    ``ramp=None``: ``weight`` from the first epoch. ``ramp=(start, end)``: 0 before
    ``start``, rising linearly to ``weight`` at ``end`` and constant after it (the ramp of
    the authors' removed ``lam_schedule``: 0 at epoch 90, 0.8 from epoch 110 of 200).
    """
    if ramp is None:
        return weight
    start, end = ramp
    if epoch < start:
        return 0.0
    return weight * min(1.0, (epoch - start) / (end - start))
