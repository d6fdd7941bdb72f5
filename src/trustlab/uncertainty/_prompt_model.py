"""The dual-encoder interface of prompt tuning: checks, image and prompt encoding (private)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError, TrustlabError
from trustlab.vision.classifiers import require_torch

__all__ = [
    "check_dual_encoder",
    "encode_images",
    "encode_prompts",
    "prompt_tokens",
    "require_torch",
    "torch_threads",
]

_NEEDS = ("image_encoder", "token_embedding", "text_encoder", "tokenize")


def check_dual_encoder(model: Any) -> Any:
    """Check that ``model`` has the attributes of :class:`~trustlab.uncertainty.prompt_tuning.DualEncoder`."""
    missing = [a for a in _NEEDS if not callable(getattr(model, a, None))]
    if missing:
        raise ModelError(
            f"model must be a DualEncoder (or have callable {', '.join(_NEEDS)}); it lacks {missing[0]}.",
            argument="model",
        )
    try:
        scale = float(model.logit_scale)
        prefix = int(getattr(model, "n_prefix", 1))
    except (AttributeError, TypeError, ValueError):
        raise ModelError("model.logit_scale must be a positive number.", argument="model") from None
    if not np.isfinite(scale) or scale <= 0 or prefix < 0:
        raise ModelError("model.logit_scale must be positive and n_prefix >= 0.", argument="model")
    return model


def _normalise(features: Any, n: int, what: str) -> Any:
    torch = require_torch()
    if not isinstance(features, torch.Tensor) or features.ndim != 2 or features.shape[0] != n:
        shape = tuple(features.shape) if hasattr(features, "shape") else type(features).__name__
        raise ModelError(
            f"model.{what} must return an (n, D) tensor for n={n}, got {shape}.", argument="model"
        )
    if not bool(torch.isfinite(features).all()):
        raise ModelError(f"model.{what} returned non-finite features.", argument="model")
    return torch.nn.functional.normalize(features.float(), dim=-1)


def encode_images(model: Any, X: Any) -> Any:
    """Unit-norm image features of the images ``X`` (float32 tensor in)."""
    torch = require_torch()
    arr = check_numeric_array(X, "X", dtype=np.float32)
    if arr.ndim < 2:
        raise DataError(f"X must be a batch of images (n, ...), got shape {arr.shape}.", argument="X")
    bounds = getattr(model, "pixel_range", None)
    if bounds is not None and (arr.min() < bounds[0] or arr.max() > bounds[1]):
        raise DataError(
            f"X must hold pixels in [{bounds[0]}, {bounds[1]}] (model.pixel_range); got "
            f"[{arr.min():.3g}, {arr.max():.3g}]. Scale the images first (e.g. divide 8-bit images by 255).",
            argument="X",
        )
    try:
        out = model.image_encoder(torch.as_tensor(arr))
    except TrustlabError:
        raise
    except Exception as exc:
        raise DataError(
            f"model.image_encoder failed on X of shape {arr.shape} ({type(exc).__name__}: {exc}); "
            "pass images of the shape the encoder takes.",
            argument="X",
        ) from None
    return _normalise(out, arr.shape[0], "image_encoder")


def prompt_tokens(model: Any, texts: list[str], argument: str) -> tuple[Any, Any]:
    """``model.tokenize(texts)`` as int64 tensors ``(ids, eot_index)``, failures blamed on ``argument``."""
    torch = require_torch()
    try:
        ids, eot = model.tokenize(texts)
    except Exception as exc:
        raise DataError(f"model.tokenize failed on {argument}: {exc}", argument=argument) from None
    ids_t, eot_t = torch.as_tensor(np.asarray(ids), dtype=torch.int64), torch.as_tensor(np.asarray(eot))
    eot_t = eot_t.to(torch.int64)
    if ids_t.ndim != 2 or ids_t.shape[0] != len(texts) or eot_t.shape != (len(texts),):
        raise ModelError("model.tokenize must return ids (n, L) and eot_index (n,).", argument="model")
    return ids_t, eot_t


def encode_prompts(model: Any, ids: Any, eot: Any, *, context: Any = None) -> Any:
    """Unit-norm text features of token ids, the context vectors (if any) replacing the prompt words."""
    torch = require_torch()
    emb = model.token_embedding(ids)
    if context is not None:
        start = int(getattr(model, "n_prefix", 1))
        n_ctx = context.shape[0]
        ctx = context.to(emb.dtype).unsqueeze(0).expand(emb.shape[0], -1, -1)
        emb = torch.cat([emb[:, :start], ctx, emb[:, start + n_ctx :]], dim=1)
    return _normalise(model.text_encoder(emb, eot), ids.shape[0], "text_encoder")


@contextlib.contextmanager
def torch_threads(n_threads: int | None) -> Iterator[None]:
    """Run torch on ``n_threads`` threads inside the block (``None``: leave torch's setting)."""
    torch = require_torch()
    before = torch.get_num_threads()
    if n_threads is not None:
        torch.set_num_threads(int(n_threads))
    try:
        yield
    finally:
        torch.set_num_threads(before)
