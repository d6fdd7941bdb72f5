"""Small HTML helpers for section bodies: escaped tables, numbers and notes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from trustlab.audit.section import Check

__all__ = ["checks_list", "fmt", "notes_list", "table"]


def fmt(value: Any, digits: int = 3) -> str:
    """Format a number for the report (NaN and None as an en dash)."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:,.{digits}f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return escape(str(value))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, caption: str = "") -> str:
    """An HTML table; cells are formatted with :func:`fmt` and escaped."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{fmt(v)}</td>" for v in row) + "</tr>" for row in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f'<table class="data">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def checks_list(checks: Sequence[Check]) -> str:
    """The section's checks as a list with pass/fail badges."""
    if not checks:
        return ""
    items = []
    for c in checks:
        cls, word = {True: ("pass", "PASS"), False: ("fail", "FAIL"), None: ("na", "N/A")}[c.passed]
        items.append(
            f'<li class="check {cls}"><span class="badge">{word}</span> '
            f"<strong>{escape(c.name)}</strong>: {escape(c.detail)}</li>"
        )
    return f'<ul class="checks">{"".join(items)}</ul>'


def notes_list(notes: Sequence[str]) -> str:
    """Caveats as a list."""
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
