"""Every catalog row marked works or partial names claim tests that exist and are marked ``claims``.

docs/catalog.md's "Claim tests" section lists, per row id, the tests (``tests/...py::name``) that
reproduce the paper's headline property. This file parses the catalog's status tables and that
section, and reads each named test file's syntax tree for the ``@pytest.mark.claims`` marker (on
the function, its class, or the module's ``pytestmark``), so ``python -m pytest -m claims`` runs a
claim for every working row. Parsing only: it takes milliseconds.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "docs" / "catalog.md"
ROW_ID = re.compile(r"^\d{3}-\d{2}$")
TEST_REF = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
CLAIMED = ("works", "partial")
SECTION = "## Claim tests"


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` inside a cell is not a separator)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def status_rows(text: str) -> list[tuple[str, str]]:
    """(row id, status) from every table of the catalog whose header has a ``status`` column.

    An id can appear twice (003-07: the ranking metric works, the jailbreak framework does not).
    """
    rows: list[tuple[str, str]] = []
    column = None
    for line in text.splitlines():
        if not line.startswith("|"):
            column = None
            continue
        cells = _cells(line)
        if cells and cells[0] == "id":
            column = cells.index("status") if "status" in cells else None
        elif column is not None and ROW_ID.match(cells[0]) and len(cells) > column:
            rows.append((cells[0], cells[column]))
    return rows


def claim_refs(text: str) -> dict[str, list[tuple[str, str]]]:
    """Row id -> [(file, test name)] from the catalog's "Claim tests" section."""
    assert SECTION in text, f"docs/catalog.md has no {SECTION!r} section"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    refs: dict[str, list[tuple[str, str]]] = {}
    for line in section.splitlines():
        cells = _cells(line) if line.startswith("|") else []
        if cells and ROW_ID.match(cells[0]):
            refs.setdefault(cells[0], []).extend(TEST_REF.findall(" ".join(cells[1:])))
    return refs


def _marks(decorators: list[ast.expr]) -> set[str]:
    names = set()
    for d in decorators:
        text = ast.unparse(d.func if isinstance(d, ast.Call) else d)
        if text.startswith("pytest.mark."):
            names.add(text.split(".")[2])
    return names


@cache
def marked_tests(path: str) -> dict[str, set[str]]:
    """Test function name -> its pytest marks (own, class and module), read from the file's syntax tree."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    module: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            value = node.value
            module |= _marks(list(value.elts) if isinstance(value, ast.List | ast.Tuple) else [value])
    tests: dict[str, set[str]] = {}
    for node in tree.body:
        inherited, body = (
            (_marks(node.decorator_list), node.body) if isinstance(node, ast.ClassDef) else (set(), [node])
        )
        for f in body:
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name.startswith("test"):
                tests[f.name] = _marks(f.decorator_list) | inherited | module
    return tests


def problems(text: str) -> list[str]:
    """Every way the catalog's claim tests fall short; empty when each claimed row is covered."""
    claimed = {row: status for row, status in status_rows(text) if status in CLAIMED}
    refs = claim_refs(text)
    found = []
    for row, status in sorted(claimed.items()):
        named = refs.get(row, [])
        if not named:
            found.append(f"{row} ({status}) names no claim test in the {SECTION!r} section")
            continue
        fast = 0
        for path, name in named:
            if not (ROOT / path).is_file():
                found.append(f"{row}: {path} does not exist")
                continue
            marks = marked_tests(path).get(name)
            if marks is None:
                found.append(f"{row}: {path}::{name} does not exist")
            elif "claims" not in marks:
                found.append(f"{row}: {path}::{name} is not marked @pytest.mark.claims")
            else:
                fast += "slow" not in marks
        if fast == 0:
            found.append(f"{row}: no named claim test runs in the fast profile (all are slow)")
    for row in sorted(set(refs) - set(claimed)):
        found.append(f"{row} is listed under {SECTION!r} but no catalog row {row} is marked works or partial")
    return found


def test_every_working_row_names_existing_claim_tests() -> None:
    text = CATALOG.read_text(encoding="utf-8")
    assert sum(s in CLAIMED for _, s in status_rows(text)) >= 30  # the parser found the tables
    assert problems(text) == []


def test_the_check_catches_a_missing_marker_and_a_missing_row() -> None:
    path, name = "tests/test_catalog_claims.py", "test_the_check_catches_a_missing_marker_and_a_missing_row"
    catalog = (
        "| id | method | status |\n|---|---|---|\n| 123-45 | m | works |\n| 123-46 | n | partial |\n"
        "| 123-47 | o | not yet |\n\n" + SECTION + "\n| id | tests |\n|---|---|\n"
        f"| 123-45 | {path}::{name} |\n| 123-47 | {path}::nowhere |\n"
    )
    found = problems(catalog)
    assert any("123-45" in p and "not marked" in p for p in found)
    assert any(p.startswith("123-46") and "names no claim test" in p for p in found)
    assert any(p.startswith("123-47") and "no catalog row" in p for p in found)


@pytest.mark.parametrize("line", ["| 001-02 | a \\| b | works |", "|001-02|a|works|"])
def test_cells_split_on_unescaped_bars_only(line: str) -> None:
    assert _cells(line)[0] == "001-02" and _cells(line)[-1] == "works" and len(_cells(line)) == 3
