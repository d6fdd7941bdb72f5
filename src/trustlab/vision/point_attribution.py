"""Point-cloud attribution helpers: the point-wise layer, critical-subset baselines, faithfulness.

What InfoCons (:mod:`trustlab.vision.infocons`) is compared with and measured by, for any
torch classifier of ``(batch, n_points, 3)`` clouds: PointNet's max-pool critical points
(Qi et al., CVPR 2017), PCSAM's gradient saliency (Zheng et al., ICCV 2019), top-k subsets,
the prediction kept or lost when a subset is kept or dropped, and the share of a subset on a
planted part. See docs/vision/infocons.md.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.vision.classifiers import check_model, one_thread, require_torch
from trustlab.vision.pointclouds import check_point_clouds, point_cloud_logits

__all__ = [
    "SubsetFaithfulness",
    "critical_point_scores",
    "find_point_layer",
    "part_precision",
    "pcsam_scores",
    "subset_faithfulness",
    "top_k_points",
]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]


def _layer_outputs(model: Any, Xt: Any) -> list[tuple[str, Any]]:
    """(name, output) of every submodule in the order they ran on ``Xt`` (no gradients)."""
    torch = require_torch()
    seen: list[tuple[str, Any]] = []
    handles = [
        mod.register_forward_hook(lambda _m, _i, out, name=name: seen.append((name, out)))
        for name, mod in model.named_modules()
        if name
    ]
    training = model.training
    model.eval()
    try:
        with torch.no_grad(), one_thread():
            model(Xt)
    finally:
        model.train(training)
        for h in handles:
            h.remove()
    return seen


@validate_params({"layer": [None, str]})
def find_point_layer(model: Any, X: Any, layer: str | None = None) -> tuple[str, int]:
    """The submodule whose output holds per-point features, and its points axis.

    With ``layer=None`` it is the *last* submodule (in execution order) whose output is a
    3-d tensor with one axis of length ``n_points`` (other than the batch axis): for a
    PointNet, the shared MLP just before the max-pool. Outputs whose point axis has another
    length (hierarchical models that subsample, e.g. PointNet++) are not supported yet.

    Parameters
    ----------
    model : torch.nn.Module
        Maps ``(batch, n_points, 3)`` clouds to logits.
    X : array-like of shape (n, n_points, 3)
        Clouds to probe the model with (the first is used).
    layer : str, optional
        A name from ``model.named_modules()``; default: found as above.

    Returns
    -------
    name : str
    points_axis : int
        1 for ``(batch, n_points, d)`` outputs, 2 for ``(batch, d, n_points)``.

    Examples
    --------
    >>> from trustlab.vision.pointclouds import make_pointnet
    >>> find_point_layer(make_pointnet(width=4), np.zeros((1, 10, 3)))
    ('features', 1)
    """
    torch = require_torch()
    check_model(model)
    arr = check_point_clouds(X)
    n_points = arr.shape[1]
    names = {name for name, _ in model.named_modules() if name}
    if layer is not None and layer not in names:
        raise ParameterError(
            f"layer {layer!r} is not a submodule of the model; pass one of model.named_modules() "
            "whose output is (batch, n_points, d) or (batch, d, n_points), or None to find it.",
            argument="layer",
        )
    found: tuple[str, int] | None = None
    for name, out in _layer_outputs(model, torch.as_tensor(arr[:1])):
        if layer is not None and name != layer:
            continue
        if isinstance(out, torch.Tensor) and out.ndim == 3:
            axes = [a for a in (1, 2) if out.shape[a] == n_points]
            if len(axes) == 1 or (len(axes) == 2 and layer is not None):
                found = (name, axes[0])
    if found is None:
        raise ModelError(
            f"no submodule of the model returns per-point features of shape (batch, {n_points}, d) or "
            f"(batch, d, {n_points})"
            + ("" if layer is None else f" at layer {layer!r}")
            + "; pass layer= naming the point-wise layer before the model pools over points.",
            argument="layer" if layer is not None else "model",
        )
    return found


def _features(model: Any, Xt: Any, layer: str, axis: int) -> Any:
    """The layer's output as ``(batch, n_points, d)``."""
    out = dict(_layer_outputs(model, Xt))[layer]
    return out if axis == 1 else out.transpose(1, 2)


def _scores(scores: Any, name: str = "scores") -> np.ndarray:
    arr = np.asarray(scores, dtype=np.float64) if not isinstance(scores, str | bytes) else np.array([])
    if arr.ndim != 2 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise DataError(
            f"{name} must be a finite (n_clouds, n_points) array of point scores; got shape {arr.shape}.",
            argument=name,
        )
    return arr


@validate_params({"k": _POS_INT})
def top_k_points(scores: Any, k: int, *, random_state: Any = 0) -> np.ndarray:
    """Indices of the ``k`` highest-scoring points of each cloud (ties broken at random).

    Parameters
    ----------
    scores : array-like of shape (n, n_points)
        Point scores (higher is more critical).
    k : int >= 1
        Subset size (at most ``n_points``).
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the tie-breaking (max-pool critical points tie on 0 for most points).

    Returns
    -------
    numpy.ndarray of shape (n, k), int

    Examples
    --------
    >>> top_k_points([[0.1, 0.9, 0.5]], 2)
    array([[1, 2]])
    """
    arr = _scores(scores)
    if k > arr.shape[1]:
        raise ParameterError(f"k must be at most n_points = {arr.shape[1]}; got {k}.", argument="k")
    tie = make_generator(random_state).random(arr.shape)
    order = np.lexsort((tie, -arr), axis=1)
    return order[:, : int(k)]


@dataclass(frozen=True)
class SubsetFaithfulness:
    """Faithfulness of critical subsets of one size.

    Attributes
    ----------
    k : int
        Subset size.
    keep : float
        Share of clouds whose prediction is unchanged when only the subset is kept (higher
        is more faithful).
    drop : float
        Share of clouds whose prediction is unchanged when the subset is dropped (lower is
        more faithful).
    kept : numpy.ndarray of bool
        Per cloud, for ``keep`` (for paired tests).
    survived : numpy.ndarray of bool
        Per cloud, for ``drop``.

    Examples
    --------
    >>> f = SubsetFaithfulness(4, 0.5, 0.0, np.array([True, False]), np.array([False, False]))
    >>> f.keep - f.drop
    0.5
    """

    k: int
    keep: float
    drop: float
    kept: np.ndarray
    survived: np.ndarray


def _refill(X: np.ndarray, keep: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Clouds of the same size holding only the points in ``keep`` (n, m): the rest are copies."""
    n, n_points = X.shape[:2]
    fill = keep[np.arange(n)[:, None], rng.integers(keep.shape[1], size=(n, n_points - keep.shape[1]))]
    idx = np.concatenate([keep, fill], axis=1)
    return X[np.arange(n)[:, None], idx]


@validate_params({"k": _POS_INT})
def subset_faithfulness(
    model: Any, X: Any, scores: Any, k: int, *, random_state: Any = 0
) -> SubsetFaithfulness:
    """Whether the prediction is kept with only the top-``k`` points, and lost without them.

    A point is removed by replacing it with a copy of a remaining point (drawn at random),
    so every model sees clouds of its input size; for max-pooling models such as PointNet
    this is exactly dropping the point.

    Parameters
    ----------
    model : torch.nn.Module
        The classifier.
    X : array-like of shape (n, n_points, 3)
        Clouds.
    scores : array-like of shape (n, n_points)
        Point scores (any method).
    k : int in [1, n_points)
        Subset size.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the tie-breaking and the copies.

    Returns
    -------
    SubsetFaithfulness

    Examples
    --------
    >>> from trustlab.vision.pointclouds import make_pointnet, make_shape_clouds
    >>> X, y, part = make_shape_clouds(8, n_points=32)
    >>> subset_faithfulness(make_pointnet(width=4), X, part, 8).keep <= 1.0
    True
    """
    arr = check_point_clouds(X)
    s = _scores(scores)
    if s.shape != arr.shape[:2]:
        raise DataError(
            f"scores must have shape {arr.shape[:2]} (one per point of X); got {s.shape}.", argument="scores"
        )
    if k >= arr.shape[1]:
        raise ParameterError(f"k must be below n_points = {arr.shape[1]}; got {k}.", argument="k")
    rng = make_generator(random_state)
    order = np.lexsort((rng.random(s.shape), -s), axis=1)
    base = point_cloud_logits(model, arr).argmax(1).numpy()
    kept = point_cloud_logits(model, _refill(arr, order[:, :k], rng)).argmax(1).numpy() == base
    survived = point_cloud_logits(model, _refill(arr, order[:, k:], rng)).argmax(1).numpy() == base
    return SubsetFaithfulness(int(k), float(kept.mean()), float(survived.mean()), kept, survived)


@validate_params({"k": [None, *_POS_INT]})
def part_precision(scores: Any, part_mask: Any, k: int | None = None, *, random_state: Any = 0) -> float:
    """Mean share of each cloud's top-``k`` points that lie on its planted part.

    Parameters
    ----------
    scores : array-like of shape (n, n_points)
        Point scores.
    part_mask : array-like of bool, shape (n, n_points)
        The known discriminative points (e.g. from :func:`make_shape_clouds`).
    k : int, optional
        Subset size; default the part's size in each cloud (then precision = recall).
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the tie-breaking.

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> part_precision([[0.9, 0.1, 0.8]], [[True, False, True]])
    1.0
    """
    s = _scores(scores)
    mask = np.asarray(part_mask)
    if mask.shape != s.shape or mask.dtype != bool:
        raise DataError(
            f"part_mask must be a boolean array of shape {s.shape}; got {mask.dtype} {mask.shape}.",
            argument="part_mask",
        )
    if k is not None and (
        isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= s.shape[1]
    ):
        raise ParameterError(f"k must be an integer in [1, {s.shape[1]}] or None; got {k!r}.", argument="k")
    order = np.lexsort((make_generator(random_state).random(s.shape), -s), axis=1)
    out = []
    for i in range(len(s)):
        kk = int(k) if k is not None else max(1, int(mask[i].sum()))
        out.append(mask[i, order[i, :kk]].mean())
    return float(np.mean(out))


@validate_params({"layer": [None, str]})
def critical_point_scores(model: Any, X: Any, *, layer: str | None = None) -> np.ndarray:
    """PointNet's critical points: the share of pooled channels each point wins the max of.

    Qi et al.'s critical point set is the set of points that attain the max-pool in at least
    one channel; scoring a point by how many channels it wins ranks that set (the "CP"
    baseline of InfoCons). The features are those of :func:`find_point_layer` (the layer
    before pooling).

    Parameters
    ----------
    model : torch.nn.Module
        The classifier (any model with a point-wise layer before max-pooling).
    X : array-like of shape (n, n_points, 3)
        Clouds.
    layer : str, optional
        The point-wise layer; default found as in :func:`find_point_layer`.

    Returns
    -------
    numpy.ndarray of shape (n, n_points)
        Scores in [0, 1]; 0 outside the critical set.

    References
    ----------
    C. R. Qi, H. Su, K. Mo, L. J. Guibas, "PointNet: Deep Learning on Point Sets for 3D
    Classification and Segmentation", CVPR 2017.

    Examples
    --------
    >>> from trustlab.vision.pointclouds import make_pointnet
    >>> critical_point_scores(make_pointnet(width=4), np.random.default_rng(0).normal(size=(2, 8, 3))).shape
    (2, 8)
    """
    torch = require_torch()
    arr = check_point_clouds(X)
    name, axis = find_point_layer(model, arr[:1], layer)
    z = _features(model, torch.as_tensor(arr), name, axis)  # (n, N, d)
    winners = z.argmax(dim=1).numpy()  # (n, d)
    out = np.zeros(arr.shape[:2])
    for i in range(len(arr)):
        out[i] = np.bincount(winners[i], minlength=arr.shape[1]) / winners.shape[1]
    return out


@validate_params({"alpha": [Interval(numbers.Real, None, None, closed="neither")]})
def pcsam_scores(model: Any, X: Any, *, alpha: float = 1.0) -> np.ndarray:
    """PCSAM gradient saliency: the loss's sensitivity to moving each point to the centre.

    Zheng et al. approximate dropping point ``i`` by shifting it to the cloud's median ``c``
    along the spherical radius ``r_i = |x_i - c|``; its score is
    ``-dL/dr_i * r_i^(1 + alpha)`` with ``L`` the cross-entropy of the predicted class
    (the one-pass form; the paper's default ``alpha = 1``).

    Parameters
    ----------
    model : torch.nn.Module
        The classifier.
    X : array-like of shape (n, n_points, 3)
        Clouds.
    alpha : float, default=1.0
        The radius exponent.

    Returns
    -------
    numpy.ndarray of shape (n, n_points)
        Higher is more critical.

    References
    ----------
    T. Zheng, C. Chen, J. Yuan, B. Li, K. Ren, "PointCloud Saliency Maps", ICCV 2019.

    Examples
    --------
    >>> from trustlab.vision.pointclouds import make_pointnet
    >>> pcsam_scores(make_pointnet(width=4), np.random.default_rng(0).normal(size=(2, 8, 3))).shape
    (2, 8)
    """
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not np.isfinite(alpha):
        raise ParameterError(f"alpha must be a finite number; got {alpha!r}.", argument="alpha")
    torch = require_torch()
    arr = check_point_clouds(X)
    Xt = torch.as_tensor(arr).clone().requires_grad_(True)
    logits = point_cloud_logits(model, Xt.detach().numpy())
    target = logits.argmax(1)
    training = model.training
    model.eval()
    try:
        with torch.enable_grad(), one_thread():
            loss = torch.nn.functional.cross_entropy(model(Xt), target, reduction="sum")
            (grad,) = torch.autograd.grad(loss, Xt)
    finally:
        model.train(training)
    c = np.median(arr, axis=1, keepdims=True)
    diff = arr - c
    r = np.linalg.norm(diff, axis=2)
    dl_dr = np.sum(grad.numpy() * diff, axis=2) / np.maximum(r, 1e-12)
    return -dl_dr * r ** (1.0 + float(alpha))
