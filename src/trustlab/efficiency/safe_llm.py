"""SAFE and SAFE+ as block-wise post-training pruning of a causal LM, beside SparseGPT, Wanda and magnitude.

The paper's LLM setting (Lee et al., ICML 2025, Section 4.3): each transformer block, in
order, is pruned to minimise the reconstruction error of its dense output on calibration
sequences (the REM objective of Shin et al., 2024), ``min_{||x||_0 <= d} max_{||e|| <= rho}
||B(X; x + e) - B(X; x_dense)||^2``, solved by SAFE's augmented-Lagrangian iteration (SAM
x-steps with the proximal pull ``lam (x - z + u)``, a projection ``z = proj(x + u)`` and a
dual step ``u += x - z`` every ``interval`` steps, a final projection). SAFE+ projects in
the Wanda metric ``P = diag(A^T A)`` (keep the largest ``||A_j|| |x_ij|``). The inputs of
block ``i`` are the outputs of the already pruned blocks ``< i``, as in SparseGPT and Wanda.
Wanda itself (Sun et al., 2024) keeps, per output row of every Linear weight, the entries
with the largest ``|W_ij| ||X_j||``; magnitude pruning keeps the largest ``|W_ij|`` per layer;
SparseGPT (Frantar & Alistarh, 2023) prunes each Linear by row-wise OBS updates with the
inverse of ``H = 2 X X^T`` (:mod:`._sparsegpt`); ALPS (Meng et al., 2024) by ADMM on the
same objective and conjugate gradients on the kept weights (:mod:`._alps`). Every method
also prunes to an N:M pattern (``pattern="2:4"``: ``N`` of every ``M`` consecutive input
weights kept, the semi-structured sparsity of the paper's Table 1); for SAFE/SAFE+ every
z-step and the final projection are then projections onto the N:M set.

References
----------
D. Lee, K. Lee, J. Chung, N. Lee, "SAFE: Finding Sparse and Flat Minima to Improve
Pruning", ICML 2025.
M. Sun, Z. Liu, A. Bair, J. Z. Kolter, "A Simple and Effective Pruning Approach for Large
Language Models", ICLR 2024.
E. Frantar, D. Alistarh, "SparseGPT: Massive Language Models Can Be Accurately Pruned in
One-Shot", ICML 2023.
X. Meng, K. Behdin, H. Wang, R. Mazumder, "ALPS: Improved Optimization for Highly Sparse
One-Shot Pruning for Large Language Models", NeurIPS 2024.
S. Shin et al., "Rethinking Pruning Large Language Models: Benefits and Pitfalls of
Reconstruction Error Minimization", EMNLP 2024.
"""

from __future__ import annotations

import copy
import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_token_ids
from trustlab.efficiency._alps import alps_prune
from trustlab.efficiency._sparsegpt import nm_keep_mask, parse_pattern, sparsegpt_prune
from trustlab.errors import DataError, ParameterError
from trustlab.vision.classifiers import require_torch

__all__ = ["LLM_PRUNING_METHODS", "decoder_layers", "lm_perplexity", "prune_causal_lm"]

LLM_PRUNING_METHODS = ("safe_plus", "safe", "safe_obd", "alps", "sparsegpt", "wanda", "magnitude")
"""``"safe_plus"``: SAFE with the Wanda projection (the paper's SAFE+); ``"safe"``: SAFE
with the Euclidean projection; ``"safe_obd"``: SAFE with Optimal Brain Damage's projection,
``P`` the diagonal of the Hessian ``2 X^T X`` of each Linear's reconstruction error (keep the
largest ``w_ij^2 ||X_j||^2`` of the layer: Wanda's score compared over the whole layer instead
of within each output row); ``"alps"``: ADMM on each Linear's reconstruction error with
ALPS's ``rho`` schedule, then conjugate gradients on the kept weights (Meng et al., 2024);
``"sparsegpt"``: one-shot OBS reconstruction with the inverse
Hessian of each Linear (Frantar & Alistarh, 2023); ``"wanda"``: one-shot ``|W| ||X||`` per
output row; ``"magnitude"``: one-shot ``|W|`` per layer."""


class _Stop(Exception):
    """Raised by the capture hook once the first block's inputs are recorded."""


def decoder_layers(model: Any) -> Any:
    """The transformer blocks of a Hugging Face causal LM (``model.model.layers`` for Llama-family models).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal language model (GPT-2, Llama, Mistral, Qwen2 ...): its blocks are
        found as the lab's hooks find them (:func:`trustlab.lm.hooks.hook_points`).

    Returns
    -------
    list of torch.nn.Module

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> cfg = ModelConfig("llama", vocab_size=16, d_model=16, n_layers=2, n_heads=2)
    >>> len(decoder_layers(build_model(cfg)))
    2
    """
    from trustlab.lm.hooks import _layout  # the lab's block finder (imports torch)

    return _layout(model).layers


def _tokens(value: Any, name: str, model: Any) -> Any:
    """``value`` (ids, a tensor or a ``TokenData``) as long ids checked against ``model``'s vocabulary."""
    torch = require_torch()
    arr = getattr(value, "tokens", value)
    arr = arr.detach().cpu().numpy() if isinstance(arr, torch.Tensor) else np.asarray(arr)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise DataError(
            f"{name} must be token ids of shape (n_sequences >= 1, length >= 2), got shape {arr.shape}.",
            argument=name,
        )
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    return torch.as_tensor(check_token_ids(arr, name, vocab=None if vocab is None else int(vocab)))


def _linears(block: Any) -> list[Any]:
    torch = require_torch()
    return [m for m in block.modules() if isinstance(m, torch.nn.Linear)]


def _capture_inputs(model: Any, layers: Any, tokens: Any) -> tuple[Any, dict[str, Any]]:
    """The hidden states entering the first block, and the keyword arguments the model passes to blocks."""
    torch = require_torch()
    store: dict[str, Any] = {}

    def hook(_module: Any, args: Any, kwargs: Any) -> None:
        store["x"] = args[0] if args else kwargs.pop("hidden_states")
        store["kwargs"] = {k: v for k, v in kwargs.items() if k != "hidden_states"}
        raise _Stop

    handle = layers[0].register_forward_pre_hook(hook, with_kwargs=True)
    try:
        with torch.no_grad():
            model(tokens, use_cache=False)
    except _Stop:
        pass
    finally:
        handle.remove()
    kwargs = {k: v for k, v in store["kwargs"].items() if k not in ("past_key_values", "past_key_value")}
    kwargs["use_cache"] = False
    return store["x"].detach(), kwargs


def _slice(kwargs: dict[str, Any], idx: Any, n: int) -> dict[str, Any]:
    """Keyword arguments for a sub-batch: tensors (or tensor pairs) batched over ``n`` are indexed."""
    torch = require_torch()

    def cut(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.ndim > 0 and v.shape[0] == n and n > 1:
            return v[idx]
        if isinstance(v, tuple):
            return tuple(cut(t) for t in v)
        return v

    return {k: cut(v) for k, v in kwargs.items()}


def _run(block: Any, x: Any, kwargs: dict[str, Any], batch: int) -> Any:
    torch = require_torch()
    outs = []
    n = x.shape[0]
    for s in range(0, n, batch):
        idx = torch.arange(s, min(s + batch, n))
        out = block(x[idx], **_slice(kwargs, idx, n))
        outs.append(out[0] if isinstance(out, tuple) else out)
    return torch.cat(outs)


def _input_norms(
    block: Any, x: Any, kwargs: dict[str, Any], batch: int, gram: bool = False
) -> dict[int, Any]:
    """``||A_j||^2`` over all calibration tokens for the input feature ``j`` of every Linear of ``block``.

    With ``gram``, the whole ``A^T A`` (float64) instead, for SparseGPT's Hessian.
    """
    torch = require_torch()
    sums: dict[int, Any] = {}

    def hook(module: Any, inputs: Any, _out: Any) -> None:
        a = inputs[0].detach().reshape(-1, inputs[0].shape[-1])
        stat = a.to(torch.float64).T @ a.to(torch.float64) if gram else (a**2).sum(0)
        sums[id(module)] = sums.get(id(module), 0) + stat

    handles = [m.register_forward_hook(hook) for m in _linears(block)]
    try:
        with torch.no_grad():
            _run(block, x, kwargs, batch)
    finally:
        for h in handles:
            h.remove()
    return sums


def _keep_mask(score: Any, sparsity: float, per_row: bool, nm: tuple[int, int] | None = None) -> Any:
    """True on the entries kept: the top ``1 - sparsity`` of ``score`` per output row (per layer), or N:M."""
    torch = require_torch()
    if nm is not None:
        return nm_keep_mask(score, *nm)
    flat = score if per_row else score.reshape(1, -1)
    n_prune = math.floor(flat.shape[1] * sparsity)
    mask = torch.ones_like(flat, dtype=torch.bool)
    if n_prune > 0:
        idx = torch.topk(flat, n_prune, dim=1, largest=False).indices
        mask.scatter_(1, idx, False)
    return mask.reshape(score.shape)


def _project(w: Any, metric: Any, sparsity: float, per_row: bool, nm: tuple[int, int] | None = None) -> Any:
    score = w.abs() if metric is None else w.abs() * metric.sqrt()
    return w * _keep_mask(score, sparsity, per_row, nm)


def _rem_loss(block: Any, xb: Any, yb: Any, kwargs: dict[str, Any], scale: float) -> Any:
    """The block's reconstruction error on a mini-batch, relative to the dense output's mean square."""
    out = block(xb, **kwargs)
    out = out[0] if isinstance(out, tuple) else out
    return ((out - yb) ** 2).mean() / scale


def _safe_block(
    block: Any,
    x: Any,
    y: Any,
    kwargs: dict[str, Any],
    metrics: list[Any] | None,
    per_row: bool,
    sparsity: float,
    params: dict[str, Any],
    gen: Any,
    nm: tuple[int, int] | None = None,
) -> None:
    """SAFE's iteration on the Linear weights of one block, the REM loss against the dense outputs ``y``."""
    torch = require_torch()
    lins = _linears(block)
    ws = [m.weight for m in lins]
    saved = {id(p): p.requires_grad for p in block.parameters()}
    for p in block.parameters():
        p.requires_grad_(False)
    for w in ws:
        w.requires_grad_(True)
    mets = metrics if metrics is not None else [None] * len(ws)
    rho, lam, interval = params["rho"], params["lam"], params["interval"]
    opt = torch.optim.Adam(ws, lr=params["lr"])
    scale = float((y**2).mean()) + 1e-12
    n, batch = x.shape[0], params["batch_size"]
    with torch.no_grad():
        zs = [_project(w, m, sparsity, per_row, nm) for w, m in zip(ws, mets, strict=True)]
        us = [torch.zeros_like(w) for w in ws]
    try:
        for t in range(params["n_steps"]):
            if t > 0 and t % interval == 0:
                with torch.no_grad():
                    zs = [
                        _project(w + u, m, sparsity, per_row, nm)
                        for w, u, m in zip(ws, us, mets, strict=True)
                    ]
                    for w, u, z in zip(ws, us, zs, strict=True):
                        u.add_(w - z)
            idx = torch.randperm(n, generator=gen)[:batch]
            kw = _slice(kwargs, idx, n)

            xb, yb = x[idx], y[idx]
            grads = torch.autograd.grad(_rem_loss(block, xb, yb, kw, scale), ws)
            if rho > 0:
                norm = torch.sqrt(sum((g**2).sum() for g in grads)) + 1e-12
                eps = [rho * g / norm for g in grads]
                with torch.no_grad():
                    for w, e in zip(ws, eps, strict=True):
                        w.add_(e)
                grads = torch.autograd.grad(_rem_loss(block, xb, yb, kw, scale), ws)
                with torch.no_grad():
                    for w, e in zip(ws, eps, strict=True):
                        w.sub_(e)
            for w, g, z, u in zip(ws, grads, zs, us, strict=True):
                w.grad = g + lam * (w.detach() - z + u)
            opt.step()
            opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for w, m in zip(ws, mets, strict=True):
                w.copy_(_project(w, m, sparsity, per_row, nm))
    finally:
        for p in block.parameters():
            p.requires_grad_(saved[id(p)])
            p.grad = None


@validate_params(
    {
        "method": [Options(LLM_PRUNING_METHODS)],
        "sparsity": [Interval(numbers.Real, 0, 1, closed="neither")],
        "pattern": [str],
        "n_steps": [Interval(numbers.Integral, 0, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "rho": [Interval(numbers.Real, 0, None, closed="left")],
        "lam": [Interval(numbers.Real, 0, None, closed="left")],
        "interval": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "damp": [Interval(numbers.Real, 0, None, closed="neither")],
        "sparsegpt_block": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def prune_causal_lm(
    model: Any,
    calibration: Any,
    *,
    method: str = "safe_plus",
    sparsity: float = 0.5,
    pattern: str = "unstructured",
    n_steps: int = 100,
    lr: float = 1e-3,
    rho: float = 1e-3,
    lam: float = 1.0,
    interval: int = 10,
    batch_size: int = 32,
    damp: float = 0.01,
    sparsegpt_block: int = 128,
    random_state: int = 0,
) -> Any:
    """Prune every Linear weight of the transformer blocks of a causal LM, block by block, to ``sparsity``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM (Llama-family; blocks found by :func:`decoder_layers`). Not modified.
    calibration : array-like of int, shape (n_sequences, length), or TokenData
        Calibration token ids (the paper: 128 C4 sequences).
    method : {"safe_plus", "safe", "safe_obd", "alps", "sparsegpt", "wanda", "magnitude"}, default="safe_plus"
        See :data:`LLM_PRUNING_METHODS`. SAFE/SAFE+ minimise each block's reconstruction
        error; ALPS, SparseGPT, Wanda and magnitude are one-shot, per Linear. Wanda and SAFE+
        compare within each output row, SAFE, SAFE-OBD, ALPS and magnitude within each layer,
        SparseGPT within each block of ``sparsegpt_block`` input columns (its adaptive mask selection).
    sparsity : float in (0, 1), default=0.5
        Share of each Linear weight set to zero (the paper: 50 % and 60 % unstructured; 0.5
        for 2:4 and 4:8).
    pattern : str, default="unstructured"
        ``"unstructured"`` or ``"N:M"`` (``0 < N < M``; the paper's ``"2:4"`` and ``"4:8"``):
        in every row, ``N`` of each group of ``M`` consecutive input weights are kept (the
        groups are the comparison groups of every method; SAFE/SAFE+ project onto this set at
        every z-step and at the end). ``sparsity`` must then equal ``1 - N/M`` and every
        Linear's input width must be a multiple of ``M``.
    n_steps : int, default=100
        SAFE x-steps per block (Adam on the block's Linear weights).
    lr : float, default=1e-3
        Adam's rate.
    rho : float, default=1e-3
        SAM radius (``0``: ADMM without flatness).
    lam : float, default=1.0
        Penalty ``lam / 2 ||x - z + u||^2`` of the augmented Lagrangian (constant, as the
        paper uses for LLMs; the reconstruction loss is divided by the mean squared dense
        output, so ``lam`` is free of the activations' scale).
    interval : int, default=10
        x-steps between z/u updates (``K``).
    batch_size : int, default=32
        Calibration sequences per x-step (and per forward pass).
    damp : float, default=0.01
        SparseGPT's and ALPS's dampening: ``damp`` times the mean diagonal of ``H = 2 X X^T / n`` is
        added to the diagonal before inversion (the paper's 1 %).
    sparsegpt_block : int, default=128
        SparseGPT's block of columns for lazy updates and adaptive mask selection (the
        paper's 128; rounded down to a multiple of ``M`` under an N:M pattern).
    random_state : int, default=0
        Seeds the mini-batch order.

    Returns
    -------
    torch.nn.Module
        A pruned deep copy of ``model`` (eval mode); embeddings and the LM head stay dense.

    See Also
    --------
    lm_perplexity : Perplexity on held-out sequences.
    trustlab.efficiency.SAFEPruning : SAFE for classifiers (pruning during training).

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=16, d_model=16, n_layers=1, n_heads=2))
    >>> calib = np.random.default_rng(0).integers(0, 16, (8, 12))
    >>> pruned = prune_causal_lm(m, calib, method="wanda")
    >>> float((pruned.model.layers[0].mlp.up_proj.weight == 0).float().mean())
    0.5
    >>> pruned = prune_causal_lm(m, calib, method="sparsegpt", pattern="2:4")
    >>> w = pruned.model.layers[0].mlp.down_proj.weight
    >>> bool(((w != 0).reshape(w.shape[0], -1, 4).sum(-1) == 2).all())
    True
    """
    torch = require_torch()
    decoder_layers(model)
    params = {"n_steps": int(n_steps), "lr": float(lr), "rho": float(rho), "lam": float(lam)}
    params |= {"interval": int(interval), "batch_size": int(batch_size)}
    seed = int(random_state)
    nm = parse_pattern(pattern, float(sparsity))
    if nm is not None:
        widths = {m.in_features for block in decoder_layers(model) for m in _linears(block)}
        if any(w % nm[1] for w in widths):
            raise ParameterError(
                f"pattern {pattern!r} groups M = {nm[1]} consecutive inputs, but the blocks' Linear layers "
                f"have input widths {sorted(widths)}: choose M dividing every width.",
                argument="pattern",
            )
    tokens = _tokens(calibration, "calibration", model)
    pruned = copy.deepcopy(model).eval()
    layers = decoder_layers(pruned)
    gen = torch.Generator().manual_seed(seed)
    batch = int(batch_size)
    x, kwargs = _capture_inputs(pruned, layers, tokens)
    for block in layers:
        lins = _linears(block)
        if not lins:
            continue
        if method in ("sparsegpt", "alps"):  # every Linear's Hessian from the block's input, then prune all
            grams = _input_norms(block, x, kwargs, batch, gram=True)
            n_tok = int(x.shape[0] * x.shape[1])
            with torch.no_grad():
                for m in lins:
                    if method == "alps":
                        new = alps_prune(m.weight, grams[id(m)], float(sparsity), nm, damp=float(damp))
                    else:
                        new = sparsegpt_prune(
                            m.weight, grams[id(m)], n_tok, float(sparsity), nm,
                            block_size=int(sparsegpt_block), damp=float(damp),
                        )  # fmt: skip
                    m.weight.copy_(new)
            with torch.no_grad():
                x = _run(block, x, kwargs, batch)
            continue
        norms = _input_norms(block, x, kwargs, batch) if method in ("wanda", "safe_plus", "safe_obd") else {}
        metrics = [norms[id(m)].reshape(1, -1).expand_as(m.weight) + 1e-12 for m in lins] if norms else None
        if method in ("wanda", "magnitude"):
            with torch.no_grad():
                mets = metrics if metrics is not None else [None] * len(lins)
                for m, met in zip(lins, mets, strict=True):
                    m.weight.copy_(_project(m.weight, met, sparsity, per_row=method == "wanda", nm=nm))
        else:
            with torch.no_grad():
                y = _run(block, x, kwargs, batch)
            _safe_block(block, x, y, kwargs, metrics, method == "safe_plus", sparsity, params, gen, nm)
        with torch.no_grad():
            x = _run(block, x, kwargs, batch)
    return pruned


@validate_params({"batch_size": [Interval(numbers.Integral, 1, None, closed="left")]})
def lm_perplexity(model: Any, tokens: Any, *, batch_size: int = 32) -> float:
    """Perplexity of a causal LM on token sequences: ``exp`` of the mean next-token cross-entropy.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM returning ``logits``.
    tokens : array-like of int, shape (n_sequences, length), or TokenData
        Held-out sequences; every position but the first is predicted.
    batch_size : int, default=32
        Sequences per forward pass.

    Returns
    -------
    float

    See Also
    --------
    prune_causal_lm : Block-wise SAFE/SAFE+, SparseGPT, Wanda and magnitude pruning.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=16, d_model=16, n_layers=1, n_heads=2))
    >>> 10 < lm_perplexity(m, np.random.default_rng(0).integers(0, 16, (4, 8))) < 25
    True
    """
    torch = require_torch()
    decoder_layers(model)
    ids = _tokens(tokens, "tokens", model)
    batch = int(batch_size)
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for s in range(0, ids.shape[0], batch):
                b = ids[s : s + batch]
                logits = model(b, use_cache=False).logits[:, :-1]
                ce = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), b[:, 1:].reshape(-1), reduction="sum"
                )
                total += float(ce)
                count += b[:, 1:].numel()
    finally:
        model.train(was_training)
    return float(math.exp(total / count))
