"""The audit: data + model + configuration -> a report with one section per pillar."""

from trustlab.audit.audit import Audit
from trustlab.audit.registry import SECTIONS, default_sections, register_section
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
    "register_section",
]
