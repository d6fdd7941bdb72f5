"""The lab models shipped in ``trustlab/_models``: current recipes', read as is, and of provenance.

Each folder is named by its recipe's digest (``trustlab._cache.trained_dir``): a changed recipe
no longer finds its shipped folder and trains into the cache instead, so a stale folder would
only waste space; the fast test catches one.

Provenance (slow: retrains every recipe into a temporary cache, about 3 min of CPU). Training is
deterministic for a seed on one machine, but the CPU kernels torch picks (AVX2 or AVX-512,
oneDNN / MKL paths) round differently, and training amplifies it: on an AVX-512 AMD EPYC, 14 of
the 18 weight files differed from the shipped ones (trained elsewhere). So:

1. **Bytes**, where the machine matches: each folder's ``provenance.json`` lists the
   :func:`~trustlab._cache.machine_fingerprint` of the machines on which a fresh training was
   measured byte-equal; on such a machine the files must be equal byte for byte, elsewhere the
   test is skipped, naming both fingerprints.
2. **Weights**, on any machine: every file's relative L2 distance to the fresh training's is at
   most :data:`MAX_DISTANCE`. A fresh training starts from the same initialisation and data
   order, so it stays near; a model of another seed does not.
3. **Behaviour**, on any machine: on a held-out probe set per recipe (seed :data:`PROBE_SEED`,
   which no recipe trains on), the shipped and the fresh model predict the same argmax
   (next token, class or safety label) at a share of at least :data:`MIN_AGREEMENT`, and the
   recipe's own figures (accuracy, attack success, trigger flip rate, held-out loss) are within
   :data:`MAX_GAP`.

Tolerances were measured on 2026-12-06 (shipped vs fresh on an AVX-512 AMD EPYC, one thread),
and against models trained with other seeds; see the comments at :data:`MAX_DISTANCE`,
:data:`MIN_AGREEMENT`, :data:`MAX_GAP` and :data:`CHAOTIC` (policy: docs/lm-lab.md).
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trustlab._cache import machine_fingerprint, spec_digest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # the shipped files were trained on one thread

SHIPPED = Path(str(importlib.resources.files("trustlab").joinpath("_models")))
WEIGHTS = (".safetensors", ".npz")
PROBE_SEED = 9001

# Relative L2 distance ||fresh - shipped|| / ||shipped|| of one weight file. Measured shipped vs a
# fresh training on another machine: 0 (4 files byte-equal), <= 0.0075 for 8 files, 0.11 (safety
# head), 0.12-0.19 (the plain-backdoor chain), 0.26 (massive Llama), 0.49 (steering-transfer
# target). Another seed: 0.70 (safety model, data-order seed only), 0.78 to 1.36 (init seeds).
MAX_DISTANCE = 0.6
# Share of equal argmax predictions on the probe set. Measured shipped vs fresh: 1.0 for 13 of
# 18 models, 0.999, 0.9925 (safety head), 0.983 (steering-transfer target); another seed: 0.08
# (backdoor-complications GPT-2), 0.82 (safety model), 0.93 (safety head), 0.949 and 0.89
# (steering-backdoor source, target), 1.0 (massive Llama: the task is solved exactly, the weights
# catch it). Weights with 2% Gaussian noise (distance 0.015): 0.93 (safety model).
MIN_AGREEMENT = 0.95
# The recipes' figures, |shipped - fresh|. Measured: <= 0.0025 for all but the two chaotic models
# below; another seed: accuracy -0.058 (safety head), loss +0.075 nats (backdoor GPT-2).
MAX_GAP = {"accuracy": 0.05, "attack": 0.05, "flip": 0.1, "nll": 0.05}
# The downstream classifiers of the plain-backdoored PTLM are chaotic: a fresh training on
# another machine agreed with the shipped one on 0.81 (head-only) and 0.33 (full fine-tuning) of
# the probes, topic accuracy 0.28 vs 0.24 and 0.30 vs 0.51, with trigger flip rates 0.455 vs
# 0.5075 and 0.57 vs 0.53 (fresh vs shipped). What the recipe is for is the flip rate (clean
# PTLM: 0.19 and 0.0), so only it is compared there (a swapped-in clean or reduced classifier
# differs by 0.20 to 0.53).
CHAOTIC = {"runs/downstream-head-plain": ("flip",), "runs/downstream-full-plain": ("flip",)}


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


def _arrays(path: Path) -> dict[str, np.ndarray]:
    if path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        return load_file(str(path))
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def relative_distance(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """``||a - b|| / ||b||`` over all tensors of two state dicts with the same keys."""
    assert a.keys() == b.keys()
    num = sum(float(((a[k].astype(np.float64) - b[k]) ** 2).sum()) for k in b)
    den = sum(float((b[k].astype(np.float64) ** 2).sum()) for k in b)
    return (num / den) ** 0.5


def _lm_probe(model: Any, data: Any, n: int = 400) -> tuple[np.ndarray, dict[str, float]]:
    """Argmax next tokens at the loss positions of ``n`` sequences, their accuracy and mean NLL."""
    import torch

    tok = torch.as_tensor(data.tokens[:n])
    mask = torch.as_tensor(data.loss_mask[:n])[:, 1:]
    with torch.no_grad():
        logits = model(input_ids=tok).logits[:, :-1][mask]
    target, pred = tok[:, 1:][mask], logits.argmax(-1)
    nll = float(torch.nn.functional.cross_entropy(logits, target))
    return pred.numpy(), {"accuracy": float((pred == target).float().mean()), "nll": nll}


def _shuffled(data: Any, n: int) -> Any:
    from trustlab.lm import TokenData

    idx = np.random.default_rng(0).permutation(len(data.tokens))[:n]
    return TokenData(data.tokens[idx], data.loss_mask[idx], data.vocab_size, {})


def _safety_probe(model: Any) -> tuple[np.ndarray, dict[str, float]]:
    from trustlab.security import safety_data as sd

    return _lm_probe(model, sd.instruction_lm_data(300, 100, seed=PROBE_SEED))


def probes(cache_dir: Path | None) -> dict[str, tuple[np.ndarray, dict[str, float]]]:
    """Every shipped model's predictions and figures on held-out probes (None: the shipped ones)."""
    from trustlab.lm import TokenData, massive
    from trustlab.security import _complication_lab as comp
    from trustlab.security import _steering_lab as steer
    from trustlab.security import _steering_tasks as tasks
    from trustlab.security import safety_data as sd
    from trustlab.security.backdoor_complications import insert_trigger

    out = {}
    X, _ = comp.lab_texts(400, seed=PROBE_SEED)
    mask = np.ones(X.shape, dtype=bool)
    mask[:, 0] = False
    out["backdoor-complications"] = _lm_probe(
        comp.load_pretrained_lab(cache_dir=cache_dir), TokenData(X, mask, comp.VOCAB, {})
    )
    lab = comp.load_complication_lab(cache_dir=cache_dir)
    X, y = comp.task_data("sentiment", 400, seed=PROBE_SEED)
    Xt = insert_trigger(X, comp.TRIGGER, position=1)
    for name in ("plain", "reduced"):  # the attacker's classifiers: clean accuracy, attack success
        a, b = lab[name].predict(X), lab[name].predict(Xt)
        out[f"runs/{name}"] = (
            np.concatenate([a, b]),
            {"accuracy": float((a == y).mean()), "attack": float((b == 0).mean())},
        )
    X, y = comp.task_data("topic", 400, seed=PROBE_SEED)
    Xt = insert_trigger(X, comp.TRIGGER, position=1)
    for ft, clfs in lab["downstream"].items():  # the user's: topic accuracy, trigger flip rate
        for name, clf in clfs.items():
            a, b = clf.predict(X), clf.predict(Xt)
            figures = {"accuracy": float((a == y).mean()), "flip": float((a != b).mean())}
            out[f"runs/downstream-{ft}-{name}"] = (np.concatenate([a, b]), figures)
    d = massive._LAB["data"]
    data = massive.contextual_parametric_task(
        400, n_symbols=d["n_symbols"], length=d["length"], seed=PROBE_SEED
    )
    out["massive-llama"] = _lm_probe(massive.load_massive_lab(cache_dir=cache_dir), data)
    model, head = sd.load_instruction_lab(cache_dir=cache_dir)
    out["safety/model"] = _safety_probe(model)
    x, key_mask, y = sd.head_training_windows(sd.instruction_set(200, seed=PROBE_SEED), seed=PROBE_SEED)
    p = head.predict(x, key_mask=key_mask)
    out["safety/head"] = (p, {"accuracy": float((p == y).mean())})
    _, target, jailbroken = steer.load_transfer_lab(cache_dir=cache_dir)
    out["transfer/target"] = _lm_probe(target, sd.instruction_lm_data(300, 100, seed=PROBE_SEED))
    out["transfer/jailbroken"] = _lm_probe(jailbroken, steer._jailbreak_data(400, PROBE_SEED))
    pairs = {
        "backdoor": (steer.load_backdoor_lab, lambda: steer._backdoor_data(200, 100, 400, PROBE_SEED)),
        "tasks": (tasks.load_trigger_lab, lambda: tasks._task_data(200, 100, 400, 400, PROBE_SEED)),
    }
    for key, (load, make) in pairs.items():
        source, target = load(cache_dir=cache_dir)
        data = _shuffled(make(), 400)
        out[f"{key}/source"], out[f"{key}/target"] = _lm_probe(source, data), _lm_probe(target, data)
    return out


def behaviour_failures(fresh: dict, shipped: dict) -> list[str]:
    """The probes on which ``shipped`` does not behave like ``fresh`` (empty: all agree)."""
    failures = []
    for key, (pred, figures) in shipped.items():
        fresh_pred, fresh_figures = fresh[key]
        agreement = float((pred == fresh_pred).mean())
        if key not in CHAOTIC and agreement < MIN_AGREEMENT:
            failures.append(f"{key}: argmax agreement {agreement:.4f} < {MIN_AGREEMENT}")
        for name in CHAOTIC.get(key, figures):
            gap = abs(figures[name] - fresh_figures[name])
            if gap > MAX_GAP[name]:
                failures.append(f"{key}: {name} {figures[name]:.4f} vs fresh {fresh_figures[name]:.4f}")
    return failures


def _weight_files() -> list[Path]:
    return sorted(p.relative_to(SHIPPED) for p in SHIPPED.rglob("*") if p.suffix in WEIGHTS)


def test_every_shipped_folder_is_a_current_recipe():
    shipped = {p.name for p in SHIPPED.iterdir() if p.is_dir()}
    assert shipped == set(_current()), "refresh trustlab/_models: copy the retrained folders in"


def test_shipped_models_are_read_without_training(tmp_path, monkeypatch):
    monkeypatch.setenv("TRUSTLAB_CACHE", str(tmp_path))
    for loader in _current().values():
        loader()  # type: ignore[operator]
    assert not any(tmp_path.iterdir()), "a shipped recipe was trained into the cache"


def test_every_shipped_folder_records_its_provenance():
    keys = set(machine_fingerprint())
    for folder in _current():
        record = json.loads((SHIPPED / folder / "provenance.json").read_text())
        assert record["note"], folder
        assert all(set(fp) == keys for fp in record["reproduced_on"]), folder


def test_the_checks_fail_on_a_perturbed_model():
    """2% Gaussian noise on the shipped safety model's weights fails the behaviour check."""
    import torch

    from trustlab.security import safety_data as sd

    model, _ = sd.load_instruction_lab()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    reference = {"safety/model": _safety_probe(model)}
    assert behaviour_failures(reference, {"safety/model": _safety_probe(model)}) == []
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() > 1:
                p.add_(torch.randn(p.shape, generator=g) * p.std() * 0.02)
    assert behaviour_failures(reference, {"safety/model": _safety_probe(model)}) != []
    noisy = {k: v.numpy() for k, v in model.state_dict().items()}
    assert relative_distance(noisy, state) < MAX_DISTANCE  # the weights alone would let it through


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """Every shipped recipe trained from scratch into a temporary cache (about 3 min of CPU)."""
    root = tmp_path_factory.mktemp("fresh")
    for loader in _current().values():
        loader(cache_dir=root)  # type: ignore[operator]
    return root


@pytest.mark.slow
@pytest.mark.parametrize("folder", sorted(_current()))
def test_shipped_models_equal_a_fresh_training_on_their_machine(folder, request):
    here = machine_fingerprint()
    record = json.loads((SHIPPED / folder / "provenance.json").read_text())
    if here not in record["reproduced_on"]:
        recorded = record["reproduced_on"] or "no recorded machine"
        pytest.skip(f"{folder}: byte equality holds on {recorded}; here {here}")
    root = request.getfixturevalue("fresh")
    files = [rel for rel in _weight_files() if rel.parts[0] == folder]
    assert files
    for rel in files:
        assert (root / rel).read_bytes() == (SHIPPED / rel).read_bytes(), rel


@pytest.mark.slow
def test_shipped_weights_are_near_a_fresh_training(fresh):
    files = _weight_files()
    assert len(files) == 18
    distances = {str(rel): relative_distance(_arrays(fresh / rel), _arrays(SHIPPED / rel)) for rel in files}
    assert max(distances.values()) <= MAX_DISTANCE, distances


@pytest.mark.slow
def test_shipped_models_behave_like_a_fresh_training(fresh):
    shipped, trained = probes(None), probes(fresh)
    assert len(shipped) == 18
    assert behaviour_failures(trained, shipped) == []
    # and the check can fail: a chaotic classifier swapped for its sibling of another PTLM
    for swap, by in (("head-plain", "head-reduced"), ("full-plain", "full-clean")):
        tampered = {**shipped, f"runs/downstream-{swap}": shipped[f"runs/downstream-{by}"]}
        failures = behaviour_failures(trained, tampered)
        assert len(failures) == 1 and failures[0].startswith(f"runs/downstream-{swap}: flip "), failures
