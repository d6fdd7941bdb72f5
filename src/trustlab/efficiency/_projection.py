"""SAFE's z-step: the projection onto ``||z||_0 <= d``, Euclidean (SAFE) or in a metric ``P`` (SAFE+).

The generalised projection of Lee et al. (ICML 2025, Section 3.4) is
``argmin_{||z||_0 <= d} 1/2 (z - v)^T P (z - v)`` for a positive-definite diagonal ``P``:
it keeps the ``d`` entries of ``v`` with the largest ``P_ii^{1/2} |v_i|`` unchanged and zeroes
the rest. ``P = I`` is hard thresholding (SAFE); ``P = diag(A^T A)`` with ``A`` a layer's
input activations is Wanda's saliency (the paper's SAFE+); ``P = diag(grad f grad f^T)`` is
SNIP's; ``P = diag(grad^2 f)`` is Optimal Brain Damage's (LeCun et al., 1989; the diagonal
estimated here by Hutchinson's probes ``E[v * (H v)]``, ``v`` Rademacher). This module
computes the diagonal of ``P`` for every prunable weight of a model on a calibration batch,
and the projection itself.
"""

from __future__ import annotations

from typing import Any

from trustlab.vision.classifiers import require_torch

__all__ = ["PROJECTIONS", "importance", "project"]

PROJECTIONS = ("magnitude", "wanda", "snip", "obd")
"""The metric ``P`` of the z-step: ``"magnitude"`` (``P = I``: SAFE), ``"wanda"``
(``P = diag(A^T A)``: the paper's SAFE+), ``"snip"`` (``P = diag(grad f grad f^T)``),
``"obd"`` (``P = diag(grad^2 f)``, Optimal Brain Damage)."""

OBD_PROBES = 16
"""Rademacher probes of the Hutchinson estimate of ``diag(grad^2 f)`` (``"obd"``)."""


def project(tensors: list[Any], keep: int | list[int], metric: list[Any] | None = None) -> list[Any]:
    """Keep the ``keep`` entries with the largest ``sqrt(P) |t|`` over all tensors (global), zero the rest.

    ``metric`` holds the diagonal of ``P`` (one tensor per entry of ``tensors``, same shape);
    ``None`` is ``P = I`` (magnitude). Kept entries keep their value (the minimiser of the
    ``P``-weighted distance). A list ``keep`` projects each tensor on its own budget (the
    layer-wise scope).
    """
    torch = require_torch()
    if isinstance(keep, list):
        metrics = [None] * len(tensors) if metric is None else [[m] for m in metric]
        return [project([t], k, m)[0] for t, k, m in zip(tensors, keep, metrics, strict=True)]
    flat = torch.cat([t.reshape(-1).abs() for t in tensors])
    if metric is not None:
        flat = flat * torch.cat([m.reshape(-1).sqrt() for m in metric])
    if keep >= flat.numel():
        return [t.clone() for t in tensors]
    idx = torch.topk(flat, keep, sorted=False).indices
    keep_mask = torch.zeros_like(flat, dtype=torch.bool)
    keep_mask[idx] = True
    out, start = [], 0
    for t in tensors:
        m = keep_mask[start : start + t.numel()].reshape(t.shape)
        out.append(t * m)
        start += t.numel()
    return out


def _input_sq_norms(module: Any, x: Any) -> Any:
    """Sum of squares over the batch per input feature (Linear) or (in-channel, kernel offset) (Conv2d)."""
    torch = require_torch()
    F = torch.nn.functional
    if isinstance(module, torch.nn.Linear):
        return (x.detach().reshape(-1, x.shape[-1]) ** 2).sum(0)
    x = x.detach()
    padding: Any = module.padding
    if isinstance(padding, str) or module.padding_mode != "zeros":
        mode = "constant" if module.padding_mode == "zeros" else module.padding_mode
        x = F.pad(x, module._reversed_padding_repeated_twice, mode=mode)
        padding = 0
    cols = F.unfold(x, module.kernel_size, dilation=module.dilation, padding=padding, stride=module.stride)
    return (cols**2).sum(dim=(0, 2))  # (C * kh * kw,), channel-major as the weight is laid out


def _broadcast(module: Any, norms: Any) -> Any:
    """The diagonal of ``P`` in the weight's shape: each weight gets its input feature's squared norm."""
    w = module.weight
    if w.ndim == 2:
        return norms.reshape(1, -1).expand_as(w)
    groups = int(module.groups)
    out_c, in_per_group, kh, kw = w.shape
    per_group = norms.reshape(groups, 1, in_per_group, kh, kw)
    return per_group.expand(groups, out_c // groups, in_per_group, kh, kw).reshape(w.shape)


def importance(net: Any, layers: list[Any], kind: str, X: Any, y: Any) -> list[Any] | None:
    """The diagonal of ``P`` for the weight of each of ``layers`` at the current weights of ``net``.

    ``"wanda"``: ``||A_j||^2`` of the layer's input feature ``j`` over the calibration batch
    ``X`` (for a Conv2d, over the unfolded patches: its im2col form is a Linear layer);
    ``"snip"``: the squared gradient of the mean cross-entropy on ``(X, y)``;
    ``"obd"``: the diagonal of its Hessian, ``mean_v v * (H v)`` over :data:`OBD_PROBES`
    Rademacher vectors ``v`` (double backpropagation; the probes are seeded, so ``P`` depends
    only on the weights), negative estimates set to 0 (OBD's saliency ``h_ii w_i^2 / 2``: a
    weight whose removal does not raise the quadratic model goes first);
    ``"magnitude"``: ``None`` (``P = I``). A ridge of ``1e-8`` times the mean keeps ``P``
    positive definite (a feature that is always zero would otherwise tie at zero).
    """
    torch = require_torch()
    if kind == "magnitude":
        return None
    was_training = net.training
    net.eval()
    try:
        if kind == "wanda":
            sums: dict[int, Any] = {}

            def hook(module: Any, inputs: Any, _out: Any) -> None:
                add = _input_sq_norms(module, inputs[0])
                sums[id(module)] = sums[id(module)] + add if id(module) in sums else add

            handles = [m.register_forward_hook(hook) for m in layers]
            try:
                with torch.no_grad():
                    net(X)
            finally:
                for h in handles:
                    h.remove()
            ones = torch.ones_like
            diag = [_broadcast(m, sums[id(m)]) if id(m) in sums else ones(m.weight) for m in layers]
        elif kind == "obd":
            diag = _hessian_diagonal(net, [m.weight for m in layers], X, y)
        else:
            weights = [m.weight for m in layers]
            with torch.enable_grad():
                loss = torch.nn.functional.cross_entropy(net(X), y)
                grads = torch.autograd.grad(loss, weights, allow_unused=True)
            pairs = zip(weights, grads, strict=True)
            diag = [torch.zeros_like(w) if g is None else g.detach() ** 2 for w, g in pairs]
    finally:
        net.train(was_training)
    mean = torch.cat([d.reshape(-1) for d in diag]).mean()
    ridge = 1e-8 * float(mean) if float(mean) > 0 else 1.0
    return [d + ridge for d in diag]


def _hessian_diagonal(net: Any, weights: list[Any], X: Any, y: Any) -> list[Any]:
    """Hutchinson's estimate of the diagonal of the cross-entropy's Hessian in ``weights``, clipped at 0."""
    torch = require_torch()
    gen = torch.Generator().manual_seed(0)
    with torch.enable_grad():
        loss = torch.nn.functional.cross_entropy(net(X), y)
        grads = torch.autograd.grad(loss, weights, create_graph=True, allow_unused=True)
        live = [(w, g) for w, g in zip(weights, grads, strict=True) if g is not None]
        sums = {id(w): torch.zeros_like(w) for w in weights}
        for _ in range(OBD_PROBES):
            vs = [torch.randint(0, 2, w.shape, generator=gen).to(w.dtype) * 2 - 1 for w, _ in live]
            hvs = torch.autograd.grad(
                [g for _, g in live], [w for w, _ in live], grad_outputs=vs, retain_graph=True
            )
            for (w, _), v, hv in zip(live, vs, hvs, strict=True):
                sums[id(w)] += v * hv.detach()
    return [(sums[id(w)] / OBD_PROBES).clamp_min(0.0) for w in weights]
