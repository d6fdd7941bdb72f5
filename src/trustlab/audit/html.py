"""Small HTML helpers for section bodies: escaped tables, numbers and notes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from trustlab.audit.section import Check

__all__ = ["BADGES", "checks_list", "fmt", "fmt_ci", "notes_list", "table"]

BADGES = {
    "pass": ("pass", "PASS"),
    "fail": ("fail", "FAIL"),
    "inconclusive": ("inconclusive", "INCONCLUSIVE"),
    "not_evaluable": ("na", "NOT EVALUABLE"),
}
"""CSS class and badge text of each check status."""


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


def fmt_ci(value: Any, low: Any, high: Any, digits: int = 3) -> str:
    """A figure with its interval, ``0.812 [0.790, 0.834]`` (the figure alone when no interval exists)."""
    if low is None or high is None or (isinstance(low, float) and math.isnan(low)):
        return fmt(value, digits)
    if isinstance(value, float) and math.isnan(value):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


def checks_list(checks: Sequence[Check]) -> str:
    """The section's checks as a list with pass / fail / inconclusive / not-evaluable badges."""
    if not checks:
        return ""
    items = []
    previous = ""
    for c in checks:
        cls, word = BADGES[c.status]
        if not c.rule:
            rule = ""
        elif c.rule == previous:  # a run of checks under one rule states it once
            rule = '<br><span class="rule">Rule: as above.</span>'
        else:
            rule = f'<br><span class="rule">Rule: {escape(c.rule)}</span>'
        previous = c.rule
        items.append(
            f'<li class="check {cls}"><span class="badge">{word}</span> '
            f"<strong>{escape(c.name)}</strong>: {escape(c.detail)}{rule}</li>"
        )
    return f'<ul class="checks">{"".join(items)}</ul>'


def notes_list(notes: Sequence[str]) -> str:
    """Caveats as a list."""
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"
