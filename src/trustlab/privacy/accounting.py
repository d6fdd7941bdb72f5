"""Privacy budget accounting: one object that holds the total and refuses to exceed it.

This module implements basic (sequential) composition of pure and approximate
differential privacy, the composition every release in the audit uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trustlab._validation import check_delta, check_epsilon
from trustlab.errors import BudgetExceededError
from trustlab.privacy.release import Release

__all__ = ["Accountant", "LedgerEntry"]

# Relative slack for floating-point sums of budget shares (e.g. 0.1 + 0.2).
_SLACK = 1e-9


@dataclass(frozen=True)
class LedgerEntry:
    """One line of a privacy ledger: what was released, how, and what it cost."""

    section: str
    description: str
    mechanism: str
    epsilon: float
    delta: float


class Accountant:
    """Tracks differential-privacy spending against a fixed total under basic composition.

    Parameters
    ----------
    epsilon : float
        Total epsilon available.
    delta : float, default 0.0
        Total delta available.
    name : str, default "total"
        A label used in ledger entries and error messages.

    Notes
    -----
    Basic composition: the epsilons (and deltas) of releases on the same data add
    up. Sub-budgets made with :meth:`child` reserve their share from this
    accountant at once, so that the parent's ledger always sums to what was
    promised, whether or not a child spends all of its share.

    Examples
    --------
    >>> acc = Accountant(1.0)
    >>> data = acc.child(0.4, "data")
    >>> data.spend(0.4, description="row count")
    >>> round(acc.remaining_epsilon, 6)
    0.6
    """

    def __init__(self, epsilon: float, delta: float = 0.0, *, name: str = "total") -> None:
        self.total_epsilon = check_epsilon(epsilon)
        self.total_delta = check_delta(delta)
        self.name = name
        self._spent_epsilon = 0.0
        self._spent_delta = 0.0
        self._entries: list[LedgerEntry] = []
        self._children: list[Accountant] = []

    @property
    def spent_epsilon(self) -> float:
        """Epsilon spent so far, including shares reserved by children."""
        return self._spent_epsilon

    @property
    def remaining_epsilon(self) -> float:
        """Epsilon still available."""
        return max(0.0, self.total_epsilon - self._spent_epsilon)

    @property
    def remaining_delta(self) -> float:
        """Delta still available."""
        return max(0.0, self.total_delta - self._spent_delta)

    def _charge(self, epsilon: float, delta: float, what: str) -> None:
        tol = _SLACK * max(1.0, self.total_epsilon)
        if self._spent_epsilon + epsilon > self.total_epsilon + tol:
            raise BudgetExceededError(
                f"{what} needs epsilon={epsilon:.6g} but only {self.remaining_epsilon:.6g} of "
                f"budget '{self.name}' (total {self.total_epsilon:.6g}) remains; "
                "raise the total epsilon or release less.",
                argument="epsilon",
            )
        if self._spent_delta + delta > self.total_delta + _SLACK * max(1e-12, self.total_delta):
            raise BudgetExceededError(
                f"{what} needs delta={delta:.3g} but only {self.remaining_delta:.3g} of "
                f"budget '{self.name}' remains.",
                argument="delta",
            )
        self._spent_epsilon += epsilon
        self._spent_delta += delta

    def spend(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        description: str,
        mechanism: str = "",
    ) -> None:
        """Charge one release to this budget, or raise :class:`BudgetExceededError`."""
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        self._charge(epsilon, delta, description)
        self._entries.append(LedgerEntry(self.name, description, mechanism, epsilon, delta))

    def record(self, release: Release) -> Release:
        """Charge a :class:`Release` that was computed with this budget's share, and return it."""
        self.spend(
            release.epsilon,
            release.delta,
            description=release.description,
            mechanism=release.mechanism,
        )
        return release

    def child(self, epsilon: float, name: str, delta: float = 0.0) -> Accountant:
        """Reserve ``epsilon`` (and ``delta``) from this budget for a named sub-budget."""
        epsilon = check_epsilon(epsilon)
        self._charge(epsilon, delta, f"sub-budget '{name}'")
        sub = Accountant(epsilon, delta, name=name)
        self._children.append(sub)
        return sub

    def ledger(self) -> list[LedgerEntry]:
        """Every release charged here or in a child, in order of sub-budget then time."""
        entries = list(self._entries)
        for sub in self._children:
            entries.extend(sub.ledger())
        return entries

    def split(self, weights: dict[str, float]) -> dict[str, Accountant]:
        """Reserve the whole remaining budget for children in proportion to ``weights``.

        The last child gets exactly what is left, so the shares sum to the total.
        """
        if not weights or any(not (w > 0 and math.isfinite(w)) for w in weights.values()):
            raise BudgetExceededError(f"split weights must be positive, got {weights}.", argument="weights")
        total = sum(weights.values())
        remaining = self.remaining_epsilon
        names = list(weights)
        out: dict[str, Accountant] = {}
        for name in names[:-1]:
            out[name] = self.child(remaining * weights[name] / total, name)
        out[names[-1]] = self.child(self.remaining_epsilon, names[-1])
        return out
