"""The runnable examples of docs/theory/*.md run (each ```python block, in order, per page)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "theory"
PAGES = sorted(DOCS.glob("*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_example_runs(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    assert blocks, f"{page.name} has no python example"
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)
    assert capsys.readouterr().out.strip(), "the example prints its results"
