"""The runnable examples of docs/unlearning/knn-memory.md and certified.md run and print."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "unlearning"


def _run(page: str) -> None:
    path = DOCS / page
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), re.S)
    assert blocks
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(path), "exec"), namespace)


def test_knn_memory_example(capsys: pytest.CaptureFixture[str]) -> None:
    _run("knn-memory.md")
    out = capsys.readouterr().out
    assert "recall of 3 after removal: 0.0" in out and "accuracy: 0.9" in out


def test_certified_example(capsys: pytest.CaptureFixture[str]) -> None:
    _run("certified.md")
    out = capsys.readouterr().out
    assert "epsilon 7.08" in out and "retrained" in out
