"""Which accountant prices a DP training run, and the noise multiplier that meets an epsilon (private).

The accountants themselves live in :mod:`trustlab.privacy.amplification` and
:mod:`trustlab.privacy.signsgd`; this module only picks one for the trainer's settings,
caches its figures (they are functions of public parameters only) and inverts them by
bisection.
"""

from __future__ import annotations

import math
from functools import lru_cache

from trustlab.errors import ParameterError
from trustlab.privacy.amplification import (
    MIN_NOISE_MULTIPLIER,
    BISAccountant,
    ModelSplitAccountant,
    PoissonAccountant,
)
from trustlab.privacy.release import Release
from trustlab.privacy.signsgd import (
    MAX_ACCOUNTED_NOISE_MULTIPLIER,
    MIN_ACCOUNTED_NOISE_MULTIPLIER,
    SignMechanismAccountant,
)

__all__ = ["calibrate_noise", "noise_range", "run_plan"]

_REL_TOL = 1e-3


def noise_range(optimizer: str) -> tuple[float, float]:
    """The noise multipliers the chosen accountant takes."""
    if optimizer == "signsgd":
        return MIN_ACCOUNTED_NOISE_MULTIPLIER, MAX_ACCOUNTED_NOISE_MULTIPLIER
    return MIN_NOISE_MULTIPLIER, MAX_ACCOUNTED_NOISE_MULTIPLIER


@lru_cache(maxsize=512)
def run_plan(
    optimizer: str,
    sampling: str,
    noise_multiplier: float,
    steps: int,
    sample_rate: float,
    epochs: int,
    delta: float,
    num_blocks: int = 1,
) -> Release:
    """The accountant's plan for the run (``value=None``): its epsilon at ``delta`` and parameters."""
    if optimizer == "signsgd":
        if sampling != "poisson":
            raise ParameterError(
                "optimizer='signsgd' is accounted for Poisson sampling only (SignMechanismAccountant); "
                "pass sampling='poisson'.",
                argument="sampling",
            )
        return SignMechanismAccountant("gaussian", noise_multiplier, sample_rate).plan(delta, steps)
    if sampling == "balanced":
        return BISAccountant(steps, epochs, noise_multiplier).plan(delta)
    if sampling == "model_split":
        return ModelSplitAccountant(num_blocks, noise_multiplier, steps, sample_rate).plan(delta)
    return PoissonAccountant(noise_multiplier, steps, sample_rate).plan(delta)


@lru_cache(maxsize=1024)
def _epsilon(
    optimizer: str,
    sampling: str,
    sigma: float,
    steps: int,
    q: float,
    epochs: int,
    delta: float,
    num_blocks: int,
) -> float:
    if optimizer == "signsgd" and sampling == "poisson":
        return float(SignMechanismAccountant("gaussian", sigma, q).get_epsilon(delta, steps))
    return float(run_plan(optimizer, sampling, sigma, steps, q, epochs, delta, num_blocks).epsilon)


@lru_cache(maxsize=256)
def calibrate_noise(
    optimizer: str,
    sampling: str,
    epsilon: float,
    delta: float,
    steps: int,
    sample_rate: float,
    epochs: int,
    num_blocks: int = 1,
) -> float:
    """The smallest noise multiplier (to a relative ``1e-3``) whose run costs at most ``epsilon``.

    Bisection on ``log(noise_multiplier)``; the epsilon of a run is non-increasing in
    the noise multiplier. The returned multiplier always meets the target (it is the
    upper end of the final bracket).

    Raises
    ------
    ParameterError
        When even the largest noise multiplier the accountant takes costs more than
        ``epsilon`` (too many steps for that epsilon).
    """
    low, high = noise_range(optimizer)
    args = (steps, sample_rate, epochs, delta, num_blocks)
    target = math.log(epsilon)

    def f(sigma: float) -> float:  # decreasing in sigma; <= 0 means the target is met
        eps = _epsilon(optimizer, sampling, sigma, *args)
        return 700.0 if not eps > 0 or not math.isfinite(eps) else math.log(eps) - target

    # bracket [lo, hi] with f(lo) > 0 >= f(hi), expanding from 1 by factors of 4
    lo = hi = min(max(1.0, low), high)
    f_hi = f(hi)
    if f_hi <= 0:
        while lo > low:
            lo = max(low, lo / 4.0)
            f_lo = f(lo)
            if f_lo > 0:
                break
            hi, f_hi = lo, f_lo
        else:
            return low
    else:
        f_lo = f_hi
        while True:
            if hi >= high:
                raise ParameterError(
                    f"epsilon={epsilon:g} cannot be met with {steps} steps even at noise multiplier "
                    f"{high:g}; "
                    "raise epsilon, or lower epochs or sample_rate.",
                    argument="epsilon",
                )
            lo, f_lo = hi, f_hi
            hi = min(high, hi * 4.0)
            f_hi = f(hi)
            if f_hi <= 0:
                break
    # Illinois (regula falsi) on log(sigma); bisection when it stalls
    side = 0
    for it in range(200):
        if hi / lo <= 1.0 + _REL_TOL:
            break
        u_lo, u_hi = math.log(lo), math.log(hi)
        if it % 8 == 7 or not (math.isfinite(f_lo) and f_lo < 700.0):
            u = 0.5 * (u_lo + u_hi)
        else:
            u = u_hi - f_hi * (u_hi - u_lo) / (f_hi - f_lo)
            u = min(max(u, u_lo + 0.01 * (u_hi - u_lo)), u_hi - 0.01 * (u_hi - u_lo))
        mid = math.exp(u)
        f_mid = f(mid)
        if f_mid <= 0:
            hi, f_hi = mid, f_mid
            if side == -1:
                f_lo /= 2.0
            side = -1
        else:
            lo, f_lo = mid, f_mid
            if side == 1:
                f_hi /= 2.0
            side = 1
    return hi
