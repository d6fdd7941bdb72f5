"""The audit report: every section's result, the privacy ledger, and their HTML and JSON forms."""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from trustlab.audit.html import summary_html, table
from trustlab.audit.section import STATUSES, Section, SectionResult
from trustlab.audit.summary import collapsed, findings, not_in_report, not_in_report_line
from trustlab.errors import ParameterError
from trustlab.privacy.accounting import LedgerEntry

__all__ = ["REPORT_FILES", "SCHEMA_VERSION", "AuditReport", "check_out_dir"]

REPORT_FILES = ("report.html", "report.json")
"""The files of a report folder. :meth:`AuditReport.save` replaces a folder that holds
nothing else; it refuses one that holds other files rather than delete them."""

SCHEMA_VERSION = "1.3"
"""1.1: checks carry ``status`` (pass / fail / inconclusive / not_evaluable) and ``rule``;
figures carry intervals; private Data summaries list every declared category (``shares``).
1.2: checks carry ``vacuous`` (a pass that a model without skill makes empty); ``meta`` carries
``no_skill``, ``column_flags`` (columns screened out of the model) and ``group``.
1.3: checks carry ``hint`` (what would make a not-evaluable check evaluable); ``meta`` carries
``screening`` (whether the column screening ran, on which rows); the report lists
``not_in_report`` (sections and checks left out, and why)."""


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
    timings : dict of str to float
        Wall-clock seconds of the steps of a Dask run, for the terminal only: never
        saved (in private mode they depend on the rows).

    See Also
    --------
    trustlab.audit.Audit.run : builds it.
    """

    meta: dict[str, Any]
    results: list[SectionResult]
    sections: Sequence[Section] = field(repr=False)
    ledger: list[LedgerEntry] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

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
        """Every figure of the report as JSON-ready types (schema version :data:`SCHEMA_VERSION`).

        Returns
        -------
        dict
            ``schema_version``, ``meta`` and ``sections`` (each section's result keyed by
            name), ``not_in_report`` (what the report leaves out and why:
            :func:`~trustlab.audit.summary.not_in_report`), plus ``privacy_ledger`` (total
            and spent epsilon, every release) in private mode. Tuples and arrays become
            lists, keys become strings, and NaN and infinities become None.
        """
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "meta": self.meta,
            "sections": {r.name: r.to_dict() for r in self.results},
            "not_in_report": not_in_report(self.results, self.meta),
        }
        if self.meta.get("private"):
            out["privacy_ledger"] = {
                "total_epsilon": self.meta["epsilon"],
                "spent_epsilon": self.epsilon_spent,
                "total_delta": self.meta.get("delta", 0.0),
                "spent_delta": float(sum(e.delta for e in self.ledger)),
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
        """The report as a JSON string.

        Parameters
        ----------
        indent : int, default 2
            Spaces per nesting level (as :func:`json.dumps`).

        Returns
        -------
        str
            :meth:`to_dict` as strict JSON (no NaN or Infinity).
        """
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def to_html(self) -> str:
        """The report as one self-contained HTML page (inline CSS and SVG, no network).

        Each section renders its own result; a summary of every check and the privacy
        ledger come with it.

        Returns
        -------
        str
            The HTML document.
        """
        files = resources.files("trustlab.audit").joinpath("templates")
        env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
        template = env.from_string(files.joinpath("report.html").read_text())
        by_name = {s.name: s for s in self.sections}
        rendered = [  # a section that computed nothing is one entry of the "not in this report" line
            {"name": r.name, "title": r.title, "body": Markup(by_name[r.name].render(r))}
            for r in self.results
            if not collapsed(r)
        ]
        all_checks = [c for r in self.results for c in r.checks]
        counts = {s: sum(c.status == s for c in all_checks) for s in STATUSES}
        counts["vacuous"] = sum(c.vacuous for c in all_checks)
        missing = not_in_report(self.results, self.meta)
        summary = summary_html(
            findings(self.results, self.meta), self.results, not_in_report_line(missing), missing
        )
        with_delta = any(e.delta > 0 for e in self.ledger)
        ledger_html = table(
            ["#", "budget", "release", "mechanism", "epsilon"] + ["delta"] * with_delta,
            [
                [i + 1, e.section, e.description, e.mechanism, f"{e.epsilon:.6g}"]
                + [f"{e.delta:.3g}"] * with_delta
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
        """Write ``report.html`` and ``report.json`` into the folder ``out_dir``, atomically.

        Both files are rendered in memory first, written into a new hidden folder next
        to ``out_dir``, and that folder is renamed to ``out_dir`` only once complete. An
        existing ``out_dir`` that holds a previous report (nothing but
        :data:`REPORT_FILES`) is renamed aside first and deleted after the new one is in
        place, so ``out_dir`` always holds one whole report, old or new, or (for the
        instant between the two renames, or when the first run fails) nothing. On any
        failure the temporary folder is removed and the old report is left as it was.
        A process killed mid-write can leave a hidden ``.NAME.tmp-*`` folder beside
        ``out_dir``; nothing else.

        Parameters
        ----------
        out_dir : str or Path
            The report folder; created (with its parents) when missing.

        Returns
        -------
        (Path, Path)
            The paths of ``report.html`` and ``report.json``.

        Raises
        ------
        ParameterError
            With ``argument="out_dir"`` when ``out_dir`` is a file, holds files other
            than a report, or cannot be written (permissions, a file in its path, a full
            disk); nothing is changed then.
        """
        out = Path(out_dir)
        if not str(out_dir).strip():
            raise ParameterError("out_dir must be a folder path, got an empty string.", argument="out_dir")
        contents = {REPORT_FILES[0]: self.to_html(), REPORT_FILES[1]: self.to_json()}
        _replace_folder(out, contents)
        return out / REPORT_FILES[0], out / REPORT_FILES[1]


def check_out_dir(out_dir: str | Path) -> None:
    """Refuse, before any work, an ``out_dir`` that :meth:`AuditReport.save` could not use.

    Parameters
    ----------
    out_dir : str or Path
        The folder the report will be saved to (it may not exist yet).

    Raises
    ------
    ParameterError
        With ``argument="out_dir"``: ``out_dir`` is a file or a folder holding other
        files, or the nearest existing folder on its path is not a writable folder.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     check_out_dir(Path(tmp) / "report")  # a new folder: accepted
    ...     _ = (Path(tmp) / "notes.txt").write_text("x")
    ...     check_out_dir(Path(tmp) / "notes.txt")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: out_dir '...notes.txt' exists and is not a folder; ...
    """
    out = Path(out_dir)
    if not str(out_dir).strip():
        raise ParameterError("out_dir must be a folder path, got an empty string.", argument="out_dir")
    _check_replaceable(out)
    ancestor = out.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ParameterError(
            f"out_dir {str(out)!r} cannot be created: {str(ancestor)!r} is a file, not a folder.",
            argument="out_dir",
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ParameterError(
            f"out_dir {str(out)!r} cannot be written: no write permission in {str(ancestor)!r}; "
            "choose a folder you can write to.",
            argument="out_dir",
        )


def _unwritable(out: Path, exc: OSError) -> ParameterError:
    why = exc.strerror or type(exc).__name__
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(out) else ""
    return ParameterError(
        f"out_dir {str(out)!r} cannot be written: {why}{where}; choose a folder you can write to.",
        argument="out_dir",
    )


def _check_replaceable(out: Path) -> bool:
    """Whether ``out`` exists (as a folder of a previous report); raise if it may not be replaced."""
    if not out.exists() and not out.is_symlink():
        return False
    if not out.is_dir() or out.is_symlink():
        raise ParameterError(
            f"out_dir {str(out)!r} exists and is not a folder; give the path of a new folder "
            "(or of a previous report's folder, which is replaced).",
            argument="out_dir",
        )
    if not os.access(out, os.W_OK | os.X_OK):
        raise ParameterError(
            f"out_dir {str(out)!r} is read-only; trustlab does not replace a folder you protected: "
            "make it writable (chmod u+w) or choose another folder.",
            argument="out_dir",
        )
    try:
        others = sorted(p.name for p in out.iterdir() if p.name not in REPORT_FILES)
    except OSError as exc:
        raise _unwritable(out, exc) from None
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise ParameterError(
            f"out_dir {str(out)!r} holds files that are not a trustlab report ({shown}); the report "
            "replaces its whole folder, so give a new or empty folder.",
            argument="out_dir",
        )
    return True


def _new_sibling(out: Path, tag: str) -> Path:
    """A new empty folder next to ``out`` (created with the umask's permissions)."""
    for _ in range(100):
        path = out.parent / f".{out.name}.{tag}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free temporary name next to {out}")


def _write_files(folder: Path, contents: Mapping[str, str]) -> None:
    for name, text in contents.items():
        with open(folder / name, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())


def _replace_folder(out: Path, contents: Mapping[str, str]) -> None:
    """Make ``out`` a folder holding exactly ``contents`` (name -> text), atomically."""
    exists = _check_replaceable(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = _new_sibling(out, "tmp")
    except OSError as exc:
        raise _unwritable(out, exc) from None
    old: Path | None = None
    try:
        _write_files(tmp, contents)
        if exists:  # the new folder keeps the permissions the user gave the old one
            os.chmod(tmp, stat.S_IMODE(out.stat().st_mode))
            old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
            os.rename(out, old)
        try:
            os.rename(tmp, out)
        except BaseException:
            if old is not None:
                os.rename(old, out)
                old = None
            raise
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _unwritable(out, exc) from None
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
