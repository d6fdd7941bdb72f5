"""The runnable examples of docs/lm-*.md run (each ```python block, in order, per page)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra torch threads only contend

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(DOCS.glob("lm-*.md"))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_example_runs(page: Path, run_docs_example) -> None:
    run_docs_example(page)
