"""Base classes of the built-in sections: what several of them share in how they compute.

- :class:`TwoModeSection`: a raw computation and a private one, chosen by the context's mode.
- :class:`RawOnlySection`: a section that reads individual rows, so releases nothing in
  private mode and says so in one note.
- :class:`TableSection`: the sections read from the shared prediction table (Performance,
  Fairness), which is built once per audit under the budget key ``"predictions"``.
"""

from __future__ import annotations

from abc import abstractmethod

from typing_extensions import override

from trustlab.audit._scale_stats import prediction_table
from trustlab.audit.prediction_table import PredictionTable
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.privacy.accounting import Accountant

__all__ = ["RawOnlySection", "TableSection", "TwoModeSection"]


class TwoModeSection(Section):
    """A section with a raw computation (:meth:`_raw`) and a private one (:meth:`_private`)."""

    @override
    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        """:meth:`_raw` outside private mode, :meth:`_private` with the section's budget in it.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.
        budget : Accountant or None
            The section's share of epsilon in private mode (spent in full), else None.

        Returns
        -------
        SectionResult
        """
        if not ctx.private:
            return self._raw(ctx)
        return self._private(ctx, budget)

    @abstractmethod
    def _raw(self, ctx: AuditContext) -> SectionResult:
        """The section's figures from the rows (not private)."""

    @abstractmethod
    def _private(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        """The section's figures in private mode, spending exactly ``budget``."""


class RawOnlySection(TwoModeSection):
    """A section that reads individual rows: in private mode it releases nothing and says why.

    Subclasses set :attr:`private_note` (the reason, for the report).
    """

    budget_weight = 0.0  # releases nothing in private mode
    private_note = "Left out in private mode: nothing was spent on this section."

    @override
    def _private(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        return SectionResult(self.name, self.title, {"released": False}, [], [self.private_note])


class TableSection(Section):
    """A section computed from the shared prediction table (``_scale_stats.prediction_table``).

    The table (held-out rows counted by sensitive cell, score bin and label, with
    bootstrap replicates) is built once per audit and shared by every such section; in
    private mode it is one DP histogram released from the sections' shared budget
    (key ``"predictions"``).
    """

    budget_key = "predictions"
    budget_weight = 0.6

    @override
    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        """The section's figures from the shared prediction table (built on first use).

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.
        budget : Accountant or None
            The shared ``"predictions"`` budget in private mode (spent in full), else None.

        Returns
        -------
        SectionResult
        """
        return self._from_table(ctx, prediction_table(ctx, budget), budget)

    @abstractmethod
    def _from_table(
        self, ctx: AuditContext, tab: PredictionTable, budget: Accountant | None
    ) -> SectionResult:
        """The section's figures from ``tab`` (``budget`` is None outside private mode)."""
