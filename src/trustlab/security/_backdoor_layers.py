"""Reading a torch layer chain: which layers a method can handle, inputs, hidden-unit permutations.

Private helpers of :mod:`trustlab.security.backdoor` (TSC's symmetry step) and
:mod:`trustlab.security.adversarial` (the feature extractor / linear head split). The
methods handle a ``torch.nn.Sequential`` (nested Sequentials are flattened) of
``Linear`` and ``Conv2d`` layers with element-wise or channel-wise layers between them
(``ReLU``, ``Flatten``, ``Dropout``, ``Identity``, ``MaxPool2d``, ``AvgPool2d``): exactly
the layers whose hidden units a permutation can reorder without changing the function.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError
from trustlab.security._nets import require_torch

__all__ = [
    "Chain",
    "as_float32",
    "check_inputs",
    "check_labels",
    "one_thread",
    "permute_to",
    "read_chain",
]

_PASS_NAMES = ("ReLU", "Flatten", "Dropout", "Identity", "MaxPool2d", "AvgPool2d")


@dataclass(frozen=True)
class Chain:
    """The leaf layers of a Sequential model and the positions of its weight layers."""

    layers: tuple[Any, ...]
    weights: tuple[int, ...]

    @property
    def first(self) -> Any:
        """The first weight layer (it fixes the input shape)."""
        return self.layers[self.weights[0]]

    @property
    def n_classes(self) -> int:
        """Outputs of the last weight layer."""
        last = self.layers[self.weights[-1]]
        return int(last.out_features if hasattr(last, "out_features") else last.out_channels)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block, restoring the caller's setting after.

    The models these methods train are small: torch's thread pool costs more than it
    gains on them, and oversubscribes a shared machine (as trustlab.privacy.training does).
    """
    torch = require_torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _leaves(module: Any, nn: Any) -> list[Any]:
    out: list[Any] = []
    for child in module:
        if isinstance(child, nn.Sequential):
            out.extend(_leaves(child, nn))
        else:
            out.append(child)
    return out


def read_chain(model: Any, caller: str, *, argument: str = "model") -> Chain:
    """Check that ``model`` is a Sequential chain the method can handle; return its layers."""
    torch = require_torch()
    nn = torch.nn
    supported = "Linear, Conv2d (groups=1) and, between them, " + ", ".join(_PASS_NAMES)
    if not isinstance(model, nn.Sequential):
        raise ModelError(
            f"{argument} of {caller} must be a torch.nn.Sequential of {supported}; got "
            f"{type(model).__name__}. Rebuild the network as an nn.Sequential of these layers.",
            argument=argument,
        )
    layers = _leaves(model, nn)
    weights = []
    for i, layer in enumerate(layers):
        name = type(layer).__name__
        if isinstance(layer, nn.Linear | nn.Conv2d):
            if isinstance(layer, nn.Conv2d) and layer.groups != 1:
                raise ModelError(
                    f"{argument} of {caller}: layer {i} is a grouped Conv2d (groups={layer.groups}), "
                    f"which {caller} cannot handle; supported layers: {supported}.",
                    argument=argument,
                )
            if layer.bias is None:
                raise ModelError(
                    f"{argument} of {caller}: layer {i} ({name}) has no bias; {caller} needs "
                    "Linear/Conv2d layers with bias=True.",
                    argument=argument,
                )
            weights.append(i)
        elif name not in _PASS_NAMES:
            raise ModelError(
                f"{argument} of {caller}: layer {i} is a {name}, which {caller} cannot handle; "
                f"supported layers: {supported}. Remove or fold the {name} layer first.",
                argument=argument,
            )
    if len(weights) < 2:
        raise ModelError(
            f"{argument} of {caller} needs at least two Linear/Conv2d layers (a hidden layer and "
            f"an output layer); got {len(weights)}.",
            argument=argument,
        )
    return Chain(tuple(layers), tuple(weights))


def as_float32(X: Any, name: str, *, min_rows: int = 1) -> np.ndarray:
    """``X`` as a finite float32 array (values beyond float32's range are refused, not cast to inf)."""
    arr = check_numeric_array(X, name, min_rows=min_rows)
    if arr.size and float(np.max(np.abs(arr))) > float(np.finfo(np.float32).max):
        raise DataError(
            f"{name} has values beyond float32's range (torch models compute in float32); rescale it.",
            argument=name,
        )
    return arr.astype(np.float32)


def check_inputs(X: Any, chain: Chain, name: str, *, min_rows: int = 1) -> np.ndarray:
    """``X`` as float32, finite, with the shape the chain's first layer takes."""
    arr = as_float32(X, name, min_rows=min_rows)
    torch = require_torch()
    first = chain.first
    if isinstance(first, torch.nn.Linear):
        if arr.ndim != 2 or arr.shape[1] != first.in_features:
            raise DataError(
                f"{name} must have shape (n, {first.in_features}) for the model's first Linear "
                f"layer; got {arr.shape}.",
                argument=name,
            )
    elif arr.ndim != 4 or arr.shape[1] != first.in_channels:
        raise DataError(
            f"{name} must have shape (n, {first.in_channels}, height, width) for the model's "
            f"first Conv2d layer; got {arr.shape}.",
            argument=name,
        )
    return arr


def check_labels(y: Any, n: int, n_classes: int, name: str) -> np.ndarray:
    """Integer labels in ``0..n_classes-1``, one per row."""
    arr = check_numeric_array(y, name, ndim=1, min_rows=1)
    if len(arr) != n:
        raise DataError(f"{name} has {len(arr)} labels for {n} rows; pass one label per row.", argument=name)
    if not np.all(arr == np.round(arr)) or arr.min() < 0 or arr.max() >= n_classes:
        raise DataError(
            f"{name} must hold integer class labels in 0..{n_classes - 1} (the model's outputs).",
            argument=name,
        )
    return arr.astype(np.int64)


def _activation(model: Any, chain: Chain, k: int, X: Any) -> Any:
    """Unit activations (rows = samples x positions, columns = units) after weight layer ``k``.

    Taken after the ReLU that follows the layer when there is one (as the authors' code
    does); convolution channels are read at every spatial position.
    """
    torch = require_torch()
    stop = chain.weights[k] + 1
    if stop < len(chain.layers) and isinstance(chain.layers[stop], torch.nn.ReLU):
        stop += 1
    with torch.no_grad():
        a = X
        for layer in chain.layers[:stop]:
            a = layer(a)
    if a.ndim == 4:
        a = a.permute(0, 2, 3, 1).reshape(-1, a.shape[1])
    return a


def _correlation(a: Any, b: Any) -> np.ndarray:
    """Pearson correlation between the units of ``a`` (rows) and of ``b`` (columns)."""
    a = a - a.mean(0)
    b = b - b.mean(0)
    cov = a.T @ b / a.shape[0]
    std = a.std(0, unbiased=False)[:, None] * b.std(0, unbiased=False)[None, :]
    return (cov / (std + 1e-4)).double().numpy()


def permute_to(reference: Any, model: Any, X: Any, *, align: bool) -> tuple[Any, float]:
    """A copy of ``model`` with its hidden units permuted to match (or mismatch) ``reference``.

    Layer by layer from the input, the units of ``model`` are assigned to those of
    ``reference`` by the Hungarian method on the correlation of their activations on
    ``X``: the assignment of largest total correlation (``align=True``, weight matching of
    Git Re-Basin / the authors' second stage) or of smallest (``align=False``, the first
    stage's push into another basin). The function is unchanged (the next layer's
    input weights are permuted alike). Returns the copy and the mean correlation of the
    matched units (over all hidden layers).
    """
    import copy

    from scipy.optimize import linear_sum_assignment

    torch = require_torch()
    out = copy.deepcopy(model)
    ref_chain = read_chain(reference, "permute_to")
    chain = read_chain(out, "permute_to")
    matched = []
    for k in range(len(chain.weights) - 1):
        corr = _correlation(_activation(reference, ref_chain, k, X), _activation(out, chain, k, X))
        rows, cols = linear_sum_assignment(corr, maximize=align)
        matched.append(float(corr[rows, cols].mean()))
        perm = torch.as_tensor(cols, dtype=torch.long)
        layer = chain.layers[chain.weights[k]]
        nxt = chain.layers[chain.weights[k + 1]]
        with torch.no_grad():
            layer.weight.copy_(layer.weight[perm])
            layer.bias.copy_(layer.bias[perm])
            w = nxt.weight
            if isinstance(nxt, torch.nn.Conv2d) or w.shape[1] == len(perm):
                w.copy_(w[:, perm])
            else:  # a Linear layer reading a flattened (channels, height, width) map
                blocks = w.reshape(w.shape[0], len(perm), -1)
                w.copy_(blocks[:, perm].reshape(w.shape))
    return out.eval(), float(np.mean(matched))
