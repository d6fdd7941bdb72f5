"""The paper's approximate loss, solution manifold and two-stage training dynamics.

Companion of :mod:`trustlab.theory.multihead_icl` (He, Pan, Chen & Yang, ICML 2025). On the
diagonal / last-entry pattern (head ``h`` scores ``omega_h x_i^T x_q`` and outputs ``mu_h``
times the attended label) with the prior ``N(0, I_d/d)``, the population loss is approximately
``L~(omega, mu) = 1 + sigma^2 - 2 mu^T omega + mu^T (omega omega^T + (1 + sigma^2) / L
exp(d omega omega^T)) mu`` (:func:`approximate_loss`). Gradient descent on it from a small random
start (:func:`simulate_pattern_dynamics`) shows the paper's two stages: zero-sum OV and sign
matching, then homogeneous ``|omega_h| = gamma`` on the solution manifold
``sum_{h+} mu_h = mu_gamma = (gamma / 2) / (gamma^2 + (1 + sigma^2) / L sinh(d gamma^2))``
(:func:`manifold_output_weight`). See ``docs/theory/multihead-icl.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError

__all__ = [
    "PatternDynamics",
    "approximate_loss",
    "manifold_output_weight",
    "simulate_pattern_dynamics",
]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_INT2 = Interval(numbers.Integral, 2, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")


def _check_heads(omega: Any, mu: Any) -> tuple[np.ndarray, np.ndarray]:
    w = check_numeric_array(omega, "omega", ndim=1)
    m = check_numeric_array(mu, "mu", ndim=1)
    if w.shape != m.shape:
        raise DataError(
            f"omega and mu must have one entry per head; got {w.shape}, {m.shape}.", argument="mu"
        )
    return w, m


@validate_params(
    {
        "omega": ["array-like"],
        "mu": ["array-like"],
        "n_context": [_INT1],
        "dim": [_INT1],
        "noise_variance": [_NONNEG],
    }
)
def approximate_loss(
    omega: Any, mu: Any, n_context: int = 40, dim: int = 5, *, noise_variance: float = 0.1
) -> tuple[float, np.ndarray, np.ndarray]:
    """The paper's approximate ICL loss of the pattern model and its gradient.

    ``L~ = 1 + sigma^2 - 2 mu^T omega + mu^T A mu``, ``A = omega omega^T + c exp(d omega
    omega^T)`` (elementwise exponential), ``c = (1 + sigma^2) / L``; accurate for large ``L``
    with the prior ``N(0, I_d/d)``. Gradients: ``2 (A mu - omega)`` and
    ``2 (mu^T omega - 1) mu + 2 c d mu * (E (mu * omega))``, ``E = exp(d omega omega^T)``.

    Parameters
    ----------
    omega, mu : array-like ``(H,)``
        Each head's KQ scale and label output.
    n_context, dim : int, default 40, 5
    noise_variance : float, default 0.1

    Returns
    -------
    loss : float
    grad_omega, grad_mu : numpy.ndarray ``(H,)``

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (the approximate loss of their Section "Simplification").

    Examples
    --------
    >>> loss, _, _ = approximate_loss([0.0], [0.0])
    >>> loss
    1.1
    """
    w, m = _check_heads(omega, mu)
    return _loss_grad(w, m, n_context, dim, float(noise_variance))


def _loss_grad(
    w: np.ndarray, m: np.ndarray, n_context: int, dim: int, s2: float
) -> tuple[float, np.ndarray, np.ndarray]:
    c = (1 + s2) / n_context
    e = np.exp(np.clip(dim * np.outer(w, w), None, 700.0))
    a = np.outer(w, w) + c * e
    loss = 1 + s2 - 2 * m @ w + m @ a @ m
    g_w = 2 * (m @ w - 1) * m + 2 * c * dim * m * (e @ (m * w))
    return float(loss), g_w, 2 * (a @ m - w)


@validate_params({"gamma": [_POS], "n_context": [_INT1], "dim": [_INT1], "noise_variance": [_NONNEG]})
def manifold_output_weight(
    gamma: float, n_context: int = 40, dim: int = 5, *, noise_variance: float = 0.1
) -> float:
    """``mu_gamma``: the positive heads' total label output on the solution manifold.

    ``mu_gamma = (gamma / 2) / (gamma^2 + (1 + sigma^2) / L sinh(d gamma^2))`` minimises ``L~``
    over ``mu`` when every non-dummy head has ``|omega_h| = gamma``; the predictor's step is
    ``2 gamma mu_gamma -> eta* = 1 / (1 + (1 + sigma^2) d / L)`` as ``gamma -> 0``.

    Parameters
    ----------
    gamma : float
        The common ``|omega_h|``.
    n_context, dim : int, default 40, 5
    noise_variance : float, default 0.1

    Returns
    -------
    float

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (the solution manifold ``S_gamma``).

    Examples
    --------
    >>> round(2 * 1e-4 * manifold_output_weight(1e-4), 4), round(1 / (1 + 1.1 * 5 / 40), 4)
    (0.8791, 0.8791)
    """
    c = (1 + float(noise_variance)) / n_context
    g = float(gamma)
    return g / 2 / (g * g + c * math.sinh(min(dim * g * g, 700.0)))


@dataclass(frozen=True)
class PatternDynamics:
    """Gradient descent on the approximate loss, from a small random start.

    Attributes
    ----------
    steps : numpy.ndarray ``(k,)``
        The recorded steps.
    omega, mu : numpy.ndarray ``(k, H)``
        The heads' parameters there.
    loss : numpy.ndarray ``(k,)``
    zero_sum : numpy.ndarray ``(k,)``
        ``|sum_h mu_h| / sum_h |mu_h|``.
    sign_mismatch : numpy.ndarray ``(k,)``
        Fraction of active heads (``|mu_h|`` at least 10 % of the largest) with
        ``sign(omega_h) != sign(mu_h)``.
    spread : numpy.ndarray ``(k,)``
        ``(max - min) / max`` of ``|omega_h|`` over active heads (0: homogeneous KQ).
    manifold_gap : numpy.ndarray ``(k,)``
        ``|sum_{h: mu_h > 0} mu_h / mu_gamma - 1|`` at ``gamma`` = the active heads' mean
        ``|omega_h|`` (0: on the solution manifold).
    step_size : numpy.ndarray ``(k,)``
        ``eta = mu^T omega``.

    See Also
    --------
    simulate_pattern_dynamics : computes it.
    """

    steps: np.ndarray
    omega: np.ndarray
    mu: np.ndarray
    loss: np.ndarray
    zero_sum: np.ndarray
    sign_mismatch: np.ndarray
    spread: np.ndarray
    manifold_gap: np.ndarray
    step_size: np.ndarray


def _pattern_measures(
    w: np.ndarray, m: np.ndarray, n_context: int, dim: int, noise_variance: float
) -> tuple[float, float, float, float]:
    """Zero sum, sign mismatch, |omega| spread and manifold gap of one (omega, mu)."""
    zero_sum = abs(m.sum()) / max(np.abs(m).sum(), 1e-300)
    active = np.abs(m) >= 0.1 * np.abs(m).max() if np.abs(m).max() > 0 else np.ones(len(m), bool)
    mismatch = float(np.mean(np.sign(w[active]) != np.sign(m[active])))
    a = np.abs(w[active])
    spread = float((a.max() - a.min()) / max(a.max(), 1e-300))
    gamma = float(a.mean())
    target = (
        manifold_output_weight(gamma, n_context, dim, noise_variance=noise_variance) if gamma > 0 else 0.0
    )
    gap = abs(m[m > 0].sum() / target - 1) if target > 0 else math.inf
    return float(zero_sum), mismatch, spread, float(gap)


@validate_params(
    {
        "n_heads": [_INT2],
        "dim": [_INT1],
        "n_context": [_INT1],
        "noise_variance": [_NONNEG],
        "steps": [_INT1],
        "learning_rate": [_POS],
        "init_scale": [_POS],
        "record_every": [_INT1],
        "random_state": ["random_state"],
    }
)
def simulate_pattern_dynamics(
    n_heads: int = 4,
    dim: int = 5,
    n_context: int = 40,
    *,
    noise_variance: float = 0.1,
    steps: int = 20_000,
    learning_rate: float = 0.01,
    init_scale: float = 0.01,
    record_every: int = 100,
    random_state: Any = 0,
) -> PatternDynamics:
    """Gradient descent on :func:`approximate_loss` from ``N(0, init_scale^2)`` parameters.

    The paper's two stages: low-order terms first drive ``sum_h mu_h -> 0`` and
    ``sign(omega_h) = sign(mu_h)`` (stage I), then the higher-order terms make ``|omega_h|``
    equal across active heads and ``(omega, mu)`` settle on the solution manifold (stage II).

    Parameters
    ----------
    n_heads : int, default 4
    dim, n_context : int, default 5, 40
    noise_variance : float, default 0.1
    steps : int, default 20000
    learning_rate : float, default 0.01
    init_scale : float, default 0.01
    record_every : int, default 100
    random_state : int, Generator or None, default 0

    Returns
    -------
    PatternDynamics

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (training dynamics: stage I sign matching and zero-sum
    OV, stage II homogeneous KQ and the solution manifold).

    Examples
    --------
    >>> r = simulate_pattern_dynamics(2, steps=3000, record_every=1000)
    >>> bool(r.zero_sum[-1] < 0.05), float(r.sign_mismatch[-1])
    (True, 0.0)
    """
    rng = make_generator(random_state)
    w = init_scale * rng.standard_normal(n_heads)
    m = init_scale * rng.standard_normal(n_heads)
    ks: list[int] = []
    ws: list[np.ndarray] = []
    ms: list[np.ndarray] = []
    rows: list[tuple[float, ...]] = []
    for k in range(1, steps + 1):
        with np.errstate(over="ignore", invalid="ignore"):  # divergence is reported below
            loss, g_w, g_m = _loss_grad(w, m, n_context, dim, float(noise_variance))
        if not np.isfinite(loss):
            raise DataError(f"the loss diverged at step {k}: lower learning_rate.", argument="learning_rate")
        w, m = w - learning_rate * g_w, m - learning_rate * g_m
        if k % record_every == 0:
            ks.append(k)
            ws.append(w.copy())
            ms.append(m.copy())
            rows.append((loss, *_pattern_measures(w, m, n_context, dim, float(noise_variance))))
    om, mu = np.reshape(ws, (-1, n_heads)), np.reshape(ms, (-1, n_heads))
    r = np.reshape(np.asarray(rows, dtype=float), (-1, 5))
    return PatternDynamics(
        np.asarray(ks, dtype=int),
        om,
        mu,
        r[:, 0],
        r[:, 1],
        r[:, 2],
        r[:, 3],
        r[:, 4],
        np.einsum("kh,kh->k", om, mu),
    )
