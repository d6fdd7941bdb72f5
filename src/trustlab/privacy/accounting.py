"""Privacy budget accounting: one object that holds the total and refuses to exceed it.

Four ways to add up the releases made on the same data:

- ``"basic"`` (default): sequential composition of pure and approximate DP, the
  composition every release in the audit uses. Epsilons and deltas add up.
- ``"rdp"``: Renyi-DP composition with Google's ``dp-accounting``
  (:class:`dp_accounting.rdp.RdpAccountant`): the Renyi curves of the releases add
  up and the total is converted to ``(epsilon, delta)`` at the accountant's delta.
- ``"zcdp"``: zero-concentrated DP (Bun and Steinke): the ``rho`` of the releases add
  up and the total is converted to ``(epsilon, delta)`` by ``dp-accounting``.
- ``"pld"``: privacy-loss-distribution composition with ``dp-accounting``'s PLD
  library (the tightest numerical accountant it offers).

Whatever the composition, an accountant never reports more than basic composition
would when basic composition applies (both bounds hold, the smaller is kept), so
pure-DP releases cost exactly what they cost before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from trustlab._validation import check_choice, check_delta, check_epsilon
from trustlab.errors import BudgetExceededError, ParameterError
from trustlab.privacy._accountant_mechanisms import MechanismSpending
from trustlab.privacy._composition import Item, pld_compose, rdp_epsilon, zcdp_epsilon
from trustlab.privacy._ledger import LedgerEntry
from trustlab.privacy.release import PrivacyMeasure, Release

__all__ = ["COMPOSITIONS", "Accountant", "LedgerEntry", "charge", "check_accountant"]

COMPOSITIONS = ("basic", "rdp", "zcdp", "pld")

# Relative slack for floating-point sums of budget shares (e.g. 0.1 + 0.2).
_SLACK = 1e-9


class Accountant(MechanismSpending):
    """Tracks differential-privacy spending against a fixed total and refuses to exceed it.

    Parameters
    ----------
    epsilon : float
        Total epsilon available.
    delta : float, default 0.0
        Total delta available.
    name : str, default "total"
        A label used in ledger entries and error messages.
    composition : {"basic", "rdp", "zcdp", "pld"}, default "basic"
        How releases add up. ``"basic"``: epsilons and deltas add (the audit's
        accountant). ``"rdp"``: Renyi-DP curves add, converted to ``(epsilon, delta)``
        by ``dp-accounting``'s :class:`~dp_accounting.rdp.RdpAccountant`. ``"zcdp"``: the
        ``rho`` add (a pure ``epsilon`` release counts as ``epsilon**2 / 2``), converted
        by ``dp-accounting``. ``"pld"``: privacy-loss distributions compose
        (``dp-accounting``'s PLD library). The three tight compositions need
        ``delta > 0`` to help; they pay off for Gaussian and zCDP releases and for
        many small pure-DP releases.

    Notes
    -----
    Basic composition: the epsilons (and deltas) of releases on the same data add
    up. Sub-budgets made with :meth:`child` reserve their share from this
    accountant at once, so that the parent's ledger always sums to what was
    promised, whether or not a child spends all of its share. A child's share is
    composed with its siblings by basic composition whatever the parent's
    composition; inside, a child uses its parent's composition.

    Under a tight composition, :attr:`spent_epsilon` is the smaller of the basic
    bound (when every release has an ``(epsilon, delta)`` of its own) and the tight
    bound at the part of ``delta`` that releases composed basically (children's
    shares, approximate-DP releases of unknown shape) leave free. A pure
    ``epsilon``-DP release enters Renyi and PLD accounting as binary randomized
    response with that ``epsilon``, the worst case of every ``epsilon``-DP mechanism.

    References
    ----------
    Mironov. "Renyi Differential Privacy". CSF 2017. Bun, Steinke. "Concentrated
    Differential Privacy: Simplifications, Extensions, and Lower Bounds". TCC 2016.
    Google's dp-accounting library (github.com/google/differential-privacy).

    Examples
    --------
    >>> acc = Accountant(1.0)
    >>> data = acc.child(0.4, "data")
    >>> data.spend(0.4, description="row count")
    >>> round(acc.remaining_epsilon, 6)
    0.6
    >>> tight = Accountant(2.0, 1e-6, composition="rdp")
    >>> for _ in range(10):
    ...     tight.spend_gaussian(12.0, description="noisy sum")
    >>> round(tight.spent_epsilon, 2)
    1.21
    """

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        name: str = "total",
        composition: str = "basic",
    ) -> None:
        self.total_epsilon = check_epsilon(epsilon)
        self.total_delta = check_delta(delta)
        self.name = name
        self.composition = check_choice(composition, "composition", COMPOSITIONS)
        self._spent_epsilon = 0.0
        self._spent_delta = 0.0
        self._entries: list[LedgerEntry] = []
        self._children: list[Accountant] = []
        self._items: list[Item] = []
        self._pld_cache: tuple[int, Any] = (0, None)
        self._pld_pending: tuple[int, Any] = (0, None)

    @property
    def spent_epsilon(self) -> float:
        """Epsilon spent so far, including shares reserved by children."""
        return self._spent_epsilon

    @property
    def spent_delta(self) -> float:
        """Delta of the current guarantee ``(spent_epsilon, spent_delta)``.

        Under a tight composition this is the whole ``delta`` once a release needs
        it (a Gaussian, zCDP, or the tight bound beating the basic one).
        """
        return self._spent_delta

    @property
    def remaining_epsilon(self) -> float:
        """Epsilon still available."""
        return max(0.0, self.total_epsilon - self._spent_epsilon)

    @property
    def remaining_delta(self) -> float:
        """Delta still available (under a tight composition: not yet fixed by basic parts)."""
        if self.composition == "basic":
            return max(0.0, self.total_delta - self._spent_delta)
        fixed = sum(it.delta for it in self._items if self._is_fixed(it))
        return max(0.0, self.total_delta - fixed)

    # -- basic composition (unchanged) ---------------------------------------------

    def _charge(self, epsilon: float, delta: float, what: str) -> None:
        self._check_basic(epsilon, delta, what)
        self._spent_epsilon += epsilon
        self._spent_delta += delta

    def _check_basic(self, epsilon: float, delta: float, what: str, verb: str = "needs") -> None:
        """Raise BudgetExceededError if ``(epsilon, delta)`` more do not fit (basic composition)."""
        tol = _SLACK * max(1.0, self.total_epsilon)
        if self._spent_epsilon + epsilon > self.total_epsilon + tol:
            raise BudgetExceededError(
                f"{what} {verb} epsilon={epsilon:.6g} but only {self.remaining_epsilon:.6g} of "
                f"budget '{self.name}' (total {self.total_epsilon:.6g}) remains; "
                "raise the total epsilon or release less.",
                argument="epsilon",
            )
        if self._spent_delta + delta > self.total_delta + _SLACK * max(1e-12, self.total_delta):
            raise BudgetExceededError(
                f"{what} {verb} delta={delta:.3g} but only {self.remaining_delta:.3g} of "
                f"budget '{self.name}' remains.",
                argument="delta",
            )

    # -- tight compositions ------------------------------------------------------------

    def _is_fixed(self, it: Item) -> bool:
        """Whether an item is composed basically, outside the tight accountant."""
        if it.kind == "reserve":
            return True
        return it.kind == "approx" and self.composition != "pld"

    def _guarantee(self, items: Sequence[Item]) -> tuple[float, float]:
        """The ``(epsilon, delta)`` the items compose to: the smaller of basic and tight."""
        best = (math.inf, self.total_delta)
        if all(it.kind in ("pure", "approx", "reserve", "laplace") for it in items):
            basic_delta = sum(it.delta for it in items)
            if basic_delta <= self.total_delta + _SLACK * max(1e-12, self.total_delta):
                best = (sum(it.epsilon * it.count for it in items), basic_delta)
        fixed = [it for it in items if self._is_fixed(it)]
        tight = [it for it in items if not self._is_fixed(it)]
        fixed_eps = sum(it.epsilon for it in fixed)
        delta_left = self.total_delta - sum(it.delta for it in fixed)
        if tight and delta_left > 0:
            if self.composition == "pld":
                eps = fixed_eps + self._pld_epsilon(tight, delta_left)
            else:
                convert = rdp_epsilon if self.composition == "rdp" else zcdp_epsilon
                eps = fixed_eps + convert(tight, delta_left)
            if eps < best[0]:
                best = (eps, self.total_delta)
        return best

    def _pld_epsilon(self, tight: Sequence[Item], delta: float) -> float:
        # Items are only ever appended, so the committed ones are a prefix: compose the
        # new ones onto the cached distribution instead of starting over.
        n_done, done = self._pld_cache
        if n_done > len(tight):
            n_done, done = 0, None
        total = pld_compose(tight[n_done:], done)
        self._pld_pending = (len(tight), total)
        return float(total.get_epsilon_for_delta(delta))

    def _plan_items(self, new: Sequence[Item], what: str) -> tuple[float, float]:
        """The guarantee after charging ``new`` items, or raise; changes nothing but caches."""
        self._pld_pending = (0, None)
        items = [*self._items, *new]
        fixed_delta = sum(it.delta for it in items if self._is_fixed(it))
        if fixed_delta > self.total_delta + _SLACK * max(1e-12, self.total_delta):
            needed = sum(it.delta for it in new)
            raise BudgetExceededError(
                f"{what} needs delta={needed:.3g} but only {self.remaining_delta:.3g} of "
                f"budget '{self.name}' remains.",
                argument="delta",
            )
        eps, delta = self._guarantee(items)
        tol = _SLACK * max(1.0, self.total_epsilon)
        if math.isinf(eps):
            raise BudgetExceededError(
                f"{what} needs more delta than budget '{self.name}' has ({self.composition} "
                f"composition, delta={self.total_delta:.3g} in total): Gaussian and zCDP releases "
                "need delta > 0; create the accountant with a larger delta (e.g. 1e-6) or release less.",
                argument="delta",
            )
        if eps > self.total_epsilon + tol:
            raise BudgetExceededError(
                f"{what} would bring epsilon to {eps:.6g} ({self.composition} composition at "
                f"delta={delta:.3g}) but budget '{self.name}' has only {self.total_epsilon:.6g} in "
                f"total ({self.remaining_epsilon:.6g} remains); raise the total epsilon or release less.",
                argument="epsilon",
            )
        return eps, delta

    def _charge_item(self, item: Item, what: str) -> float:
        """Charge one item or raise; returns the increase of the total epsilon."""
        eps, delta = self._plan_items([item], what)
        increase = max(0.0, eps - self._spent_epsilon)
        self._items.append(item)
        if self._pld_pending[0] == sum(not self._is_fixed(it) for it in self._items):
            self._pld_cache = self._pld_pending
        self._spent_epsilon, self._spent_delta = eps, delta
        return increase

    def _log(self, increase: float, delta: float, description: str, mechanism: str) -> None:
        self._entries.append(LedgerEntry(self.name, description, mechanism, increase, delta))

    # -- public spending ------------------------------------------------------------

    def spend(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        description: str,
        mechanism: str = "",
    ) -> None:
        """Charge one ``(epsilon, delta)`` release to this budget, or raise :class:`BudgetExceededError`.

        Under a tight composition a release with ``delta == 0`` is composed as pure
        ``epsilon``-DP; one with ``delta > 0`` of unknown shape is composed basically
        (``"rdp"``, ``"zcdp"``) or as the worst case of ``(epsilon, delta)``-DP (``"pld"``).

        Parameters
        ----------
        epsilon : float
            Epsilon of the release (its own guarantee, not a share of the total).
        delta : float, default 0.0
            Delta of the release; 0 for pure epsilon-DP.
        description : str
            What was released; appears in the ledger and in error messages.
        mechanism : str, default ""
            The mechanism's name, for the ledger.

        Raises
        ------
        BudgetExceededError
            When the release would bring the spent epsilon or delta over the total;
            nothing is charged then.

        Examples
        --------
        >>> acc = Accountant(1.0)
        >>> acc.spend(0.3, description="mean income")
        >>> round(acc.spent_epsilon, 6), round(acc.remaining_epsilon, 6)
        (0.3, 0.7)
        """
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        if self.composition == "basic":
            self._charge(epsilon, delta, description)
            self._entries.append(LedgerEntry(self.name, description, mechanism, epsilon, delta))
            return
        kind = "pure" if delta == 0 else "approx"
        inc = self._charge_item(Item(kind, epsilon=epsilon, delta=delta), description)
        self._log(inc, delta, description, mechanism)

    def _item(self, release: Release) -> tuple[Item | None, float, float]:
        """How ``release`` is composed here: a tight-composition item, or None for ``(epsilon, delta)``."""
        if not release.is_dp:
            raise ParameterError(
                f"release '{release.description}' is under {release.guarantee}, not differential "
                "privacy; a DP accountant cannot compose it. Keep it out of the DP budget.",
                argument="release",
            )
        epsilon = check_epsilon(release.epsilon)
        delta = check_delta(release.delta)
        measure = PrivacyMeasure(str(release.measure))
        if self.composition == "basic":
            return None, epsilon, delta
        if measure is PrivacyMeasure.ZCDP and self.composition != "pld":
            return Item("zcdp", rho=float(release.rho or 0.0)), epsilon, delta
        if measure is PrivacyMeasure.GAUSSIAN:
            return Item("gaussian", noise_multiplier=float(release.noise_multiplier or 0.0)), epsilon, delta
        kind = "pure" if delta == 0 else "approx"
        return Item(kind, epsilon=epsilon, delta=delta), epsilon, delta

    def check(self, *releases: Release) -> None:
        """Raise :class:`BudgetExceededError` if charging ``releases`` would exceed the budget.

        Charges nothing. A mechanism given ``accountant=`` states its cost as a plan (a
        :class:`Release` whose ``value`` is ``None``: epsilon, delta, measure, sensitivity
        and noise scale follow from its parameters alone) and calls this *before* it draws
        any noise, then :meth:`record` with the finished release. Several releases are
        checked together, as they would compose.

        Parameters
        ----------
        *releases : Release
            The planned releases (their ``value`` is not read).

        Raises
        ------
        BudgetExceededError
            When the releases would exceed the remaining epsilon or delta.
        ParameterError
            When a release is not differentially private.

        Examples
        --------
        >>> acc = Accountant(1.0)
        >>> acc.check(Release(None, 0.6), Release(None, 0.4))
        >>> acc.check(Release(None, 1.5))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        trustlab.errors.BudgetExceededError: planned release(s) need epsilon=1.5 but only 1 ...
        """
        planned = [self._item(r) for r in releases]
        what = "planned release(s)"
        if self.composition == "basic":
            epsilon = sum(e for _, e, _ in planned)
            delta = sum(d for _, _, d in planned)
            self._check_basic(epsilon, delta, what, verb="need")
            return
        items = [it for it, _, _ in planned if it is not None]
        self._plan_items(items, what)

    def record(self, release: Release) -> Release:
        """Charge a :class:`Release` that was computed with this budget's share, and return it.

        Releases that are not differentially private (``release.is_dp`` False, e.g.
        DSI) are refused with :class:`~trustlab.errors.ParameterError`. The release's
        typed ``measure`` says how it composes (never its mechanism's name): under a
        tight composition a ``"zCDP"`` release is charged by its ``rho`` (``"pld"``
        has no zCDP event: by its ``(epsilon, delta)``), a ``"gaussian"`` one by its
        noise multiplier ``noise_scale / sensitivity``, a ``"pure"`` or
        ``"approximate"`` one by its ``(epsilon, delta)``; basic composition charges
        every release its ``(epsilon, delta)``.

        Parameters
        ----------
        release : Release
            A finished differentially private release.

        Returns
        -------
        Release
            ``release`` itself, unchanged, once charged.

        Raises
        ------
        BudgetExceededError
            When the release would exceed the budget; nothing is charged then.
        ParameterError
            When the release is not differentially private.

        Examples
        --------
        >>> acc = Accountant(1.0)
        >>> r = acc.record(Release(3.0, 0.5, description="noisy count"))
        >>> r.value, round(acc.remaining_epsilon, 6)
        (3.0, 0.5)
        """
        item, epsilon, delta = self._item(release)
        if item is None:
            self.spend(epsilon, delta, description=release.description, mechanism=release.mechanism)
        elif item.kind == "zcdp":
            self.spend_zcdp(item.rho, description=release.description, mechanism=release.mechanism)
        elif item.kind == "gaussian":
            self.spend_gaussian(
                item.noise_multiplier, description=release.description, mechanism=release.mechanism
            )
        else:
            self.spend(epsilon, delta, description=release.description, mechanism=release.mechanism)
        return release

    def child(self, epsilon: float, name: str, delta: float = 0.0) -> Accountant:
        """Reserve ``epsilon`` (and ``delta``) from this budget for a named sub-budget.

        The child uses this accountant's composition inside its share. The share is
        charged here at once (whether or not the child spends it) and is composed
        with its siblings by basic composition.

        Parameters
        ----------
        epsilon : float
            Epsilon reserved for the child.
        name : str
            The child's name (its ledger section).
        delta : float, default 0.0
            Delta reserved for the child.

        Returns
        -------
        Accountant
            A new accountant whose total is the reserved ``(epsilon, delta)``.

        Raises
        ------
        BudgetExceededError
            When this accountant has less than ``(epsilon, delta)`` left.

        Examples
        --------
        >>> acc = Accountant(1.0)
        >>> fit = acc.child(0.25, "fit")
        >>> fit.total_epsilon, round(acc.remaining_epsilon, 6)
        (0.25, 0.75)
        """
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        if self.composition == "basic":
            self._charge(epsilon, delta, f"sub-budget '{name}'")
        else:
            self._charge_item(Item("reserve", epsilon=epsilon, delta=delta), f"sub-budget '{name}'")
        sub = Accountant(epsilon, delta, name=name, composition=self.composition)
        self._children.append(sub)
        return sub

    def ledger(self) -> list[LedgerEntry]:
        """Every release charged here or in a child, in order of sub-budget then time.

        Returns
        -------
        list of LedgerEntry
            This accountant's own entries in the order they were charged, then each
            child's ledger in the order the children were made. A child's
            reservation is not an entry; what the child spent is.

        Examples
        --------
        >>> acc = Accountant(1.0)
        >>> acc.child(0.5, "data").spend(0.5, description="count")
        >>> acc.spend(0.25, description="mean")
        >>> [(e.section, e.description) for e in acc.ledger()]
        [('total', 'mean'), ('data', 'count')]
        """
        entries = list(self._entries)
        for sub in self._children:
            entries.extend(sub.ledger())
        return entries

    def split(self, weights: dict[str, float]) -> dict[str, Accountant]:
        """Reserve the whole remaining budget for children in proportion to ``weights``.

        The last child gets exactly what is left, so the shares sum to the total.
        Under ``"basic"`` composition only epsilon is split (the children get no
        delta); under a tight composition the remaining delta is split like epsilon.

        Parameters
        ----------
        weights : dict of str to float
            Child name to positive, finite weight; shares are proportional to weights.

        Returns
        -------
        dict of str to Accountant
            The children, by name, in the order of ``weights``.

        Raises
        ------
        BudgetExceededError
            When ``weights`` is empty or a weight is not positive and finite.

        Examples
        --------
        >>> acc = Accountant(1.0)
        >>> parts = acc.split({"fit": 3, "evaluate": 1})
        >>> {k: round(v.total_epsilon, 6) for k, v in parts.items()}
        {'fit': 0.75, 'evaluate': 0.25}
        >>> acc.remaining_epsilon
        0.0
        """
        if not weights or any(not (w > 0 and math.isfinite(w)) for w in weights.values()):
            raise BudgetExceededError(f"split weights must be positive, got {weights}.", argument="weights")
        total = sum(weights.values())
        remaining = self.remaining_epsilon
        names = list(weights)
        out: dict[str, Accountant] = {}
        if self.composition == "basic":
            for name in names[:-1]:
                out[name] = self.child(remaining * weights[name] / total, name)
            out[names[-1]] = self.child(self.remaining_epsilon, names[-1])
            return out
        # Tight compositions: the children need delta too; it is split like epsilon.
        remaining_delta = self.remaining_delta
        for name in names[:-1]:
            share = weights[name] / total
            out[name] = self.child(remaining * share, name, remaining_delta * share)
        out[names[-1]] = self.child(self.remaining_epsilon, names[-1], self.remaining_delta)
        return out


def check_accountant(accountant: Any) -> Accountant | None:
    """Return ``accountant`` after checking it is an :class:`Accountant` or None.

    Parameters
    ----------
    accountant : Any
        The value a caller passed as ``accountant``.

    Returns
    -------
    Accountant or None
        ``accountant`` itself; anything else raises
        :class:`~trustlab.errors.ParameterError` naming ``accountant``.

    Examples
    --------
    >>> check_accountant(None) is None
    True
    >>> check_accountant(1.0)
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: accountant must be a trustlab.privacy.Accountant or None, got float.
    """
    if accountant is not None and not isinstance(accountant, Accountant):
        raise ParameterError(
            f"accountant must be a trustlab.privacy.Accountant or None, got {type(accountant).__name__}.",
            argument="accountant",
        )
    return accountant


def charge(accountant: Accountant | None, plan: Release, draw: Callable[[], Any]) -> Release:
    """Check ``plan`` against ``accountant``, then ``draw()`` the noisy value, then record the release.

    The order is the point: the budget is checked from the plan's parameters before
    ``draw`` touches any sampler, so an exhausted budget raises
    :class:`~trustlab.errors.BudgetExceededError` with no noise drawn. Without an
    accountant the release is returned uncharged (the caller records it).

    Parameters
    ----------
    accountant : Accountant or None
        The budget to charge; None charges nothing.
    plan : Release
        The release as planned, with its ``epsilon``, ``delta`` and parameters (its
        ``value`` is ignored and replaced).
    draw : callable
        Called with no argument after the check; returns the noisy value.

    Returns
    -------
    Release
        ``plan`` with ``value=draw()``, recorded in ``accountant`` when one is given.

    Examples
    --------
    >>> acc = Accountant(epsilon=1.0)
    >>> plan = Release(value=None, epsilon=0.5, delta=0.0, mechanism="demo",
    ...                parameters={}, description="a count")
    >>> charge(acc, plan, lambda: 42).value, acc.spent_epsilon
    (42, 0.5)
    """
    accountant = check_accountant(accountant)
    if accountant is not None:
        accountant.check(plan)
    release = replace(plan, value=draw())
    if accountant is not None:
        accountant.record(release)
    return release
