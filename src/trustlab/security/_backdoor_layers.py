"""Reading a torch layer chain: which layers a method can handle, inputs, hidden-unit permutations.

Private helpers of :mod:`trustlab.security.backdoor` (TSC's symmetry step) and
:mod:`trustlab.security.adversarial` (the feature extractor / linear head split). The
methods handle a ``torch.nn.Sequential`` (nested Sequentials are flattened) of
``Linear`` and ``Conv2d`` layers with element-wise or channel-wise layers between them
(``ReLU``, ``Flatten``, ``Dropout``, ``Identity``, ``MaxPool2d``, ``AvgPool2d``): exactly
the layers whose hidden units a permutation can reorder without changing the function.
Where the caller allows it (TSC), a ``BatchNorm1d``/``BatchNorm2d`` directly after a
``Linear``/``Conv2d`` is permuted with that layer's units (its weight, bias, running mean
and running variance), as the authors' code does for VGG-BN and ResNets.
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
    """The leaf layers of a Sequential model and the positions of its weight layers.

    ``norms[k]`` is the position of the BatchNorm directly after weight layer ``k``, or
    None (empty when the caller does not allow BatchNorm).
    """

    layers: tuple[Any, ...]
    weights: tuple[int, ...]
    norms: tuple[int | None, ...] = ()

    def norm(self, k: int) -> Any:
        """The BatchNorm module after weight layer ``k``, or None."""
        pos = self.norms[k] if k < len(self.norms) else None
        return None if pos is None else self.layers[pos]

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


def read_chain(model: Any, caller: str, *, argument: str = "model", batchnorm: bool = False) -> Chain:
    """Check that ``model`` is a Sequential chain the method can handle; return its layers.

    ``batchnorm=True`` also accepts a ``BatchNorm1d``/``BatchNorm2d`` (with running
    statistics) directly after a ``Linear``/``Conv2d``; that weight layer may then have no
    bias (the BatchNorm's shift plays its part).
    """
    torch = require_torch()
    nn = torch.nn
    norm_types = (nn.BatchNorm1d, nn.BatchNorm2d)
    supported = "Linear, Conv2d (groups=1)"
    if batchnorm:
        supported += ", BatchNorm1d/BatchNorm2d directly after one of them"
    supported += " and, between them, " + ", ".join(_PASS_NAMES)
    if not isinstance(model, nn.Sequential):
        raise ModelError(
            f"{argument} of {caller} must be a torch.nn.Sequential of {supported}; got "
            f"{type(model).__name__}. Rebuild the network as an nn.Sequential of these layers.",
            argument=argument,
        )
    layers = _leaves(model, nn)
    weights: list[int] = []
    norms: list[int | None] = []
    for i, layer in enumerate(layers):
        name = type(layer).__name__
        if isinstance(layer, nn.Linear | nn.Conv2d):
            if isinstance(layer, nn.Conv2d) and layer.groups != 1:
                raise ModelError(
                    f"{argument} of {caller}: layer {i} is a grouped Conv2d (groups={layer.groups}), "
                    f"which {caller} cannot handle; supported layers: {supported}.",
                    argument=argument,
                )
            followed_by_norm = batchnorm and i + 1 < len(layers) and isinstance(layers[i + 1], norm_types)
            if layer.bias is None and not followed_by_norm:
                raise ModelError(
                    f"{argument} of {caller}: layer {i} ({name}) has no bias; {caller} needs "
                    "Linear/Conv2d layers with bias=True"
                    + (" or followed by a BatchNorm." if batchnorm else "."),
                    argument=argument,
                )
            weights.append(i)
            norms.append(i + 1 if followed_by_norm else None)
        elif batchnorm and isinstance(layer, norm_types):
            _check_norm(layer, i, layers, weights, norms, caller, argument)
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
    return Chain(tuple(layers), tuple(weights), tuple(norms) if batchnorm else ())


def _check_norm(
    layer: Any,
    i: int,
    layers: list[Any],
    weights: list[int],
    norms: list[int | None],
    caller: str,
    argument: str,
) -> None:
    """A BatchNorm must directly follow a weight layer, match its units and keep running statistics."""
    name = type(layer).__name__
    if not weights or norms[-1] != i:
        raise ModelError(
            f"{argument} of {caller}: layer {i} ({name}) does not directly follow a Linear/Conv2d "
            f"layer; {caller} permutes a BatchNorm with the units of the layer just before it. Move "
            "it right after a Linear/Conv2d (Conv - BatchNorm - ReLU, as in a ResNet) or remove it.",
            argument=argument,
        )
    prev = layers[weights[-1]]
    units = int(prev.out_features if hasattr(prev, "out_features") else prev.out_channels)
    if layer.num_features != units:
        raise ModelError(
            f"{argument} of {caller}: layer {i} ({name}) has {layer.num_features} features but the "
            f"layer before it has {units} units; they must match.",
            argument=argument,
        )
    if layer.running_mean is None or layer.running_var is None:
        raise ModelError(
            f"{argument} of {caller}: layer {i} ({name}) has track_running_stats=False; {caller} "
            "needs BatchNorm layers with running statistics (the default).",
            argument=argument,
        )


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

    Taken after the BatchNorm and the ReLU that follow the layer when there are (as the
    authors' code does); convolution channels are read at every spatial position.
    """
    torch = require_torch()
    stop = chain.weights[k] + 1
    if chain.norm(k) is not None:
        stop += 1
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
    input weights are permuted alike, and a BatchNorm after the layer has its weight,
    bias, running mean and running variance permuted with the units). Returns the copy
    and the mean correlation of the matched units (over all hidden layers).
    """
    import copy

    from scipy.optimize import linear_sum_assignment

    torch = require_torch()
    out = copy.deepcopy(model)
    ref_chain = read_chain(reference, "permute_to", batchnorm=True)
    chain = read_chain(out, "permute_to", batchnorm=True)
    matched = []
    for k in range(len(chain.weights) - 1):
        corr = _correlation(_activation(reference, ref_chain, k, X), _activation(out, chain, k, X))
        rows, cols = linear_sum_assignment(corr, maximize=align)
        matched.append(float(corr[rows, cols].mean()))
        perm = torch.as_tensor(cols, dtype=torch.long)
        layer = chain.layers[chain.weights[k]]
        nxt = chain.layers[chain.weights[k + 1]]
        norm = chain.norm(k)
        with torch.no_grad():
            own = [layer.weight, layer.bias]
            if norm is not None:
                own += [norm.weight, norm.bias, norm.running_mean, norm.running_var]
            for tensor in own:
                if tensor is not None:
                    tensor.copy_(tensor[perm])
            w = nxt.weight
            if isinstance(nxt, torch.nn.Conv2d) or w.shape[1] == len(perm):
                w.copy_(w[:, perm])
            else:  # a Linear layer reading a flattened (channels, height, width) map
                blocks = w.reshape(w.shape[0], len(perm), -1)
                w.copy_(blocks[:, perm].reshape(w.shape))
    return out.eval(), float(np.mean(matched))
