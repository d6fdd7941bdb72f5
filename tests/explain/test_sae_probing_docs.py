"""The runnable example of docs/explain/sae-probing.md runs and prints what the page says."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "sae-probing.md"


def test_example_runs(docs_printout) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on shared cores
    try:
        docs_printout(PAGE)
    finally:
        torch.set_num_threads(threads)
