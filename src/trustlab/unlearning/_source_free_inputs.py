"""Input checks of source-free unlearning: torch, the model, its input shape, the classes."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab.errors import MissingDependencyError, ModelError, ParameterError

__all__ = [
    "check_classes",
    "check_finite",
    "check_input_range",
    "check_model",
    "find_head",
    "import_torch",
]

_MAX_INPUT_SIZE = 10**8  # values in one input: far above images, below an accidental allocation of terabytes


def import_torch() -> Any:
    """Import torch or raise MissingDependencyError naming the extra."""
    try:
        import torch
    except ImportError:
        raise MissingDependencyError(
            "source-free unlearning needs torch; install it with `pip install trustlab[torch]` "
            "(or `pip install torch`).",
            argument="model",
        ) from None
    return torch


def check_input_range(input_range: Any) -> tuple[float, float]:
    """``(low, high)`` as two finite floats with ``low < high``."""
    try:
        low, high = (float(v) for v in input_range)
    except (TypeError, ValueError, OverflowError):
        raise ParameterError(
            f"input_range must be a pair (low, high) of numbers, e.g. (-1.0, 1.0); got {input_range!r}.",
            argument="input_range",
        ) from None
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ParameterError(
            f"input_range must hold two finite numbers with low < high; got {input_range!r}.",
            argument="input_range",
        )
    return low, high


def _infer_input_shape(model: Any) -> tuple[int, ...]:
    torch = import_torch()
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            return (int(module.in_features),)
        if any(True for _ in module.parameters(recurse=False)):
            break
    raise ModelError(
        "the input shape cannot be read off this model (its first layer with parameters is not "
        "an nn.Linear); pass input_shape=, the shape of one input without the batch axis, e.g. (1, 28, 28).",
        argument="input_shape",
    )


def check_model(model: Any, input_shape: Any, low: float, high: float) -> tuple[tuple[int, ...], int, Any]:
    """Check that ``model`` maps a batch of inputs to finite logits; return (shape, n_classes, dtype)."""
    torch = import_torch()
    if not isinstance(model, torch.nn.Module):
        raise ModelError(
            f"model must be a torch.nn.Module returning logits of shape (batch, n_classes); "
            f"got {type(model).__name__}.",
            argument="model",
        )
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ModelError("the model has no trainable parameters to unlearn.", argument="model")
    dtype = params[0].dtype
    if dtype not in (torch.float32, torch.float64):
        raise ModelError(
            f"the model's parameters must be float32 or float64; got {dtype}: pass model.float().",
            argument="model",
        )
    if input_shape is None:
        shape = _infer_input_shape(model)
    else:
        try:
            shape = tuple(int(s) for s in input_shape)
        except (TypeError, ValueError, OverflowError):
            shape = ()
        if (
            not shape
            or any(s < 1 for s in shape)
            or any(isinstance(s, bool) or not isinstance(s, numbers.Integral) for s in input_shape)
        ):
            raise ParameterError(
                f"input_shape must be a tuple of positive ints (one input without the batch axis); "
                f"got {input_shape!r}.",
                argument="input_shape",
            )
    if int(np.prod(shape, dtype=object)) > _MAX_INPUT_SIZE:
        raise ParameterError(
            f"input_shape {shape} has more than {_MAX_INPUT_SIZE:,} values per input; pass the shape of one "
            "input without the batch axis.",
            argument="input_shape",
        )
    probe = torch.full((2, *shape), (low + high) / 2, dtype=dtype)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            out = model(probe)
    except Exception as exc:  # the user's module failing on inputs of the stated shape
        raise ModelError(
            f"the model could not be applied to a batch of inputs of shape {shape} "
            f"({type(exc).__name__}: {exc}); it must map (batch, *input_shape) to logits of shape "
            "(batch, n_classes). Pass the right input_shape=.",
            argument="model",
        ) from None
    finally:
        model.train(was_training)
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 2:
        raise ModelError(
            "the model must return logits of shape (batch, n_classes) (a tensor, before softmax); it "
            f"returned {type(out).__name__} of shape {tuple(getattr(out, 'shape', ()))}.",
            argument="model",
        )
    if not out.dtype.is_floating_point:
        raise ModelError(
            f"the model must return floating-point logits; it returned {out.dtype}.", argument="model"
        )
    if int(out.shape[1]) < 2:
        raise ModelError("the model must have at least 2 output classes (logits).", argument="model")
    if not bool(torch.isfinite(out).all()):
        raise ModelError(
            "the model returned non-finite logits (NaN or inf) on inputs inside input_range; fix the model.",
            argument="model",
        )
    return shape, int(out.shape[1]), dtype


def check_classes(classes: Any, n_classes: int, name: str, *, allow_all: bool) -> tuple[int, ...]:
    """Distinct class indices in ``0..n_classes-1`` (sorted); not empty."""
    try:
        arr = np.asarray(classes).ravel() if not np.isscalar(classes) else np.asarray([classes])
    except (TypeError, ValueError):
        arr = np.asarray([None], dtype=object)
    ok = arr.size > 0 and all(
        isinstance(c, numbers.Integral) and not isinstance(c, bool | np.bool_) for c in arr.tolist()
    )
    if not ok:
        raise ParameterError(
            f"{name} must be a non-empty list of class indices (ints in 0..{n_classes - 1}); "
            f"got {classes!r}.",
            argument=name,
        )
    values = sorted({int(c) for c in arr.tolist()})
    unknown = [c for c in values if c < 0 or c >= n_classes]
    if unknown:
        raise ParameterError(
            f"{name} holds {unknown}, not classes of this model (its logits have {n_classes} columns: "
            f"0..{n_classes - 1}).",
            argument=name,
        )
    if not allow_all and len(values) == n_classes:
        raise ParameterError(
            f"{name} names every class of the model; at least one class must be retained.", argument=name
        )
    return tuple(values)


def find_head(model: Any) -> Any:
    """The last ``nn.Linear`` of the model (its input is the feature ``h = M_f(x)``), or None."""
    torch = import_torch()
    head = None
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            head = module
    return head


def check_finite(value: Any, what: str) -> None:
    """Raise ModelError when a tensor holds NaN or inf (the model or the chain diverged)."""
    torch = import_torch()
    if not bool(torch.isfinite(value).all()):
        raise ModelError(
            f"{what} became non-finite (NaN or inf); lower lr / alpha or check the model.",
            argument="model",
        )
