"""Algorithm 3 of PTA (Tang et al.'s GenPrompt): fresh random subsets per token, and their accounting.

Per generated token, ``M * N`` private demonstrations are drawn uniformly **without
replacement** from the ``n`` private ones (from the operating system's CSPRNG, never a seed)
and split into ``M`` subsets of ``N`` (Yamasaki et al. 2025, Algorithm 3; Tang et al. 2024).
Each token is then the Gaussian noisy argmax of :mod:`trustlab.privacy.dp_icl` on a random
subsample, so it is amplified by subsampling with rate ``q = M N / n``.

Neighbouring is **replace-one** (``n`` is public). Per token the mechanism is a Gaussian of
L2 sensitivity ``Delta`` (:func:`~trustlab.privacy.dp_icl.step_sensitivity`) on a subsample of
fixed size drawn without replacement, which is ``C_q(G_{Delta/sigma})``-DP (Dong, Roth, Su
2022, Theorem 4.2: ``min{f_q, f_q^-1}**``). Its privacy profile for ``epsilon >= 0`` is that of
the pair ``((1-q) N(0, s^2) + q N(Delta, s^2), N(0, s^2))`` in *both* directions (Balle et al.
2018, advanced joint convexity), so one per-token privacy loss distribution (PLD) dominates:
the remove-direction PLD of that pair on losses ``> 0``, mirrored onto ``< 0`` with weight
``exp(-loss)`` (the symmetric pair of ``C_q``), the rest at 0. The ``n_steps`` tokens compose
by convolving it (dp-accounting's pessimistic connect-the-dots PLD, Doroshenko et al. 2022).

Why not the paper's accounting: the paper composes Gopi et al.'s PRVs of the *Poisson*
subsampled Gaussian (its Theorem 8) with ``q = M N / n``, i.e. add/remove neighbours and
Poisson sampling, while Algorithm 3 draws a fixed number under replacement of one record.
That figure is what :func:`poisson_subsampled_epsilon` computes: it is a *lower* bound for
Algorithm 3 (its two directions are worst cases Algorithm 3 realises), never charged. The
Renyi-DP bound for exactly this event (Wang, Balle, Kasiviswanathan 2019;
dp-accounting's ``SampledWithoutReplacementDpEvent`` under ``REPLACE_ONE``) is the second,
independent upper bound (:func:`subsampled_epsilon` with ``method="rdp"``).

References
----------
Yamasaki et al. ICML 2025 (Algorithm 3, Appendix D). Tang et al. ICLR 2024. Dong, Roth, Su.
"Gaussian differential privacy". JRSS-B 2022. Balle, Barthe, Gaboardi. "Privacy amplification by
subsampling". NeurIPS 2018. Zhu, Dong, Wang. "Optimal accounting of differential privacy via
characteristic function". AISTATS 2022. Lebeda, Regehr, Kamath, Steinke. "Avoiding pitfalls for
privacy accounting of subsampled mechanisms under composition". 2024.
"""

from __future__ import annotations

import functools
import math
import secrets
from typing import Any

import numpy as np

from trustlab._validation import check_delta, check_epsilon, check_positive, check_positive_int
from trustlab.errors import ParameterError

__all__ = [
    "SUBSAMPLING_NEIGHBOURS",
    "draw_subsets",
    "poisson_subsampled_epsilon",
    "subsampled_epsilon",
    "subsampled_sigma",
]

SUBSAMPLING_NEIGHBOURS = (
    "replace one private demonstration (the number n of private demonstrations is public); "
    "per token M*N of them drawn without replacement from a CSPRNG"
)

_GRID = 1e-3  # PLD loss discretisation (pessimistic rounding: only ever over-reports epsilon)
_METHODS = ("pld", "rdp")


def _check_sizes(n: int, sample_size: int) -> tuple[int, int]:
    n = check_positive_int(n, "n")
    sample_size = check_positive_int(sample_size, "sample_size")
    if sample_size > n:
        raise ParameterError(
            f"sample_size={sample_size} exceeds the {n} private demonstrations; lower n_subsets or shots.",
            argument="n_subsets",
        )
    return n, sample_size


def draw_subsets(n: int, n_subsets: int, shots: int) -> list[list[int]]:
    """Algorithm 3, line 1 and 4: ``M = n_subsets`` disjoint subsets of ``N = shots`` indices.

    ``M N`` indices are drawn uniformly without replacement from ``range(n)`` by
    :class:`secrets.SystemRandom` (the operating system's CSPRNG): the draw must stay secret for
    the amplification to hold, so it takes no seed and never touches numpy's generators.

    Parameters
    ----------
    n : int
        Number of private demonstrations.
    n_subsets : int
        ``M``.
    shots : int
        ``N``, demonstrations per subset.

    Returns
    -------
    list of list of int
        ``M`` lists of ``N`` distinct indices (all ``M N`` distinct).

    Examples
    --------
    >>> subsets = draw_subsets(10, 3, 2)
    >>> len(subsets), {len(s) for s in subsets}, len({i for s in subsets for i in s})
    (3, {2}, 6)
    """
    m, k = check_positive_int(n_subsets, "n_subsets"), check_positive_int(shots, "shots")
    n, size = _check_sizes(n, m * k)
    picked = secrets.SystemRandom().sample(range(n), size)
    return [picked[i * k : (i + 1) * k] for i in range(m)]


def _step_pld(sigma: float, sensitivity: float, q: float) -> Any:
    """The dominating per-token PLD of ``C_q(G)`` (symmetric), as a dp-accounting PLD."""
    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_distribution as pld

    remove = pld.from_gaussian_mechanism(
        standard_deviation=sigma,
        sensitivity=sensitivity,
        sampling_prob=q,
        value_discretization_interval=_GRID,
    )._pmf_remove.to_dense_pmf()
    idx = np.arange(remove._probs.size) + remove._lower_loss
    probs = np.asarray(remove._probs, dtype=float)
    pos = idx > 0
    top = int(idx[pos].max()) if pos.any() else 0
    upper = np.zeros(top + 1)
    upper[idx[pos]] = probs[pos]  # losses 1..top (grid units) kept as they are
    weights = upper * np.exp(-np.arange(top + 1) * _GRID)  # mass mirrored onto -loss
    inf = float(remove._infinity_mass)
    zero = 1.0 - inf - upper.sum() - weights.sum()
    if zero < -1e-12:  # impossible for a valid remove PLD (mass(L > 0) + Q(L > 0) <= 1)
        raise ParameterError("internal: the mirrored PLD has negative mass at 0.", argument="sigma")
    dense = np.concatenate([weights[:0:-1], [max(zero, 0.0)], upper[1:]])
    pmf = pld_pmf.DensePLDPmf(_GRID, -top, dense, inf, pessimistic_estimate=True)
    return pld.PrivacyLossDistribution(pmf)


def _pld_epsilon(sigma: float, sensitivity: float, q: float, n_steps: int, delta: float) -> float:
    return float(_step_pld(sigma, sensitivity, q).self_compose(n_steps).get_epsilon_for_delta(delta))


def _rdp_epsilon(sigma: float, sensitivity: float, n: int, size: int, n_steps: int, delta: float) -> float:
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    one = dp_event.SampledWithoutReplacementDpEvent(n, size, dp_event.GaussianDpEvent(sigma / sensitivity))
    acc.compose(dp_event.SelfComposedDpEvent(one, n_steps))
    return float(acc.get_epsilon(delta))


def subsampled_epsilon(
    sigma: float,
    delta: float,
    *,
    n: int,
    sample_size: int,
    n_steps: int,
    sensitivity: float,
    method: str = "pld",
) -> float:
    """Epsilon of ``n_steps`` Gaussian steps, each on ``sample_size`` of ``n`` drawn without replacement.

    Replace-one neighbours. ``method="pld"`` (the one charged): the symmetric dominating PLD of
    ``C_q(G)`` composed by convolution (see the module notes); ``method="rdp"``: dp-accounting's
    Renyi-DP bound for ``SampledWithoutReplacementDpEvent`` under ``REPLACE_ONE`` (Wang et al.
    2019), an independent upper bound.

    Parameters
    ----------
    sigma : float
        Noise std per step.
    delta : float
        Target delta of the whole composition.
    n : int
        Number of private demonstrations (public).
    sample_size : int
        ``M N`` drawn per step (at most ``n``; ``n`` means no amplification).
    n_steps : int
        Number of noisy tokens.
    sensitivity : float
        L2 sensitivity of one step under replace-one.
    method : {"pld", "rdp"}, default "pld"

    Returns
    -------
    float

    Examples
    --------
    >>> e = subsampled_epsilon(8.0, 1e-5, n=30, sample_size=5, n_steps=24, sensitivity=1.5)
    >>> 0 < e < subsampled_epsilon(8.0, 1e-5, n=30, sample_size=30, n_steps=24, sensitivity=1.5)
    True
    """
    sigma, sensitivity = check_positive(sigma, "sigma"), check_positive(sensitivity, "sensitivity")
    delta, steps = check_delta(delta), check_positive_int(n_steps, "n_steps")
    n, size = _check_sizes(n, sample_size)
    if method == "pld":
        return _pld_epsilon(sigma, sensitivity, size / n, steps, delta)
    if method == "rdp":
        return _rdp_epsilon(sigma, sensitivity, n, size, steps, delta)
    raise ParameterError(f"method must be one of {_METHODS}, got {method!r}.", argument="method")


def poisson_subsampled_epsilon(
    sigma: float, delta: float, *, q: float, n_steps: int, sensitivity: float
) -> float:
    """The paper's figure: Poisson-subsampled Gaussian, add/remove neighbours (Gopi et al.'s PRVs).

    dp-accounting's PLD of ``PoissonSampledDpEvent(q, GaussianDpEvent(sigma / sensitivity))``
    composed ``n_steps`` times, the larger of the add and remove directions. For Algorithm 3
    (fixed-size draw, replace-one) it is a **lower** bound: a worst-case neighbour pair
    realises either direction at every step. Reported for comparison, never charged.

    Parameters
    ----------
    sigma : float
        Noise std per step.
    delta : float
        Target delta.
    q : float
        Sampling rate ``M N / n``, in ``(0, 1]``.
    n_steps : int
        Number of noisy tokens.
    sensitivity : float
        L2 sensitivity of one step.

    Returns
    -------
    float

    Examples
    --------
    >>> lo = poisson_subsampled_epsilon(8.0, 1e-5, q=1 / 6, n_steps=24, sensitivity=1.5)
    >>> lo <= subsampled_epsilon(8.0, 1e-5, n=30, sample_size=5, n_steps=24, sensitivity=1.5)
    True
    """
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant

    sigma, sensitivity = check_positive(sigma, "sigma"), check_positive(sensitivity, "sensitivity")
    if not (isinstance(q, int | float) and 0.0 < q <= 1.0):
        raise ParameterError(f"q must be a number in (0, 1], got {q!r}.", argument="q")
    acc = PLDAccountant(value_discretization_interval=_GRID)
    one = dp_event.PoissonSampledDpEvent(float(q), dp_event.GaussianDpEvent(sigma / sensitivity))
    acc.compose(dp_event.SelfComposedDpEvent(one, check_positive_int(n_steps, "n_steps")))
    return float(acc.get_epsilon(check_delta(delta)))


def subsampled_sigma(
    epsilon: float, delta: float, *, n: int, sample_size: int, n_steps: int, sensitivity: float
) -> float:
    """Smallest noise std (to 0.1%) whose PLD epsilon (:func:`subsampled_epsilon`) is at most ``epsilon``.

    Bisection on ``log(sigma)`` between the unamplified Gaussian-DP calibration (always
    feasible: subsampling only helps) and a lower bracket; the feasible end is returned, so
    the release is never less private than requested.

    Parameters
    ----------
    epsilon, delta : float
        The guarantee of all ``n_steps`` tokens together.
    n, sample_size, n_steps : int
        As in :func:`subsampled_epsilon`.
    sensitivity : float
        L2 sensitivity of one step.

    Returns
    -------
    float

    Examples
    --------
    >>> s = subsampled_sigma(2.0, 1e-5, n=30, sample_size=5, n_steps=24, sensitivity=1.5)
    >>> subsampled_epsilon(s, 1e-5, n=30, sample_size=5, n_steps=24, sensitivity=1.5) <= 2.0
    True
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    steps, sensitivity = check_positive_int(n_steps, "n_steps"), check_positive(sensitivity, "sensitivity")
    n, size = _check_sizes(n, sample_size)
    return _calibrate(epsilon, delta, size / n, steps, sensitivity)


@functools.lru_cache(maxsize=256)  # a pure function of public parameters
def _calibrate(epsilon: float, delta: float, q: float, steps: int, sensitivity: float) -> float:
    from trustlab.privacy.calibration import analytic_gaussian_sigma

    def ok(s: float) -> bool:
        return _pld_epsilon(s, sensitivity, q, steps, delta) <= epsilon

    hi = analytic_gaussian_sigma(epsilon, delta, math.sqrt(steps) * sensitivity) * (1 + 1e-6)
    lo = hi * max(q, 1e-3)  # many steps: sigma shrinks about like q (small sigmas cost the most)
    while ok(lo) and lo > 1e-6:  # bracket: lo infeasible
        hi, lo = lo, lo / 2
    for _ in range(40):  # at q = 1 the PLD's pessimistic rounding can put hi just above epsilon
        if ok(hi):
            break
        hi *= 1.02
    else:
        raise ParameterError(
            f"could not calibrate sigma for epsilon={epsilon}, delta={delta}; raise delta.", argument="delta"
        )
    while hi / lo > 1.001:
        mid = math.sqrt(hi * lo)
        hi, lo = (mid, lo) if ok(mid) else (hi, mid)
    return hi
