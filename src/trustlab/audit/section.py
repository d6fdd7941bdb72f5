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

__all__ = ["AuditContext", "Check", "Section", "SectionResult"]


@dataclass(frozen=True)
class Check:
    """One pass/fail line of the report.

    ``passed`` is None when the check could not be evaluated (e.g. too few rows).
    """

    name: str
    passed: bool | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


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
