"""The audit report: every section's result, the privacy ledger, and their HTML and JSON forms."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from trustlab.audit.html import checks_list, table
from trustlab.audit.section import STATUSES, Section, SectionResult
from trustlab.privacy.accounting import LedgerEntry

__all__ = ["SCHEMA_VERSION", "AuditReport"]

SCHEMA_VERSION = "1.1"
"""1.1: checks carry ``status`` (pass / fail / inconclusive / not_evaluable) and ``rule``;
figures carry intervals; private Data summaries list every declared category (``shares``)."""


def _jsonable(value: Any) -> Any:
    """Plain JSON types; NaN and infinities become null (JSON has none)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class AuditReport:
    """The outcome of :meth:`trustlab.audit.Audit.run`.

    Attributes
    ----------
    meta : dict
        What was audited and how (data, target, model, seed, privacy settings).
    results : list of SectionResult
        One per section, in report order.
    sections : list of Section
        The section objects, used only to render their results.
    ledger : list of LedgerEntry
        Every DP release (empty unless private).
    """

    meta: dict[str, Any]
    results: list[SectionResult]
    sections: Sequence[Section] = field(repr=False)
    ledger: list[LedgerEntry] = field(default_factory=list)

    def __getitem__(self, name: str) -> SectionResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no section {name!r}; sections: {[r.name for r in self.results]}")

    @property
    def checks(self) -> list[tuple[str, Any]]:
        """``(section title, Check)`` for every check, in report order."""
        return [(r.title, c) for r in self.results for c in r.checks]

    @property
    def status_counts(self) -> dict[str, int]:
        """How many checks ended in each status (pass, fail, inconclusive, not_evaluable)."""
        return {s: sum(c.status == s for _, c in self.checks) for s in STATUSES}

    @property
    def epsilon_spent(self) -> float:
        """Total epsilon of the ledger's releases."""
        return float(sum(e.epsilon for e in self.ledger))

    def to_dict(self) -> dict[str, Any]:
        """Every figure of the report as JSON-ready types (schema version :data:`SCHEMA_VERSION`)."""
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "meta": self.meta,
            "sections": {r.name: r.to_dict() for r in self.results},
        }
        if self.meta.get("private"):
            out["privacy_ledger"] = {
                "total_epsilon": self.meta["epsilon"],
                "spent_epsilon": self.epsilon_spent,
                "releases": [
                    {
                        "section": e.section,
                        "description": e.description,
                        "mechanism": e.mechanism,
                        "epsilon": e.epsilon,
                        "delta": e.delta,
                    }
                    for e in self.ledger
                ],
            }
        return _jsonable(out)

    def to_json(self, *, indent: int = 2) -> str:
        """The report as a JSON string."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def to_html(self) -> str:
        """The report as one self-contained HTML page (inline CSS and SVG, no network)."""
        files = resources.files("trustlab.audit").joinpath("templates")
        env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
        template = env.from_string(files.joinpath("report.html").read_text())
        by_name = {s.name: s for s in self.sections}
        rendered = [
            {"name": r.name, "title": r.title, "body": Markup(by_name[r.name].render(r))}
            for r in self.results
        ]
        all_checks = [c for r in self.results for c in r.checks]
        counts = {s: sum(c.status == s for c in all_checks) for s in STATUSES}
        summary = "".join(f"<h3>{r.title}</h3>" + checks_list(r.checks) for r in self.results if r.checks)
        ledger_html = table(
            ["#", "budget", "release", "mechanism", "epsilon"],
            [
                [i + 1, e.section, e.description, e.mechanism, f"{e.epsilon:.6g}"]
                for i, e in enumerate(self.ledger)
            ],
        )
        return template.render(
            meta=self.meta,
            sections=rendered,
            counts=counts,
            checks_html=Markup(summary),
            css=Markup(files.joinpath("report.css").read_text()),
            ledger_html=Markup(ledger_html),
            ledger_total=self.epsilon_spent,
            schema_version=SCHEMA_VERSION,
        )

    def save(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``report.html`` and ``report.json`` into ``out_dir`` (created if needed)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        html_path, json_path = out / "report.html", out / "report.json"
        html_path.write_text(self.to_html(), encoding="utf-8")
        json_path.write_text(self.to_json(), encoding="utf-8")
        return html_path, json_path
