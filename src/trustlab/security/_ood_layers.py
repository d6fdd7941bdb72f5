"""Layer splitting and gradient integration for S&I and GAIA-Z (private helpers of ``ood``).

The network is split at a named module ``L``: the *head* is everything that computes
``L``'s output ``h`` from the input, the *remainder* maps ``h`` to the logits. Instead of
rewriting the network into head/remainder classes (as the authors' code does for each
ResNet), the split is done with forward hooks: the clean forward pass records ``h``, and
the remainder is evaluated on a modified ``h'`` by running the model again with a hook that
replaces ``L``'s output by ``h'``. Skip connections that bypass ``L`` still see the clean
input, exactly as the authors' ``NetRemain`` classes receive ``last_layer_x``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.security._nets import require_torch

__all__ = [
    "as_tensor_batches",
    "attribution_path",
    "default_layers",
    "resolve_layers",
    "split_integrate_ratios",
]


def default_layers(model: Any) -> list[str]:
    """The split points S&I uses when none are named.

    Every BatchNorm module when the model has any (the authors split a ResNet after each
    of its 36 BatchNorm layers); otherwise every Conv/Linear module except the last one in
    module order, which is taken to be the classifier head (its output are the logits).
    """
    torch = require_torch()
    nn = torch.nn
    named = list(model.named_modules())
    bn = [n for n, m in named if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if bn:
        return bn
    affine = [n for n, m in named if isinstance(m, nn.Linear | nn.Conv1d | nn.Conv2d | nn.Conv3d)]
    return affine[:-1]


def resolve_layers(
    model: Any, layers: Sequence[str] | None, argument: str = "layers"
) -> list[tuple[str, Any]]:
    """Map layer names to modules, with errors that name what is missing and what exists."""
    modules = dict(model.named_modules())
    names = default_layers(model) if layers is None else list(layers)
    if layers is not None and (isinstance(layers, str) or not all(isinstance(n, str) for n in names)):
        raise ParameterError(
            f"{argument} must be a list of module names (as model.named_modules() gives them), "
            f"got {layers!r}.",
            argument=argument,
        )
    if not names:
        kinds = sorted({type(m).__name__ for m in modules.values() if m is not model})
        raise ModelError(
            "this method splits the network at intermediate layers and needs at least one "
            "BatchNorm, Conv or Linear module before the classifier head; the model has "
            f"{kinds or 'no submodules'}. Pass {argument}=[...] naming the modules whose "
            "outputs are the intermediate features (e.g. the pre-activation Linear/Conv outputs).",
            argument="model",
        )
    missing = [n for n in names if n not in modules or n == ""]
    if missing:
        available = [n for n in modules if n][:20]
        raise ModelError(
            f"the model has no module named {missing}; {argument} must name modules of "
            f"model.named_modules(), e.g. {available}.",
            argument=argument,
        )
    return [(n, modules[n]) for n in names]


def as_tensor_batches(X: Any, batch_size: int) -> list[Any]:
    """Split a float32 array into torch tensors of at most ``batch_size`` rows."""
    torch = require_torch()
    t = torch.as_tensor(np.ascontiguousarray(X, dtype=np.float32))
    return list(torch.split(t, batch_size))


def _capture(model: Any, layers: list[tuple[str, Any]], x: Any) -> tuple[Any, dict[str, Any]]:
    torch = require_torch()
    feats: dict[str, Any] = {}

    def hook(name: str) -> Any:
        def record(_m: Any, _i: Any, out: Any) -> None:
            if name in feats:
                raise ModelError(
                    f"module {name!r} is called more than once in one forward pass; a split point "
                    "must be a module used once (pass layers=[...] naming such modules).",
                    argument="layers",
                )
            if not isinstance(out, torch.Tensor):
                raise ModelError(
                    f"module {name!r} returns {type(out).__name__}, not a tensor; name a module "
                    "whose output is a single tensor.",
                    argument="layers",
                )
            feats[name] = out.detach()

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in layers]
    try:
        with torch.no_grad():
            logits = model(x)
    finally:
        for h in handles:
            h.remove()
    unused = [n for n, _ in layers if n not in feats]
    if unused:
        raise ModelError(
            f"modules {unused} are not called by model.forward, so the network cannot be "
            "split there; name modules on the forward path.",
            argument="layers",
        )
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2 or logits.shape[1] < 2:
        shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ModelError(
            f"model must return logits of shape (n_samples, n_classes >= 2); got {shape}.",
            argument="model",
        )
    return logits, feats


def _channel_ratio(indicator: Any) -> Any:
    """Per-channel share of non-zero entries: mean over spatial positions for (N, C, ...)."""
    if indicator.ndim > 2:
        return indicator.flatten(2).mean(2)
    return indicator.reshape(indicator.shape[0], -1)


def attribution_path(
    model: Any, module: Any, x: Any, h0: Any, *, steps: int, alpha: float, loss: str
) -> list[tuple[Any, Any, Any]]:
    """The points of the adversarial attribution path at one split layer.

    Returns ``steps`` triples ``(h_t, logits_t, g_t)`` (detached): the split feature, the
    remainder's logits on it and the gradient of the maximum logit w.r.t. it, with
    ``h_{t+1} = h_t + alpha * sign(grad_h CE(remainder(h_t), y_hat))`` (``loss="max"``:
    the maximum logit's gradient instead), ``y_hat`` the prediction at ``h_0``.
    """
    torch = require_torch()
    func = torch.nn.functional
    h = h0.clone()
    target: Any = None
    out: list[tuple[Any, Any, Any]] = []
    for t in range(steps):
        h = h.detach().requires_grad_(True)
        current = h
        handle = module.register_forward_hook(lambda _m, _i, _o, v=current: v)
        try:
            y = model(x)
        finally:
            handle.remove()
        last = t == steps - 1
        g = torch.autograd.grad(y.max(dim=1).values.sum(), h, retain_graph=not last and loss == "ce")[0]
        out.append((h.detach(), y.detach(), g.detach()))
        if not last:
            if target is None:
                target = y.argmax(dim=1).detach()
            if loss == "ce":
                adv = torch.autograd.grad(func.cross_entropy(y, target, reduction="sum"), h)[0]
            else:
                adv = g
            h = h + alpha * adv.sign()
    return out


def split_integrate_ratios(
    model: Any,
    layers: list[tuple[str, Any]],
    x: Any,
    *,
    steps: int,
    alpha: float,
    loss: str,
    integration: str,
) -> Any:
    """Per-sample, per-channel non-zero ratios of the integrated split-layer gradients.

    For each split layer ``L`` with clean feature ``h_0``: for ``t = 0..steps-1`` take the
    gradient ``g_t`` of the maximum logit of the remainder w.r.t. ``h_t``, then move
    ``h_{t+1} = h_t + alpha * sign(grad_h CE(remainder(h_t), y_hat))`` (the adversarial
    attribution path, ``y_hat`` the clean prediction; ``loss="max"`` ascends the maximum
    logit instead). The integrated gradient is ``prod_t g_t`` (``"multiply"``) or
    ``sum_t g_t`` (``"add"``); its non-zero indicator is averaged per channel.
    ``steps=1`` is GAIA-Z: the clean gradient only. Returns an (N, total channels) tensor.
    """
    torch = require_torch()
    _, feats = _capture(model, layers, x)
    ratios: list[Any] = []
    for name, module in layers:
        integrated: Any = None
        for _h, _y, g in attribution_path(model, module, x, feats[name], steps=steps, alpha=alpha, loss=loss):
            if integrated is None:
                integrated = g.clone()
            elif integration == "multiply":
                integrated = integrated * g
            else:
                integrated = integrated + g
        if not torch.all(torch.isfinite(integrated)):
            raise DataError(
                f"the gradients at layer {name!r} are not finite; check that X is on the scale the "
                "model was trained on.",
                argument="X",
            )
        ratios.append(_channel_ratio((integrated != 0).to(torch.float32)))
    return torch.cat(ratios, dim=1)
