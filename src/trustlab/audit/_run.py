"""Running the sections: each section's share of a private budget, then each section in order.

Shared by the in-process audit and the private audit on Dask, so both split the budget
and check it was spent in the same way (their ledgers are identical).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.privacy.accounting import Accountant

__all__ = ["compute_sections", "left_out_in_private", "section_budgets"]


def section_budgets(sections: Sequence[Section], accountant: Accountant | None) -> dict[str, Accountant]:
    """Each budget key's share of ``accountant`` (by the sections' ``budget_weight``; none when raw).

    Sections sharing a ``budget_key`` share one budget (the largest of their weights); a
    weight-0 section releases nothing and gets no budget.

    Parameters
    ----------
    sections : sequence of Section
        The sections of the run.
    accountant : Accountant or None
        The audit's budget; None outside private mode.

    Returns
    -------
    dict
        Budget key -> child accountant.
    """
    if accountant is None:
        return {}
    weights: dict[str, float] = {}
    for s in sections:
        if s.budget_weight > 0:
            weights[s.key] = max(weights.get(s.key, 0.0), s.budget_weight)
    return accountant.split(weights) if weights else {}


def compute_sections(
    sections: Sequence[Section],
    ctx: AuditContext,
    budgets: dict[str, Accountant],
    step: Callable[[str], None],
) -> list[SectionResult]:
    """Compute every section in order, then check each budget was spent in full.

    Parameters
    ----------
    sections : sequence of Section
        The sections of the run (those that apply).
    ctx : AuditContext
        The run's context.
    budgets : dict
        What :func:`section_budgets` returned.
    step : callable
        Called with ``"section: TITLE"`` before each section.

    Returns
    -------
    list of SectionResult

    Raises
    ------
    RuntimeError
        A budget left unspent (an internal error: every section spends its share).
    """
    results: list[SectionResult] = []
    for s in sections:
        step(f"section: {s.title}")
        results.append(s.compute(ctx, budgets.get(s.key) if s.budget_weight > 0 else None))
    for key, acc in budgets.items():
        if acc.remaining_epsilon > 1e-9 * acc.total_epsilon:
            raise RuntimeError(f"internal error: budget '{key}' left {acc.remaining_epsilon} unspent")
    return results


def left_out_in_private(sections: Sequence[Section], ctx: AuditContext) -> list[dict[str, str]]:
    """The ``raw_only`` sections a private audit leaves out, each with its reason.

    Decided from the mode and the sections' classes only, never from the rows; the report's
    "not in this report" line lists them (:func:`trustlab.audit.summary.not_in_report`).

    Parameters
    ----------
    sections : sequence of Section
        Every section the audit was asked for, before :meth:`Section.applies` filtered them.
    ctx : AuditContext
        The audit's context.

    Returns
    -------
    list of dict
        ``name`` (the section's title) and ``reason`` (a sentence); empty outside private mode.
    """
    if not ctx.private:
        return []
    generic = (
        "Left out in private mode: {title} reads individual rows and trustlab has no differentially "
        "private release of it yet; nothing was spent on this section."
    )
    return [
        {"name": s.title, "reason": s.private_reason or generic.format(title=s.title)}
        for s in sections
        if s.raw_only
    ]
