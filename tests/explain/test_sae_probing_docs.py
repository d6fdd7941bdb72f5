"""The runnable example of docs/explain/sae-probing.md runs and prints what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "sae-probing.md"


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = PAGE.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    expected = re.findall(r"prints\n\n```text\n(.*?)```", text, re.S)
    assert blocks and expected
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on shared cores
    try:
        exec(compile(blocks[0], str(PAGE), "exec"), {"__name__": "docs_example"})
    finally:
        torch.set_num_threads(threads)
    assert capsys.readouterr().out == expected[0]
