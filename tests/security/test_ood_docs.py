"""The runnable example of docs/security/ood.md runs and prints one line per detector."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "security" / "ood.md"


def test_ood_docs_example(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    before = torch.get_num_threads()
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert blocks
    namespace: dict = {"__name__": "docs_example"}
    try:
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)
    finally:
        torch.set_num_threads(before)
    out = capsys.readouterr().out
    for name in ("SplitIntegrateDetector", "GAIADetector", "MSPDetector"):
        assert f"{name}: AUROC 0." in out
    auroc = {n: float(a) for n, a in re.findall(r"(\w+): AUROC ([0-9.]+)", out)}
    assert auroc["SplitIntegrateDetector"] > 0.7
