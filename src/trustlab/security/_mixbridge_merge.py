"""MixBridge's Merge: the mixture of expert bridges, the router's pre-training, the WRS penalty.

Private helper of :mod:`trustlab.security.mixbridge` (its public names are re-exported there).
"""

from __future__ import annotations

import copy
import functools
import numbers
from collections.abc import Sequence
from typing import Any

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ModelError, ParameterError
from trustlab.security._mixbridge_poison import PoisonedPairs
from trustlab.vision.bridge import I2SBSchedule, bridge_loss, check_fits, check_pairs
from trustlab.vision.classifiers import check_model, one_thread, require_torch, torch_generator
from trustlab.vision.diffusion import _denoising_loop

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]
_RATE = [Interval(numbers.Real, 0, None, closed="neither")]


@functools.cache
def _mixture_class() -> Any:
    torch = require_torch()

    class MixtureOfBridges(torch.nn.Module):  # type: ignore[name-defined]
        """Expert bridges mixed by a router: ``sum_k softmax(router(x1))_k expert_k(x_t, t)``."""

        takes_input_image = True

        def __init__(self, experts: list[Any], router: Any) -> None:
            super().__init__()
            self.experts = torch.nn.ModuleList(experts)
            self.router = router

        def weights(self, x1: Any) -> Any:
            """Router weights ``(n, K)`` from the ``[-1, 1]`` input images (router reads [0, 1])."""
            return torch.softmax(self.router((x1 + 1) / 2), dim=1)

        def forward(self, x: Any, t: Any, x1: Any) -> Any:
            w = self.weights(x1)
            outs = [getattr(o, "sample", o) for o in (e(x, t) for e in self.experts)]
            return sum(w[:, k, None, None, None] * o for k, o in enumerate(outs))

    return MixtureOfBridges


def MixtureOfBridges(experts: Sequence[Any], router: Any) -> Any:
    """Merge expert bridge networks with a router into one bridge network (MixBridge's Merge).

    Parameters
    ----------
    experts : sequence of torch.nn.Module
        ``expert(x, t)`` networks, the benign one first, then one per trigger.
    router : torch.nn.Module
        Maps ``(n, C, H, W)`` input images in [0, 1] to ``len(experts)`` logits.

    Returns
    -------
    torch.nn.Module
        ``model(x_t, t, x1)``, with ``weights(x1)`` and ``takes_input_image = True`` (so
        :func:`~trustlab.vision.bridge.bridge_sample` passes it the input).

    Examples
    --------
    >>> import torch
    >>> class Expert(torch.nn.Module):
    ...     def forward(self, x, t):
    ...         return x
    >>> router = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 2))
    >>> mix = MixtureOfBridges([Expert(), Expert()], router)
    >>> x = torch.zeros(3, 1, 8, 8)
    >>> tuple(mix(x, torch.zeros(3), x).shape), tuple(mix.weights(x).shape)
    ((3, 1, 8, 8), (3, 2))
    """
    for k, e in enumerate(experts):
        check_model(e, f"experts[{k}]")
    check_model(router, "router")
    return _mixture_class()(list(experts), router)


def _check_router(router: Any, x1: Any, n_tasks: int) -> None:
    """The router maps one input image in [0, 1] to ``n_tasks`` logits (ModelError naming ``router``)."""
    torch = require_torch()
    was_training = router.training
    router.eval()
    try:
        with torch.no_grad():
            out = router(torch.as_tensor(x1[:1]))
    except RuntimeError as exc:
        raise ModelError(
            f"router failed on an input image of shape {tuple(x1.shape[1:])} ({exc}); pass a router that "
            "reads the images.",
            argument="router",
        ) from None
    finally:
        router.train(was_training)
    if tuple(out.shape) != (1, n_tasks):
        raise ModelError(
            f"router must return {n_tasks} logits per image (benign + one per trigger); got output shape "
            f"{tuple(out.shape)} for one image.",
            argument="router",
        )


def _check_pairs_obj(pairs: Any) -> PoisonedPairs:
    if not isinstance(pairs, PoisonedPairs):
        raise ParameterError(
            f"pairs must be PoisonedPairs (poison_pairs); got {type(pairs).__name__}.", argument="pairs"
        )
    return pairs


@validate_params({"steps": _POS_INT, "lr": _RATE, "batch_size": _POS_INT})
def train_router(
    router: Any,
    pairs: Any,
    *,
    steps: int = 200,
    lr: float = 3e-3,
    batch_size: int = 64,
    random_state: Any = 0,
) -> Any:
    """Pre-train the router to tell the tasks apart from the input image (negative log-likelihood).

    The authors pre-train a classifier of the input into {benign, trigger 1, ...} before the
    Merge (their ``train_classifier``: a ResNet-50 head, 15,000 iterations).

    Parameters
    ----------
    router : torch.nn.Module
        Input images in [0, 1] to ``pairs.n_tasks`` logits; trained in place.
    pairs : PoisonedPairs
    steps, batch_size : int, default=(200, 64)
    lr : float, default=3e-3
        Adam's learning rate.
    random_state : None, int or numpy.random.Generator, default=0

    Returns
    -------
    torch.nn.Module
        ``router`` in eval mode.

    Examples
    --------
    >>> import torch
    >>> from trustlab.security import poison_pairs
    >>> from trustlab.security.mixbridge_lab import digits_backdoor_targets, digits_sr_pairs
    >>> pairs = poison_pairs(*digits_sr_pairs("train", 16), digits_backdoor_targets(2))
    >>> router = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, pairs.n_tasks))
    >>> train_router(router, pairs, steps=2).training
    False
    """
    torch = require_torch()
    check_model(router, "router")
    p = _check_pairs_obj(pairs)
    _check_router(router, p.X1, p.n_tasks)
    x1, y = torch.as_tensor(p.X1), torch.as_tensor(p.task)
    gen = torch_generator(random_state)
    opt = torch.optim.Adam(router.parameters(), lr=float(lr))
    with one_thread():
        router.train()
        for _ in range(int(steps)):
            idx = torch.randint(len(x1), (min(int(batch_size), len(x1)),), generator=gen)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(router(x1[idx]), y[idx]).backward()
            opt.step()
    return router.eval()


def wrs_penalty(weights: Any) -> Any:
    """The Weight Reallocation Scheme's penalty ``sum_k mean_i (w_ik - 1/K)^2`` (authors' ``WRS``).

    MixBridge (Qin et al., ICML 2025) adds it to the Merge loss so that the router's
    weights stay near uniform and no expert stands out (stealth).

    Parameters
    ----------
    weights : torch.Tensor of shape (n, K)
        Router weights (rows sum to 1).

    Returns
    -------
    torch.Tensor
        A scalar, 0 when every weight is ``1/K``.

    Examples
    --------
    >>> import torch
    >>> float(wrs_penalty(torch.tensor([[0.5, 0.5], [1.0, 0.0]])))
    0.25
    """
    return ((weights - 1.0 / weights.shape[1]) ** 2).mean(0).sum()


@validate_params(
    {
        "steps": _POS_INT,
        "lr": _RATE,
        "batch_size": _POS_INT,
        "wrs": [Interval(numbers.Real, 0, None, closed="left")],
    }
)
def merge_bridges(
    experts: Sequence[Any],
    router: Any,
    pairs: Any,
    *,
    steps: int = 50,
    lr: float = 5e-4,
    wrs: float = 1.0,
    train_experts: bool = True,
    batch_size: int = 64,
    schedule: I2SBSchedule | None = None,
    random_state: Any = 0,
) -> Any:
    """Merge trained expert bridges with a router into one MixBridge and fine-tune it (Merge + WRS).

    Each step draws pairs of every task and minimises the merged bridge's I2SB loss plus
    ``wrs`` times :func:`wrs_penalty` of the router weights, over the router and (with
    ``train_experts``, as the authors' optimiser does) the experts.

    Parameters
    ----------
    experts : sequence of torch.nn.Module
        Benign expert first, then one per trigger (the Divide stage's bridges); deep-copied.
    router : torch.nn.Module
        Pre-trained by :func:`train_router`; deep-copied.
    pairs : PoisonedPairs
    steps, batch_size : int, default=(50, 64)
    lr : float, default=5e-4
    wrs : float >= 0, default=1.0
        Weight of the WRS penalty (the authors' 1); 0 merges without it.
    train_experts : bool, default=True
        Fine-tune the experts too (else only the router).
    schedule : I2SBSchedule, optional
    random_state : None, int or numpy.random.Generator, default=0

    Returns
    -------
    torch.nn.Module
        The :func:`MixtureOfBridges`, in eval mode.

    Examples
    --------
    >>> import torch
    >>> from trustlab.security import poison_pairs
    >>> from trustlab.security.mixbridge_lab import digits_backdoor_targets, digits_sr_pairs
    >>> pairs = poison_pairs(*digits_sr_pairs("train", 16), digits_backdoor_targets(2))
    >>> class Net(torch.nn.Module):  # any net(x, t)
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.conv = torch.nn.Conv2d(1, 1, 3, padding=1)
    ...     def forward(self, x, t):
    ...         return self.conv(x)
    >>> router = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, pairs.n_tasks))
    >>> merged = merge_bridges([Net() for _ in range(pairs.n_tasks)], router, pairs, steps=1)
    >>> tuple(merged.weights(torch.zeros(2, 1, 8, 8)).shape)
    (2, 4)
    """
    p = _check_pairs_obj(pairs)
    if len(experts) != p.n_tasks:
        raise ParameterError(
            f"experts must hold one network per task ({p.n_tasks}: benign + triggers); got {len(experts)}.",
            argument="experts",
        )
    model = MixtureOfBridges([copy.deepcopy(e) for e in experts], copy.deepcopy(router))
    _check_router(model.router, p.X1, p.n_tasks)
    sched = schedule or I2SBSchedule()
    x0, x1 = check_pairs(p.X0, p.X1)
    check_fits(model, x1, "pairs")
    params = list(model.parameters()) if train_experts else list(model.router.parameters())

    def loss(idx: Any, t: Any, noise: Any, gen: Any) -> Any:
        cond = x1[idx]
        value = bridge_loss(lambda x, s: model(x, s, cond), x0[idx], cond, t, noise, sched)
        return value + float(wrs) * wrs_penalty(model.weights(cond)) if wrs > 0 else value

    return _denoising_loop(model, x0, sched.interval, loss, steps, lr, batch_size, random_state, params)
