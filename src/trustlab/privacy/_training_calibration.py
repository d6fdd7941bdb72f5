"""Which accountant prices a DP training run, and the noise multiplier that meets an epsilon (private).

DP-SGD with Poisson sampling is priced by the privacy-loss-distribution (PLD)
accountant of ``dp-accounting`` (Poisson-subsampled Gaussian, add/remove-one, both
directions, pessimistic discretisation: a valid upper bound), the tightest one it
offers; Renyi DP (:class:`~trustlab.privacy.amplification.PoissonAccountant`) is the
stated fallback when the PLD computation fails, and the only accountant for the
balanced, model-splitting and sign schemes (:mod:`trustlab.privacy.amplification`,
:mod:`trustlab.privacy.signsgd`). This module picks one for the trainer's settings,
caches its figures (they are functions of public parameters only) and inverts them by
bisection.

References
----------
Koskela, Jalko, Honkela. "Computing Tight Differential Privacy Guarantees Using FFT".
AISTATS 2020. Doroshenko, Ghazi, Kamath, Kumar, Manurangsi. "Connect the Dots: Tighter
Discrete Approximations of Privacy Loss Distributions". PETS 2022 (dp-accounting's PLD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
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

__all__ = [
    "GRID_BITS",
    "PLD_INTERVAL",
    "Run",
    "calibrate_noise",
    "grid_cost",
    "grid_inflation",
    "grid_step",
    "grid_tv_delta",
    "noise_range",
    "pld_interval",
    "run_plan",
]

_REL_TOL = 1e-3
PLD_INTERVAL = 1e-3
"""dp-accounting's ``value_discretization_interval`` for the PLD accountant at noise
multipliers of 0.5 and above (pessimistic: a coarser interval only overstates epsilon;
1e-3 is within 5e-4 of 1e-4 at epsilon 1 and about 8x faster). See :func:`pld_interval`."""


def pld_interval(sigma: float) -> float:
    """The PLD discretisation interval at noise multiplier ``sigma``: ``1e-3 max(1, 0.25 / sigma**2)``.

    The privacy-loss support of a Gaussian step widens like ``1 / sigma**2``, and so do
    the number of grid points and the time of a PLD computation at a fixed interval (5.3 s
    at sigma 0.174, 500 steps). Widening the interval in proportion keeps the point count
    bounded; the discretisation stays pessimistic, so the figure stays a valid upper
    bound. Measured at sigma 0.174 (epsilon 250, 500 steps of rate 0.01): 249.9903 at
    interval 0.01 against 249.9901 at 1e-3, in 0.6 s instead of 5.3 s. A function of the
    public multiplier only.
    """
    return PLD_INTERVAL * max(1.0, 0.25 / (sigma * sigma))


@dataclass(frozen=True)
class Run:
    """The public settings of a training run that the accountants read (hashable: cached)."""

    optimizer: str
    sampling: str
    steps: int
    sample_rate: float
    epochs: int
    delta: float
    num_blocks: int = 1

    @property
    def uses_pld(self) -> bool:
        """Whether the PLD accountant prices the run (DP-SGD with Poisson sampling)."""
        return self.optimizer == "dpsgd" and self.sampling == "poisson"


def noise_range(optimizer: str) -> tuple[float, float]:
    """The noise multipliers the chosen accountant takes."""
    if optimizer == "signsgd":
        return MIN_ACCOUNTED_NOISE_MULTIPLIER, MAX_ACCOUNTED_NOISE_MULTIPLIER
    return MIN_NOISE_MULTIPLIER, MAX_ACCOUNTED_NOISE_MULTIPLIER


@lru_cache(maxsize=2048)
def _pld_epsilon(sigma: float, steps: int, q: float, delta: float) -> float:
    """Epsilon at ``delta`` of ``steps`` Poisson-subsampled Gaussian steps (dp-accounting's PLD)."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(
        NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=pld_interval(sigma)
    )
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    return float(acc.get_epsilon(delta))


def _rdp_plan(run: Run, noise_multiplier: float) -> Release:
    if run.optimizer == "signsgd":
        if run.sampling != "poisson":
            raise ParameterError(
                "optimizer='signsgd' is accounted for Poisson sampling only (SignMechanismAccountant); "
                "pass sampling='poisson'.",
                argument="sampling",
            )
        return SignMechanismAccountant("gaussian", noise_multiplier, run.sample_rate).plan(
            run.delta, run.steps
        )
    if run.sampling == "balanced":
        return BISAccountant(run.steps, run.epochs, noise_multiplier).plan(run.delta)
    if run.sampling == "model_split":
        return ModelSplitAccountant(run.num_blocks, noise_multiplier, run.steps, run.sample_rate).plan(
            run.delta
        )
    return PoissonAccountant(noise_multiplier, run.steps, run.sample_rate).plan(run.delta)


@lru_cache(maxsize=512)
def run_plan(run: Run, noise_multiplier: float) -> Release:
    """The accountant's plan for the run (``value=None``): its epsilon at ``delta`` and parameters.

    ``parameters["accountant"]`` says which accountant priced it: ``"pld"``
    (dp-accounting's PLD; the Renyi figure is kept as ``rdp_epsilon``) or ``"rdp"``
    (with ``accountant_note`` saying why: the scheme has no PLD accountant here, or the
    PLD computation failed).
    """
    plan = _rdp_plan(run, noise_multiplier)
    params = dict(plan.parameters)
    if not run.uses_pld:
        params.update(accountant="rdp", accountant_note="no PLD accountant for this scheme in trustlab")
        return replace(plan, parameters=params)
    try:
        eps = _pld_epsilon(noise_multiplier, run.steps, run.sample_rate, run.delta)
    except Exception as exc:  # public parameters only: a failure here says nothing about data
        params.update(accountant="rdp", accountant_note=f"PLD failed ({type(exc).__name__}); Renyi DP used")
        return replace(plan, parameters=params)
    if not eps < plan.epsilon:  # both are valid upper bounds: state the smaller
        params.update(accountant="rdp", accountant_note="Renyi DP was not above the PLD figure")
        return replace(plan, parameters=params)
    params.update(accountant="pld", rdp_epsilon=plan.epsilon, pld_interval=pld_interval(noise_multiplier))
    return replace(
        plan,
        epsilon=eps,
        mechanism="Gaussian noise, Poisson subsampling (PLD, dp-accounting)",
        parameters=params,
    )


def _epsilon(run: Run, sigma: float) -> float:
    if run.optimizer == "signsgd" and run.sampling == "poisson":
        return float(
            SignMechanismAccountant("gaussian", sigma, run.sample_rate).get_epsilon(run.delta, run.steps)
        )
    return float(run_plan(run, sigma).epsilon)


@lru_cache(maxsize=256)
def calibrate_noise(run: Run, epsilon: float) -> float:
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
    low, high = noise_range(run.optimizer)
    target = math.log(epsilon)

    def f(sigma: float) -> float:  # decreasing in sigma; <= 0 means the target is met
        eps = _epsilon(run, sigma)
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
                    f"epsilon={epsilon:g} cannot be met with {run.steps} steps even at noise multiplier "
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


GRID_BITS = 26
"""The noise grid is ``noise_std * 2**-26`` rounded down to a power of two."""
_ROUNDING_TV = 0.021  # trustlab.privacy.calibration.DG_ROUNDING_TV


def grid_step(std: float) -> float:
    """The public grid step of a run's noisy sums: ``std * 2**-26`` rounded down to a power of two."""
    return 2.0 ** (math.floor(math.log2(std)) - GRID_BITS)


def grid_inflation(n_params: int, target: float) -> float:
    """Factor on the accountant's multiplier ``target`` that pays the grid's sensitivity slack.

    With ``h <= sigma C 2**-26`` the accounted multiplier is
    ``sigma / (1 + 1e-9 + sqrt(P) h / (2 C)) >= sigma / (1 + 1e-9 + sqrt(P) sigma 2**-27)``,
    which is at least ``target`` for ``sigma = target (1 + 1e-9) / (1 - sqrt(P) target 2**-27)``.
    """
    shrink = 1.0 - math.sqrt(n_params) * target * 2.0 ** -(GRID_BITS + 1)
    return (1.0 + 1e-9) / max(shrink, 1e-3)


def grid_tv_delta(epsilon: float, steps: int, n_params: int) -> float:
    """The delta the exact discrete noise adds beyond the Gaussian mechanism the accountant prices.

    Each coordinate's discrete Gaussian (scale ``s = std / h >= 2**26`` grid units) is
    within total variation ``0.021 / s**2`` of the continuous Gaussian rounded to the
    grid (``calibration.DG_ROUNDING_TV``), and rounding the (grid-valued) sum plus a
    continuous Gaussian is post-processing of the Gaussian mechanism. Over ``T`` steps
    of ``P`` coordinates the run is within ``tau = T P 0.021 2**-52`` of that mechanism,
    so an ``(epsilon, delta')`` guarantee for it gives ``(epsilon, delta' + (1 + e^epsilon) tau)``.
    """
    tau = steps * n_params * _ROUNDING_TV * 2.0 ** (-2 * GRID_BITS)
    return (1.0 + math.exp(min(epsilon, 700.0))) * tau


def grid_cost(epsilon: float, steps: int, n_params: int, delta: float) -> tuple[float, float]:
    """``(epsilon_grid, delta_acc)``: the accountant prices ``(epsilon - epsilon_grid, delta_acc)``.

    Two valid bounds on the exact discrete noise's cost beyond the Gaussian mechanism
    (sensitivity ``C + sqrt(P) h / 2``) that the accountant prices, the cheaper one used:

    * total variation (:func:`grid_tv_delta`): ``(0, delta - (1 + e^epsilon) tau)`` when that
      share is at most ``delta / 2``; its ``e^epsilon`` makes it useless at large epsilon;
    * a pointwise density ratio: with ``N = T P`` draws of scale ``s >= 2**26`` and every
      noise value ``|z| <= L s``, ``|log p(z) / q(z)| <= eta = L / (2 s) + 1 / (8 s**2)
      + 3 e^(-2 pi^2 s^2)`` between the discrete Gaussian ``p`` and the rounded Gaussian
      ``q`` (``q(z) / phi(z)`` is an average of ``exp(-(2 z t + t**2) / (2 s**2))`` over
      ``|t| <= 1/2``; Poisson summation bounds the normaliser), and the tails beyond
      ``L s`` have mass at most ``3 N e^(-L**2/2)`` under either. An ``(e_a, d_a)`` bound for
      the rounded-Gaussian run then gives ``(e_a + 2 N eta, e^(N eta) d_a + (1 + e^epsilon)
      3 N e^(-L**2/2))`` for the exact one; ``L`` is chosen so the tail term is ``delta / 4``.
    """
    tv_delta = grid_tv_delta(epsilon, steps, n_params)
    if tv_delta <= 0.5 * delta:
        return 0.0, delta - tv_delta
    n = float(steps) * float(n_params)
    log_one_plus_exp = epsilon + math.log1p(math.exp(-epsilon))
    tail = 0.25 * delta
    big_l = math.sqrt(2.0 * (math.log(3.0 * n / tail) + log_one_plus_exp))
    s = 2.0**GRID_BITS
    eta = big_l / (2.0 * s) + 1.0 / (8.0 * s * s) + 2.0**-100
    eta *= 1.0 + 1e-9  # float rounding of the bound only ever overstates it
    return 2.0 * n * eta, (delta - tail) * math.exp(-n * eta)
