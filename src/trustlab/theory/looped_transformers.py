"""Approximation rate of looped transformers and the timestep-encoding fix.

A single transformer block applied ``r`` times (weight-tied) approximates a continuous
permutation-equivariant map ``f: [0, 1]^{d x N} -> [0, 1]^{d x N}`` with an error governed by
three moduli of continuity of ``f`` (sequence, contextual, token) at the scale
``delta = ((r - N) / 2)^{-1 / ((N + 1) d + 1)}`` (Xu & Sato, ICML 2025, Theorem 3.6); the
contextual and token terms come from weight tying, and scaling the feed-forward output per loop
by ``eta(t)`` (from a timestep encoding) removes that limitation (Lemma 4.1, Theorem 4.2).
:func:`looped_rate` evaluates the rate, :func:`estimate_moduli` estimates the three moduli of a
user's function, :func:`simulate_looped` trains small looped transformers with and without
timestep encoding. See ``docs/theory/looped-transformers.md``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, MissingDependencyError, ParameterError

__all__ = [
    "LoopedRate",
    "LoopedSimulation",
    "SequenceModuli",
    "default_target",
    "estimate_moduli",
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
        ``(N d)^{1/p} [omega_tok(delta sqrt d) + omega_cont(delta sqrt(N d)) + omega_f(delta sqrt(N d))]``.
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
    """Test errors of looped transformers trained per loop count, with and without timestep encoding.

    Attributes
    ----------
    loops : numpy.ndarray
    plain : numpy.ndarray
        Test MSE of the weight-tied model (mean over seeds).
    timestep : numpy.ndarray
        Test MSE with per-loop scales from a timestep encoding.
    plain_slope, timestep_slope : float
        Least-squares slopes of ``log MSE`` on ``log r``.

    See Also
    --------
    simulate_looped : computes it.
    """

    loops: np.ndarray
    plain: np.ndarray
    timestep: np.ndarray
    plain_slope: float
    timestep_slope: float


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


def _build(torch: Any, d_in: int, d_out: int, width: int, loops: int, timestep: bool) -> Any:
    nn = torch.nn

    class Looped(nn.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(d_in, width)
            self.out = nn.Linear(width, d_out)
            self.attn = nn.MultiheadAttention(width, 2, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
            self.n1 = nn.RMSNorm(width)
            self.n2 = nn.RMSNorm(width)
            if timestep:  # eta(t) from a sinusoidal timestep encoding: 4 scale vectors per loop
                self.te = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, 4 * width))
                nn.init.zeros_(self.te[2].weight)
                nn.init.zeros_(self.te[2].bias)
            freq = torch.exp(-math.log(100.0) * torch.arange(width // 2) / max(width // 2, 1))
            self.register_buffer("freq", freq)

        def forward(self, x: Any) -> Any:
            h = self.inp(x)
            for t in range(loops):
                if timestep:
                    pe = torch.cat([torch.sin(t * self.freq), torch.cos(t * self.freq)])
                    a1, a2, g1, g2 = (1 + self.te(pe)).chunk(4)
                else:
                    a1 = a2 = g1 = g2 = 1.0
                z = self.n1(h) * g1
                h = h + a1 * self.attn(z, z, z, need_weights=False)[0]
                h = h + a2 * self.ff(self.n2(h) * g2)
            return self.out(h)

    return Looped()


@validate_params(
    {
        "loops": ["array-like"],
        "target": [callable, None],
        "tokens": [_INT1],
        "dim": [Interval(numbers.Integral, 2, None, closed="left")],
        "width": [Interval(numbers.Integral, 4, None, closed="left")],
        "steps": [_INT1],
        "batch_size": [_INT1],
        "learning_rate": [_POS],
        "n_seeds": [_INT1],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def simulate_looped(
    loops: Any,
    *,
    target: Callable[[np.ndarray], np.ndarray] | None = None,
    tokens: int = 6,
    dim: int = 2,
    width: int = 32,
    steps: int = 400,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    n_seeds: int = 2,
    random_state: int = 0,
) -> LoopedSimulation:
    """Train a one-block looped transformer for each loop count, plain and with timestep encoding.

    Inputs are uniform on ``[0, 1]^{N x d}``, fresh each step; Adam on the MSE; the error is the
    MSE on 4096 held-out sequences. Requires ``torch``.

    Parameters
    ----------
    loops : array-like of int
        Loop counts ``r`` (>= 1), at least two.
    target : callable, optional
        ``(batch, N, d) -> (batch, N, d_out)``; default :func:`default_target`.
    tokens, dim, width, steps, batch_size : int
    learning_rate : float, default 3e-3
    n_seeds : int, default 2
    random_state : int, default 0

    Returns
    -------
    LoopedSimulation

    References
    ----------
    K. Xu and I. Sato, ICML 2025 (Section 5: more loops help; timestep encoding helps further).

    Examples
    --------
    >>> sim = simulate_looped([1, 2], steps=5, n_seeds=1)
    >>> sim.plain.shape
    (2,)
    """
    torch = _torch()
    rs = check_numeric_array(loops, "loops", ndim=1, min_rows=2)
    if np.any(rs < 1) or np.any(rs != np.round(rs)):
        raise DataError(f"loops must be integers >= 1, got {rs.tolist()}.", argument="loops")
    f = default_target if target is None else target
    rng = np.random.default_rng(random_state)
    x_test = rng.uniform(0, 1, (4096, tokens, dim))
    y_test = np.asarray(f(x_test), dtype=float)
    d_out = y_test.shape[-1]
    xt, yt = torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test, dtype=torch.float32)
    errs = np.zeros((2, len(rs), n_seeds))
    for j, r in enumerate(rs.astype(int)):
        for k, ts in enumerate((False, True)):
            for s in range(n_seeds):
                torch.manual_seed(random_state + 1000 * s + 7 * j)
                model = _build(torch, dim, d_out, width, int(r), ts)
                opt = torch.optim.Adam(model.parameters(), lr=learning_rate)
                for _ in range(steps):
                    x = rng.uniform(0, 1, (batch_size, tokens, dim))
                    xb = torch.tensor(x, dtype=torch.float32)
                    yb = torch.tensor(np.asarray(f(x), dtype=float), dtype=torch.float32)
                    loss = ((model(xb) - yb) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                with torch.no_grad():
                    errs[k, j, s] = float(((model(xt) - yt) ** 2).mean())
    mean = errs.mean(axis=2)
    lr_ = np.log(rs)
    slopes = [float(np.polyfit(lr_, np.log(m), 1)[0]) for m in mean]
    return LoopedSimulation(rs.astype(int), mean[0], mean[1], slopes[0], slopes[1])
