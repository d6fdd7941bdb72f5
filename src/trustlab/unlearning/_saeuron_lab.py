"""The fitted SAeUron of the vision lab's class-conditional digit DDPM: shipped, or fitted once.

Two fits ship, one per block: 512 BatchTopK features on ``mid`` (the default,
``saeuron_digits_mid.npz``) or on ``down2`` (``saeuron_digits.npz``), each block 32 channels at
4 x 4 positions. The SAE, the concept means and the per-digit sweep are stored as float32
arrays (package data), so tests, docs and benchmarks do not spend the minutes a fit and the
sweep cost. Private to
:mod:`trustlab.unlearning.saeuron`, which exports :func:`digits_saeuron`.
"""

from __future__ import annotations

import io
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.explain.sae import SparseAutoencoder

SHIPPED = {"mid": "saeuron_digits_mid.npz", "down2": "saeuron_digits.npz"}
# The recipe of the shipped states (docs/unlearning/saeuron.md); HOOK is the default block.
HOOK, STEPS, GUIDANCE, PERCENTILE, MULTIPLIER = "mid", 10, 2.0, 90.0, -10.0
N_PER_CLASS, SAE_LATENTS, SAE_K, SAE_STEPS, SAE_LR = 40, 512, 4, 600, 3e-3
_SAE_FIELDS = ("W_enc_", "b_enc_", "W_dec_", "b_dec_")


def lab_sae() -> SparseAutoencoder:
    """The SAE template of the recipe."""
    return SparseAutoencoder(
        SAE_LATENTS,
        architecture="batchtopk",
        k=SAE_K,
        batch_size=1024,
        n_steps=SAE_STEPS,
        learning_rate=SAE_LR,
    )


def lab_data() -> tuple[np.ndarray, np.ndarray]:
    """The recipe's starting noise and prompts (``N_PER_CLASS`` per digit, seed 0)."""
    y = np.repeat(np.arange(10), N_PER_CLASS)
    return np.random.default_rng(0).standard_normal((len(y), 1, 8, 8)), y


def state_arrays(su: Any) -> dict[str, np.ndarray]:
    """What a fitted SAeUron needs besides its parameters."""
    out: dict[str, np.ndarray] = {
        f"sae/{k}": np.asarray(getattr(su.sae_, k), dtype=np.float32) for k in _SAE_FIELDS
    }
    out["sae/threshold_"] = np.asarray(su.sae_.threshold_, dtype=np.float32)
    out.update(
        concept_means_=su.concept_means_.astype(np.float32),
        counts_=su.counts_.astype(np.int64),
        classes_=np.asarray(su.classes_),
    )
    concepts = sorted(su.concept_params_)
    out["params/concepts"] = np.asarray(concepts)
    out["params/values"] = np.asarray([su.concept_params_[c] for c in concepts], dtype=np.float64).reshape(
        -1, 2
    )
    return out


def restore(su: Any, arrays: Any) -> Any:
    """Set the fitted state of the unfitted ``su`` (same recipe) from :func:`state_arrays`."""
    from trustlab.unlearning import _saeuron_hooks as hk

    su._setup()
    sae = lab_sae()
    for k in _SAE_FIELDS:
        setattr(sae, k, np.asarray(arrays[f"sae/{k}"], dtype=np.float64))
    sae.threshold_ = float(arrays["sae/threshold_"])
    sae.n_features_in_ = sae.W_enc_.shape[0]
    sae.prefixes_ = [SAE_LATENTS]
    sae.order_ = np.arange(SAE_LATENTS)
    su.sae_ = sae
    su._tsae = hk.TorchSAE(sae)
    su.concept_means_ = np.asarray(arrays["concept_means_"], dtype=np.float64)
    su.counts_ = np.asarray(arrays["counts_"], dtype=np.int64)
    su.classes_ = np.asarray(arrays["classes_"])
    su.mean_activation_ = su.concept_means_.mean(0)
    su.concept_params_ = {
        c.item(): (float(p), float(m))
        for c, (p, m) in zip(arrays["params/concepts"], arrays["params/values"], strict=True)
    }
    return su


def tune_lab(su: Any) -> Any:  # pragma: no cover - run once by a maintainer, before ship
    """The recipe's per-digit sweep: 10 validation prompts per digit (seed 3), a logistic judge."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    d = load_digits()
    clf = LogisticRegression(max_iter=500).fit(d.data / 16.0, d.target)
    y = np.repeat(np.arange(10), 10)
    X = np.random.default_rng(3).standard_normal((len(y), 1, 8, 8))
    return su.tune(X, y, lambda imgs: clf.predict(imgs.reshape(len(imgs), -1)))


def shipped_arrays(hook: str = HOOK) -> Any:
    raw = resources.files("trustlab.unlearning").joinpath(SHIPPED[hook]).read_bytes()
    with np.load(io.BytesIO(raw)) as f:
        return {k: f[k] for k in f.files}


def ship(su: Any, path: str | Path) -> None:  # pragma: no cover - run once by a maintainer
    """Write the package-data file from a model fitted with the recipe."""
    np.savez_compressed(Path(path), **state_arrays(su))  # type: ignore[arg-type]
