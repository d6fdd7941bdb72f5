"""The runnable example of docs/explain/hierarchy.md runs and prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "hierarchy.md"


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert blocks
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    assert "dendrogram purity: 0.7" in capsys.readouterr().out
