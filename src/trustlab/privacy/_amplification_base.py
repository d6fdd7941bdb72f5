"""Shared parts of the partition accountants: orders, conversion, the accountant base, Poisson (private).

Public names are re-exported by :mod:`trustlab.privacy.amplification`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, check_params
from trustlab.errors import ParameterError
from trustlab.privacy import _amplification_rdp as _rdp
from trustlab.privacy.release import PrivacyMeasure, Release

__all__ = ["DEFAULT_ORDERS", "MIN_NOISE_MULTIPLIER", "NEIGHBOURING", "PoissonAccountant"]

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

    steps: int
    noise_multiplier: float

    def _keep(self, **params: Any) -> None:
        """Keep the constructor's arguments under their names and check them (``_parameter_constraints``)."""
        for name, value in params.items():
            setattr(self, name, value)
        check_params(self._parameters(), self._parameter_constraints, type(self).__name__)

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
    sample_rate: float
    scheme = "poisson"
    mechanism = "Gaussian noise, Poisson subsampling (Renyi DP)"

    def __init__(self, noise_multiplier: float, steps: int, sample_rate: float) -> None:
        self._keep(noise_multiplier=noise_multiplier, steps=steps, sample_rate=sample_rate)

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
        integer = arr == np.round(arr)
        log_m = np.empty(arr.size)
        with np.errstate(over="ignore", invalid="ignore"):
            if integer.any():
                log_m[integer] = _rdp.poisson_gaussian_log_moment(arr[integer].astype(int), q, z)
            if not integer.all():
                log_m[~integer] = _rdp.poisson_gaussian_log_moment_real(arr[~integer], q, z)
            out = self.steps * log_m / (arr - 1.0)
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
