"""Small HTML helpers for section bodies: escaped tables, numbers and notes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from trustlab.audit.section import Check

__all__ = ["BADGES", "checks_list", "fmt", "fmt_ci", "notes_list", "summary_html", "table"]

BADGES = {
    "pass": ("pass", "PASS"),
    "fail": ("fail", "FAIL"),
    "inconclusive": ("inconclusive", "INCONCLUSIVE"),
    "not_evaluable": ("na", "NOT EVALUABLE"),
}
"""CSS class and badge text of each check status."""


def fmt(value: Any, digits: int = 3) -> str:
    """Format a number for the report (NaN and None as an en dash).

    Parameters
    ----------
    value : Any
        A number, bool, None or anything else (shown as escaped text).
    digits : int, default=3
        Decimals of a float below one million (larger floats are rounded to integers).

    Returns
    -------
    str
        Integers with thousands separators, booleans as ``yes``/``no``.

    Examples
    --------
    >>> fmt(1234567), fmt(0.12345), fmt(float("nan")), fmt(True), fmt("<b>")
    ('1,234,567', '0.123', '–', 'yes', '&lt;b&gt;')
    """
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
    """An HTML table; cells are formatted with :func:`fmt` and escaped.

    Parameters
    ----------
    headers : sequence of str
        Column headings.
    rows : iterable of sequence
        One sequence of cell values per row.
    caption : str, default=""
        Optional caption.

    Returns
    -------
    str
        A ``<table class="data">`` element.

    Examples
    --------
    >>> html = table(["group", "n"], [["a", 1200]])
    >>> html[:55]
    '<table class="data"><thead><tr><th>group</th><th>n</th>'
    >>> html[55:]
    '</tr></thead><tbody><tr><td>a</td><td>1,200</td></tr></tbody></table>'
    """
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{fmt(v)}</td>" for v in row) + "</tr>" for row in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f'<table class="data">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fmt_ci(value: Any, low: Any, high: Any, digits: int = 3) -> str:
    """A figure with its interval, ``0.812 [0.790, 0.834]`` (the figure alone when no interval exists).

    Parameters
    ----------
    value : Any
        The figure.
    low, high : Any
        The interval's ends (None or a NaN ``low`` means no interval).
    digits : int, default=3
        Decimals (as :func:`fmt`).

    Returns
    -------
    str
        The formatted figure and interval.

    Examples
    --------
    >>> fmt_ci(0.8123, 0.79, 0.834), fmt_ci(0.8123, None, None)
    ('0.812 [0.790, 0.834]', '0.812')
    """
    if low is None or high is None or (isinstance(low, float) and math.isnan(low)):
        return fmt(value, digits)
    if isinstance(value, float) and math.isnan(value):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(low, digits)}, {fmt(high, digits)}]"


def checks_list(checks: Sequence[Check]) -> str:
    """The section's checks as a list with pass / fail / inconclusive / not-evaluable badges.

    A vacuous pass gets its own badge; a check's hint and rule follow it (a run of checks
    under the same rule states it once).

    Parameters
    ----------
    checks : sequence of Check
        The section's checks.

    Returns
    -------
    str
        A ``<ul class="checks">`` element, or ``""`` when there is no check.

    Examples
    --------
    >>> html = checks_list([Check("auc > 0.5", True, "0.71")])
    >>> html.startswith('<ul class="checks"><li class="check pass"><span class="badge">PASS</span>')
    True
    """
    if not checks:
        return ""
    items = []
    previous = ""
    for c in checks:
        cls, word = BADGES[c.status]
        if c.vacuous:
            cls, word = "vacuous", "PASS (VACUOUS)"
        if not c.rule:
            rule = ""
        elif c.rule == previous:  # a run of checks under one rule states it once
            rule = '<br><span class="rule">Rule: as above.</span>'
        else:
            rule = f'<br><span class="rule">Rule: {escape(c.rule)}</span>'
        previous = c.rule
        hint = f'<br><span class="action">Would be {escape(c.hint)}</span>' if c.hint else ""
        items.append(
            f'<li class="check {cls}"><span class="badge">{word}</span> '
            f"<strong>{escape(c.name)}</strong>: {escape(c.detail)}{hint}{rule}</li>"
        )
    return f'<ul class="checks">{"".join(items)}</ul>'


def notes_list(notes: Sequence[str]) -> str:
    """Caveats as a list.

    Parameters
    ----------
    notes : sequence of str
        Plain-language caveats.

    Returns
    -------
    str
        A ``<ul class="notes">`` element (escaped), or ``""`` when there is no note.

    Examples
    --------
    >>> notes_list(["rows < 100"])
    '<ul class="notes"><li>rows &lt; 100</li></ul>'
    """
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>"


_FINDING = {
    "no_skill": ("fail", "NO SKILL"),
    "fail": ("fail", "FAIL"),
    "warning": ("inconclusive", "WARNING"),
    "inconclusive": ("inconclusive", "INCONCLUSIVE"),
}


def summary_html(
    findings: Sequence[dict[str, Any]],
    results: Sequence[Any],
    missing: Sequence[tuple[str, list[str]]] = (),
    reasons: Sequence[dict[str, str]] = (),
) -> str:
    """The report's opening list: findings ranked by severity, each linked to its section.

    Vacuous passes and checks that could not be evaluated come last, as one line each
    listing their names (a not-evaluable check with what would make it evaluable); then
    one line per section with its check counts and a link (each check is printed once,
    in its section); then one line of what is not in this report and why (``missing``,
    from :func:`trustlab.audit.summary.not_in_report_line`), each reason in full in a
    folded list (``reasons``).

    Parameters
    ----------
    findings : sequence of dict
        Each with ``severity`` (``no_skill``, ``fail``, ``warning``, ``inconclusive``,
        ``vacuous`` or ``not_evaluable``), ``text``, ``section``, ``action`` and optionally
        ``badge``; other severities are left out.
    results : sequence of SectionResult
        The sections, for the per-section counts (sections without checks are skipped).
    missing : sequence of (str, list of str), default=()
        Why some sections are not in the report, and their names.
    reasons : sequence of dict, default=()
        ``{"name": ..., "reason": ...}`` for each missing section, shown folded.

    Returns
    -------
    str
        The summary's HTML.

    Examples
    --------
    >>> from trustlab.audit.section import SectionResult
    >>> r = SectionResult("perf", "Performance", {}, [Check("auc > 0.5", True, "0.71")])
    >>> html = summary_html([], [r])
    >>> "Nothing to report" in html, "1 passed" in html
    (True, True)
    """
    items = []
    for f in findings:
        if f["severity"] not in _FINDING:
            continue
        cls, word = _FINDING[f["severity"]]
        word = f.get("badge", word)
        action = f'<br><span class="action">Next: {escape(f["action"])}</span>' if f["action"] else ""
        items.append(
            f'<li class="finding {cls}"><span class="badge">{word}</span> {escape(f["text"])} '
            f'<a href="#{escape(f["section"])}">see section</a>{action}</li>'
        )
    for kind, words in (("vacuous", "Vacuous passes"), ("not_evaluable", "Not evaluable")):
        rest = [f for f in findings if f["severity"] == kind]
        if not rest:
            continue
        hints = list(dict.fromkeys(f["action"] for f in rest))  # one line per hint, checks grouped
        lines = []
        for hint in hints:
            names = ", ".join(
                f'<a href="#{escape(f["section"])}">{escape(f["text"].split(": ")[1])}</a>'
                for f in rest
                if f["action"] == hint
            )
            lines.append(names + (f'<br><span class="action">Would be {escape(hint)}</span>' if hint else ""))
        items.append(
            f'<li class="finding na"><span class="badge">{len(rest)}</span> {words}: '
            + "<br>".join(lines)
            + "</li>"
        )
    head = (
        f'<ol class="findings">{"".join(items)}</ol>'
        if items
        else "<p>Nothing to report: every check passed and no column was flagged.</p>"
    )
    rows = []
    for r in results:
        if not r.checks:
            continue
        n = {s: sum(c.status == s and not c.vacuous for c in r.checks) for s in BADGES}
        v = sum(c.vacuous for c in r.checks)
        parts = [f"{n['pass']} passed"] + [f"{v} vacuous"] * bool(v)
        parts += [f"{n[s]} {w}" for s, w in (("fail", "failed"), ("inconclusive", "inconclusive")) if n[s]]
        parts += [f"{n['not_evaluable']} not evaluable"] * bool(n["not_evaluable"])
        rows.append(f'<li><a href="#{escape(r.name)}">{escape(r.title)}</a>: {", ".join(parts)}</li>')
    absent = "; ".join(f"{escape(why)}: {escape(', '.join(names))}" for why, names in missing)
    more = "".join(
        f"<li><strong>{escape(r['name'])}</strong>: {escape(r['reason'])}</li>"
        for r in reasons
        if r["reason"]
    )
    absent_html = (
        f'<p class="notin"><strong>Not in this report</strong> — {absent}.</p>'
        + (
            f'<details class="notin"><summary>Why each</summary><ul class="notes">{more}</ul></details>'
            if more
            else ""
        )
        if missing
        else ""
    )
    return (
        head
        + '<p class="rule">Checks by section (each is printed once, in its section):</p>'
        + f'<ul class="bysection">{"".join(rows)}</ul>'
        + absent_html
    )
