"""The Accountant's spending methods for noise-calibrated mechanisms: Gaussian, zCDP, dp-accounting events.

A mixin of :class:`trustlab.privacy.accounting.Accountant` (kept apart so that the
budget bookkeeping and the mechanism-specific conversions each read on their own).
The methods rely on the accountant's ``composition``, ``spend``, ``_charge_item``
and ``_log``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from trustlab._validation import check_delta, check_positive, check_positive_int
from trustlab.errors import ParameterError
from trustlab.privacy._composition import Item, zcdp_epsilon

__all__ = ["MechanismSpending"]


class MechanismSpending:
    """Spending by noise parameters (mixed into :class:`~trustlab.privacy.accounting.Accountant`)."""

    composition: str

    if TYPE_CHECKING:  # provided by Accountant

        def spend(
            self, epsilon: float, delta: float = 0.0, *, description: str, mechanism: str = ""
        ) -> None: ...

        def _charge_item(self, item: Item, what: str) -> float: ...

        def _log(self, increase: float, delta: float, description: str, mechanism: str) -> None: ...

    def spend_gaussian(
        self,
        sigma: float,
        *,
        sensitivity: float = 1.0,
        count: int = 1,
        description: str,
        mechanism: str = "Gaussian",
        delta: float | None = None,
    ) -> None:
        """Charge ``count`` runs of the Gaussian mechanism (noise std ``sigma``, L2 ``sensitivity``).

        Under a tight composition the release is accounted exactly by its noise
        multiplier ``sigma / sensitivity``. Under ``"basic"`` composition pass the
        ``delta`` to spend on it: it is charged as ``(epsilon, delta)`` with the tight
        epsilon of the Gaussian (``dp_accounting.get_epsilon_gaussian``; ``count`` runs
        are one Gaussian with multiplier ``sigma / (sensitivity sqrt(count))``).

        Parameters
        ----------
        sigma : float
            Standard deviation of the Gaussian noise, in the units of the released value.
        sensitivity : float, default 1.0
            L2 sensitivity of the released value (same units as ``sigma``).
        count : int, default 1
            Number of runs of the mechanism with this noise (composed together).
        description : str
            What was released; appears in the ledger and in error messages.
        mechanism : str, default "Gaussian"
            The mechanism's name, for the ledger.
        delta : float or None, default None
            Under ``"basic"`` composition: the delta to spend (required, > 0). Under a
            tight composition: must be left out (the accountant's delta is used).

        Raises
        ------
        BudgetExceededError
            When the release would exceed the budget; nothing is charged then.
        ParameterError
            When ``delta`` is missing under ``"basic"`` or given under a tight composition.

        Examples
        --------
        >>> from trustlab.privacy import Accountant
        >>> acc = Accountant(1.0, 1e-6, composition="zcdp")
        >>> acc.spend_gaussian(20.0, sensitivity=1.0, description="noisy sum")
        >>> 0 < acc.spent_epsilon < 1.0, acc.spent_delta
        (True, 1e-06)
        """
        sigma = check_positive(sigma, "sigma")
        sensitivity = check_positive(sensitivity, "sensitivity")
        count = check_positive_int(count, "count")
        multiplier = sigma / sensitivity
        what = f"{mechanism} (sigma/sensitivity={multiplier:.4g}, {count} run(s))"
        if self.composition == "basic":
            if delta is None:
                raise ParameterError(
                    "a Gaussian release under basic composition needs delta=...: pass the delta "
                    "to spend on it, or create the accountant with composition='rdp', 'zcdp' or 'pld'.",
                    argument="delta",
                )
            from dp_accounting import get_epsilon_gaussian

            delta = check_delta(delta)
            if delta == 0:
                raise ParameterError("delta must be > 0 for a Gaussian release.", argument="delta")
            epsilon = float(get_epsilon_gaussian(multiplier / math.sqrt(count), delta))
            self.spend(epsilon, delta, description=description, mechanism=what)
            return
        if delta is not None:
            raise ParameterError(
                f"delta is set by the accountant under {self.composition} composition; leave it out.",
                argument="delta",
            )
        inc = self._charge_item(Item("gaussian", noise_multiplier=multiplier, count=count), description)
        self._log(inc, 0.0, description, what)

    def spend_zcdp(
        self,
        rho: float,
        *,
        description: str,
        mechanism: str = "zCDP",
        delta: float | None = None,
    ) -> None:
        """Charge a ``rho``-zCDP release (e.g. a Gaussian: ``rho = sensitivity**2 / (2 sigma**2)``).

        Accepted under ``"zcdp"`` and ``"rdp"`` (zCDP is Renyi-DP ``rho * alpha`` at every
        order). Under ``"basic"`` pass the ``delta`` to spend: it is charged as the
        ``(epsilon, delta)`` that ``dp-accounting`` converts ``rho`` to. ``"pld"`` has no
        zCDP event: use ``"rdp"`` or ``"zcdp"``.

        Parameters
        ----------
        rho : float
            The release's zCDP parameter (Bun and Steinke, TCC 2016), > 0.
        description : str
            What was released; appears in the ledger and in error messages.
        mechanism : str, default "zCDP"
            The mechanism's name, for the ledger.
        delta : float or None, default None
            Under ``"basic"`` composition: the delta to spend (required, > 0). Under
            ``"zcdp"`` and ``"rdp"``: must be left out (the accountant's delta is used).

        Raises
        ------
        BudgetExceededError
            When the release would exceed the budget; nothing is charged then.
        ParameterError
            Under ``"pld"``, or when ``delta`` is missing under ``"basic"`` or given
            under a tight composition.

        Examples
        --------
        >>> from trustlab.privacy import Accountant
        >>> acc = Accountant(1.0, 1e-6, composition="zcdp")
        >>> acc.spend_zcdp(0.001, description="noisy histogram")
        >>> 0 < acc.spent_epsilon < 1.0
        True
        """
        rho = check_positive(rho, "rho")
        what = f"{mechanism} (rho={rho:.4g})"
        if self.composition == "pld":
            raise ParameterError(
                "PLD accounting has no zCDP event; use composition='zcdp' or 'rdp', or spend_gaussian.",
                argument="composition",
            )
        if self.composition == "basic":
            if delta is None:
                raise ParameterError(
                    "a zCDP release under basic composition needs delta=...: pass the delta to "
                    "spend on it, or create the accountant with composition='zcdp'.",
                    argument="delta",
                )
            delta = check_delta(delta)
            if delta == 0:
                raise ParameterError("delta must be > 0 for a zCDP release.", argument="delta")
            epsilon = zcdp_epsilon([Item("zcdp", rho=rho)], delta)
            self.spend(epsilon, delta, description=description, mechanism=what)
            return
        if delta is not None:
            raise ParameterError(
                f"delta is set by the accountant under {self.composition} composition; leave it out.",
                argument="delta",
            )
        inc = self._charge_item(Item("zcdp", rho=rho), description)
        self._log(inc, 0.0, description, what)

    def spend_event(self, event: Any, *, description: str, mechanism: str = "") -> None:
        """Charge a ``dp_accounting`` ``DpEvent`` (e.g. ``PoissonSampledDpEvent`` for DP-SGD).

        ``"rdp"`` takes any event dp-accounting's RdpAccountant supports under
        add/remove-one neighbours; ``"zcdp"`` takes ``ZCDpEvent`` and ``GaussianDpEvent``;
        ``"pld"`` takes ``GaussianDpEvent`` and ``LaplaceDpEvent``. ``"basic"`` takes none.

        Parameters
        ----------
        event : dp_accounting.DpEvent
            The event that describes the release (noise multipliers are relative to
            the sensitivity, as in ``dp-accounting``).
        description : str
            What was released; appears in the ledger and in error messages.
        mechanism : str, default ""
            The mechanism's name, for the ledger (default: the event's class name).

        Raises
        ------
        BudgetExceededError
            When the release would exceed the budget; nothing is charged then.
        ParameterError
            When ``event`` is not a ``DpEvent`` or this composition cannot account it.

        Examples
        --------
        >>> from dp_accounting import dp_event
        >>> from trustlab.privacy import Accountant
        >>> acc = Accountant(2.0, 1e-6, composition="rdp")
        >>> acc.spend_event(dp_event.GaussianDpEvent(10.0), description="noisy sum")
        >>> acc.ledger()[0].mechanism
        'GaussianDpEvent'
        """
        from dp_accounting import dp_event
        from dp_accounting.rdp import RdpAccountant

        if not isinstance(event, dp_event.DpEvent):
            raise ParameterError(
                f"event must be a dp_accounting DpEvent, got {type(event).__name__}.", argument="event"
            )
        what = mechanism or type(event).__name__
        item: Item | None = None
        if isinstance(event, dp_event.GaussianDpEvent) and event.noise_multiplier > 0:
            item = Item("gaussian", noise_multiplier=float(event.noise_multiplier))
        elif isinstance(event, dp_event.LaplaceDpEvent) and event.noise_multiplier > 0:
            item = Item(
                "laplace", epsilon=1.0 / event.noise_multiplier, noise_multiplier=event.noise_multiplier
            )
        elif isinstance(event, dp_event.ZCDpEvent) and event.xi == 0 and event.rho > 0:
            item = Item("zcdp", rho=float(event.rho))
        elif self.composition == "rdp" and RdpAccountant().supports(event):
            item = Item("event", event=event)
        if (
            item is None
            or self.composition == "basic"
            or (self.composition == "pld" and item.kind not in ("gaussian", "laplace"))
            or (self.composition == "zcdp" and item.kind not in ("gaussian", "zcdp", "laplace"))
        ):
            raise ParameterError(
                f"{type(event).__name__} cannot be accounted under {self.composition} composition; "
                "use composition='rdp' (most events) or spend the event's (epsilon, delta) with spend().",
                argument="event",
            )
        inc = self._charge_item(item, description)
        self._log(inc, 0.0, description, what)
