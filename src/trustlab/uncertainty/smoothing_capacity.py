"""How confident a language model can become, and whether label smoothing can reach its optimum.

Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing",
ICML 2025 (arXiv:2508.00264), section on large-vocabulary LLMs. See
``docs/uncertainty/label_smoothing.md``.

The logits of a causal LM are ``z = W h + b`` with ``h`` the final hidden state, so
``||z|| <= sigma_C ||h||`` (``sigma_C`` the output layer's largest singular value, ``||h||``
at most ``sigma_h sqrt(D)`` after the last norm). A bounded logit norm bounds the confidence a
model can express over a vocabulary of ``V`` tokens, and that bound falls with ``V`` and rises
with the hidden size ``D``. The smoothed loss (factor ``beta``) has its optimum at a target
probability ``1 - beta + beta / V``, a logit gap ``log(1 + (1 - beta) V / beta)`` that grows
with ``log V``. When the model cannot reach that confidence (small hidden size, large
vocabulary), the smoothed loss's gradient points the same way as the hard-label one everywhere
and smoothing changes nothing; dividing the logits by a training temperature ``T < 1`` raises
the reachable confidence so the smoothed optimum is in reach again.

This module imports torch; ``import trustlab.uncertainty`` does not import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.uncertainty.label_smoothing import _check_smoothing, _check_temperature

__all__ = [
    "ConfidenceCapacity",
    "attainable_confidence",
    "confidence_capacity",
    "max_confidence_bound",
    "smoothing_optimum_gap",
]


def _vocab(vocab_size: Any) -> int:
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 2:
        raise ParameterError(f"vocab_size must be an int >= 2, got {vocab_size!r}.", argument="vocab_size")
    return int(vocab_size)


def _positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise ParameterError(
            f"{name} must be a finite number {'>=' if allow_zero else '>'} 0, got {value!r}.", argument=name
        )
    return float(value)


def smoothing_optimum_gap(vocab_size: int, smoothing: float = 0.1) -> float:
    """The logit gap (target minus every other token) at the optimum of the smoothed loss.

    Parameters
    ----------
    vocab_size : int
        ``V``, at least 2.
    smoothing : float, default=0.1
        ``beta`` in [0, 1).

    Returns
    -------
    float
        ``log(1 + (1 - beta) V / beta)``: the gap at which the softmax puts ``1 - beta + beta / V``
        on the target and ``beta / V`` on each other token; ``inf`` for ``beta = 0`` (hard labels
        have no finite optimum).

    References
    ----------
    Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing", ICML 2025.

    Examples
    --------
    >>> round(smoothing_optimum_gap(32000, 0.1), 2)
    12.57
    """
    v, beta = _vocab(vocab_size), _check_smoothing(smoothing)
    return math.inf if beta == 0 else math.log1p((1 - beta) * v / beta)


def max_confidence_bound(logit_norm: float, vocab_size: int) -> float:
    """The largest softmax probability any logit vector of norm at most ``logit_norm`` can give.

    Parameters
    ----------
    logit_norm : float
        ``R >= 0``, a bound on ``||z||_2`` (e.g. ``sigma_C * ||h||``).
    vocab_size : int
        ``V``, at least 2.

    Returns
    -------
    float
        ``1 / (1 + (V - 1) exp(-R sqrt(V / (V - 1))))``, reached by the two-level vector (one
        logit high, the rest equal): it falls as ``V`` grows and rises with ``R`` (so with the
        hidden size, ``R`` being of order ``sigma_C sigma_h sqrt(D)``).

    References
    ----------
    Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing", ICML 2025.

    Examples
    --------
    >>> round(max_confidence_bound(0.0, 4), 3)
    0.25
    >>> max_confidence_bound(10.0, 256_000) < max_confidence_bound(10.0, 32_000)
    True
    """
    r, v = _positive("logit_norm", logit_norm, allow_zero=True), _vocab(vocab_size)
    gap = r * math.sqrt(v / (v - 1))
    return 1.0 / (1.0 + (v - 1) * math.exp(-gap))


def attainable_confidence(
    weight: Any, hidden_norm: float, *, bias: Any = None, targets: Any = None, steps: int = 300
) -> np.ndarray:
    """The most probability an output layer can put on each target over hidden states of bounded norm.

    For each target ``y``: ``max softmax(W h + b)_y`` over ``||h|| <= hidden_norm``, a concave
    problem in ``h`` (the log-probability), solved by projected Adam ascent on the analytic gradient
    (NumPy, float64).

    Parameters
    ----------
    weight : torch.Tensor, shape (V, D)
        The output layer (``model.get_output_embeddings().weight``).
    hidden_norm : float
        The largest norm the final hidden state takes (e.g. observed on the data).
    bias : torch.Tensor, shape (V,), optional
    targets : array-like of int, optional
        The token ids to evaluate (default all ``V``; pass a subset for large vocabularies, the
        cost is ``len(targets) * V * D`` per step).
    steps : int, default=300
        Ascent steps.

    Returns
    -------
    numpy.ndarray of float, shape (len(targets),)
        The attainable confidence of each target.

    References
    ----------
    Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing", ICML 2025.

    Examples
    --------
    >>> w = torch.eye(3)  # logits = h itself, so the norm bound is tight
    >>> attainable_confidence(w, 2.0).round(3)
    array([0.853, 0.853, 0.853])
    >>> round(max_confidence_bound(2.0, 3), 3)
    0.853
    """
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2 or not weight.is_floating_point():
        raise DataError("weight must be a 2-D float torch.Tensor (V, D).", argument="weight")
    h_norm = _positive("hidden_norm", hidden_norm, allow_zero=True)
    v = weight.shape[0]
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.shape != (v,)):
        raise DataError(f"bias must be a ({v},) torch.Tensor or None.", argument="bias")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ParameterError(f"steps must be a positive int, got {steps!r}.", argument="steps")
    ids = np.arange(v) if targets is None else np.asarray(targets)
    if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= v:
        raise DataError(
            f"targets must be a non-empty 1-D array of token ids in [0, {v}).", argument="targets"
        )
    w = weight.detach().double().cpu().numpy()
    b = np.zeros(v) if bias is None else bias.detach().double().cpu().numpy()
    out = np.empty(ids.size)
    lr, eps = 0.05 * max(h_norm, 1e-3), 1e-12
    for start in range(0, ids.size, 256):
        y = ids[start : start + 256]
        rows = np.arange(y.size)
        h = w[y] / np.maximum(np.linalg.norm(w[y], axis=1, keepdims=True), eps) * h_norm
        m, s2 = np.zeros_like(h), np.zeros_like(h)
        best = np.full(y.size, -np.inf)
        for step in range(1, steps + 1):  # projected Adam ascent on the analytic gradient
            z = h @ w.T + b
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            norm = p.sum(axis=1)
            best = np.maximum(best, np.log(p[rows, y] / norm))
            grad = w[y] - (p / norm[:, None]) @ w  # d log p_y / d h
            unit = h / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), eps)
            outward = np.maximum((grad * unit).sum(axis=1, keepdims=True), 0.0)
            on_sphere = np.linalg.norm(h, axis=1, keepdims=True) >= h_norm * (1 - 1e-9)
            grad = grad - on_sphere * outward * unit  # the sphere blocks outward moves
            m = 0.9 * m + 0.1 * grad
            s2 = 0.999 * s2 + 0.001 * grad**2
            h = h + lr * (m / (1 - 0.9**step)) / (np.sqrt(s2 / (1 - 0.999**step)) + 1e-12)
            h *= np.minimum(1.0, h_norm / np.maximum(np.linalg.norm(h, axis=1, keepdims=True), eps))
        out[start : start + y.size] = np.exp(best)
    return out


@dataclass(frozen=True)
class ConfidenceCapacity:
    """How confident a model can become, set against the smoothed loss's optimum.

    Attributes
    ----------
    hidden_size, vocab_size : int
        ``D`` and ``V``.
    hidden_norm : float
        Largest final-hidden-state norm over the given inputs, divided by the temperature.
    sigma_c : float
        Largest singular value of the output layer.
    logit_norm_bound : float
        ``sigma_c * hidden_norm``: no logit vector is longer (the paper's bound).
    confidence_bound : float
        :func:`max_confidence_bound` of that norm: an upper bound from the norms alone.
    attainable_confidence : float
        The most any target (of those asked) can get from the actual output layer at that hidden
        norm (:func:`attainable_confidence`, maximised over targets): the tight figure.
    smoothed_target : float
        ``1 - beta + beta / V``, the target probability at the smoothed loss's optimum.
    optimum_gap : float
        :func:`smoothing_optimum_gap`.
    smoothing, temperature : float
        The settings it was computed for.

    See Also
    --------
    confidence_capacity : builds it from a model.
    """

    hidden_size: int
    vocab_size: int
    hidden_norm: float
    sigma_c: float
    logit_norm_bound: float
    confidence_bound: float
    attainable_confidence: float
    smoothed_target: float
    optimum_gap: float
    smoothing: float
    temperature: float

    @property
    def smoothing_reachable(self) -> bool:
        """Whether the model can reach the smoothed optimum (else smoothing acts like hard labels)."""
        return self.attainable_confidence >= self.smoothed_target


def confidence_capacity(
    model: Any,
    input_ids: Any,
    *,
    smoothing: float = 0.1,
    temperature: float = 1.0,
    targets: Any = None,
    steps: int = 300,
) -> ConfidenceCapacity:
    """Whether label smoothing can act on a causal LM: its confidence capacity vs the smoothed optimum.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM with an output-embedding layer (``get_output_embeddings``).
    input_ids : torch.Tensor of int, shape (batch, seq)
        Inputs whose final hidden states give the hidden norm (e.g. a batch of the SFT data).
    smoothing : float, default=0.1
        ``beta`` of the smoothed loss.
    temperature : float, default=1.0
        Training temperature the loss divides the logits by (the paper's remedy): the capacity
        is that of ``z / T``.
    targets : array-like of int, optional
        Token ids to maximise over (default all; pass the answer tokens for a large vocabulary).
    steps : int, default=300
        Ascent steps of :func:`attainable_confidence`.

    Returns
    -------
    ConfidenceCapacity

    References
    ----------
    Huang, Lu & Zeng, "Calibrated Language Models and How to Find Them with Label Smoothing", ICML 2025.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=64, d_model=8, n_layers=1, n_heads=2))
    >>> cap = confidence_capacity(m, torch.tensor([[1, 2, 3]]), steps=50)
    >>> cap.smoothing_reachable  # a fresh model's logits are far too small
    False
    """
    beta, temp = _check_smoothing(smoothing), _check_temperature(temperature)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None or not isinstance(getattr(head, "weight", None), torch.Tensor):
        raise ModelError(
            "model has no output-embedding layer (get_output_embeddings); pass a transformers causal LM.",
            argument="model",
        )
    if not isinstance(input_ids, torch.Tensor) or input_ids.ndim != 2 or input_ids.is_floating_point():
        raise DataError("input_ids must be a 2-D integer torch.Tensor (batch, seq).", argument="input_ids")
    with torch.no_grad():
        hidden = model.base_model(input_ids=input_ids).last_hidden_state
    w = head.weight.detach()
    bias = getattr(head, "bias", None)
    bias = None if bias is None else bias.detach() / temp
    h_norm = float(hidden.double().norm(dim=-1).max()) / temp
    w64 = w.double().cpu().numpy()
    sigma = float(np.sqrt(max(np.linalg.eigvalsh(w64.T @ w64).max(), 0.0)))  # largest singular value
    v = int(w.shape[0])
    attain = float(attainable_confidence(w, h_norm, bias=bias, targets=targets, steps=steps).max())
    return ConfidenceCapacity(
        hidden_size=int(w.shape[1]),
        vocab_size=v,
        hidden_norm=h_norm,
        sigma_c=sigma,
        logit_norm_bound=sigma * h_norm,
        confidence_bound=max_confidence_bound(sigma * h_norm, v),
        attainable_confidence=attain,
        smoothed_target=1 - beta + beta / v,
        optimum_gap=smoothing_optimum_gap(v, beta) if beta > 0 else math.inf,
        smoothing=beta,
        temperature=temp,
    )
