"""Privacy amplification by random data and model partitioning (balanced subsampling, model splitting).

Accountants for noisy gradient training in which every record takes part in only a
random part of training, beside Poisson subsampling:

- :class:`BISAccountant`: *balanced iteration subsampling*, each record joins exactly
  ``participations`` of the ``steps`` iterations, chosen uniformly at random;
- :class:`ModelSplitAccountant`: *model splitting*, each step a participating record
  updates one of ``num_blocks`` disjoint parameter blocks chosen uniformly at random;
- :class:`PoissonAccountant`: Poisson subsampling at rate ``sample_rate`` (the
  baseline; it agrees with ``dp-accounting``'s ``RdpAccountant``).

All three state Renyi-DP curves at integer orders and convert them to
``(epsilon, delta)`` with ``dp-accounting``'s conversion; :meth:`~PoissonAccountant.plan`
states the cost as a :class:`~trustlab.privacy.release.Release` plan that an
:class:`~trustlab.privacy.accounting.Accountant` can check and charge. Neighbouring
relation: zero-out (one record replaced by a null record with zero gradient), which
for a sum of clipped gradients is add/remove-one. The bounds are for the *remove*
direction; the *add* direction is assumed no larger (Feldman and Shenfeld observe
this is typical; :meth:`BISAccountant.rdp_reverse_mc` checks it by Monte Carlo).

The schedules (:func:`bis_schedule`, :func:`poisson_schedule`) are the sampling the
accountants assume. Their randomness is part of the privacy guarantee: by default it
comes from a generator seeded with ``os.urandom`` at each call. A ``random_state``
makes the schedule reproducible, and then public, which voids the amplification
(for tests and simulations only).

References
----------
Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for Privacy
Amplification". ICML 2025 (PMLR 267:13938-13962). Feldman, Shenfeld. "Privacy
amplification by random allocation". arXiv 2502.08202, 2025. Mironov, Talwar, Zhang.
"Renyi Differential Privacy of the Sampled Gaussian Mechanism". arXiv 1908.10530, 2019.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import make_generator
from trustlab.errors import ParameterError
from trustlab.privacy._amplification_base import (
    _DELTA,
    _NOISE,
    _RATE,
    _STEPS,
    DEFAULT_ORDERS,
    MIN_NOISE_MULTIPLIER,
    NEIGHBOURING,
    PoissonAccountant,
    _RenyiAccountant,
)
from trustlab.privacy._amplification_partition import BISAccountant, ModelSplitAccountant
from trustlab.privacy.release import Release

__all__ = [
    "DEFAULT_ORDERS",
    "MIN_NOISE_MULTIPLIER",
    "NEIGHBOURING",
    "AmplificationResult",
    "BISAccountant",
    "ModelSplitAccountant",
    "PoissonAccountant",
    "PoissonComparison",
    "amplified_epsilon",
    "bis_schedule",
    "compare_to_poisson",
    "poisson_schedule",
]


@dataclass(frozen=True)
class AmplificationResult:
    """The epsilon of a partitioned (or Poisson-subsampled) noisy training run.

    Attributes
    ----------
    scheme : str
        ``"poisson"``, ``"balanced"`` or ``"model_split"``.
    epsilon : float
        The run's epsilon at ``delta``.
    delta : float
        The delta.
    order : float
        The Renyi order at which ``epsilon`` is attained.
    release : Release
        The plan to charge to an :class:`~trustlab.privacy.accounting.Accountant`.

    See Also
    --------
    amplified_epsilon : Builds it.
    """

    scheme: str
    epsilon: float
    delta: float
    order: float
    release: Release


@validate_params(
    {
        "scheme": [Options({"poisson", "balanced", "model_split"})],
        "noise_multiplier": [_NOISE],
        "steps": [_STEPS],
        "delta": [_DELTA],
        "sample_rate": [_RATE, None],
        "participations": [_STEPS, None],
        "num_blocks": [_STEPS, None],
        "description": [str],
    }
)
def amplified_epsilon(
    scheme: str,
    *,
    noise_multiplier: float,
    steps: int,
    delta: float,
    sample_rate: float | None = None,
    participations: int | None = None,
    num_blocks: int | None = None,
    description: str = "private training run",
) -> AmplificationResult:
    """Return the epsilon of ``steps`` noisy gradient steps under a sampling or partitioning scheme.

    Parameters
    ----------
    scheme : {"poisson", "balanced", "model_split"}
        Poisson subsampling (needs ``sample_rate``), balanced iteration subsampling
        (needs ``participations``), or model splitting (needs ``num_blocks``;
        ``sample_rate`` defaults to 1).
    noise_multiplier : float
        Noise standard deviation over the clipping norm, >= 1e-3.
    steps : int
        Number of steps, >= 1.
    delta : float
        Target delta, in ``(0, 1)``.
    sample_rate : float, optional
        Poisson rate in ``(0, 1]``.
    participations : int, optional
        Iterations each record joins (balanced iteration subsampling).
    num_blocks : int, optional
        Disjoint parameter blocks (model splitting).
    description : str, default "private training run"
        What the run releases, for the ledger.

    Returns
    -------
    AmplificationResult
        The epsilon, the Renyi order and the :class:`~trustlab.privacy.release.Release`
        plan.

    References
    ----------
    Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for
    Privacy Amplification". ICML 2025.

    Examples
    --------
    >>> bis = amplified_epsilon("balanced", noise_multiplier=1.0, steps=10, participations=1, delta=1e-5)
    >>> poi = amplified_epsilon("poisson", noise_multiplier=1.0, steps=10, sample_rate=0.1, delta=1e-5)
    >>> bis.epsilon < poi.epsilon
    True
    """
    acc: _RenyiAccountant
    if scheme == "poisson":
        if sample_rate is None:
            raise ParameterError("scheme='poisson' needs sample_rate=... in (0, 1].", argument="sample_rate")
        acc = PoissonAccountant(noise_multiplier, steps, sample_rate)
    elif scheme == "balanced":
        if participations is None:
            raise ParameterError(
                "scheme='balanced' needs participations=... (iterations each record joins).",
                argument="participations",
            )
        acc = BISAccountant(steps, participations, noise_multiplier)
    else:
        if num_blocks is None:
            raise ParameterError("scheme='model_split' needs num_blocks=... (>= 1).", argument="num_blocks")
        acc = ModelSplitAccountant(
            num_blocks, noise_multiplier, steps, 1.0 if sample_rate is None else sample_rate
        )
    release = acc.plan(delta, description=description)
    return AmplificationResult(
        scheme, release.epsilon, float(delta), float(release.parameters["rdp_order"]), release
    )


@dataclass(frozen=True)
class PoissonComparison:
    """Balanced iteration subsampling against Poisson subsampling at the same expected participation.

    Attributes
    ----------
    epsilon_balanced : float
        Epsilon of balanced iteration subsampling (integer orders 2..256).
    epsilon_poisson : float
        Epsilon of Poisson subsampling at ``sample_rate = participations / steps`` on the
        same orders and conversion.
    epsilon_poisson_all_orders : float
        Poisson's epsilon over ``dp-accounting``'s default orders (fractional included).
    sample_rate : float
        ``participations / steps``.
    ratio : float
        ``epsilon_balanced / epsilon_poisson`` (below 1: balanced sampling wins).

    See Also
    --------
    compare_to_poisson : Builds it.
    """

    epsilon_balanced: float
    epsilon_poisson: float
    epsilon_poisson_all_orders: float
    sample_rate: float
    ratio: float


@validate_params(
    {"noise_multiplier": [_NOISE], "steps": [_STEPS], "participations": [_STEPS], "delta": [_DELTA]}
)
def compare_to_poisson(
    noise_multiplier: float, steps: int, participations: int, delta: float
) -> PoissonComparison:
    """Compare balanced iteration subsampling with Poisson subsampling at rate ``participations / steps``.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, >= 1e-3.
    steps : int
        Number of iterations, >= 1.
    participations : int
        Iterations each record joins, ``1 <= participations <= steps``.
    delta : float
        Target delta, in ``(0, 1)``.

    Returns
    -------
    PoissonComparison
        Both epsilons and their ratio.

    References
    ----------
    Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for
    Privacy Amplification". ICML 2025.

    Examples
    --------
    >>> c = compare_to_poisson(1.0, steps=10, participations=1, delta=1e-5)
    >>> c.ratio < 1
    True
    """
    bis = BISAccountant(steps, participations, noise_multiplier)
    q = participations / steps
    poisson = PoissonAccountant(noise_multiplier, steps, q)
    e_bis = bis.get_epsilon(delta)
    e_poi = poisson.epsilon_and_order(delta, DEFAULT_ORDERS)[0]
    e_all = poisson.get_epsilon(delta)
    return PoissonComparison(e_bis, e_poi, e_all, q, e_bis / e_poi if e_poi > 0 else float("nan"))


_SCHEDULE = {
    "n": [Interval(numbers.Integral, 0, None, closed="left")],
    "steps": [_STEPS],
    "random_state": ["random_state"],
}
"""Constraints shared by the schedules (each adds its own subsampling parameter)."""


def _schedule_rng(random_state: Any) -> np.random.Generator:
    if random_state is None:
        return np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(32), "little")))
    return make_generator(random_state)


@validate_params({**_SCHEDULE, "participations": [_STEPS]})
def bis_schedule(n: int, steps: int, participations: int, random_state: Any = None) -> np.ndarray:
    """Draw a balanced iteration subsampling schedule: each record joins ``participations`` random steps.

    Parameters
    ----------
    n : int
        Number of records.
    steps : int
        Number of iterations ``T``.
    participations : int
        Iterations each record joins, ``1 <= participations <= steps``.
    random_state : None, int or numpy Generator, default None
        ``None`` (the only choice for a private run): a generator seeded from
        ``os.urandom``. A seed makes the schedule public and voids the amplification.

    Returns
    -------
    numpy.ndarray
        Boolean ``(n, steps)``: row ``i`` marks the iterations record ``i`` joins;
        every row sums to ``participations``.

    References
    ----------
    Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for
    Privacy Amplification". ICML 2025.

    Examples
    --------
    >>> s = bis_schedule(5, steps=6, participations=2, random_state=0)
    >>> s.shape, s.sum(axis=1).tolist()
    ((5, 6), [2, 2, 2, 2, 2])
    """
    if participations > steps:
        raise ParameterError(
            f"participations of bis_schedule must be at most steps={steps}; got {participations}.",
            argument="participations",
        )
    rng = _schedule_rng(random_state)
    keys = rng.random((int(n), int(steps)))
    chosen = np.argpartition(keys, int(participations) - 1, axis=1)[:, : int(participations)]
    out = np.zeros((int(n), int(steps)), dtype=bool)
    np.put_along_axis(out, chosen, True, axis=1)
    return out


@validate_params({**_SCHEDULE, "sample_rate": [_RATE]})
def poisson_schedule(n: int, steps: int, sample_rate: float, random_state: Any = None) -> np.ndarray:
    """Draw a Poisson subsampling schedule: each record joins each step with probability ``sample_rate``.

    Parameters
    ----------
    n : int
        Number of records.
    steps : int
        Number of iterations.
    sample_rate : float
        Inclusion probability in ``(0, 1]``.
    random_state : None, int or numpy Generator, default None
        As in :func:`bis_schedule` (None for a private run).

    Returns
    -------
    numpy.ndarray
        Boolean ``(n, steps)`` inclusion matrix.

    References
    ----------
    Abadi et al. "Deep Learning with Differential Privacy". CCS 2016.

    Examples
    --------
    >>> poisson_schedule(3, steps=4, sample_rate=1.0, random_state=0).all()
    np.True_
    """
    rng = _schedule_rng(random_state)
    return rng.random((int(n), int(steps))) < float(sample_rate)
