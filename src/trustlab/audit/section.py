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
    vacuous : bool
        A pass that says nothing because the model has no skill (it does not beat
        chance or the majority class): set by :func:`trustlab.audit.summary.mark_vacuous`.
    hint : str
        For a check that is not evaluable: what would make it evaluable (more held-out
        rows of a named group, a larger epsilon, one sensitive column at a time), in
        words; "" otherwise (:mod:`trustlab.audit._hints`).

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
    vacuous: bool = False
    hint: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            status = {True: "pass", False: "fail", None: "not_evaluable"}[self.passed]
            object.__setattr__(self, "status", status)
        elif self.status not in STATUSES:
            raise ValueError(f"Check status must be one of {STATUSES}, got {self.status!r}")
        object.__setattr__(self, "passed", {"pass": True, "fail": False}.get(self.status))

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON-able fields.

        Returns
        -------
        dict
            ``name``, ``status``, ``passed``, ``detail``, ``rule``, ``vacuous`` and ``hint``.
        """
        return {
            "name": self.name,
            "status": self.status,
            "passed": self.passed,
            "detail": self.detail,
            "rule": self.rule,
            "vacuous": self.vacuous,
            "hint": self.hint,
        }


def interval_verdict(low: float, high: float, threshold: float, *, at_most: bool) -> str:
    """Decide a check from an interval: pass, fail, inconclusive or not evaluable.

    With ``at_most=True`` the check asks "is the quantity at most ``threshold``?":
    pass when the whole interval lies at or below it, fail when the whole interval
    lies above it, inconclusive when the interval straddles it. With
    ``at_most=False`` it asks "is the quantity above ``threshold``?" (pass when the
    interval lies above it, fail when it lies at or below it). A NaN end means no
    interval exists: not evaluable.

    Parameters
    ----------
    low, high : float
        The interval's ends.
    threshold : float
        The threshold of the check.
    at_most : bool
        True to check ``quantity <= threshold``, False to check ``quantity > threshold``.

    Returns
    -------
    str
        ``"pass"``, ``"fail"``, ``"inconclusive"`` or ``"not_evaluable"``.

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
    """The words for the rule that :func:`interval_verdict` applies.

    Parameters
    ----------
    threshold : float
        The threshold the interval is compared with.
    at_most : bool
        As in :func:`interval_verdict`.
    level : str, default "95%"
        The interval's confidence level, as shown.

    Returns
    -------
    str

    Examples
    --------
    >>> interval_rule(0.1, at_most=True)[:45]
    'pass when the whole 95% interval is at most 0'
    """
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

    Examples
    --------
    >>> r = SectionResult("demo", "Demo", {"rows": 3}, [Check("rows > 0", True, "3")])
    >>> r.to_dict()["checks"][0]["status"]
    'pass'
    """

    name: str
    title: str
    figures: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The result as it appears in ``report.json`` under the section's name.

        Returns
        -------
        dict
            ``title``, ``figures``, ``checks`` (as dicts) and ``notes``.
        """
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
    section (``proba_test``). Sections receive it from the audit
    (:meth:`trustlab.audit.Audit.context` builds one for inspection).

    Attributes
    ----------
    data : pandas.DataFrame
        The audited table (conformed to the schema in private mode).
    target : str
        The outcome column.
    sensitive : list of str
        The sensitive columns.
    features : list of str
        The model's input columns.
    y : numpy.ndarray
        The outcome as 0/1.
    positive_label, negative_label
        The outcome values read as 1 and 0.
    train_index, test_index : numpy.ndarray
        Row positions of the training and held-out rows.
    model
        The fitted classifier.
    model_name : str
        How the model is named in the report.
    proba_test : numpy.ndarray
        Predicted probability of label 1 on the held-out rows.
    schema : Schema
        The public schema.
    private : bool
        Whether the audit is private.
    random_state : int
        The audit's seed (public choices only).
    model_status : str
        A note on the model (e.g. the constant fallback), or "".
    column_flags : list of dict
        Columns the screening flagged (:mod:`trustlab.audit.screening`), as
        :meth:`~trustlab.audit.screening.ColumnFlag.to_dict` (in private mode, from the
        column names only).
    group : str or None
        The entity column the split kept whole (``Audit(group=...)``), or None.
    screening : dict
        Whether the column screening read the rows, and on which
        (:func:`~trustlab.audit._public_screening.screening_meta`); empty when unknown.

    See Also
    --------
    Section : the sections that read it.
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
    column_flags: list[dict[str, Any]] = field(default_factory=list)
    group: Any = None
    screening: dict[str, Any] = field(default_factory=dict)
    _shared: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def X_train(self) -> pd.DataFrame:
        """The training rows' features."""
        return self.data.iloc[self.train_index][self.features]

    @property
    def X_test(self) -> pd.DataFrame:
        """The held-out rows' features."""
        return self.data.iloc[self.test_index][self.features]

    @property
    def y_test(self) -> np.ndarray:
        """The held-out rows' outcomes (0/1)."""
        return self.y[self.test_index]

    @property
    def sensitive_test(self) -> pd.DataFrame:
        """The held-out rows' sensitive columns."""
        return self.data.iloc[self.test_index][self.sensitive]

    def shared(self, key: str, compute: Callable[[], Any]) -> Any:
        """Compute a value (e.g. a DP release several sections use) once and cache it.

        Parameters
        ----------
        key : str
            The cache key (the same for every section that shares the value).
        compute : callable
            Called with no argument the first time ``key`` is asked for.

        Returns
        -------
        object
            The cached value.
        """
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]


class Section(ABC):
    """Base class of audit sections.

    Subclasses set ``name`` and ``title`` and implement :meth:`compute` and
    :meth:`render`. In private mode the audit splits the total epsilon across
    budget keys in proportion to ``budget_weight``; sections that share a
    ``budget_key`` share one accountant (e.g. Performance and Fairness share one
    DP histogram of predictions). Register a subclass with
    :func:`trustlab.audit.register_section` to add it to every audit.

    Examples
    --------
    >>> class RowCount(Section):
    ...     name, title = "rows", "Rows"
    ...     def compute(self, ctx, budget):
    ...         return SectionResult(self.name, self.title, {"rows": len(ctx.data)})
    ...     def render(self, result):
    ...         return f"<p>{result.figures['rows']} rows</p>"
    >>> RowCount().render(SectionResult("rows", "Rows", {"rows": 3}))
    '<p>3 rows</p>'
    """

    name: str = ""
    title: str = ""
    budget_key: str | None = None
    budget_weight: float = 1.0
    raw_only: bool = False
    #: Why a ``raw_only`` section is left out of a private report (the report's "not in this
    #: report" line); a generic sentence when empty.
    private_reason: str = ""

    @property
    def key(self) -> str:
        """The budget key this section charges (its own name unless shared)."""
        return self.budget_key or self.name

    def applies(self, ctx: AuditContext) -> bool:
        """Whether the section has anything to say for this context.

        By default every section applies, except a ``raw_only`` one in a private audit.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.

        Returns
        -------
        bool
        """
        return not (self.raw_only and ctx.private)

    @abstractmethod
    def compute(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        """Compute the section's figures; in private mode spend exactly ``budget``.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.
        budget : Accountant or None
            The section's share of epsilon in private mode, else None.

        Returns
        -------
        SectionResult
        """

    @abstractmethod
    def render(self, result: SectionResult) -> str:
        """Return the section's HTML body (plots inline as SVG) from ``result`` alone.

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            An HTML fragment.
        """
