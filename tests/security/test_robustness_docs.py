"""The runnable example of docs/security/robustness.md runs and prints what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "security" / "robustness.md"


def test_robustness_docs_example(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert blocks
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    assert "most unlike rows: [200, 201, 202, 203, 204]" in out
    assert "gradient search (analytic, from coef_)" in out
    share = float(re.search(r"percentile: ([0-9.]+)", out).group(1))
    assert 0.02 < share < 0.12
