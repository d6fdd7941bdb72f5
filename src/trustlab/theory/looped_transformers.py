"""Approximation rate of looped transformers and the timestep-encoding fix.

A single transformer block applied ``r`` times (weight-tied) approximates a continuous
permutation-equivariant map ``f: [0, 1]^{d x N} -> [0, 1]^{d x N}`` with an error governed by
three moduli of continuity of ``f`` (sequence, contextual, token) at the scale
``delta = ((r - N) / 2)^{-1 / ((N + 1) d + 1)}`` (Xu & Sato, ICML 2025, Theorem 3.6); the
contextual and token terms come from weight tying, and scaling the feed-forward output per loop
by ``eta(t)`` (from a timestep encoding) removes that limitation (Lemma 4.1, Theorem 4.2).
:func:`looped_rate` evaluates the rate, :func:`estimate_moduli` estimates the three moduli of a
user's function, :func:`simulate_looped` trains small looped transformers (the authors' block,
with and without the timestep encoding) on :func:`flow_target`, :func:`commutator_target`
(whose per-step map must change with the step) or a user's target. The paper's
full text was not readable here: the statements follow public summaries (see
``docs/theory/looped-transformers.md``, which records where they disagree).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._threads import one_thread
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, MissingDependencyError, ParameterError
from trustlab.theory._looped_schedule import commutator_target, rk4, token_array
from trustlab.theory._looped_torch import _forward, _init_params, _slope

__all__ = [
    "LoopedRate",
    "LoopedSimulation",
    "SequenceModuli",
    "commutator_target",
    "default_target",
    "estimate_moduli",
    "flow_target",
    "looped_rate",
    "simulate_looped",
]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")


@dataclass(frozen=True)
class LoopedRate:
    """Theorem 3.6's bound for ``r`` loops with Holder moduli ``omega(t) = L t^alpha``.

    Attributes
    ----------
    loops : int
    delta : float
        ``((r - N) / 2)^{-1 / ((N + 1) d + 1)}``.
    modulus_term : float
        ``(N d)^{1/p} [omega_tok(delta sqrt d) + omega_cont(delta sqrt(N d)) + omega_f(delta sqrt(N d))]``
        (one summary puts ``omega_f`` outside the factor ``(N d)^{1/p}``: this is the larger form).
    tied_term : float
        The part of ``modulus_term`` from the contextual and token moduli (the weight-tying cost
        that the timestep encoding removes).
    quantization_term : float
        ``N^{2/p} delta^{d/p}`` (the theorem's ``O(.)`` term, constant taken as 1).
    total : float
        ``modulus_term + quantization_term``.

    See Also
    --------
    looped_rate : computes it.
    """

    loops: int
    delta: float
    modulus_term: float
    tied_term: float
    quantization_term: float
    total: float


@validate_params(
    {
        "loops": [_INT1],
        "tokens": [_INT1],
        "dim": [_INT1],
        "p": [Interval(numbers.Real, 1, None, closed="left")],
        "lipschitz": [_NONNEG],
        "alpha": [Interval(numbers.Real, 0, 1, closed="right")],
        "context_lipschitz": [_NONNEG, None],
        "token_lipschitz": [_NONNEG, None],
    }
)
def looped_rate(
    loops: int,
    tokens: int,
    dim: int,
    *,
    p: float = 2.0,
    lipschitz: float = 1.0,
    alpha: float = 1.0,
    context_lipschitz: float | None = None,
    token_lipschitz: float | None = None,
) -> LoopedRate:
    """The approximation bound of a looped transformer with ``loops`` iterations.

    Parameters
    ----------
    loops : int
        ``r``; must exceed ``tokens``.
    tokens : int
        Sequence length ``N``.
    dim : int
        Token dimension ``d``.
    p : float, default 2
        The ``L_p`` norm.
    lipschitz, alpha : float
        Sequence modulus ``omega_f(t) = lipschitz * t^alpha``.
    context_lipschitz, token_lipschitz : float, optional
        Constants of the contextual and token moduli (same exponent); default ``lipschitz``.

    Returns
    -------
    LoopedRate

    References
    ----------
    K. Xu and I. Sato, "On Expressive Power of Looped Transformers: Theoretical Analysis and
    Enhancement via Timestep Encoding", ICML 2025 (arXiv:2410.01405), Theorem 3.6.

    Examples
    --------
    >>> a, b = looped_rate(10, 2, 1), looped_rate(1000, 2, 1)
    >>> bool(b.total < a.total), round(b.delta, 3)
    (True, 0.212)
    """
    if loops <= tokens:
        raise ParameterError(
            f"loops must exceed tokens (Theorem 3.6 needs r > N); got loops={loops}, tokens={tokens}.",
            argument="loops",
        )
    n, d = tokens, dim
    delta = ((loops - n) / 2) ** (-1.0 / ((n + 1) * d + 1))
    lc = lipschitz if context_lipschitz is None else context_lipschitz
    lt = lipschitz if token_lipschitz is None else token_lipschitz
    scale = (n * d) ** (1 / p)
    tied = scale * (lt * (delta * math.sqrt(d)) ** alpha + lc * (delta * math.sqrt(n * d)) ** alpha)
    seq = scale * lipschitz * (delta * math.sqrt(n * d)) ** alpha
    quant = n ** (2 / p) * delta ** (d / p)
    return LoopedRate(
        int(loops), float(delta), float(tied + seq), float(tied), float(quant), float(tied + seq + quant)
    )


@dataclass(frozen=True)
class SequenceModuli:
    """Monte-Carlo lower estimates of the three moduli of continuity at each ``delta``.

    Attributes
    ----------
    deltas : numpy.ndarray
    sequence : numpy.ndarray
        ``omega_f(delta)``: largest ``|f(X) - f(X')|`` (max over tokens, 2-norm) with
        ``|X - X'|_F <= delta``.
    contextual : numpy.ndarray
        ``omega_cont``: largest change of token ``i``'s output when the other tokens move by
        ``delta`` and token ``i`` is held fixed.
    token : numpy.ndarray
        ``omega_tok``: largest change of token ``i``'s output when token ``i`` moves by ``delta``
        and the others are held fixed.

    See Also
    --------
    estimate_moduli : computes it.
    """

    deltas: np.ndarray
    sequence: np.ndarray
    contextual: np.ndarray
    token: np.ndarray


@validate_params(
    {
        "f": [callable],
        "tokens": [_INT1],
        "dim": [_INT1],
        "deltas": ["array-like"],
        "n_samples": [_INT1],
        "random_state": ["random_state"],
    }
)
def estimate_moduli(
    f: Callable[[np.ndarray], np.ndarray],
    tokens: int,
    dim: int,
    deltas: Any,
    *,
    n_samples: int = 2000,
    random_state: Any = 0,
) -> SequenceModuli:
    """Estimate the sequence, contextual and token moduli of ``f`` by random search.

    Parameters
    ----------
    f : callable
        Maps an array ``(batch, N, d)`` in ``[0, 1]`` to ``(batch, N, d_out)``.
    tokens, dim : int
        ``N`` and ``d``.
    deltas : array-like
        Perturbation sizes (> 0).
    n_samples : int, default 2000
        Random pairs per delta (the estimates are lower bounds of the suprema).
    random_state : int, Generator or None, default 0

    Returns
    -------
    SequenceModuli

    References
    ----------
    K. Xu and I. Sato, ICML 2025, Definitions 3.1-3.3 (as summarised; see the docs page).

    Examples
    --------
    >>> m = estimate_moduli(lambda x: 2 * x, 3, 1, [0.1], n_samples=200)
    >>> bool(m.sequence[0] <= 0.2 + 1e-12), bool(m.contextual[0] == 0.0)
    (True, True)
    """
    dl = check_numeric_array(deltas, "deltas", ndim=1)
    if np.any(dl <= 0):
        raise DataError(f"deltas must all be > 0, got {dl.tolist()}.", argument="deltas")
    rng = make_generator(random_state)
    n, d = tokens, dim
    out: dict[str, list[float]] = {"sequence": [], "contextual": [], "token": []}
    for delta in dl:
        x = rng.uniform(0, 1, (n_samples, n, d))
        base = np.asarray(f(x), dtype=float)
        for kind in out:
            step = rng.standard_normal((n_samples, n, d))
            if kind == "contextual":
                step[:, 0] = 0.0
            elif kind == "token":
                step[:, 1:] = 0.0
            step *= (
                delta
                * rng.uniform(0, 1, (n_samples, 1, 1))
                / np.linalg.norm(step, axis=(1, 2), keepdims=True)
            )
            moved = np.asarray(f(np.clip(x + step, 0, 1)), dtype=float)
            diff = np.linalg.norm(moved - base, axis=2)
            out[kind].append(float(diff.max() if kind == "sequence" else diff[:, 0].max()))
        # contextual and token perturbations are sequence perturbations too: the sup is at least theirs
        out["sequence"][-1] = max(out["sequence"][-1], out["contextual"][-1], out["token"][-1])
    return SequenceModuli(dl, *(np.array(out[k]) for k in ("sequence", "contextual", "token")))


@dataclass(frozen=True)
class LoopedSimulation:
    """Test errors of looped transformers trained per loop count: plain, timestep-modulated, ablation.

    Attributes
    ----------
    loops : numpy.ndarray
        Loop counts ``r``.
    plain, timestep, constant : numpy.ndarray
        Test MSE, shape ``(len(loops), n_seeds)``: the weight-tied block (``plain``), the
        Timestep-Modulated Looped Transformer (``timestep``: gates and RMSNorm scales from a
        timestep encoding) and the same gated block whose scales do not depend on the loop index
        (``constant``: the encoding of step 0 at every loop, which separates the gain of the
        gating from that of the timestep).
    target_variance : float
        Variance of the test targets (the MSE of a constant predictor).
    plain_slope, timestep_slope : float
        Least-squares slopes of ``log MSE`` on ``log r`` over all (loop count, seed) pairs.
    plain_slope_se, timestep_slope_se : float
        Their ordinary least-squares standard errors (seeds as replicates).
    constant_slope, constant_slope_se : float
        The same for the constant-scale ablation.

    See Also
    --------
    simulate_looped : computes it.
    """

    loops: np.ndarray
    plain: np.ndarray
    timestep: np.ndarray
    constant: np.ndarray
    target_variance: float
    plain_slope: float
    plain_slope_se: float
    timestep_slope: float
    timestep_slope_se: float
    constant_slope: float
    constant_slope_se: float


@validate_params({"x": ["array-like"]})
def default_target(x: np.ndarray) -> np.ndarray:
    """A permutation-equivariant target: ``y_i = sin(2 pi x_i1) * mean_j x_j2 + x_i2 * max_j x_j1``.

    Parameters
    ----------
    x : numpy.ndarray
        ``(batch, N, d)`` with ``d >= 2``.

    Returns
    -------
    numpy.ndarray
        ``(batch, N, 1)``.

    Examples
    --------
    >>> default_target(np.zeros((1, 3, 2))).shape
    (1, 3, 1)
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 3 or x.shape[2] < 2:
        raise DataError(f"x must have shape (batch, N, d) with d >= 2, got {x.shape}.", argument="x")
    ctx = x[..., 1].mean(axis=1, keepdims=True)
    peak = x[..., 0].max(axis=1, keepdims=True)
    return (np.sin(2 * np.pi * x[..., 0]) * ctx + x[..., 1] * peak)[..., None]


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the dev extra
        raise MissingDependencyError(
            "simulate_looped needs torch; install it with `pip install trustlab[torch]`."
        ) from exc
    return torch


_FLOW_ROTATION = np.array([[0.0, -1.0], [1.0, 0.0]])


@validate_params({"x": ["array-like"], "autonomous": ["boolean"], "n_steps": [_INT1]})
def flow_target(x: np.ndarray, *, autonomous: bool = False, n_steps: int = 32) -> np.ndarray:
    """A permutation-equivariant target with loop structure: the time-1 map of a token ODE.

    Each token ``x_i in R^2`` moves with ``u_i = x_i - mean_j x_j``:
    ``dx_i/dt = 2 [cos(pi t) J u_i + sin(pi t) tanh(3 u_i)]`` (``J`` the quarter rotation),
    integrated over ``t in [0, 1]`` by ``n_steps`` RK4 steps. The vector field changes with
    ``t``: a weight-tied block applies the same update at every loop, while a timestep-modulated
    block can follow the schedule (the limitation of weight tying that Lemma 4.1 of Xu & Sato
    states and Theorem 4.2 removes). ``autonomous=True`` uses the time-averaged field
    ``J u_i + tanh(3 u_i)`` instead (a control without time dependence).

    Parameters
    ----------
    x : numpy.ndarray
        ``(batch, N, 2)``.
    autonomous : bool, default False
    n_steps : int, default 32

    Returns
    -------
    numpy.ndarray
        ``(batch, N, 2)``.

    References
    ----------
    K. Xu and I. Sato, ICML 2025 (Lemma 4.1, Theorem 4.2: why a per-loop scale helps).

    Examples
    --------
    >>> y = flow_target(np.random.default_rng(0).uniform(0, 1, (5, 3, 2)))
    >>> y.shape
    (5, 3, 2)
    """

    def field(t: float, v: np.ndarray) -> np.ndarray:
        u = v - v.mean(axis=1, keepdims=True)
        if autonomous:
            return u @ _FLOW_ROTATION.T + np.tanh(3 * u)
        return 2 * (np.cos(np.pi * t) * u @ _FLOW_ROTATION.T + np.sin(np.pi * t) * np.tanh(3 * u))

    return rk4(field, token_array(x), 1.0, n_steps)


_TARGETS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "flow": flow_target,
    "flow_autonomous": lambda x: flow_target(x, autonomous=True),
    "default": default_target,
    "commutator": commutator_target,
}
_VARIANTS = ("plain", "timestep", "constant")


@validate_params(
    {
        "loops": ["array-like"],
        "target": [callable, Options(tuple(_TARGETS)), None],
        "tokens": [_INT1],
        "dim": [_INT1],
        "width": [Interval(numbers.Integral, 4, None, closed="left")],
        "steps": [_INT1],
        "batch_size": [_INT1],
        "learning_rate": [_POS],
        "n_seeds": [_INT1],
        "n_test": [_INT1],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
@one_thread()
def simulate_looped(
    loops: Any,
    *,
    target: Callable[[np.ndarray], np.ndarray] | str | None = "flow",
    tokens: int = 4,
    dim: int = 2,
    width: int = 16,
    steps: int = 600,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    n_seeds: int = 3,
    n_test: int = 4096,
    random_state: int = 0,
) -> LoopedSimulation:
    """Train one-block looped transformers per loop count: plain, timestep-modulated and an ablation.

    The block is the authors' (``kevin671/tmlt``, ``model.py``): pre-RMSNorm two-head
    self-attention and a ``4 x width`` GELU feed-forward, each added to the residual stream,
    applied ``r`` times between an input and an output linear map (final RMSNorm). The
    timestep-modulated variant (TMLT, Section 4) computes, per loop ``t``, a sinusoidal
    encoding -> two-layer SiLU MLP -> SiLU -> linear map (zero-initialised) to
    ``alpha1, alpha2, gamma1, gamma2`` and uses ``h + alpha1 * Attn(RMSNorm(h) * (1 + gamma1))``,
    ``h + alpha2 * FF(RMSNorm(h) * (1 + gamma2))``. The ``constant`` ablation is the same network
    fed the encoding of ``t = 0`` at every loop. Inputs are uniform on ``[0, 1]^{N x d}``, fresh
    each step; Adam with 5 % linear warm-up and cosine decay, gradient norm clipped at 1 per
    model; the error is the MSE on ``n_test`` held-out sequences. The ``n_seeds`` models of each
    (variant, loop count) are trained at once as one batched network (independent parameters,
    data and clipping). Requires ``torch``.

    Parameters
    ----------
    loops : array-like of int
        Loop counts ``r`` (>= 1), at least two.
    target : callable or {"flow", "flow_autonomous", "default", "commutator"}, default "flow"
        ``(batch, N, d) -> (batch, N, d_out)``. ``"flow"`` is :func:`flow_target` (``d = 2``),
        ``"flow_autonomous"`` its time-independent control, ``"default"``
        :func:`default_target`, ``"commutator"`` :func:`commutator_target` (``d = 2``: a map
        whose per-phase steps differ and whose averaged field is zero).
    tokens, dim, width, steps, batch_size : int
        ``N``, ``d``, model width (even), Adam steps, sequences per step.
    learning_rate : float, default 3e-3
    n_seeds : int, default 3
    n_test : int, default 4096
        Held-out sequences.
    random_state : int, default 0

    Returns
    -------
    LoopedSimulation

    References
    ----------
    K. Xu and I. Sato, "On Expressive Power of Looped Transformers: Theoretical Analysis and
    Enhancement via Timestep Encoding", ICML 2025 (Section 4 architecture; Section 5: more loops
    help, the timestep encoding helps further).

    Examples
    --------
    >>> sim = simulate_looped([1, 2], steps=5, n_seeds=2, n_test=64)
    >>> sim.plain.shape
    (2, 2)
    """
    torch = _torch()
    rs = check_numeric_array(loops, "loops", ndim=1, min_rows=2)
    if np.any(rs < 1) or np.any(rs != np.round(rs)):
        raise DataError(f"loops must be integers >= 1, got {rs.tolist()}.", argument="loops")
    if width % 2:
        raise ParameterError(f"width must be even (two attention heads), got {width}.", argument="width")
    if (target is None or str(target).startswith(("flow", "commutator"))) and dim != 2:
        raise ParameterError(f"the flow and commutator targets need dim=2, got dim={dim}.", argument="dim")
    f = _TARGETS[target] if isinstance(target, str) else (flow_target if target is None else target)
    rng = np.random.default_rng(random_state)
    x_test = rng.uniform(0, 1, (n_test, tokens, dim))
    y_test = np.asarray(f(x_test), dtype=float)
    if y_test.ndim != 3 or y_test.shape[:2] != x_test.shape[:2]:
        raise DataError(
            f"target must map (batch, N, d) to (batch, N, d_out); got {y_test.shape} for {x_test.shape}.",
            argument="target",
        )
    s, d_out = n_seeds, y_test.shape[-1]
    xt = torch.tensor(x_test, dtype=torch.float32).expand(s, -1, -1, -1)
    yt = torch.tensor(y_test, dtype=torch.float32)
    errs = {v: np.zeros((len(rs), s)) for v in _VARIANTS}
    warm = max(1, steps // 20)
    for j, r in enumerate(rs.astype(int)):
        # one stream per loop count, shared by the three variants; the targets computed at once
        x_all = np.random.default_rng([random_state, j, 12345]).uniform(
            0, 1, (steps, s * batch_size, tokens, dim)
        )
        y_all = np.asarray(f(x_all.reshape(-1, tokens, dim)), dtype=float)
        xs = torch.tensor(x_all.reshape(steps, s, batch_size, tokens, dim), dtype=torch.float32)
        ys = torch.tensor(y_all.reshape(steps, s, batch_size, tokens, d_out), dtype=torch.float32)
        for variant in _VARIANTS:
            gen = torch.Generator().manual_seed(random_state * 7919 + 101 * j + 1)
            p = _init_params(torch, s, dim, d_out, width, gen)
            tied = [k for k in p if variant != "plain" or k not in ("te1", "te2", "mod")]
            params = [t for k in tied for t in p[k]]
            opt = torch.optim.Adam(params, lr=learning_rate)
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt,
                lambda i: min(1.0, (i + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(i, steps) / steps)),
            )
            for i in range(steps):
                loss = ((_forward(torch, p, xs[i], int(r), variant) - ys[i]) ** 2).mean(dim=(1, 2, 3)).sum()
                opt.zero_grad()
                loss.backward()
                with torch.no_grad():  # clip each model's gradient norm at 1
                    norm = torch.sqrt(sum(q.grad.reshape(s, -1).pow(2).sum(1) for q in params))
                    scale = torch.clamp(1.0 / (norm + 1e-6), max=1.0)
                    for q in params:
                        q.grad.mul_(scale.view(s, *([1] * (q.dim() - 1))))
                opt.step()
                sched.step()
            with torch.no_grad():
                errs[variant][j] = (
                    ((_forward(torch, p, xt, int(r), variant) - yt) ** 2).mean(dim=(1, 2, 3)).numpy()
                )
    log_r = np.log(rs)
    ps, pse = _slope(log_r, errs["plain"])
    ts, tse = _slope(log_r, errs["timestep"])
    cs, cse = _slope(log_r, errs["constant"])
    out = (errs["plain"], errs["timestep"], errs["constant"], float(y_test.var()), ps, pse, ts, tse, cs, cse)
    return LoopedSimulation(rs.astype(int), *out)
