"""One line of a privacy ledger (private module; re-exported by :mod:`trustlab.privacy.accounting`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LedgerEntry"]


@dataclass(frozen=True)
class LedgerEntry:
    """One line of a privacy ledger: what was released, how, and what it cost.

    Under ``"rdp"``, ``"zcdp"`` and ``"pld"`` composition ``epsilon`` is the increase of
    the accountant's total epsilon that the release caused (the entries add up to
    :attr:`Accountant.spent_epsilon`), and ``delta`` is the release's own delta (0 for
    Gaussian and zCDP releases, which share the accountant's delta).

    Attributes
    ----------
    section : str
        Name of the (sub-)budget that was charged (:attr:`Accountant.name`).
    description : str
        What was released, as the caller described it.
    mechanism : str
        The mechanism that produced the release (may be empty).
    epsilon : float
        Epsilon the release cost: its own epsilon under ``"basic"`` composition, the
        increase of the total epsilon under a tight one.
    delta : float
        Delta the release cost (0 for Gaussian and zCDP releases under a tight
        composition).

    See Also
    --------
    Accountant.ledger : The list of entries an accountant built.

    Examples
    --------
    >>> from trustlab.privacy import Accountant
    >>> acc = Accountant(1.0)
    >>> acc.spend(0.25, description="row count", mechanism="discrete Laplace")
    >>> entry = acc.ledger()[0]
    >>> entry.section, entry.description, entry.mechanism, entry.epsilon, entry.delta
    ('total', 'row count', 'discrete Laplace', 0.25, 0.0)
    """

    section: str
    description: str
    mechanism: str
    epsilon: float
    delta: float
