"""QuEST: quantization-aware training with Hadamard normalisation, MSE-optimal fitting and trust gradients.

:func:`quantize_model` copies any torch model and wraps its ``Linear`` and ``Conv2d``
layers (on a ``transformers`` language model: every block's linear layers, the embedding
and ``lm_head`` kept, as in the paper) so that their weights and inputs are quantized on
the forward pass (QuEST, an abs-max straight-through baseline, or LSQ) while the optimiser
updates the full-precision latent weights; :class:`QuantizationAwareTraining` trains such
a copy on images (the scikit-learn contract). :func:`gradient_alignment` measures how well an estimator's
gradient matches the full-precision one (the paper's Figure 2, on weights).

References
----------
A. Panferov, J. Chen, S. Tabesh, R. L. Castro, M. Nikdan, D. Alistarh, "QuEST: Stable
Training of LLMs with 1-Bit Weights and Activations", ICML 2025.
"""

from __future__ import annotations

import copy
import numbers
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab.efficiency._quantizers import lsq_init, lsq_quantize, quest_quantize, ste_quantize
from trustlab.efficiency._trained import TrainedModelMixin
from trustlab.errors import ModelError, ParameterError
from trustlab.vision.classifiers import (
    _logits_width,
    check_images,
    check_labels,
    check_model,
    one_thread,
    require_torch,
    train_classifier,
)

__all__ = ["METHODS", "QuantizationAwareTraining", "gradient_alignment", "quantize_model"]

METHODS = ("quest", "quest_no_hadamard", "ste", "lsq")
"""Quantizers :func:`quantize_model` knows: QuEST, QuEST without the Hadamard transform,
abs-max with the straight-through estimator, learned step size quantization."""

_BITS = [Interval(numbers.Integral, 1, 8, closed="both")]


def _quantizer_module() -> Any:
    torch = require_torch()
    nn = torch.nn
    F = nn.functional

    class QuantizedLayer(nn.Module):  # type: ignore[name-defined]
        """A ``Linear`` or ``Conv2d`` quantizing its weights and inputs (latent weights in full precision)."""

        def __init__(self, layer: Any, bits: int, method: str, activations: bool) -> None:
            super().__init__()
            self.layer = layer
            self.bits = int(bits)
            self.method = method
            self.activations = bool(activations)
            self.enabled = True
            self.conv = isinstance(layer, nn.Conv2d)
            self.transposed = _is_conv1d(layer)  # transformers' Conv1D (GPT-2): weight (in, out)
            if method == "lsq":
                self.w_step = nn.Parameter(torch.tensor(lsq_init(self._w2d(), bits, signed=True)))
                self.a_step = nn.Parameter(torch.tensor(1.0))
                self.register_buffer("a_ready", torch.tensor(False))
                self.register_buffer("a_signed", torch.tensor(True))

        def _w2d(self) -> Any:
            w = self.layer.weight
            return w.T if self.transposed else w.reshape(w.shape[0], -1)

        def _q(self, v: Any, which: str) -> Any:
            if self.method == "quest":
                return quest_quantize(v, self.bits)
            if self.method == "quest_no_hadamard":
                return quest_quantize(v, self.bits, hadamard=False)
            if self.method == "ste":
                return ste_quantize(v, self.bits)
            if which == "w":
                return lsq_quantize(v, self.w_step, self.bits, signed=True)
            if not bool(self.a_ready):
                with torch.no_grad():
                    signed = bool((v < 0).any())
                    self.a_signed.fill_(signed)
                    self.a_step.fill_(lsq_init(v, self.bits, signed=signed))
                    self.a_ready.fill_(True)
            return lsq_quantize(v, self.a_step, self.bits, signed=bool(self.a_signed))

        def forward(self, x: Any) -> Any:
            if not self.enabled:
                return self.layer(x)
            w = self._q(self._w2d(), "w")
            if not self.conv:
                lead = x.shape[:-1]
                a = x.reshape(-1, x.shape[-1])
                a = self._q(a, "a") if self.activations else a
                y = a @ w.T
                if self.layer.bias is not None:
                    y = y + self.layer.bias
                return y.reshape(*lead, w.shape[0])
            c = self.layer
            if c.groups != 1 or c.padding_mode != "zeros" or isinstance(c.padding, str):
                raise ModelError(
                    "quantize_model wraps Conv2d layers with groups=1, zero padding and numeric padding; "
                    f"got groups={c.groups}, padding={c.padding!r}, padding_mode={c.padding_mode!r}.",
                    argument="model",
                )
            n, _, h, wd = x.shape
            cols = F.unfold(x, c.kernel_size, dilation=c.dilation, padding=c.padding, stride=c.stride)
            oh = (h + 2 * c.padding[0] - c.dilation[0] * (c.kernel_size[0] - 1) - 1) // c.stride[0] + 1
            ow = (wd + 2 * c.padding[1] - c.dilation[1] * (c.kernel_size[1] - 1) - 1) // c.stride[1] + 1
            a = cols.transpose(1, 2).reshape(-1, cols.shape[1])
            a = self._q(a, "a") if self.activations else a
            y = a @ w.T
            if c.bias is not None:
                y = y + c.bias
            return y.reshape(n, oh * ow, -1).transpose(1, 2).reshape(n, -1, oh, ow)

    return QuantizedLayer


def _is_conv1d(layer: Any) -> bool:
    """Whether ``layer`` is transformers' ``Conv1D`` (GPT-2: ``y = x W + b``, ``W`` of shape (in, out))."""
    return (
        type(layer).__name__ == "Conv1D"
        and hasattr(layer, "nf")
        and getattr(layer, "weight", None) is not None
    )


def _layers(model: Any) -> list[tuple[Any, str, Any]]:
    """(parent, attribute name, layer) of every Linear/Conv2d/Conv1D of ``model``, in definition order."""
    torch = require_torch()
    out = []
    for parent in model.modules():
        for name, child in parent.named_children():
            if isinstance(child, torch.nn.Linear | torch.nn.Conv2d) or _is_conv1d(child):
                out.append((parent, name, child))
    return out


def _output_head(model: Any) -> Any:
    """The unembedding (``lm_head``) of a transformers model, or ``None`` for any other model."""
    get = getattr(model, "get_output_embeddings", None)
    if not callable(get) or not hasattr(model, "get_input_embeddings"):
        return None
    try:
        return get()
    except (AttributeError, NotImplementedError):
        return None


@validate_params(
    {
        "bits": _BITS,
        "method": [Options(METHODS)],
        "activations": ["boolean"],
        "keep_first_last": ["boolean"],
    }
)
def quantize_model(
    model: Any,
    *,
    bits: int = 4,
    method: str = "quest",
    activations: bool = True,
    keep_first_last: bool = True,
) -> Any:
    """A copy of ``model`` whose Linear/Conv2d layers quantize their weights and inputs.

    Inputs of any shape ``(..., d)`` are quantized row by row along ``d`` (a language
    model's ``(batch, tokens, d)`` activations: one row per token).

    Parameters
    ----------
    model : torch.nn.Module
        Any model; it is deep-copied, never changed.
    bits : int in [1, 8], default=4
        Bit width of weights and activations (LSQ needs at least 2).
    method : {"quest", "quest_no_hadamard", "ste", "lsq"}, default="quest"
        The quantizer and gradient estimator (see :data:`METHODS`).
    activations : bool, default=True
        Also quantize each wrapped layer's input (``False``: weight-only).
    keep_first_last : bool, default=True
        Keep the first and the last layer in full precision. For a ``transformers`` model
        (one with ``get_output_embeddings``, e.g. from :func:`trustlab.lm.build_model`)
        these are the embedding and the unembedding ``lm_head``: every other linear layer
        (attention and MLP projections of every block, GPT-2's ``Conv1D`` included) is
        quantized, as in the paper and its code. For any other model, the first and the
        last Linear/Conv2d in definition order (common QAT practice for small image models).

    Returns
    -------
    torch.nn.Module
        The copy; its wrapped layers are ``QuantizedLayer`` modules whose ``layer``
        holds the original (latent, full-precision) weights.

    Examples
    --------
    >>> from trustlab.vision import make_classifier
    >>> q = quantize_model(make_classifier("mlp", width=8), bits=2)
    >>> sum(type(m).__name__ == "QuantizedLayer" for m in q.modules())
    2
    """
    torch = require_torch()
    check_model(model)
    if method == "lsq" and bits < 2:
        raise ParameterError(
            "bits must be at least 2 for method='lsq' (its signed grid needs two levels "
            "on each side); use method='quest' for 1 bit.",
            argument="bits",
        )
    out = copy.deepcopy(model)
    layers = _layers(out)
    if not layers:
        raise ModelError(
            "model has no torch.nn.Linear or torch.nn.Conv2d layer to quantize.", argument="model"
        )
    head = _output_head(out)
    if not keep_first_last:
        chosen = layers
    elif head is not None:  # a transformers LM: every layer but the head (the embedding is no Linear)
        chosen = [entry for entry in layers if entry[2] is not head]
    else:
        chosen = layers[1:-1]
    if not chosen:
        raise ModelError(
            f"model has {len(layers)} Linear/Conv2d layer(s); with keep_first_last=True none is left to "
            "quantize. Pass keep_first_last=False.",
            argument="keep_first_last",
        )
    Layer = _quantizer_module()
    for parent, name, layer in chosen:
        setattr(parent, name, Layer(layer, bits, method, activations))
    del torch
    return out


def set_quantization(model: Any, enabled: bool) -> None:
    """Turn the quantization of every wrapped layer of ``model`` on or off (in place)."""
    for m in model.modules():
        if type(m).__name__ == "QuantizedLayer":
            m.enabled = bool(enabled)


def gradient_alignment(model: Any, X: Any, y: Any) -> float:
    """Cosine similarity of the quantized model's weight gradient with the full-precision one.

    The loss gradient with respect to the latent weights of every wrapped layer, taken
    through the quantizers' gradient estimator, against the gradient of the same weights
    with quantization switched off ("true" gradient), on one batch ``(X, y)``: the
    paper's gradient-alignment measure (its Figure 2 takes activations' gradients).

    Parameters
    ----------
    model : torch.nn.Module
        A model returned by :func:`quantize_model` (e.g. ``QuantizationAwareTraining().model_``).
    X : array-like of shape (n, ...)
        Images in [0, 1].
    y : array-like of shape (n,)
        Integer labels.

    Returns
    -------
    float
        In [-1, 1]; 1 means the estimator returns the full-precision gradient's direction.

    Examples
    --------
    >>> from trustlab.vision import digits_split, make_classifier
    >>> X_tr, X_te, y_tr, y_te = digits_split()
    >>> q = quantize_model(make_classifier("mlp", width=8), bits=4)
    >>> -1.0 <= gradient_alignment(q, X_te[:64], y_te[:64]) <= 1.0
    True
    """
    torch = require_torch()
    check_model(model)
    weights = [m.layer.weight for m in model.modules() if type(m).__name__ == "QuantizedLayer"]
    if not weights:
        raise ModelError("model has no quantized layer; pass a model from quantize_model.", argument="model")
    Xt = torch.as_tensor(check_images(X))
    grads = []
    was_training = model.training
    model.eval()
    try:
        with one_thread():  # labels checked against the logits of one image, in eval mode
            yt = torch.as_tensor(check_labels(y, len(Xt), _logits_width(model, Xt)))
            for enabled in (True, False):
                set_quantization(model, enabled)
                loss = torch.nn.functional.cross_entropy(model(Xt), yt)
                grads.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, weights)]))
    finally:
        set_quantization(model, True)
        model.train(was_training)
    a, b = grads
    return float((a @ b) / (a.norm() * b.norm() + 1e-30))


class QuantizationAwareTraining(TrainedModelMixin, ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Train a quantized copy of a torch image classifier (QuEST or a baseline quantizer).

    ``fit`` wraps a copy of ``model`` with :func:`quantize_model` and trains it with Adam on
    cross-entropy (the latent full-precision weights are updated; the forward pass is
    quantized). With ``bits=None`` it trains the copy in full precision, the reference.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture and initial weights (copied; not changed).
    bits : int in [1, 8] or None, default=4
        Bit width of weights and activations; ``None`` for full precision.
    method : {"quest", "quest_no_hadamard", "ste", "lsq"}, default="quest"
        The quantizer (see :func:`quantize_model`).
    activations : bool, default=True
        Quantize activations too (``False``: weight-only).
    keep_first_last : bool, default=True
        Keep the first and last layers in full precision.
    epochs : int, default=20
        Passes over the training data.
    lr : float, default=3e-3
        Adam's learning rate (the same for every method, as the paper reuses the
        full-precision rate for all QuEST runs).
    batch_size : int, default=64
        Minibatch size.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the batch order.

    Attributes
    ----------
    model_ : torch.nn.Module
        The trained (quantized) model, in eval mode.
    classes_ : numpy.ndarray
        The labels seen in ``fit``.

    References
    ----------
    A. Panferov et al., "QuEST: Stable Training of LLMs with 1-Bit Weights and
    Activations", ICML 2025.

    Examples
    --------
    >>> from trustlab.vision import digits_split, make_classifier
    >>> X_tr, X_te, y_tr, y_te = digits_split()
    >>> qat = QuantizationAwareTraining(make_classifier("mlp", width=8), bits=4, epochs=5)
    >>> qat.fit(X_tr, y_tr).score(X_te, y_te) > 0.7
    True
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "bits": [None, *_BITS],
        "method": [Options(METHODS)],
        "activations": ["boolean"],
        "keep_first_last": ["boolean"],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        model: Any = None,
        *,
        bits: int | None = 4,
        method: str = "quest",
        activations: bool = True,
        keep_first_last: bool = True,
        epochs: int = 20,
        lr: float = 3e-3,
        batch_size: int = 64,
        random_state: Any = 0,
    ) -> None:
        self.model = model
        self.bits = bits
        self.method = method
        self.activations = activations
        self.keep_first_last = keep_first_last
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> QuantizationAwareTraining:
        """Quantize a copy of ``model`` and train it on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Images in [0, 1], in the shape the model takes.
        y : array-like of shape (n,)
            Integer labels 0..C-1.

        Returns
        -------
        QuantizationAwareTraining
            ``self``.
        """
        self._validate_params()
        check_model(self.model)
        Xa = check_images(X)
        ya = check_labels(y, len(Xa))
        if self.bits is None:
            net = copy.deepcopy(self.model)
        else:
            net = quantize_model(
                self.model,
                bits=self.bits,
                method=self.method,
                activations=self.activations,
                keep_first_last=self.keep_first_last,
            )
        self.model_ = train_classifier(
            net,
            Xa,
            ya,
            epochs=self.epochs,
            lr=self.lr,
            batch_size=self.batch_size,
            random_state=self.random_state,
        )
        self.classes_ = np.unique(ya)
        return self
