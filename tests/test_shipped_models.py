"""The lab models shipped in ``trustlab/_models``: current recipes', read as is, equal to a fresh training.

Each folder is named by its recipe's digest (``trustlab._cache.trained_dir``): a changed recipe
no longer finds its shipped folder and trains into the cache instead, so a stale folder would
only waste space; the fast test catches one. The slow test retrains every recipe into a temporary
cache and compares the weight files byte for byte (training is deterministic for a seed).
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest

from trustlab._cache import spec_digest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # the shipped files were trained on one thread

SHIPPED = Path(str(importlib.resources.files("trustlab").joinpath("_models")))


def _current() -> dict[str, object]:
    """Folder name -> the loader that writes it (given ``cache_dir``)."""
    from trustlab.lm import massive
    from trustlab.security import _complication_lab as comp
    from trustlab.security import _steering_lab as steer
    from trustlab.security import _steering_tasks as tasks
    from trustlab.security import safety_data

    return {
        f"backdoor-complications-{spec_digest(comp._SPEC)}": comp.load_pretrained_lab,
        f"backdoor-complications-runs-{spec_digest([comp._SPEC, comp._RUNS])}": comp.load_complication_lab,
        f"massive-llama-{spec_digest({**massive._LAB, 'arch': 'llama'})}": massive.load_massive_lab,
        f"safety-instructions-{spec_digest(safety_data._LAB_SPEC)}": safety_data.load_instruction_lab,
        f"steering-transfer-{spec_digest(steer._SPEC)}": steer.load_transfer_lab,
        f"steering-backdoor-{spec_digest(steer._BACKDOOR)}": steer.load_backdoor_lab,
        f"steering-tasks-{spec_digest(tasks._SPEC)}": tasks.load_trigger_lab,
    }


def test_every_shipped_folder_is_a_current_recipe():
    shipped = {p.name for p in SHIPPED.iterdir() if p.is_dir()}
    assert shipped == set(_current()), "refresh trustlab/_models: copy the retrained folders in"


def test_shipped_models_are_read_without_training(tmp_path, monkeypatch):
    monkeypatch.setenv("TRUSTLAB_CACHE", str(tmp_path))
    for loader in _current().values():
        loader()  # type: ignore[operator]
    assert not any(tmp_path.iterdir()), "a shipped recipe was trained into the cache"


@pytest.mark.slow  # trains every shipped lab model from scratch (about 90 s of CPU)
def test_shipped_models_equal_a_fresh_training(tmp_path):
    for loader in _current().values():
        loader(cache_dir=tmp_path)  # type: ignore[operator]
    files = sorted(p.relative_to(SHIPPED) for p in SHIPPED.rglob("*") if p.suffix in (".safetensors", ".npz"))
    assert len(files) >= 9
    for rel in files:
        assert (tmp_path / rel).read_bytes() == (SHIPPED / rel).read_bytes(), rel
