"""Where models trained on first use are kept, and how a finished one is published.

The labs (language models, diffusion, the security and unlearning studies) train their small
models once and keep them under ``$TRUSTLAB_CACHE/<area>`` or ``~/.cache/trustlab/<area>``, in a
folder named by a digest of the recipe, so a changed recipe never reads a stale model. A model is
written into a private staging folder and moved into place in one rename, so a reader never sees
half a model and two processes training at once (pytest-xdist workers) do not clash.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "cache_root",
    "machine_fingerprint",
    "publish",
    "save_npz",
    "spec_digest",
    "staging_dir",
    "trained_dir",
]


def cache_root(cache_dir: str | Path | None, area: str) -> Path:
    """The cache folder of one area (``"lm"``, ``"vision"``, ...).

    Parameters
    ----------
    cache_dir : str, Path or None
        The caller's choice; None means ``$TRUSTLAB_CACHE/<area>`` or ``~/.cache/trustlab/<area>``.
    area : str
        The lab's sub-folder.

    Returns
    -------
    Path
    """
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("TRUSTLAB_CACHE")
    return Path(env) / area if env else Path.home() / ".cache" / "trustlab" / area


def trained_dir(cache_dir: str | Path | None, area: str, name: str) -> Path:
    """The folder of the models of recipe ``name``: shipped with trustlab, else in the cache.

    The default recipes of the tests' and examples' lab models ship in ``trustlab/_models/<name>``
    (their training is deterministic on one torch thread and one machine: a fresh training on a
    machine of the same :func:`machine_fingerprint` writes the same files, and on any machine a
    model that behaves like the shipped one, tests/test_shipped_models.py); any other recipe,
    or an explicit ``cache_dir``, lives in :func:`cache_root`, where it is trained on first use.

    Parameters
    ----------
    cache_dir : str, Path or None
        The caller's choice (None: shipped if there, else the default cache).
    area : str
        The lab's cache sub-folder.
    name : str
        The recipe's folder name (its digest included).

    Returns
    -------
    Path
    """
    if cache_dir is None:
        shipped = Path(str(resources.files("trustlab").joinpath("_models", name)))
        if shipped.is_dir():
            return shipped
    return cache_root(cache_dir, area) / name


def spec_digest(spec: Any) -> str:
    """The first 12 hex digits of the SHA-256 of a JSON-serialisable recipe (keys sorted)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def staging_dir(path: Path) -> Path:
    """The staging folder of the calling process for ``path`` (a hidden sibling)."""
    return path.parent / f".{path.name}-{os.getpid()}"


def publish(tmp: Path, path: Path) -> None:
    """Move the finished staging folder ``tmp`` to ``path`` in one rename.

    Where another process published ``path`` first, its copy is kept and ``tmp`` is removed (the
    caller keeps its own in-memory model, trained from the same recipe).
    """
    try:
        os.replace(tmp, path)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def save_npz(path: Path, arrays: dict[str, Any]) -> None:
    """Write ``arrays`` to the compressed ``.npz`` file ``path`` in one rename (folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)


def machine_fingerprint() -> dict[str, Any]:
    """What decides a training's float results on this machine, for the shipped models' provenance.

    Training is deterministic for a seed on one machine, but the CPU kernels torch picks (AVX2 or
    AVX-512, oneDNN / MKL paths), the library versions and the thread count change the rounding,
    and training amplifies it. A shipped folder's ``provenance.json`` lists the fingerprints of
    the machines on which a fresh training was measured byte-equal to it.

    Returns
    -------
    dict
        ``torch``, ``transformers`` and ``numpy`` versions, ``cpu_capability``
        (``torch.backends.cpu.get_cpu_capability()``), ``cpu`` (the processor's model name),
        ``machine`` (the architecture) and ``torch_threads``.
    """
    import platform

    import torch
    import transformers

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu": cpu,
        "machine": platform.machine(),
        "torch_threads": torch.get_num_threads(),
    }
