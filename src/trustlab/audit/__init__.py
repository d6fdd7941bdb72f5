"""The audit: data + model + configuration -> a report with one section per pillar.

Sections are plugins: :func:`register_section` adds one (see docs/audit.md, "Your own
section"); the built-in sections are imported on first use. Computing a report needs no
plotting library; rendering its HTML needs matplotlib.
"""

from trustlab.audit.audit import Audit
from trustlab.audit.registry import (
    SECTIONS,
    default_sections,
    get_section,
    register_section,
    section_names,
    unregister_section,
)
from trustlab.audit.report import SCHEMA_VERSION, AuditReport
from trustlab.audit.section import AuditContext, Check, Section, SectionResult

__all__ = [
    "SCHEMA_VERSION",
    "SECTIONS",
    "Audit",
    "AuditContext",
    "AuditReport",
    "Check",
    "Section",
    "SectionResult",
    "default_sections",
    "get_section",
    "register_section",
    "section_names",
    "unregister_section",
]
