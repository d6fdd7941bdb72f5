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

import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, check_params, validate_params
from trustlab._validation import make_generator
from trustlab.errors import ParameterError
from trustlab.privacy import _amplification_rdp as _rdp
from trustlab.privacy.release import PrivacyMeasure, Release

__all__ = [
    "DEFAULT_ORDERS",
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

DEFAULT_ORDERS: tuple[int, ...] = tuple(range(2, 257))
"""Integer Renyi orders 2..256 at which the partition accountants state their curves."""

NEIGHBOURING = "zero-out (one record replaced by a null record), i.e. add/remove one record"
_MAX_ORDER = 1024

MIN_NOISE_MULTIPLIER = 1e-3
"""Smallest noise multiplier accepted (below it every epsilon is astronomically large)."""

_NOISE = Interval(numbers.Real, MIN_NOISE_MULTIPLIER, None, closed="left")
_STEPS = Interval(numbers.Integral, 1, None, closed="left")
_RATE = Interval(numbers.Real, 0, 1, closed="right")
_DELTA = Interval(numbers.Real, 0, 1, closed="neither")


def _check_orders(orders: Any) -> np.ndarray:
    if orders is None:
        return np.asarray(DEFAULT_ORDERS, dtype=int)
    try:
        arr = np.asarray(orders)
    except Exception:  # any unconvertible input is a parameter error
        arr = np.asarray([])
    ok = (
        arr.ndim == 1
        and arr.size > 0
        and arr.dtype.kind in "iuf"
        and bool(np.all(np.isfinite(arr)))
        and bool(np.all(arr == np.round(arr)))
        and bool(np.all((arr >= 2) & (arr <= _MAX_ORDER)))
    )
    if not ok:
        raise ParameterError(
            f"orders must be a non-empty 1-d sequence of integers in [2, {_MAX_ORDER}], got {orders!r:.60}.",
            argument="orders",
        )
    return arr.astype(int)


def _to_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float]:
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    rdp = np.where(np.isnan(rdp), np.inf, rdp)
    eps, order = compute_epsilon(list(map(float, orders)), list(map(float, rdp)), float(delta))
    return float(eps), float(order) if order is not None else float("nan")


class _RenyiAccountant:
    """Shared interface: ``rdp(orders)``, ``get_epsilon(delta)``, ``epsilon_and_order``, ``plan``."""

    _parameter_constraints: ClassVar[dict[str, Any]] = {}
    scheme: ClassVar[str] = ""
    mechanism: ClassVar[str] = ""

    def _check(self) -> None:
        params = {name: getattr(self, name) for name in self._parameter_constraints}
        check_params(params, self._parameter_constraints, type(self).__name__)

    def rdp(
        self, orders: Sequence[int] | np.ndarray | None = None
    ) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _parameters(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._parameter_constraints}

    def epsilon_and_order(
        self, delta: float, orders: Sequence[int] | np.ndarray | None = None
    ) -> tuple[float, float]:
        """Return ``(epsilon, order)``: the smallest epsilon over the orders and the order that gives it.

        Parameters
        ----------
        delta : float
            The target delta, in ``(0, 1)``.
        orders : sequence of int, optional
            Renyi orders (default :data:`DEFAULT_ORDERS`).

        Returns
        -------
        tuple of float
            ``epsilon`` and the Renyi order at which it is attained.
        """
        check_params({"delta": delta}, {"delta": [_DELTA]}, f"{type(self).__name__}.get_epsilon")
        grid = _check_orders(orders)
        return _to_epsilon(grid, self.rdp(grid), float(delta))

    def get_epsilon(self, delta: float) -> float:
        """Return the epsilon of the whole run at ``delta`` (Renyi DP converted by dp-accounting).

        Parameters
        ----------
        delta : float
            The target delta, in ``(0, 1)``.

        Returns
        -------
        float
            The smallest epsilon over :data:`DEFAULT_ORDERS` (``inf`` when every order's
            Renyi divergence is infinite).
        """
        return self.epsilon_and_order(delta)[0]

    def plan(self, delta: float, *, description: str = "private training run") -> Release:
        """State the run's cost as a :class:`~trustlab.privacy.release.Release` plan (``value=None``).

        An :class:`~trustlab.privacy.accounting.Accountant` checks it with
        ``check(plan)`` before training and records it after
        (:func:`~trustlab.privacy.accounting.charge` does both).

        Parameters
        ----------
        delta : float
            The delta to spend, in ``(0, 1)``.
        description : str, default "private training run"
            What the run releases, for the ledger.

        Returns
        -------
        Release
            ``measure="approximate"`` with this accountant's ``(epsilon, delta)`` and its
            parameters (scheme, noise multiplier, steps, the Renyi order used, the
            neighbouring relation and the direction assumption).
        """
        eps, order = self.epsilon_and_order(delta)
        params = {"scheme": self.scheme, **self._parameters()}
        params.update(
            {
                "rdp_order": order,
                "neighbouring": NEIGHBOURING,
                "direction": "remove-direction bound; add direction assumed no larger",
            }
        )
        return Release(
            None,
            eps,
            float(delta),
            mechanism=self.mechanism,
            parameters=params,
            description=description,
            measure=PrivacyMeasure.APPROXIMATE,
        )

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._parameters().items())
        return f"{type(self).__name__}({args})"


class PoissonAccountant(_RenyiAccountant):
    """Poisson-subsampled Gaussian steps (DP-SGD): each record joins each step with rate ``sample_rate``.

    Integer orders use the closed form of Mironov, Talwar and Zhang; other real
    orders (``dp-accounting``'s fractional defaults, via :meth:`rdp_real`) use
    numerical quadrature. Agrees with ``dp-accounting``'s ``RdpAccountant``.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the clipping norm, >= 1e-3.
    steps : int
        Number of steps, >= 1.
    sample_rate : float
        Probability that a record joins a step, in ``(0, 1]``.

    References
    ----------
    Mironov, Talwar, Zhang. "Renyi Differential Privacy of the Sampled Gaussian
    Mechanism". arXiv 1908.10530, 2019. Abadi et al. "Deep Learning with Differential
    Privacy". CCS 2016.

    Examples
    --------
    >>> acc = PoissonAccountant(noise_multiplier=1.1, steps=1000, sample_rate=0.01)
    >>> round(acc.get_epsilon(1e-5), 2)
    1.71
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "noise_multiplier": [_NOISE],
        "steps": [_STEPS],
        "sample_rate": [_RATE],
    }
    scheme = "poisson"
    mechanism = "Gaussian noise, Poisson subsampling (Renyi DP)"

    def __init__(self, noise_multiplier: float, steps: int, sample_rate: float) -> None:
        self.noise_multiplier = noise_multiplier
        self.steps = steps
        self.sample_rate = sample_rate
        self._check()

    def rdp(self, orders: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Renyi DP of the whole run at integer ``orders`` (default :data:`DEFAULT_ORDERS`).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders in ``[2, 1024]``.

        Returns
        -------
        numpy.ndarray
            ``steps * log(M_alpha) / (alpha - 1)`` at each order.
        """
        grid = _check_orders(orders)
        z, q = float(self.noise_multiplier), float(self.sample_rate)
        with np.errstate(over="ignore", invalid="ignore"):
            return self.steps * _rdp.rdp_from_log_moments(grid, _rdp.poisson_gaussian_log_moment(grid, q, z))

    def rdp_real(self, orders: Sequence[float] | np.ndarray) -> np.ndarray:
        """Renyi DP of the run at real ``orders > 1`` (integers: closed form; others: quadrature).

        Parameters
        ----------
        orders : sequence of float
            Orders in ``(1, 1024]``.

        Returns
        -------
        numpy.ndarray
            The Renyi divergence of the run at each order.
        """
        arr = np.asarray(orders, dtype=float)
        if arr.ndim != 1 or arr.size == 0 or not np.all((arr > 1) & (arr <= _MAX_ORDER)):
            raise ParameterError(f"orders must be real numbers in (1, {_MAX_ORDER}].", argument="orders")
        z, q = float(self.noise_multiplier), float(self.sample_rate)
        out = np.empty(arr.size)
        with np.errstate(over="ignore", invalid="ignore"):
            for i, a in enumerate(arr):
                if a == round(a):
                    lm = _rdp.poisson_gaussian_log_moment(np.array([int(a)]), q, z)[0]
                else:
                    lm = _rdp.poisson_gaussian_log_moment_real(float(a), q, z)
                out[i] = self.steps * lm / (a - 1.0)
        return out

    def epsilon_and_order(
        self, delta: float, orders: Sequence[int] | np.ndarray | None = None
    ) -> tuple[float, float]:
        """Return ``(epsilon, order)``; by default over dp-accounting's default (fractional) orders.

        Parameters
        ----------
        delta : float
            The target delta, in ``(0, 1)``.
        orders : sequence of int, optional
            Integer orders; default: ``dp-accounting``'s ``DEFAULT_RDP_ORDERS``
            (1.1 to 1024) through :meth:`rdp_real`.

        Returns
        -------
        tuple of float
            ``epsilon`` and the order that gives it.
        """
        if orders is not None:
            return super().epsilon_and_order(delta, orders)
        from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

        check_params({"delta": delta}, {"delta": [_DELTA]}, "PoissonAccountant.get_epsilon")
        grid = np.asarray(DEFAULT_RDP_ORDERS, dtype=float)
        return _to_epsilon(grid, self.rdp_real(grid), float(delta))


class BISAccountant(_RenyiAccountant):
    """Balanced iteration subsampling: each record joins exactly ``participations`` of ``steps`` iterations.

    The remove-direction Renyi DP of the whole run is bounded by the smallest of
    three valid bounds at each integer order: Poisson subsampling at rate
    ``participations / steps`` over ``steps`` iterations (uniform ``k``-subset
    indicators are negatively associated, so the balanced moment is at most the
    Poisson one); Feldman and Shenfeld's ``participations``-fold composition of the
    exact one-of-``steps // participations`` allocation; and, at order 2, the exact
    hypergeometric moment.

    Parameters
    ----------
    steps : int
        Number of iterations ``T``, >= 1.
    participations : int
        Iterations ``k`` each record joins, ``1 <= k <= steps``.
    noise_multiplier : float
        Noise standard deviation over the clipping norm, >= 1e-3.

    References
    ----------
    Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for
    Privacy Amplification". ICML 2025. Feldman, Shenfeld. "Privacy amplification by
    random allocation". arXiv 2502.08202, 2025. Joag-Dev, Proschan. "Negative
    Association of Random Variables". Annals of Statistics, 1983.

    Examples
    --------
    >>> bis = BISAccountant(steps=10, participations=1, noise_multiplier=1.0)
    >>> poisson = PoissonAccountant(noise_multiplier=1.0, steps=10, sample_rate=0.1)
    >>> [round(float(v), 4) for v in bis.rdp([2, 8])], [round(float(v), 4) for v in poisson.rdp([2, 8])]
    ([0.1586, 1.7075], [0.1704, 13.7836])
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "steps": [_STEPS],
        "participations": [_STEPS],
        "noise_multiplier": [_NOISE],
    }
    scheme = "balanced iteration subsampling"
    mechanism = "Gaussian noise, balanced iteration subsampling (Renyi DP)"

    def __init__(self, steps: int, participations: int, noise_multiplier: float) -> None:
        self.steps = steps
        self.participations = participations
        self.noise_multiplier = noise_multiplier
        self._check()
        if participations > steps:
            raise ParameterError(
                f"participations of BISAccountant must be at most steps={steps}; got {participations}.",
                argument="participations",
            )

    def _poisson_bound(self, grid: np.ndarray) -> np.ndarray:
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        return t * _rdp.rdp_from_log_moments(grid, _rdp.poisson_gaussian_log_moment(grid, k / t, z))

    def _allocation_bound(self, grid: np.ndarray) -> np.ndarray:
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        log_m = _rdp.balls_in_bins_log_moments(int(grid.max()), t // k, 1.0, z)
        return k * _rdp.rdp_from_log_moments(grid, log_m[grid])

    def rdp(self, orders: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Certified remove-direction Renyi DP of the whole run at integer ``orders``.

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders in ``[2, 1024]`` (default :data:`DEFAULT_ORDERS`).

        Returns
        -------
        numpy.ndarray
            The smallest of the Poisson-domination bound, the allocation-composition
            bound and (order 2) the exact value.
        """
        grid = _check_orders(orders)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.minimum(self._poisson_bound(grid), self._allocation_bound(grid))
            z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
            out = np.where(grid == 2, np.minimum(out, _rdp.hypergeometric_log_moment2(t, k, z)), out)
        return np.asarray(out, dtype=float)

    def rdp_exact(self, orders: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Exact remove-direction Renyi DP (order 2; any order for one participation or tiny ``steps``).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders (default 2..8).

        Returns
        -------
        numpy.ndarray
            ``log(M_alpha) / (alpha - 1)`` at each order.

        Raises
        ------
        ParameterError
            When an order other than 2 is asked for with ``participations > 1`` and the
            exact dynamic program would be too large (use :meth:`rdp`).
        """
        grid = _check_orders(range(2, 9) if orders is None else orders)
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        out = np.empty(grid.size)
        with np.errstate(over="ignore", invalid="ignore"):
            if k == 1 or k == t:
                lm = _rdp.balls_in_bins_log_moments(int(grid.max()), t // k, 1.0, z)
                return k * _rdp.rdp_from_log_moments(grid, lm[grid])
            for i, a in enumerate(grid):
                if a == 2:
                    out[i] = _rdp.hypergeometric_log_moment2(t, k, z)
                    continue
                work = _rdp.small_bis_state_count(int(a), t) * math.comb(t, k)
                if work > 2_000_000:
                    raise ParameterError(
                        f"the exact Renyi DP at order {a} for steps={t}, participations={k} is too large "
                        "to compute; use rdp() (a certified upper bound).",
                        argument="orders",
                    )
                out[i] = _rdp.small_bis_log_moment(int(a), t, k, z) / (a - 1.0)
        return out

    def rdp_reverse_mc(
        self,
        orders: Sequence[int] | np.ndarray | None = None,
        n_samples: int = 100_000,
        random_state: Any = 0,
    ) -> np.ndarray:
        """Monte Carlo *estimate* of the add-direction Renyi DP ``log E_Q[L^-(alpha-1)] / (alpha - 1)``.

        An estimate, not a bound: it checks the assumption that the add direction is
        no larger than the remove direction. Heavy tails make it run low at large
        orders.

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders (default ``[2, 3, 4]``).
        n_samples : int, default 100000
            Monte Carlo samples of ``y ~ N(0, z^2 I_T)``.
        random_state : int, numpy Generator or None, default 0
            Seeds the simulation (an estimate, not a mechanism).

        Returns
        -------
        numpy.ndarray
            The estimated add-direction Renyi divergence at each order.
        """
        grid = _check_orders([2, 3, 4] if orders is None else orders)
        check_params({"n_samples": n_samples}, {"n_samples": [_STEPS]}, "rdp_reverse_mc")
        rng = make_generator(random_state)
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        log_c = math.lgamma(t + 1) - math.lgamma(k + 1) - math.lgamma(t - k + 1)
        chunk = max(1, 2_000_000 // max(t, 1))
        log_l = []
        for start in range(0, int(n_samples), chunk):
            m = min(chunk, int(n_samples) - start)
            y = rng.normal(0.0, z, size=(m, t))
            log_l.append(_rdp.log_elementary_symmetric((2.0 * y - 1.0) / (2.0 * z**2), k) - log_c)
        ll = np.concatenate(log_l)
        from scipy.special import logsumexp

        return np.array([(logsumexp(-(a - 1.0) * ll) - math.log(ll.size)) / (a - 1.0) for a in grid])


class ModelSplitAccountant(_RenyiAccountant):
    """Model splitting: each step a participating record updates one of ``num_blocks`` random disjoint blocks.

    Per-block clipping to the clipping norm, noise on every block: one step is the
    mixture over "no participation" (probability ``1 - sample_rate``) and "block j"
    (probability ``sample_rate / num_blocks`` each); its integer-order Renyi moment is
    exact (a balls-in-bins generating function), and steps compose additively.
    ``num_blocks=1`` is the Poisson-subsampled Gaussian.

    Parameters
    ----------
    num_blocks : int
        Number of disjoint parameter blocks ``d``, >= 1.
    noise_multiplier : float
        Noise standard deviation over the per-block clipping norm, >= 1e-3.
    steps : int
        Number of steps, >= 1.
    sample_rate : float, default 1.0
        Poisson rate at which a record joins a step, in ``(0, 1]``.

    References
    ----------
    Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for
    Privacy Amplification". ICML 2025 (model splitting, Theorem 3.1 with one block
    per record and step).

    Examples
    --------
    >>> split = ModelSplitAccountant(num_blocks=8, noise_multiplier=1.0, steps=1, sample_rate=0.01)
    >>> [f"{v:.3e}" for v in split.rdp([2, 8])]
    ['2.148e-05', '8.771e-05']
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "num_blocks": [_STEPS],
        "noise_multiplier": [_NOISE],
        "steps": [_STEPS],
        "sample_rate": [_RATE],
    }
    scheme = "model splitting"
    mechanism = "Gaussian noise, random model splitting (Renyi DP)"

    def __init__(
        self, num_blocks: int, noise_multiplier: float, steps: int, sample_rate: float = 1.0
    ) -> None:
        self.num_blocks = num_blocks
        self.noise_multiplier = noise_multiplier
        self.steps = steps
        self.sample_rate = sample_rate
        self._check()

    def rdp(self, orders: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Exact remove-direction Renyi DP of the run at integer ``orders`` (worst case: full-norm blocks).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders in ``[2, 1024]`` (default :data:`DEFAULT_ORDERS`).

        Returns
        -------
        numpy.ndarray
            ``steps * log(M_alpha) / (alpha - 1)`` at each order.
        """
        grid = _check_orders(orders)
        z, q, d = float(self.noise_multiplier), float(self.sample_rate), int(self.num_blocks)
        with np.errstate(over="ignore", invalid="ignore"):
            lm = _rdp.balls_in_bins_log_moments(int(grid.max()), d, q, z)
            return self.steps * _rdp.rdp_from_log_moments(grid, lm[grid])

    rdp_exact = rdp

    def rdp_reverse_mc(
        self,
        orders: Sequence[int] | np.ndarray | None = None,
        n_samples: int = 100_000,
        random_state: Any = 0,
    ) -> np.ndarray:
        """Monte Carlo *estimate* of the add-direction Renyi DP of the run (a check, not a bound).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders (default ``[2, 3, 4]``).
        n_samples : int, default 100000
            Monte Carlo samples of ``y ~ N(0, z^2 I_d)``.
        random_state : int, numpy Generator or None, default 0
            Seeds the simulation.

        Returns
        -------
        numpy.ndarray
            ``steps`` times the estimated one-step add-direction divergence.
        """
        grid = _check_orders([2, 3, 4] if orders is None else orders)
        check_params({"n_samples": n_samples}, {"n_samples": [_STEPS]}, "rdp_reverse_mc")
        rng = make_generator(random_state)
        z, q, d = float(self.noise_multiplier), float(self.sample_rate), int(self.num_blocks)
        y = rng.normal(0.0, z, size=(int(n_samples), d))
        from scipy.special import logsumexp

        with np.errstate(divide="ignore"):
            blocks = logsumexp((2.0 * y - 1.0) / (2.0 * z**2), axis=1) + math.log(q / d)
            ll = np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, blocks)
        return np.array(
            [self.steps * (logsumexp(-(a - 1.0) * ll) - math.log(ll.size)) / (a - 1.0) for a in grid]
        )


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


def _schedule_rng(random_state: Any) -> np.random.Generator:
    if random_state is None:
        return np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(32), "little")))
    return make_generator(random_state)


@validate_params(
    {
        "n": [Interval(numbers.Integral, 0, None, closed="left")],
        "steps": [_STEPS],
        "participations": [_STEPS],
        "random_state": ["random_state"],
    }
)
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


@validate_params(
    {
        "n": [Interval(numbers.Integral, 0, None, closed="left")],
        "steps": [_STEPS],
        "sample_rate": [_RATE],
        "random_state": ["random_state"],
    }
)
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
        ``None`` (the only choice for a private run): a generator seeded from
        ``os.urandom``. A seed makes the schedule public and voids the amplification.

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
