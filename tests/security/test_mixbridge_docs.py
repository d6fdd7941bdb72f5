"""The runnable example of docs/security/mixbridge.md runs and shows the page's claim on its own run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "security" / "mixbridge.md"


# the page's example samples the shipped models as the fast claim test does (~2 s CPU more): slow profile
@pytest.mark.slow
def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert blocks, "mixbridge.md has no python example"
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    benign = [float(x) for x in re.findall(r"benign MSE ([0-9.]+)", out)]
    asr = [[float(a) for a in line.split(", ")] for line in re.findall(r"per trigger ([0-9., ]+)", out)]
    assert len(benign) == 2 and len(asr) == 2 and len(asr[0]) == 3
    # 60 images per trigger: MixBridge's mean ASR over the 180 triggered outputs beats the single
    # bridge's (standard error of the difference <= sqrt(2 * 0.25 / 180) = 0.053; margin 2 of them)
    assert sum(asr[1]) / 3 - sum(asr[0]) / 3 > 2 * 0.053
    assert benign[1] <= benign[0]
    # FID-like on the tiny-CLIP features: the single bridge's benign outputs sit about as far from
    # the clean digits as the pooled inputs (2.5); MixBridge's near the sampling floor (0.3 at n = 150)
    fid = [float(x) for x in re.findall(r"FID-like ([0-9.]+)", out)]
    assert len(fid) == 2 and fid[1] * 3 < fid[0]
