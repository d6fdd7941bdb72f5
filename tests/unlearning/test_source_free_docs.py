"""The runnable example of docs/unlearning/source-free.md runs and prints what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "unlearning" / "source-free.md"


def test_source_free_example(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) == 1
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        exec(compile(blocks[0], str(PAGE), "exec"), {"__name__": "docs_example"})
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    printed = re.search(r"```text\n(.*?)```", PAGE.read_text(), re.S)
    assert printed is not None
    for line in printed.group(1).strip().splitlines():
        assert line.split("[")[0] in out  # the page quotes the output (lists elided)
