"""Batched SGD on small teacher-student MLPs, one loss per (schedule, rate, seed); private.

Every student of one call trains at once (batched matrices, one backward pass per step). Seed
``k`` fixes its own teacher, the student's initial weights and its own stream of fresh training
inputs, shared by all schedules and rates of that seed (common random numbers), so rate and
schedule comparisons within a seed are not blurred by data noise. Used by
:func:`trustlab.theory.lr_extension.mlp_extension_study` and
:func:`trustlab.theory.lr_continuation.mlp_continuation_study`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval
from trustlab.errors import MissingDependencyError

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")

STUDY_CONSTRAINTS: dict[str, list[Any]] = {
    "n_seeds": [Interval(numbers.Integral, 2, None, closed="left")],
    "width": [_INT1],
    "dimension": [_INT1],
    "teacher_width": [_INT1],
    "decay": [_NONNEG],
    "batch_size": [_INT1],
    "noise": [_NONNEG],
    "n_bootstrap": [_INT1],
    "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
}
"""The parameter checks shared by the MLP studies (the teacher-student task and the bootstrap)."""


def train_students(
    shapes: np.ndarray,
    gammas: np.ndarray,
    *,
    n_seeds: int,
    width: int,
    dimension: int,
    batch_size: int,
    noise: float,
    teacher_width: int,
    decay: float,
    random_state: int,
) -> np.ndarray:
    """Final excess population loss, ``(len(shapes), len(gammas), n_seeds)``; ``inf`` if diverged.

    ``shapes`` is ``(S, T)``. Each seed's teacher ``y = sum_k c_k tanh(<u_k, x>) + noise * N(0, 1)`` has
    ``teacher_width`` units with output weights ``c_k ~ k^-decay`` (renormalised to unit norm):
    a long tail of ever weaker features, learnt one after another, so the loss keeps falling
    like a power of ``t`` instead of converging fast. The student is a ``width``-unit tanh MLP
    trained on the half squared error; the loss is measured on 2048 fresh inputs per seed against the
    noiseless teacher.
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the dev extra
        raise MissingDependencyError(
            "the MLP studies of trustlab.theory need torch; install it with `pip install trustlab[torch]`."
        ) from exc

    from trustlab._threads import one_thread

    with one_thread():
        gen = torch.Generator().manual_seed(int(random_state))
        d, h, m = int(dimension), int(width), int(teacher_width)
        u = torch.randn(n_seeds, d, m, generator=gen) / math.sqrt(d)  # one teacher per seed
        c = torch.arange(1, m + 1, dtype=torch.float32) ** -float(decay)
        c = (c / c.norm()).view(m, 1)
        n_models = shapes.shape[0] * len(gammas)
        init1 = torch.randn(n_seeds, d, h, generator=gen) / math.sqrt(d)
        init2 = torch.randn(n_seeds, h, 1, generator=gen) / math.sqrt(h)
        w1 = init1.unsqueeze(0).repeat(n_models, 1, 1, 1).requires_grad_(True)  # (M, K, d, h)
        w2 = init2.unsqueeze(0).repeat(n_models, 1, 1, 1).requires_grad_(True)
        rates = torch.as_tensor(
            (shapes[:, None, :] * np.asarray(gammas)[None, :, None]).reshape(n_models, -1),
            dtype=torch.float32,
        )
        for t in range(shapes.shape[1]):
            x = torch.randn(n_seeds, batch_size, d, generator=gen)
            y = torch.tanh(x @ u) @ c + noise * torch.randn(n_seeds, batch_size, 1, generator=gen)
            pred = torch.tanh(torch.einsum("kbd,mkdh->mkbh", x, w1)) @ w2
            w1.grad = None
            w2.grad = None
            (((pred - y) ** 2).mean(dim=(2, 3)) / 2).sum().backward()
            with torch.no_grad():
                lr = rates[:, t].view(-1, 1, 1, 1)
                w1 -= lr * w1.grad  # type: ignore[operator]
                w2 -= lr * w2.grad  # type: ignore[operator]
        with torch.no_grad():
            x = torch.randn(n_seeds, 2048, d, generator=gen)
            target = torch.tanh(x @ u) @ c
            excess = torch.cat(
                [
                    (
                        (
                            torch.tanh(torch.einsum("kbd,mkdh->mkbh", x, w1[i : i + 4])) @ w2[i : i + 4]
                            - target
                        )
                        ** 2
                    )
                    .mean(dim=(2, 3))
                    .div(2)
                    for i in range(0, n_models, 4)
                ]
            )
    loss = excess.numpy().astype(float).reshape(shapes.shape[0], len(gammas), n_seeds)
    return np.where(np.isfinite(loss), loss, np.inf)
