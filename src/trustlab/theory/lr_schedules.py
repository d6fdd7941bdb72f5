"""Learning-rate schedules vs the last-iterate bound of non-smooth convex SGD.

For convex ``f`` with ``E|g_t|^2 <= G^2`` and ``|x_1 - x*| <= D``, SGD ``x_{t+1} = x_t - eta_t g_t``
satisfies ``E f(x_T) - f* <= Omega(eta)`` with
``Omega = [D^2 + G^2 sum_1^T eta_t^2] / (2 eta_{1:T})
+ (G^2/2) sum_{k=1}^{T-1} eta_k / (eta_{k+1:T} eta_{k:T}) sum_{t=k}^T eta_t^2``
(Defazio, Cutkosky, Mehta & Mishchenko 2023; Orabona 2020), the bound Schaipp, Hagele, Taylor,
Simsekli & Bach (ICML 2025) show tracks large-model training. Writing ``eta_t = gamma s_t``,
``Omega(gamma) = A / gamma + B gamma``: the optimal base rate ``gamma* = sqrt(A / B)`` is closed
form, which is what makes schedule extension and transfer computable. :func:`simulate_schedules`
runs SGD on a non-smooth convex problem to check. See ``docs/theory/lr-schedules.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, MissingDependencyError

__all__ = [
    "SCHEDULES",
    "MLPScheduleRun",
    "ScheduleBound",
    "ScheduleSimulation",
    "schedule",
    "schedule_bound",
    "simulate_schedules",
    "train_mlp_schedules",
]

SCHEDULES = ("constant", "cooldown", "cosine", "wsd")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_STEPS = Interval(numbers.Integral, 2, None, closed="left")
_FRAC = Interval(numbers.Real, 0, 1, closed="neither")


@validate_params({"name": [Options(set(SCHEDULES))], "steps": [_STEPS], "cooldown": [_FRAC]})
def schedule(name: str, steps: int, *, cooldown: float = 0.2) -> np.ndarray:
    """Shape ``s_1..s_T`` of a schedule (peak 1, every entry > 0).

    ``constant``: 1. ``cooldown``: 1, then linear to ``1 / (T_c + 1)`` over the last
    ``cooldown * T`` steps (``T_c`` of them). ``cosine``: ``(1 + cos(pi (t - 1) / T)) / 2``.
    ``wsd``: 1, then ``1 - sqrt((t - T_0) / (T + 1 - T_0))`` over the cooldown (the
    "1 - sqrt" cooldown of warmup-stable-decay).

    Parameters
    ----------
    name : {"constant", "cooldown", "cosine", "wsd"}
    steps : int
        ``T >= 2``.
    cooldown : float, default 0.2
        Fraction of steps in the cooldown, in ``(0, 1)``.

    Returns
    -------
    numpy.ndarray

    References
    ----------
    F. Schaipp, A. Hagele, A. Taylor, U. Simsekli and F. Bach, "The Surprising Agreement Between
    Convex Optimization Theory and Learning-Rate Scheduling for Large Model Training", ICML 2025.

    Examples
    --------
    >>> schedule("cooldown", 5, cooldown=0.4).round(3).tolist()
    [1.0, 1.0, 1.0, 0.667, 0.333]
    """
    t = np.arange(1, steps + 1, dtype=float)
    if name == "constant":
        return np.ones(steps)
    if name == "cosine":
        return (1 + np.cos(math.pi * (t - 1) / steps)) / 2
    n_cool = max(round(cooldown * steps), 1)
    t0 = steps - n_cool  # last step at the peak
    s = np.ones(steps)
    tail = t[t0:]
    if name == "cooldown":
        s[t0:] = (steps + 1 - tail) / (n_cool + 1)
    else:
        s[t0:] = 1 - np.sqrt((tail - t0) / (steps + 1 - t0))
    return s


def _check_schedule(eta: Any) -> np.ndarray:
    s = check_numeric_array(eta, "schedule", ndim=1, min_rows=2)
    if np.any(s < 0):
        raise DataError(
            f"schedule must be non-negative (learning rates), got a minimum of {float(s.min()):.3g}.",
            argument="schedule",
        )
    if s[-1] <= 0:
        raise DataError(
            "schedule's last entry must be > 0 (the bound divides by the tail sums); end the "
            "schedule at a small positive rate.",
            argument="schedule",
        )
    return s


def _terms(s: np.ndarray) -> tuple[float, float, float]:
    """``(sum s, sum s^2, sum_k s_k / (s_{k+1:T} s_{k:T}) sum_{t>=k} s_t^2)`` for a shape ``s``."""
    tail = np.cumsum(s[::-1])[::-1]  # s_{k:T}
    tail2 = np.cumsum((s * s)[::-1])[::-1]
    k = np.arange(len(s) - 1)
    last = float(np.sum(s[k] / (tail[k + 1] * tail[k]) * tail2[k]))
    return float(tail[0]), float(tail2[0]), last


@dataclass(frozen=True)
class ScheduleBound:
    """The bound ``Omega(gamma) = A / gamma + B gamma`` of one schedule shape.

    Attributes
    ----------
    a, b : float
        ``A = D^2 / (2 sum s)``, ``B = G^2 [sum s^2 / (2 sum s) + (1/2) sum_k ...]``.
    gamma : float
        The base rate it was evaluated at.
    value : float
        ``Omega(gamma)``.
    optimal_gamma : float
        ``sqrt(A / B)``.
    optimal_value : float
        ``2 sqrt(A B)``.

    See Also
    --------
    schedule_bound : computes it.
    """

    a: float
    b: float
    gamma: float
    value: float
    optimal_gamma: float
    optimal_value: float


@validate_params(
    {"shape": ["array-like"], "gamma": [_POS, None], "distance": [_POS], "gradient_bound": [_POS]}
)
def schedule_bound(
    shape: Any, gamma: float | None = None, *, distance: float = 1.0, gradient_bound: float = 1.0
) -> ScheduleBound:
    """Last-iterate suboptimality bound of SGD with rates ``gamma * shape``.

    Parameters
    ----------
    shape : array-like
        ``s_1..s_T``, non-negative with ``s_T > 0`` (e.g. from :func:`schedule`).
    gamma : float, optional
        Base rate; default the optimal one.
    distance : float, default 1
        ``D >= |x_1 - x*|``.
    gradient_bound : float, default 1
        ``G`` with ``E|g_t|^2 <= G^2``.

    Returns
    -------
    ScheduleBound

    References
    ----------
    F. Schaipp et al., ICML 2025 (the bound of their Section 3, from A. Defazio, A. Cutkosky,
    H. Mehta and K. Mishchenko, "Optimal Linear Decay Learning Rate Schedules and Further
    Refinements", 2023, Theorem 10).

    Examples
    --------
    >>> T = 1000
    >>> const = schedule_bound(schedule("constant", T))
    >>> cool = schedule_bound(schedule("cooldown", T))
    >>> bool(cool.optimal_value < const.optimal_value)  # cooldown removes the log T term
    True
    """
    s = _check_schedule(shape)
    s1, s2, last = _terms(s)
    a = distance**2 / (2 * s1)
    b = gradient_bound**2 * (s2 / (2 * s1) + last / 2)
    opt = math.sqrt(a / b)
    g = opt if gamma is None else float(gamma)
    return ScheduleBound(a, b, g, a / g + b * g, opt, 2 * math.sqrt(a * b))


@dataclass(frozen=True)
class ScheduleSimulation:
    """SGD on ``f(x) = E|x - x* - noise|_1``-type non-smooth convex losses, per schedule and rate.

    Attributes
    ----------
    schedules : tuple of str
    gammas : numpy.ndarray
    measured : numpy.ndarray
        ``(len(schedules), len(gammas))`` mean final suboptimality ``f(x_T) - f*`` over runs.
    standard_error : numpy.ndarray
        Its Monte-Carlo standard error.
    bound : numpy.ndarray
        The bound at the same points (``D``, ``G`` of the problem).
    best_gamma : numpy.ndarray
        Per schedule, the grid rate with the lowest measured suboptimality.
    optimal_gamma : numpy.ndarray
        Per schedule, the bound's ``gamma*``.
    rank_correlation : float
        Spearman correlation between bound and measured over all points.

    See Also
    --------
    simulate_schedules : computes it.
    """

    schedules: tuple[str, ...]
    gammas: np.ndarray
    measured: np.ndarray
    standard_error: np.ndarray
    bound: np.ndarray
    best_gamma: np.ndarray
    optimal_gamma: np.ndarray
    rank_correlation: float


@validate_params(
    {
        "steps": [_STEPS],
        "gammas": ["array-like"],
        "schedules": [tuple, list],
        "dimension": [Interval(numbers.Integral, 1, None, closed="left")],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "distance": [_POS],
        "cooldown": [_FRAC],
        "n_runs": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def simulate_schedules(
    steps: int,
    gammas: Any,
    *,
    schedules: tuple[str, ...] | list[str] = SCHEDULES,
    dimension: int = 10,
    noise: float = 1.0,
    distance: float = 1.0,
    cooldown: float = 0.2,
    n_runs: int = 50,
    random_state: Any = 0,
) -> ScheduleSimulation:
    """Run SGD with each schedule and base rate on a non-smooth convex problem.

    The problem: ``f(x) = E_z sum_i |x_i - z_i|``, ``z ~ N(0, noise^2 I)`` per coordinate
    (``noise = 0``: ``|x|_1``), minimised at ``x* = 0`` with
    ``f(x) - f* = sum_i E|x_i - z_i| - E|z_i|`` in closed form; the stochastic subgradient
    ``sign(x - z)`` has ``|g|^2 = d = G^2`` exactly. Starts at distance ``D`` from ``x*`` along a
    random direction.

    Parameters
    ----------
    steps : int
        ``T``.
    gammas : array-like
        Base rates (> 0).
    schedules : sequence of str, default all of :data:`SCHEDULES`
    dimension : int, default 10
    noise : float, default 1
    distance : float, default 1
    cooldown : float, default 0.2
    n_runs : int, default 50
    random_state : int, Generator or None, default 0

    Returns
    -------
    ScheduleSimulation

    References
    ----------
    F. Schaipp et al., ICML 2025.

    Examples
    --------
    >>> sim = simulate_schedules(200, [0.01, 0.05, 0.2], schedules=("constant", "cooldown"), n_runs=10)
    >>> bool(np.all(sim.measured <= sim.bound + 3 * sim.standard_error))
    True
    """
    g = check_numeric_array(gammas, "gammas", ndim=1)
    if np.any(g <= 0):
        raise DataError(f"gammas must all be > 0, got {g.tolist()}.", argument="gammas")
    names = tuple(schedules)
    for name in names:
        if name not in SCHEDULES:
            raise DataError(f"schedules must be drawn from {SCHEDULES}, got {name!r}.", argument="schedules")
    rng = make_generator(random_state)
    d = int(dimension)
    shapes = np.stack([schedule(n, steps, cooldown=cooldown) for n in names])  # (S, T)
    start = rng.standard_normal((n_runs, d))
    start *= distance / np.linalg.norm(start, axis=1, keepdims=True)
    x = np.broadcast_to(start, (len(names), len(g), n_runs, d)).copy()
    rates = shapes[:, None, :] * g[None, :, None]  # (S, G, T)
    for t in range(steps):
        z = noise * rng.standard_normal((n_runs, d))
        x -= rates[:, :, t, None, None] * np.sign(x - z)
    excess = _expected_abs(x, noise).sum(axis=-1) - d * _expected_abs(np.zeros(1), noise)[0]
    measured = excess.mean(axis=-1)
    se = excess.std(axis=-1, ddof=1) / math.sqrt(n_runs)
    gbound = math.sqrt(d)
    bound = np.array(
        [
            [schedule_bound(s, float(gam), distance=distance, gradient_bound=gbound).value for gam in g]
            for s in shapes
        ]
    )
    opt = np.array(
        [schedule_bound(s, distance=distance, gradient_bound=gbound).optimal_gamma for s in shapes]
    )
    best = g[np.argmin(measured, axis=1)]
    rho = float(spearmanr(bound.ravel(), measured.ravel())[0])
    return ScheduleSimulation(names, g, measured, se, bound, best, opt, rho)


def _expected_abs(x: np.ndarray, noise: float) -> np.ndarray:
    """``E|x - z|``, ``z ~ N(0, noise^2)``, elementwise."""
    if noise == 0:
        return np.abs(x)
    from scipy.stats import norm

    u = x / noise
    return noise * (2 * norm.pdf(u) + u * (2 * norm.cdf(u) - 1))


@dataclass(frozen=True)
class MLPScheduleRun:
    """Final losses of small MLPs trained by online mini-batch SGD per schedule and base rate.

    Attributes
    ----------
    schedules : tuple of str
    gammas : numpy.ndarray
    steps : int
    loss : numpy.ndarray
        ``(len(schedules), len(gammas))`` final excess population loss (4096 fresh inputs,
        against the noiseless teacher), averaged over seeds; ``inf`` where training diverged.
    best_gamma : numpy.ndarray
        Per schedule, the grid rate with the lowest loss.

    See Also
    --------
    train_mlp_schedules : computes it.
    """

    schedules: tuple[str, ...]
    gammas: np.ndarray
    steps: int
    loss: np.ndarray
    best_gamma: np.ndarray


@validate_params(
    {
        "steps": [_STEPS],
        "gammas": ["array-like"],
        "schedules": [tuple, list],
        "width": [Interval(numbers.Integral, 1, None, closed="left")],
        "dimension": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_seeds": [Interval(numbers.Integral, 1, None, closed="left")],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "cooldown": [_FRAC],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def train_mlp_schedules(
    steps: int,
    gammas: Any,
    *,
    schedules: tuple[str, ...] | list[str] = SCHEDULES,
    width: int = 32,
    dimension: int = 16,
    batch_size: int = 4,
    n_seeds: int = 4,
    noise: float = 0.5,
    cooldown: float = 0.2,
    random_state: int = 0,
) -> MLPScheduleRun:
    """Train one-hidden-layer tanh MLPs on a teacher-student regression with every schedule and rate.

    All ``len(schedules) * len(gammas) * n_seeds`` students train at once (batched matrices, one
    backward pass), each with plain SGD at rate ``gamma * s_t``, on fresh Gaussian inputs with
    labels from a fixed random teacher of the same shape plus Gaussian ``noise`` (online: the training
    loss is the population loss). Requires ``torch``.

    Parameters
    ----------
    steps : int
    gammas : array-like
        Base rates (> 0).
    schedules : sequence of str, default all of :data:`SCHEDULES`
    width, dimension, batch_size, n_seeds : int
    noise : float, default 0.5
        Label noise.
    cooldown : float, default 0.2
    random_state : int, default 0

    Returns
    -------
    MLPScheduleRun

    References
    ----------
    F. Schaipp et al., ICML 2025 (Section 4: the bound's predictions on real training).

    Examples
    --------
    >>> run = train_mlp_schedules(50, [0.01, 0.1], schedules=("constant", "cosine"), n_seeds=1)
    >>> run.loss.shape
    (2, 2)
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the dev extra
        raise MissingDependencyError(
            "train_mlp_schedules needs torch; install it with `pip install trustlab[torch]`."
        ) from exc
    g = check_numeric_array(gammas, "gammas", ndim=1)
    if np.any(g <= 0):
        raise DataError(f"gammas must all be > 0, got {g.tolist()}.", argument="gammas")
    names = tuple(schedules)
    for name in names:
        if name not in SCHEDULES:
            raise DataError(f"schedules must be drawn from {SCHEDULES}, got {name!r}.", argument="schedules")
    gen = torch.Generator().manual_seed(int(random_state))
    d, h = int(dimension), int(width)
    teacher1 = torch.randn(d, h, generator=gen) / math.sqrt(d)
    teacher2 = 2 * torch.randn(h, 1, generator=gen) / math.sqrt(h)
    init1 = torch.randn(n_seeds, d, h, generator=gen) / math.sqrt(d)
    init2 = torch.randn(n_seeds, h, 1, generator=gen) / math.sqrt(h)
    w1 = init1.repeat(len(names) * len(g), 1, 1).requires_grad_(True)
    w2 = init2.repeat(len(names) * len(g), 1, 1).requires_grad_(True)
    shapes = np.stack([schedule(n, steps, cooldown=cooldown) for n in names])
    rates = torch.as_tensor(
        np.repeat((shapes[:, None, :] * g[None, :, None]).reshape(-1, steps), n_seeds, axis=0),
        dtype=torch.float32,
    )
    for t in range(steps):
        x = torch.randn(batch_size, d, generator=gen)
        y = torch.tanh(x @ teacher1) @ teacher2 + noise * torch.randn(batch_size, 1, generator=gen)
        pred = torch.tanh(torch.einsum("bd,mdh->mbh", x, w1)) @ w2
        w1.grad = None
        w2.grad = None
        (((pred - y) ** 2).mean(dim=(1, 2)) / 2).sum().backward()
        with torch.no_grad():
            lr = rates[:, t].view(-1, 1, 1)
            w1 -= lr * w1.grad  # type: ignore[operator]
            w2 -= lr * w2.grad  # type: ignore[operator]
    with torch.no_grad():
        x = torch.randn(4096, d, generator=gen)
        pred = torch.tanh(torch.einsum("bd,mdh->mbh", x, w1)) @ w2
        excess = ((pred - torch.tanh(x @ teacher1) @ teacher2) ** 2).mean(dim=(1, 2)) / 2
    loss = excess.numpy().astype(float).reshape(len(names), len(g), n_seeds).mean(axis=2)
    loss = np.where(np.isfinite(loss), loss, np.inf)
    best = g[np.argmin(loss, axis=1)]
    return MLPScheduleRun(names, g, int(steps), loss, best)
