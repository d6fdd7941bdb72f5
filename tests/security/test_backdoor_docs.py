"""The runnable examples of docs/security/backdoor.md and adversarial.md run (each python block)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

DOCS = Path(__file__).resolve().parents[2] / "docs" / "security"
PAGES = [DOCS / "backdoor.md", DOCS / "adversarial.md"]


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# backdoor.md's example is the fast TSC claim's own scenario (test_backdoor.py, the same seed and
# sizes: ~20 s CPU), so it runs in the slow profile only
@pytest.mark.parametrize(
    "page",
    [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name == "backdoor.md" else []) for p in PAGES],
)
def test_example_runs(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    assert blocks, f"{page.name} has no python example"
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)
    out = capsys.readouterr().out
    assert out.strip(), "the example prints its results"
    if page.name == "backdoor.md":
        # the page's claim, on the page's own run: the backdoor is gone, clean accuracy kept
        asr = [float(x) for x in re.findall(r"attack success rate ([0-9.]+)", out)]
        acc = [float(x) for x in re.findall(r"clean accuracy ([0-9.]+)", out)]
        assert asr[0] >= 0.9 and asr[1] <= 0.15 and acc[1] >= acc[0] - 0.05
