"""The runnable examples of docs/efficiency/*.md and docs/vision-lab.md run (```python blocks, in order)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = [*sorted((DOCS / "efficiency").glob("*.md")), DOCS / "vision-lab.md"]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_example_runs(page: Path, run_docs_example) -> None:
    run_docs_example(page)
