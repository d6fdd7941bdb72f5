"""SAeUron's saved format: a folder with the tensors (safetensors) and a small JSON.

Private to :mod:`trustlab.unlearning.saeuron` (:meth:`SAeUron.save` / :meth:`SAeUron.load`).
The folder holds

- ``saeuron.safetensors``: the fitted SAE (``sae/W_enc_``, ``sae/b_enc_``, ``sae/W_dec_``,
  ``sae/b_dec_``; ``sae/order_`` and ``sae/losses_`` when it has them), ``concept_means_`` and ``counts_`` at
  their fitted precision (float64), so a loaded model generates bit for bit what the saved
  one did;
- ``saeuron.json``: the format tag, SAeUron's parameters (the hook as its module name, the
  schedule's fields, or ``null`` when a pipeline's scheduler gave it, and a digest of its
  ``alphas_cumprod``, the SAE template's parameters), the SAE's own parameters and threshold,
  the concepts (``classes_``), the fitted DDIM timesteps, the per-concept sweep
  (``concept_params_``), the SHA-256 of the tensors file (a changed byte is caught) and a
  fingerprint of the denoiser (its parameters' names and shapes, and a hash of their values)
  so that loading onto another model fails instead of editing it with a foreign dictionary.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.errors import DataError, MissingDependencyError, ModelError, NotFittedError, ParameterError
from trustlab.vision.diffusion import DDPMSchedule

FORMAT = "trustlab.unlearning.SAeUron/1"
CONFIG, TENSORS = "saeuron.json", "saeuron.safetensors"
_SAE_ARRAYS = ("W_enc_", "b_enc_", "W_dec_", "b_dec_")
_SAE_OPTIONAL = ("order_", "losses_")  # saved when the SAE has them
_PARAMS = (
    "conditional",
    "guidance_scale",
    "null_label",
    "num_inference_steps",
    "percentile",
    "multiplier",
    "preserve_error",
    "score_against",
    "max_sae_rows",
)


def _safetensors() -> Any:
    try:
        from safetensors import numpy as st_numpy
    except ImportError as exc:  # pragma: no cover - safetensors ships with the torch extra
        raise MissingDependencyError(
            "safetensors is needed to save or load SAeUron: pip install safetensors (or trustlab[torch]).",
            argument="safetensors",
        ) from exc
    return st_numpy


def model_fingerprint(model: Any) -> dict[str, str]:
    """Hashes of the denoiser's parameter layout (names, shapes) and of their float32 values."""
    layout, values = hashlib.sha256(), hashlib.sha256()
    for name, tensor in model.state_dict().items():
        layout.update(f"{name}:{tuple(tensor.shape)};".encode())
        values.update(name.encode())
        values.update(tensor.detach().cpu().float().contiguous().numpy().tobytes())
    return {"layout": layout.hexdigest(), "weights": values.hexdigest()}


def schedule_digest(alphas_cumprod: Any) -> str:
    """SHA-256 of a schedule's ``alphas_cumprod`` rounded to float32 (a changed schedule is caught)."""
    return hashlib.sha256(np.ascontiguousarray(alphas_cumprod, dtype=np.float32).tobytes()).hexdigest()


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _hook_name(su: Any) -> str:
    if isinstance(su.hook, str):
        return su.hook
    for name, module in su.denoiser_.named_modules():
        if module is su.module_:
            return name
    raise ParameterError("hook must be a submodule of model to be saved.", argument="hook")


def _seed(value: Any) -> int | None:
    return int(value) if isinstance(value, int | np.integer) and not isinstance(value, bool) else None


def save(su: Any, path: Any) -> Path:
    """Write the fitted ``su`` into the folder ``path`` (created if missing)."""
    if not hasattr(su, "concept_means_"):
        raise NotFittedError("SAeUron is not fitted: call fit before save.", argument="self")
    st = _safetensors()
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ParameterError(
            f"path must be a folder (new or existing) to write the SAeUron into; {str(folder)!r} is a file.",
            argument="path",
        )
    sae = su.sae_
    tensors = {
        f"sae/{k}": np.ascontiguousarray(getattr(sae, k))
        for k in (*_SAE_ARRAYS, *_SAE_OPTIONAL)
        if hasattr(sae, k)
    }
    tensors["concept_means_"] = np.ascontiguousarray(su.concept_means_, dtype=np.float64)
    tensors["counts_"] = np.ascontiguousarray(su.counts_, dtype=np.int64)
    sched = su.schedule or (None if su.from_pipeline_ else DDPMSchedule())
    config = {
        "format": FORMAT,
        "hook": _hook_name(su),
        "params": {k: _jsonable(getattr(su, k)) for k in _PARAMS},
        "random_state": _seed(su.random_state),
        "schedule": None if sched is None else [sched.num_train_timesteps, sched.beta_start, sched.beta_end],
        "alphas_cumprod": schedule_digest(su.alphas_cumprod_),
        "sae_template": None
        if su.sae is None
        else {**su.sae.get_params(), "random_state": _seed(su.sae.random_state)},
        "sae": {
            "params": {**sae.get_params(), "random_state": _seed(sae.random_state)},
            "threshold_": float(sae.threshold_),
            "prefixes_": [int(p) for p in sae.prefixes_],
        },
        "classes_": {"dtype": su.classes_.dtype.str, "values": su.classes_.tolist()},
        "timesteps_": [int(t) for t in su.timesteps_],
        "concept_params_": [[_jsonable(c), float(p), float(m)] for c, (p, m) in su.concept_params_.items()],
        "model": model_fingerprint(su.denoiser_),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        st.save_file(tensors, str(folder / TENSORS))
        config["sha256"] = hashlib.sha256((folder / TENSORS).read_bytes()).hexdigest()
        (folder / CONFIG).write_text(json.dumps(config, indent=1))
    except OSError as exc:
        raise DataError(
            f"path could not be written ({exc}); pass a writable folder.", argument="path"
        ) from exc
    return folder


def _corrupt(folder: Path, what: str) -> DataError:
    return DataError(
        f"path {str(folder)!r} does not hold a valid SAeUron save ({what}); write it again with "
        "SAeUron.save.",
        argument="path",
    )


def read(path: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The checked config and tensors of a saved folder."""
    st = _safetensors()
    folder = Path(path)
    if not (folder / CONFIG).is_file() or not (folder / TENSORS).is_file():
        raise DataError(
            f"path must be a folder written by SAeUron.save (with {CONFIG} and {TENSORS}); "
            f"got {str(folder)!r}.",
            argument="path",
        )
    try:
        config = json.loads((folder / CONFIG).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _corrupt(folder, f"{CONFIG} is not JSON: {exc}") from exc
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise _corrupt(folder, f"{CONFIG} is not in the format {FORMAT}")
    raw = (folder / TENSORS).read_bytes()
    if hashlib.sha256(raw).hexdigest() != config.get("sha256"):
        raise _corrupt(folder, f"{TENSORS} does not match the checksum in {CONFIG}")
    try:
        tensors = dict(st.load(raw))
    except Exception as exc:  # safetensors raises its own error type on a bad header
        raise _corrupt(folder, f"{TENSORS} cannot be read: {exc}") from exc
    want = {f"sae/{k}" for k in _SAE_ARRAYS} | {"concept_means_", "counts_"}
    if not want <= set(tensors) <= want | {f"sae/{k}" for k in _SAE_OPTIONAL}:
        raise _corrupt(folder, f"{TENSORS} holds {sorted(tensors)}, expected {sorted(want)}")
    return config, tensors


def check_model(config: dict[str, Any], model: Any, *, check_weights: bool) -> None:
    """Raise unless ``model`` has the saved layout (and, if asked, the saved weights)."""
    import torch

    from trustlab.vision._pipeline import is_pipeline

    if is_pipeline(model):
        model = model.unet
    if not isinstance(model, torch.nn.Module):
        raise ModelError(
            f"model must be the torch denoiser the SAeUron was fitted on; got {type(model).__name__}.",
            argument="model",
        )
    saved, now = config.get("model", {}), model_fingerprint(model)
    if saved.get("layout") != now["layout"]:
        raise ModelError(
            "model is not the denoiser this SAeUron was fitted on: its parameters' names or shapes "
            "differ; load it onto the same architecture.",
            argument="model",
        )
    if check_weights and saved.get("weights") != now["weights"]:
        raise ModelError(
            "model has the saved architecture but other weights; load it onto the model it was "
            "fitted on, or pass check_weights=False to apply the SAE to a changed copy anyway.",
            argument="model",
        )


def load(cls: Any, path: Any, model: Any, *, check_weights: bool) -> Any:
    """A fitted ``cls`` (SAeUron) on ``model`` from the folder ``path``."""
    from trustlab.explain.sae import SparseAutoencoder
    from trustlab.unlearning import _saeuron_hooks as hk

    config, tensors = read(path)
    folder = Path(path)
    check_model(config, model, check_weights=check_weights)
    try:
        template = config["sae_template"]
        su = cls(
            model,
            config["hook"],
            schedule=None if config["schedule"] is None else DDPMSchedule(*config["schedule"]),
            sae=None if template is None else SparseAutoencoder(**template),
            random_state=config["random_state"],
            **config["params"],
        )
        su._setup()
        sae = SparseAutoencoder(**config["sae"]["params"])
        for k in (*_SAE_ARRAYS, *_SAE_OPTIONAL):
            if f"sae/{k}" in tensors:
                setattr(sae, k, np.array(tensors[f"sae/{k}"]))
        sae.threshold_ = float(config["sae"]["threshold_"])
        sae.prefixes_ = [int(p) for p in config["sae"]["prefixes_"]]
        sae.n_features_in_ = int(sae.W_enc_.shape[0])
        classes = np.asarray(config["classes_"]["values"], dtype=np.dtype(config["classes_"]["dtype"]))
        params = {c: (float(p), float(g)) for c, p, g in config["concept_params_"]}
        timesteps = config["timesteps_"]
    except (KeyError, TypeError, ValueError) as exc:
        raise _corrupt(folder, f"{CONFIG} is incomplete: {exc!r}") from exc
    means, counts = np.array(tensors["concept_means_"]), np.array(tensors["counts_"])
    d_in, n_lat = sae.W_enc_.shape
    shapes_ok = (
        sae.b_enc_.shape == (n_lat,)
        and sae.W_dec_.shape == (n_lat, d_in)
        and sae.b_dec_.shape == (d_in,)
        and means.shape == (len(classes), len(timesteps), n_lat)
        and counts.shape == (len(classes),)
    )
    if not shapes_ok:
        raise _corrupt(folder, "its arrays' shapes do not fit together")
    if config.get("alphas_cumprod", schedule_digest(su.alphas_cumprod_)) != schedule_digest(
        su.alphas_cumprod_
    ):
        raise ModelError(
            "model: its noise schedule differs from the one this SAeUron was fitted with; load it onto "
            "the same pipeline (or the denoiser with the saved schedule).",
            argument="model",
        )
    if list(map(int, su.timesteps_)) != list(timesteps):
        raise _corrupt(folder, "its timesteps differ from its num_inference_steps and schedule")
    su.sae_ = sae
    su._tsae = hk.TorchSAE(sae)
    su.classes_, su.counts_, su.concept_means_ = classes, counts, means
    su.mean_activation_ = means.mean(0)
    su.concept_params_ = params
    return su
