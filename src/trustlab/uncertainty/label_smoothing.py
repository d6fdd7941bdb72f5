"""Label smoothing for calibrated supervised fine-tuning, and a memory-light smoothed cross-entropy.

Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing",
ICML 2025 (PMLR 267:25593-25612, arXiv:2508.00264). See ``docs/uncertainty/label_smoothing.md``.

The smoothed loss with factor ``beta`` over a vocabulary of ``V`` tokens is
``(1 - beta) * CE(y) + beta * mean_v(-log p_v)``, which for logits ``z = h W^T + b`` equals
``logsumexp(z) - (1 - beta) z_y - beta * mean_v z_v``. The last term is linear in ``h``:
``mean_v z_v = h . mean(W) + mean(b)``, so the loss needs only the log-partition function, the
target logit and one dot product per token. :func:`chunked_smoothed_cross_entropy` computes the
log-partition function block by block (tokens x vocabulary, an online log-sum-exp) and recomputes
the blocks in the backward pass, so neither the ``tokens x V`` logits nor their log-softmax is ever
held: peak extra memory is one ``token_block x vocab_block`` tile.

This module imports torch; ``import trustlab.uncertainty`` does not import it.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trustlab.errors import DataError, ModelError, ParameterError

__all__ = ["chunked_smoothed_cross_entropy", "smoothed_cross_entropy", "smoothed_lm_loss"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_smoothing(smoothing: Any) -> float:
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not 0 <= smoothing < 1:
        raise ParameterError(
            f"smoothing must be a number in [0, 1), got {smoothing!r}; the paper uses 0.1.",
            argument="smoothing",
        )
    return float(smoothing)


def _check_reduction(reduction: Any) -> str:
    if reduction not in _REDUCTIONS:
        raise ParameterError(
            f"reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}.", argument="reduction"
        )
    return str(reduction)


def _check_temperature(temperature: Any) -> float:
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature <= 0
    ):
        raise ParameterError(
            f"temperature must be a finite number > 0, got {temperature!r}; 1.0 leaves the logits as they "
            "are, the paper's remedy trains large-vocabulary models at 0.05-0.75.",
            argument="temperature",
        )
    return float(temperature)


def _check_softcap(softcap: Any) -> float | None:
    if softcap is None:
        return None
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not 0 < softcap < math.inf:
        raise ParameterError(
            f"softcap must be None or a finite number > 0, got {softcap!r}; the paper's runs use 32-128.",
            argument="softcap",
        )
    return float(softcap)


def _block(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(f"{name} must be a positive int, got {value!r}; e.g. 1024.", argument=name)
    return value


def _reduce(per_token: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return per_token
    total = per_token.sum()
    return total if reduction == "sum" else total / valid.sum().clamp(min=1)


def smoothed_cross_entropy(
    logits: Any,
    targets: Any,
    *,
    smoothing: float = 0.1,
    ignore_index: int = -100,
    reduction: str = "mean",
    temperature: float = 1.0,
    softcap: float | None = None,
) -> torch.Tensor:
    """The label-smoothed cross-entropy from materialised logits (the reference, as torch computes it).

    With ``temperature`` or ``softcap`` it is the paper's remedy for large-vocabulary models:
    the loss of ``softcap * tanh(logits / temperature / softcap)`` (temperature first, then the
    cap), multiplied by ``temperature`` so the gradient scale stays that of the plain loss.

    Parameters
    ----------
    logits : torch.Tensor, shape (n, V)
        Unnormalised scores.
    targets : torch.Tensor of int, shape (n,)
        Target ids; ``ignore_index`` marks positions that do not count.
    smoothing : float, default=0.1
        The smoothing factor ``beta`` in [0, 1) (the paper's default 0.1): the target is
        ``(1 - beta) one_hot(y) + beta / V``.
    ignore_index : int, default=-100
    reduction : {"mean", "sum", "none"}, default="mean"
        ``"mean"`` averages over the counted positions.
    temperature : float, default=1.0
        Training temperature ``T > 0``; ``T < 1`` sharpens the logits the loss sees, which lets a
        model whose logit norm is bounded (small hidden size, large vocabulary) reach the smoothed
        optimum (see :func:`trustlab.uncertainty.smoothing_capacity.confidence_capacity`).
    softcap : float, optional
        Soft cap ``c``: the loss sees ``c * tanh(z / c)`` (Gemma-2 style logit capping).

    Returns
    -------
    torch.Tensor
        Equal to ``torch.nn.functional.cross_entropy(logits, targets, label_smoothing=smoothing)``
        (times ``temperature``, on the tempered and capped logits, when those are set).

    References
    ----------
    Szegedy et al., "Rethinking the Inception Architecture for Computer Vision", CVPR 2016;
    Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing", ICML 2025.

    Examples
    --------
    >>> z = torch.tensor([[2.0, 0.0, -1.0]])
    >>> round(float(smoothed_cross_entropy(z, torch.tensor([0]), smoothing=0.0)), 4)
    0.1698
    """
    beta = _check_smoothing(smoothing)
    reduction = _check_reduction(reduction)
    temp, cap = _check_temperature(temperature), _check_softcap(softcap)
    z, y = _check_pair(logits, targets)
    z = z.float() if z.dtype in (torch.float16, torch.bfloat16) else z
    if temp != 1.0:
        z = z / temp
    if cap is not None:
        z = cap * torch.tanh(z / cap)
    logp = torch.log_softmax(z, dim=-1)
    valid = y != ignore_index
    safe = torch.where(valid, y, 0)
    nll = -logp.gather(1, safe[:, None])[:, 0]
    per_token = ((1 - beta) * nll - beta * logp.mean(dim=-1)) * valid
    return _reduce(per_token * temp if temp != 1.0 else per_token, valid, reduction)


def _check_pair(logits: Any, targets: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2 or not logits.is_floating_point():
        raise DataError(
            "logits must be a 2-D float torch.Tensor (n, V); flatten (batch, seq, V) first.",
            argument="logits",
        )
    if (
        not isinstance(targets, torch.Tensor)
        or targets.shape != logits.shape[:1]
        or targets.is_floating_point()
    ):
        raise DataError(
            f"targets must be an integer torch.Tensor of shape ({logits.shape[0]},), one id per row.",
            argument="targets",
        )
    return logits, targets


class _ChunkedSmoothedCE(torch.autograd.Function):
    """Per-token smoothed CE from hidden states and the output layer; blocks recomputed in backward."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        beta: float,
        token_block: int,
        vocab_block: int,
    ) -> torch.Tensor:
        n, vocab = hidden.shape[0], weight.shape[0]
        dt = torch.promote_types(torch.promote_types(hidden.dtype, weight.dtype), torch.float32)
        h, w = hidden.to(dt), weight.to(dt)
        b = None if bias is None else bias.to(dt)
        valid = targets >= 0
        safe = torch.where(valid, targets, 0)
        lse = torch.empty(n, dtype=dt, device=hidden.device)
        for r0 in range(0, n, token_block):
            hr = h[r0 : r0 + token_block]
            m = torch.full((hr.shape[0],), -math.inf, dtype=dt, device=h.device)
            s = torch.zeros(hr.shape[0], dtype=dt, device=h.device)
            for c0 in range(0, vocab, vocab_block):
                z = hr @ w[c0 : c0 + vocab_block].T
                if b is not None:
                    z += b[c0 : c0 + vocab_block]
                m_new = torch.maximum(m, z.max(dim=1).values)
                s = s * torch.exp(m - m_new) + torch.exp(z - m_new[:, None]).sum(dim=1)
                m = m_new
            lse[r0 : r0 + token_block] = m + torch.log(s)
        z_y = (h * w[safe]).sum(dim=1)
        z_mean = h @ w.mean(dim=0)
        if b is not None:
            z_y = z_y + b[safe]
            z_mean = z_mean + b.mean()
        loss = (lse - (1 - beta) * z_y - beta * z_mean) * valid
        ctx.save_for_backward(hidden, weight, bias if bias is not None else torch.empty(0), safe, valid, lse)
        ctx.has_bias, ctx.beta, ctx.blocks = bias is not None, beta, (token_block, vocab_block)
        return loss

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, bias, safe, valid, lse = ctx.saved_tensors
        beta, (token_block, vocab_block) = ctx.beta, ctx.blocks
        n, vocab = hidden.shape[0], weight.shape[0]
        h, w = hidden.to(lse.dtype), weight.to(lse.dtype)
        b = bias.to(lse.dtype) if ctx.has_bias else None
        g_tok = grad.to(lse.dtype) * valid
        grad_h = torch.zeros_like(h)
        grad_w = torch.zeros_like(w)
        grad_b = torch.zeros(vocab, dtype=h.dtype, device=h.device) if ctx.has_bias else None
        for r0 in range(0, n, token_block):
            rows = slice(r0, r0 + token_block)
            hr, gr, yr = h[rows], g_tok[rows], safe[rows]
            for c0 in range(0, vocab, vocab_block):
                wc = w[c0 : c0 + vocab_block]
                z = hr @ wc.T
                if b is not None:
                    z += b[c0 : c0 + vocab_block]
                d = torch.exp(z - lse[rows, None]) - beta / vocab  # d loss / d z, less the target term
                hit = (yr >= c0) & (yr < c0 + wc.shape[0])
                d[hit.nonzero()[:, 0], yr[hit] - c0] -= 1 - beta
                d *= gr[:, None]
                grad_h[rows] += d @ wc
                grad_w[c0 : c0 + vocab_block] += d.T @ hr
                if grad_b is not None:
                    grad_b[c0 : c0 + vocab_block] += d.sum(dim=0)
        out_b = None if grad_b is None else grad_b.to(bias.dtype)
        return grad_h.to(hidden.dtype), grad_w.to(weight.dtype), out_b, None, None, None, None


def chunked_smoothed_cross_entropy(
    hidden: Any,
    weight: Any,
    targets: Any,
    *,
    bias: Any = None,
    smoothing: float = 0.1,
    ignore_index: int = -100,
    reduction: str = "mean",
    token_block: int = 1024,
    vocab_block: int = 4096,
    temperature: float = 1.0,
) -> torch.Tensor:
    """The label-smoothed cross-entropy of ``hidden @ weight.T + bias`` without materialising the logits.

    Equal (to float rounding) to ``smoothed_cross_entropy(hidden @ weight.T + bias, targets)`` in value
    and gradient, with peak extra memory ``token_block x vocab_block`` floats instead of ``n x V``
    (the paper's custom kernel, written here in blocked torch rather than Triton).

    Parameters
    ----------
    hidden : torch.Tensor, shape (n, d)
        Final hidden states (after the model's last norm).
    weight : torch.Tensor, shape (V, d)
        The output layer (``model.get_output_embeddings().weight``).
    targets : torch.Tensor of int, shape (n,)
        Target ids; ``ignore_index`` marks positions that do not count.
    bias : torch.Tensor, shape (V,), optional
        The output layer's bias, if it has one.
    smoothing : float, default=0.1
        The smoothing factor ``beta`` in [0, 1) (the paper's default).
    ignore_index : int, default=-100
    reduction : {"mean", "sum", "none"}, default="mean"
    token_block, vocab_block : int, default=1024, 4096
        Tile sizes (memory vs speed; results do not depend on them beyond float rounding).
    temperature : float, default=1.0
        Training temperature ``T``: the loss of the logits divided by ``T``, times ``T`` (as
        :func:`smoothed_cross_entropy`); computed by scaling ``hidden`` and ``bias``, so still
        without the logits.

    Returns
    -------
    torch.Tensor
        The loss (float32, or float64 for float64 inputs), differentiable in ``hidden``,
        ``weight`` and ``bias``.

    References
    ----------
    Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing", ICML 2025;
    Wijmans et al., "Cut Your Losses in Large-Vocabulary Language Models", ICLR 2025 (the blocked
    log-sum-exp the paper's kernel extends).

    Examples
    --------
    >>> g = torch.Generator().manual_seed(0)
    >>> h, w = torch.randn(6, 4, generator=g), torch.randn(10, 4, generator=g)
    >>> y = torch.tensor([1, 2, 3, -100, 5, 9])
    >>> a = chunked_smoothed_cross_entropy(h, w, y, token_block=4, vocab_block=3)
    >>> bool(torch.isclose(a, smoothed_cross_entropy(h @ w.T, y), atol=1e-6))
    True
    """
    beta = _check_smoothing(smoothing)
    reduction = _check_reduction(reduction)
    temp = _check_temperature(temperature)
    token_block, vocab_block = _block("token_block", token_block), _block("vocab_block", vocab_block)
    if not isinstance(hidden, torch.Tensor) or hidden.ndim != 2 or not hidden.is_floating_point():
        raise DataError(
            "hidden must be a 2-D float torch.Tensor (n, d); flatten (batch, seq, d) first.",
            argument="hidden",
        )
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2 or weight.shape[1] != hidden.shape[1]:
        raise DataError(
            f"weight must be a (V, {hidden.shape[1]}) torch.Tensor (the output layer's weight).",
            argument="weight",
        )
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.shape != weight.shape[:1]):
        raise DataError(f"bias must be a ({weight.shape[0]},) torch.Tensor or None.", argument="bias")
    if (
        not isinstance(targets, torch.Tensor)
        or targets.shape != hidden.shape[:1]
        or targets.is_floating_point()
    ):
        raise DataError(
            f"targets must be an integer torch.Tensor of shape ({hidden.shape[0]},), one id per row.",
            argument="targets",
        )
    valid = targets != ignore_index
    if bool(((targets[valid] < 0) | (targets[valid] >= weight.shape[0])).any()):
        raise DataError(
            f"targets hold ids outside [0, {weight.shape[0]}) that are not ignore_index={ignore_index}; "
            "check the tokenizer matches the model.",
            argument="targets",
        )
    marked = torch.where(valid, targets, -1).long()
    if temp != 1.0:
        hidden = hidden / temp
        bias = None if bias is None else bias / temp
    per_token = _ChunkedSmoothedCE.apply(hidden, weight, bias, marked, beta, token_block, vocab_block)
    return _reduce(per_token * temp if temp != 1.0 else per_token, valid, reduction)


def smoothed_lm_loss(
    model: Any,
    input_ids: Any,
    loss_mask: Any = None,
    *,
    smoothing: float = 0.1,
    memory_light: bool = True,
    token_block: int = 1024,
    vocab_block: int = 4096,
    temperature: float = 1.0,
    softcap: float | None = None,
) -> torch.Tensor:
    """Label-smoothed next-token loss of any ``transformers`` causal LM (the SFT loss of the paper).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM with an output-embedding layer (``get_output_embeddings``).
    input_ids : torch.Tensor of int, shape (batch, seq)
    loss_mask : torch.Tensor, shape (batch, seq), optional
        Which target positions count (e.g. the response tokens of an instruction); default all.
        Position ``t`` of the mask says whether token ``t`` is a target (the first never is).
    smoothing : float, default=0.1
    memory_light : bool, default=True
        Use :func:`chunked_smoothed_cross_entropy` on the final hidden states (no logits); else the
        model's logits and :func:`smoothed_cross_entropy`.
    token_block, vocab_block : int
        Tile sizes of the memory-light path.
    temperature : float, default=1.0
        Training temperature (the paper's remedy for large-vocabulary, small-hidden models:
        ``T < 1`` lets the smoothed optimum be reached; the model is used at ``T = 1`` after).
    softcap : float, optional
        Train on ``softcap * tanh(z / softcap)`` of the (tempered) logits; needs
        ``memory_light=False``.

    Returns
    -------
    torch.Tensor
        The mean loss over counted positions (scalar, differentiable).

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("gpt2", vocab_size=11, d_model=8, n_layers=1, n_heads=2))
    >>> ids = torch.tensor([[1, 2, 3, 4]])
    >>> a, b = smoothed_lm_loss(m, ids), smoothed_lm_loss(m, ids, memory_light=False)
    >>> bool(torch.isclose(a, b, atol=1e-5))
    True
    """
    _check_smoothing(smoothing)
    _check_temperature(temperature)
    if _check_softcap(softcap) is not None and memory_light:
        raise ParameterError(
            "softcap needs the materialised logits (tanh is not linear in the hidden states); "
            "pass memory_light=False with it.",
            argument="softcap",
        )
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
        raise DataError("input_ids must be a 2-D integer torch.Tensor (batch, seq).", argument="input_ids")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None or not isinstance(getattr(head, "weight", None), torch.Tensor):
        raise ModelError(
            "model has no output-embedding layer (get_output_embeddings); pass a transformers causal LM.",
            argument="model",
        )
    config = getattr(model, "config", None)
    capped = getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None)
    if memory_light and capped:
        raise ModelError(
            "model rescales or caps its logits after the output layer, which the memory-light path does not "
            "model; pass memory_light=False.",
            argument="model",
        )
    targets = input_ids[:, 1:]
    if loss_mask is not None:
        mask = torch.as_tensor(loss_mask, device=input_ids.device)
        if mask.shape != input_ids.shape:
            raise DataError(
                f"loss_mask must have the shape of input_ids {tuple(input_ids.shape)}.", argument="loss_mask"
            )
        targets = torch.where(mask[:, 1:].bool(), targets, -100)
    targets = targets.reshape(-1)
    if not memory_light:
        logits = model(input_ids=input_ids).logits[:, :-1]
        return smoothed_cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            targets,
            smoothing=smoothing,
            temperature=temperature,
            softcap=softcap,
        )
    hidden = model.base_model(input_ids=input_ids).last_hidden_state[:, :-1]
    return chunked_smoothed_cross_entropy(
        hidden.reshape(-1, hidden.shape[-1]),
        head.weight,
        targets,
        bias=getattr(head, "bias", None),
        smoothing=smoothing,
        token_block=token_block,
        vocab_block=vocab_block,
        temperature=temperature,
    )
