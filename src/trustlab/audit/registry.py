"""The audit's section registry: which sections a default audit runs, in report order."""

from __future__ import annotations

from trustlab.audit.section import Section
from trustlab.audit.sections.data import DataSection
from trustlab.audit.sections.explain import ExplainSection
from trustlab.audit.sections.fairness import FairnessSection
from trustlab.audit.sections.performance import PerformanceSection
from trustlab.audit.sections.privacy import PrivacySection

__all__ = ["SECTIONS", "default_sections", "register_section"]

SECTIONS: list[type[Section]] = [
    DataSection,
    PerformanceSection,
    FairnessSection,
    PrivacySection,
    ExplainSection,
]


def register_section(cls: type[Section], *, position: int | None = None) -> type[Section]:
    """Add a section class to the default audit (usable as a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, Section)):
        raise TypeError(f"{cls!r} is not a Section subclass")
    if cls not in SECTIONS:
        SECTIONS.insert(len(SECTIONS) if position is None else position, cls)
    return cls


def default_sections() -> list[Section]:
    """Fresh instances of every registered section, in report order."""
    return [cls() for cls in SECTIONS]
