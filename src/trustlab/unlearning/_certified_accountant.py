"""The certificate of noisy fine-tuning: privacy amplification by iteration (Rényi) to (epsilon, delta).

Koloskova, Allouah, Jha, Guerraoui and Koyejo, "Certified Unlearning for Neural
Networks" (ICML 2025), gradient-clipping variant. Two runs of

    x_{t+1} = rho x_t - lr * clip_{C1}(g_t) + xi_{t+1},   xi ~ N(0, sigma_t^2 I),   rho = 1 - lr * lam

started anywhere in the ball of radius C0 stay at distance at most
``D_T = rho^T 2 C0 + sum_{t<T} rho^{T-1-t} (2 lr C1 + s)`` in the worst case (``s`` is
the per-step rounding slack of the grid the noise is drawn on), and the shifted-Rényi
argument gives ``D_alpha <= alpha R`` with ``R = D_T^2 / (2 V_T)``,
``V_T = sum_{t<T} rho^{2(T-1-t)} sigma_t^2``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq, minimize_scalar


def distance_bound(C0: float, C1: float, lr: float, weight_decay: float, T: int, slack: float = 0.0) -> float:
    """``D_T``: the worst-case distance of two coupled runs after ``T`` steps."""
    rho = 1.0 - lr * weight_decay
    powers = rho ** np.arange(T - 1, -1, -1, dtype=float)  # rho^{T-1-t}, t = 0..T-1
    return float(rho**T * 2.0 * C0 + np.sum(powers) * (2.0 * lr * C1 + slack))


def noise_variance_sum(lr: float, weight_decay: float, sigmas: np.ndarray) -> float:
    """``V_T = sum_t rho^{2(T-1-t)} sigma_t^2``."""
    rho = 1.0 - lr * weight_decay
    T = sigmas.size
    return float(np.sum(rho ** (2.0 * np.arange(T - 1, -1, -1, dtype=float)) * sigmas**2))


def pabi_rho(
    C0: float, C1: float, lr: float, weight_decay: float, sigmas: np.ndarray, slack: float = 0.0
) -> float:
    """``R = D_T^2 / (2 V_T)`` (Rényi divergence of order alpha at most alpha R)."""
    sig = np.asarray(sigmas, dtype=float)
    return distance_bound(C0, C1, lr, weight_decay, sig.size, slack) ** 2 / (
        2.0 * noise_variance_sum(lr, weight_decay, sig)
    )


def calibrate_sigmas(
    C0: float,
    C1: float,
    lr: float,
    weight_decay: float,
    T: int,
    target_rho: float,
    schedule: str,
    slack: float = 0.0,
) -> np.ndarray:
    """Noise stds giving exactly ``R = target_rho`` (constant or decreasing schedule)."""
    rho = 1.0 - lr * weight_decay
    D = distance_bound(C0, C1, lr, weight_decay, T, slack)
    decay = rho ** (2.0 * np.arange(T - 1, -1, -1, dtype=float))  # rho^{2(T-1-t)}
    if schedule == "constant":
        var = np.full(T, D**2 / (2.0 * target_rho * decay.sum()))
    else:  # "decreasing": every step contributes equally to V_T
        var = D**2 / (2.0 * target_rho * T * decay)
    return np.sqrt(var)


def default_steps(C0: float, C1: float, lr: float, weight_decay: float) -> int:
    """``T = ceil(C0 / (lr C1))``, or the shorter ``ceil(ln(2 lam C0 / C1) / (lr lam))`` when lam > 0."""
    T = max(1, math.ceil(C0 / (lr * C1) - 1e-12))
    if weight_decay > 0 and 2.0 * weight_decay * C0 > C1:
        T2 = math.ceil(math.log(2.0 * weight_decay * C0 / C1) / (lr * weight_decay) - 1e-12)
        if 0 < T2 < T:
            T = T2
    return int(T)


def rho_to_epsilon(rho: float, delta: float) -> tuple[float, float]:
    """``eps(delta) = min_{alpha > 1} alpha R + ln((alpha - 1)/alpha) - (ln delta + ln alpha)/(alpha - 1)``.

    Returns ``(epsilon, best alpha)`` (Canonne, Kamath and Steinke's RDP conversion).
    """

    def eps(log_am1: float) -> float:
        a = 1.0 + math.exp(log_am1)
        return a * rho + math.log((a - 1.0) / a) - (math.log(delta) + math.log(a)) / (a - 1.0)

    res = minimize_scalar(eps, bounds=(-12.0, 12.0), method="bounded", options={"xatol": 1e-10})
    return float(res.fun), float(1.0 + math.exp(res.x))


def epsilon_to_rho(epsilon: float, delta: float) -> float:
    """The largest ``R`` whose certificate is at most ``epsilon`` at ``delta`` (bisection)."""

    def gap(log_r: float) -> float:
        return rho_to_epsilon(math.exp(log_r), delta)[0] - epsilon

    lo, hi = -40.0, 20.0
    if gap(lo) > 0:
        return math.exp(lo)
    return math.exp(brentq(gap, lo, hi, xtol=1e-12))
