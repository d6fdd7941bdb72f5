"""The Section interface: each pillar of trustlab adds one section to the audit report.

A section turns an :class:`AuditContext` (data, fitted model, cached predictions)
into a :class:`SectionResult` (plain figures, checks and notes) in ``compute``, and
renders that result as an HTML fragment in ``render``. The report never
recomputes: ``render`` reads only the result, and the JSON report is the result's
``figures``, ``checks`` and ``notes`` as they are.

In private mode, ``compute`` receives an :class:`~trustlab.privacy.Accountant`
holding the section's share of the audit's epsilon; every figure it derives
from the data must come from a release charged to that accountant (or from a
release shared through :meth:`AuditContext.shared`), and it must spend its
whole share so that the ledger sums to the total.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from trustlab.datasets.schema import Schema
    from trustlab.privacy.accounting import Accountant

__all__ = [
    "STATUSES",
    "AuditContext",
    "Check",
    "Section",
    "SectionResult",
    "interval_rule",
    "interval_verdict",
]


STATUSES = ("pass", "fail", "inconclusive", "not_evaluable")
"""The four verdicts of a :class:`Check`."""


@dataclass(frozen=True)
class Check:
    """One verdict line of the report: pass, fail, inconclusive or not evaluable.

    Parameters
    ----------
    name : str
        What is checked (fixed text: it is part of the report's structure).
    passed : bool or None
        True for a pass, False for a fail, None otherwise; kept for compatibility
        and derived from ``status`` when ``status`` is given.
    detail : str
        The figures behind the verdict.
    status : str, optional
        One of :data:`STATUSES`; derived from ``passed`` when omitted (None then
        means ``"not_evaluable"``).
    rule : str
        The rule that decided, in words (e.g. "pass when the 95% interval lies at
        or below 0.1, fail when it lies above, inconclusive otherwise").

    Examples
    --------
    >>> Check("gap", None, "0.10 (0.02..0.20)", status="inconclusive").passed is None
    True
    >>> Check("auc", True, "0.7").status
    'pass'
    """

    name: str
    passed: bool | None
    detail: str
    status: str = ""
    rule: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            status = {True: "pass", False: "fail", None: "not_evaluable"}[self.passed]
            object.__setattr__(self, "status", status)
        elif self.status not in STATUSES:
            raise ValueError(f"Check status must be one of {STATUSES}, got {self.status!r}")
        object.__setattr__(self, "passed", {"pass": True, "fail": False}.get(self.status))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "passed": self.passed,
            "detail": self.detail,
            "rule": self.rule,
        }


def interval_verdict(low: float, high: float, threshold: float, *, at_most: bool) -> str:
    """Decide a check from an interval: pass, fail, inconclusive or not evaluable.

    With ``at_most=True`` the check asks "is the quantity at most ``threshold``?":
    pass when the whole interval lies at or below it, fail when the whole interval
    lies above it, inconclusive when the interval straddles it. With
    ``at_most=False`` it asks "is the quantity above ``threshold``?" (pass when the
    interval lies above it, fail when it lies at or below it). A NaN end means no
    interval exists: not evaluable.

    Examples
    --------
    >>> interval_verdict(0.02, 0.199, 0.1, at_most=True)
    'inconclusive'
    >>> interval_verdict(0.55, 0.70, 0.5, at_most=False)
    'pass'
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        return "not_evaluable"
    if at_most:
        return "pass" if high <= threshold else "fail" if low > threshold else "inconclusive"
    return "pass" if low > threshold else "fail" if high <= threshold else "inconclusive"


def interval_rule(threshold: float, *, at_most: bool, level: str = "95%") -> str:
    """The words for the rule that :func:`interval_verdict` applies."""
    if at_most:
        return (
            f"pass when the whole {level} interval is at most {threshold:g}, fail when it lies "
            f"above {threshold:g}, inconclusive when it straddles {threshold:g}"
        )
    return (
        f"pass when the whole {level} interval lies above {threshold:g}, fail when it is at most "
        f"{threshold:g}, inconclusive when it straddles {threshold:g}"
    )


@dataclass(frozen=True)
class SectionResult:
    """What a section computed: JSON-able figures, checks and notes.

    Parameters
    ----------
    name : str
        Machine name of the section (the key in ``report.json``).
    title : str
        Heading shown in the HTML report.
    figures : dict
        Every number the section reports, as plain Python types (lists, dicts,
        floats, strings), so that it serialises to JSON unchanged.
    checks : list of Check
        Checks that passed and that failed.
    notes : list of str
        Plain-language caveats (what was private, what was skipped and why).
    """

    name: str
    title: str
    figures: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "figures": self.figures,
            "checks": [c.to_dict() for c in self.checks],
            "notes": list(self.notes),
        }


@dataclass
class AuditContext:
    """Everything a section may read: the data, the split, the model and its cached predictions.

    Predictions are computed once, when the context is built, and reused by every
    section (``proba_test``).
    """

    data: pd.DataFrame
    target: str
    sensitive: list[str]
    features: list[str]
    y: np.ndarray
    positive_label: Any
    negative_label: Any
    train_index: np.ndarray
    test_index: np.ndarray
    model: Any
    model_name: str
    proba_test: np.ndarray
    schema: Schema
    private: bool
    random_state: int
    model_status: str = ""
    _shared: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def X_train(self) -> pd.DataFrame:
        return self.data.iloc[self.train_index][self.features]

    @property
    def X_test(self) -> pd.DataFrame:
        return self.data.iloc[self.test_index][self.features]

    @property
    def y_test(self) -> np.ndarray:
        return self.y[self.test_index]

    @property
    def sensitive_test(self) -> pd.DataFrame:
        return self.data.iloc[self.test_index][self.sensitive]

    def shared(self, key: str, compute: Callable[[], Any]) -> Any:
        """Compute a value (e.g. a DP release several sections use) once and cache it."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]


class Section(ABC):
    """Base class of audit sections.

    Subclasses set ``name`` and ``title`` and implement :meth:`compute` and
    :meth:`render`. In private mode the audit splits the total epsilon across
    budget keys in proportion to ``budget_weight``; sections that share a
    ``budget_key`` share one accountant (e.g. Performance and Fairness share one
    DP histogram of predictions).
    """

    name: str = ""
    title: str = ""
    budget_key: str | None = None
    budget_weight: float = 1.0

    @property
    def key(self) -> str:
        """The budget key this section charges (its own name unless shared)."""
        return self.budget_key or self.name

    def applies(self, ctx: AuditContext) -> bool:
        """Whether the section has anything to say for this context (default: yes)."""
        return True

    @abstractmethod
    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        """Compute the section's figures; in private mode spend exactly ``budget``."""

    @abstractmethod
    def render(self, result: SectionResult) -> str:
        """Return the section's HTML body (plots inline as SVG) from ``result`` alone."""
