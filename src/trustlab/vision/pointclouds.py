"""Synthetic point clouds with a planted discriminative part, a small PointNet, its training loop.

The substrate the point-cloud explanation row (InfoCons, :mod:`trustlab.vision.infocons`)
trains on. Every cloud is a random *body* (a sphere, cube or cylinder surface, drawn
independently of the label) with a small *part* attached at a random direction; the label
is the part's shape (ball, ring, rod or cube), so the part's points are the known
discriminative subset (``part_mask``). Methods take *any* ``torch.nn.Module`` mapping a
``(batch, n_points, 3)`` float tensor to logits; these helpers only build what tests, docs
and benchmarks need, in seconds on one CPU thread.
"""

from __future__ import annotations

import functools
import io
import numbers
from importlib import resources
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError
from trustlab.vision.classifiers import check_labels, check_model, one_thread, require_torch, torch_generator

__all__ = [
    "BODIES",
    "PARTS",
    "check_point_clouds",
    "make_pointnet",
    "make_shape_clouds",
    "point_cloud_logits",
    "shape_pointnet",
    "train_point_classifier",
    "train_shape_pointnet",
]

BODIES = ("sphere", "cube", "cylinder")
"""Body shapes of :func:`make_shape_clouds` (drawn independently of the label)."""

PARTS = ("ball", "ring", "rod", "cube")
"""Part shapes of :func:`make_shape_clouds`; the label is the index of the part."""

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _body(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "sphere":
        return _unit(rng, n)
    if kind == "cube":  # surface of [-0.8, 0.8]^3: a random face, uniform on it
        p = rng.uniform(-0.8, 0.8, size=(n, 3))
        axis = rng.integers(3, size=n)
        p[np.arange(n), axis] = rng.choice([-0.8, 0.8], size=n)
        return p
    # cylinder surface, radius 0.8, height 1.6 along z (side only)
    t = rng.uniform(0, 2 * np.pi, n)
    return np.stack([0.8 * np.cos(t), 0.8 * np.sin(t), rng.uniform(-0.8, 0.8, n)], axis=1)


def _part(label: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Part ``label`` in its own frame: centred at 0, its axis along z."""
    t = rng.uniform(0, 2 * np.pi, n)
    if label == 0:  # ball: sphere surface of radius 0.2
        return 0.2 * _unit(rng, n)
    if label == 1:  # ring: torus, major radius 0.4, minor radius 0.04, in the xy plane
        s = rng.uniform(0, 2 * np.pi, n)
        r = 0.4 + 0.04 * np.cos(s)
        return np.stack([r * np.cos(t), r * np.sin(t), 0.04 * np.sin(s)], axis=1)
    if label == 2:  # rod: thin cylinder, radius 0.04, length 0.8 along the axis
        return np.stack([0.04 * np.cos(t), 0.04 * np.sin(t), rng.uniform(-0.4, 0.4, n)], axis=1)
    # cube: surface of a cube of half-side 0.3
    p = rng.uniform(-0.3, 0.3, size=(n, 3))
    p[np.arange(n), rng.integers(3, size=n)] = rng.choice([-0.3, 0.3], size=n)
    return p


def _frame(d: np.ndarray) -> np.ndarray:
    """A rotation whose third column is the unit vector ``d``."""
    a = np.array([1.0, 0.0, 0.0]) if abs(d[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = np.cross(d, a)
    u /= np.linalg.norm(u)
    return np.stack([u, np.cross(d, u), d], axis=1)


@validate_params(
    {
        "n_clouds": _POS_INT,
        "n_points": [Interval(numbers.Integral, 8, None, closed="left")],
        "part_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "tilt": [Interval(numbers.Real, 0, None, closed="left")],
    }
)
def make_shape_clouds(
    n_clouds: int,
    *,
    n_points: int = 64,
    part_fraction: float = 0.25,
    noise: float = 0.01,
    tilt: float = 0.3,
    random_state: Any = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point clouds whose class is decided by a small planted part (the known critical subset).

    Cloud ``i``: a body (sphere of radius 1, cube of half-side 0.8 or cylinder of radius 0.8
    and height 1.6, uniform over :data:`BODIES`, scaled by U(0.9, 1.1); independent of the
    label) sampled on its surface, and ``round(part_fraction * n_points)`` points of the part
    :data:`PARTS` ``[y_i]`` (ball of radius 0.25, ring of radius 0.3, rod of length 0.8, disc of
    radius 0.35; labels balanced and shuffled), its axis along a uniform random direction ``d``
    and its centre at ``1.4 d``; Gaussian jitter of standard deviation ``noise`` on every
    coordinate; points in random order.

    Parameters
    ----------
    n_clouds : int >= 1
        Number of clouds.
    n_points : int >= 8, default=64
        Points per cloud.
    part_fraction : float in (0, 1), default=0.25
        Share of each cloud's points on the part.
    noise : float >= 0, default=0.01
        Jitter standard deviation.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds everything.

    Returns
    -------
    X : numpy.ndarray of shape (n_clouds, n_points, 3), float32
    y : numpy.ndarray of shape (n_clouds,), int64
        The part's index in :data:`PARTS`.
    part_mask : numpy.ndarray of shape (n_clouds, n_points), bool
        True on the part's points (the planted discriminative subset).

    Examples
    --------
    >>> X, y, part = make_shape_clouds(8, n_points=64)
    >>> X.shape, int(part[0].sum())
    ((8, 64, 3), 16)
    """
    rng = make_generator(random_state)
    n, m = int(n_clouds), int(n_points)
    k = min(max(1, round(part_fraction * m)), m - 1)
    y = rng.permutation(np.arange(n) % len(PARTS)).astype(np.int64)
    X = np.empty((n, m, 3))
    mask = np.zeros((n, m), dtype=bool)
    for i in range(n):
        body = _body(BODIES[rng.integers(len(BODIES))], m - k, rng) * rng.uniform(0.9, 1.1)
        d = np.array([0.0, 0.0, 1.0]) + float(tilt) * rng.normal(size=3)
        d /= np.linalg.norm(d)
        part = _part(int(y[i]), k, rng) @ _frame(d).T + 1.4 * d
        order = rng.permutation(m)
        X[i, order] = np.concatenate([body, part])
        mask[i, order] = np.arange(m) >= m - k
    X += rng.normal(scale=float(noise), size=X.shape)
    return X.astype(np.float32), y, mask


def check_point_clouds(X: Any, name: str = "X") -> np.ndarray:
    """Check a batch of point clouds: numeric, finite, shape ``(n, n_points, 3)``, non-empty.

    Parameters
    ----------
    X : array-like of shape (n, n_points, 3)
        The clouds (xyz coordinates).
    name : str, default="X"
        The argument name used in error messages.

    Returns
    -------
    numpy.ndarray
        ``X`` as float32.

    Raises
    ------
    DataError
        Non-numeric, NaN/inf, not 3-d with 3 coordinates, no clouds or fewer than 2 points.

    Examples
    --------
    >>> check_point_clouds(np.zeros((2, 16, 3))).shape
    (2, 16, 3)
    """
    if isinstance(X, str | bytes) or X is None:
        raise DataError(f"{name} must be an array of point clouds, got {type(X).__name__}.", argument=name)
    try:
        arr = np.asarray(X, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be an array of numbers ({exc}).", argument=name) from None
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise DataError(
            f"{name} must have shape (n_clouds, n_points, 3); got {arr.shape}. "
            "Stack the clouds (resample them to one size first).",
            argument=name,
        )
    if arr.shape[0] == 0 or arr.shape[1] < 2:
        raise DataError(
            f"{name} must hold at least one cloud of at least 2 points; got shape {arr.shape}.",
            argument=name,
        )
    if not np.all(np.isfinite(arr)):
        raise DataError(f"{name} contains NaN or infinite coordinates; drop or repair them.", argument=name)
    return arr


@functools.cache
def _pointnet_classes() -> tuple[Any, Any]:
    nn = require_torch().nn

    class MaxOverPoints(nn.Module):  # type: ignore[name-defined]
        """Symmetric pooling: ``(batch, n_points, d) -> (batch, d)`` by the max over points."""

        def forward(self, z: Any) -> Any:
            return z.max(dim=1).values

    class PointNet(nn.Module):  # type: ignore[name-defined]
        """PointNet (Qi et al., 2017) without the T-nets: shared MLP, max-pool, MLP head."""

        def __init__(self, width: int, n_classes: int) -> None:
            super().__init__()
            w = width
            self.features = nn.Sequential(
                nn.Linear(3, w), nn.ReLU(), nn.Linear(w, 2 * w), nn.ReLU(), nn.Linear(2 * w, 4 * w), nn.ReLU()
            )
            self.pool = MaxOverPoints()
            self.head = nn.Sequential(nn.Linear(4 * w, 2 * w), nn.ReLU(), nn.Linear(2 * w, n_classes))

        def forward(self, x: Any) -> Any:
            return self.head(self.pool(self.features(x)))

    return PointNet, MaxOverPoints


@validate_params({"width": _POS_INT, "n_classes": [Interval(numbers.Integral, 2, None, closed="left")]})
def make_pointnet(*, width: int = 32, n_classes: int = 4, seed: int = 0) -> Any:
    """A small PointNet classifier taking ``(batch, n_points, 3)`` clouds to logits.

    Shared per-point MLP 3 - w - 2w - 4w (ReLU; submodule ``features``, output
    ``(batch, n_points, 4w)``), max over points (``pool``), head 4w - 2w - C (``head``). The
    input and feature T-nets of the original are left out (the synthetic clouds are not
    rotated into a canonical pose, and the row's methods only need a point-wise encoder with
    symmetric pooling).

    Parameters
    ----------
    width : int >= 1, default=32
        The width ``w``.
    n_classes : int >= 2, default=4
        Number of classes ``C``.
    seed : int, default=0
        Seeds the initial weights (torch's global generator is restored).

    Returns
    -------
    torch.nn.Module

    References
    ----------
    C. R. Qi, H. Su, K. Mo, L. J. Guibas, "PointNet: Deep Learning on Point Sets for 3D
    Classification and Segmentation", CVPR 2017.

    Examples
    --------
    >>> net = make_pointnet(width=8)
    >>> tuple(net(require_torch().zeros(2, 16, 3)).shape)
    (2, 4)
    """
    torch = require_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return _pointnet_classes()[0](int(width), int(n_classes))


@validate_params({"grad": ["boolean"]})
def point_cloud_logits(model: Any, X: Any, *, grad: bool = False) -> Any:
    """Logits of ``model`` on clouds ``X`` (a torch tensor), one torch thread, eval mode.

    Parameters
    ----------
    model : torch.nn.Module
        Maps ``(batch, n_points, 3)`` to ``(batch, C)``.
    X : array-like of shape (n, n_points, 3)
        The clouds.
    grad : bool, default=False
        Keep the autograd graph.

    Returns
    -------
    torch.Tensor of shape (n, C)

    Examples
    --------
    >>> tuple(point_cloud_logits(make_pointnet(width=4), np.zeros((3, 8, 3))).shape)
    (3, 4)
    """
    torch = require_torch()
    check_model(model)
    Xt = torch.as_tensor(check_point_clouds(X))
    was_training = model.training
    model.eval()
    with torch.set_grad_enabled(bool(grad)), one_thread():
        try:
            out = model(Xt)
        except RuntimeError as exc:
            raise DataError(
                f"X does not fit the model's input ({exc}); pass clouds of shape (n, n_points, 3).",
                argument="X",
            ) from None
        finally:
            model.train(was_training)
    if out.ndim != 2 or out.shape[0] != len(Xt):
        raise DataError(
            f"model must return logits of shape (n, C); got {tuple(out.shape)}.", argument="model"
        )
    return out


@validate_params(
    {"epochs": _POS_INT, "lr": [Interval(numbers.Real, 0, None, closed="neither")], "batch_size": _POS_INT}
)
def train_point_classifier(
    model: Any,
    X: Any,
    y: Any,
    *,
    epochs: int = 30,
    lr: float = 3e-3,
    batch_size: int = 32,
    random_state: Any = 0,
) -> Any:
    """Train a point-cloud classifier in place with Adam on cross-entropy; return it in eval mode.

    Parameters
    ----------
    model : torch.nn.Module
        Maps ``(batch, n_points, 3)`` clouds to logits.
    X : array-like of shape (n, n_points, 3)
        Training clouds.
    y : array-like of shape (n,)
        Integer labels.
    epochs, batch_size : int, default=(30, 32)
        Passes over the data and minibatch size (batch order from ``random_state``).
    lr : float, default=3e-3
        Adam's learning rate.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the batch order.

    Returns
    -------
    torch.nn.Module
        ``model``, trained, in eval mode.

    Examples
    --------
    >>> X, y, _ = make_shape_clouds(64, n_points=32)
    >>> net = train_point_classifier(make_pointnet(width=8), X, y, epochs=2)
    >>> point_cloud_logits(net, X).shape[1]
    4
    """
    torch = require_torch()
    arr = check_point_clouds(X)
    n_classes = int(point_cloud_logits(model, arr[:1]).shape[1])
    Xt = torch.as_tensor(arr)
    yt = torch.as_tensor(check_labels(y, len(Xt), n_classes))
    gen = torch_generator(random_state)
    opt = torch.optim.Adam(model.parameters(), lr=float(lr))
    with one_thread():
        model.train()
        for _ in range(int(epochs)):
            order = torch.randperm(len(Xt), generator=gen)
            for start in range(0, len(Xt), int(batch_size)):
                idx = order[start : start + int(batch_size)]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(Xt[idx]), yt[idx]).backward()
                opt.step()
    return model.eval()


_SHAPE_WEIGHTS = "pointnet_shapes.npz"
_SHAPE_WIDTH = 32
_SHAPE_STAGES: tuple[tuple[float, int], ...] = ((3e-3, 20),) * 3 + ((1e-3, 20),)  # (lr, epochs)


def train_shape_pointnet() -> Any:
    """Train the PointNet that :func:`shape_pointnet` ships, by its recipe (about a minute).

    800 clouds of :func:`make_shape_clouds` (64 points, ``random_state=0``), ``make_pointnet
    (width=32, seed=0)``, Adam with batches of 16: three stages of 20 epochs at 3e-3 and one
    of 20 at 1e-3, stage ``r`` seeding its batch order with ``r``.

    Returns
    -------
    torch.nn.Module
        The trained model, in eval mode.

    Examples
    --------
    >>> net = train_shape_pointnet()  # doctest: +SKIP
    """
    X, y, _ = make_shape_clouds(800, n_points=64, random_state=0)
    net = make_pointnet(width=_SHAPE_WIDTH, seed=0)
    for stage, (lr, epochs) in enumerate(_SHAPE_STAGES):
        train_point_classifier(net, X, y, epochs=epochs, lr=lr, batch_size=16, random_state=stage)
    return net


def shape_pointnet() -> Any:
    """The small PointNet trained on the synthetic shapes, loaded from the weights that ship.

    Trained by :func:`train_shape_pointnet` (its weights, 73 KB, are package data, so no test
    trains it); test accuracy about 0.95 on fresh clouds of :func:`make_shape_clouds` with 64
    points (tests/vision/test_pointclouds.py checks it).

    Returns
    -------
    torch.nn.Module
        ``make_pointnet(width=32)`` with the shipped weights, in eval mode.

    Examples
    --------
    >>> X, y, _ = make_shape_clouds(40, n_points=64, random_state=5)
    >>> float((point_cloud_logits(shape_pointnet(), X).argmax(1).numpy() == y).mean()) > 0.8
    True
    """
    torch = require_torch()
    raw = resources.files("trustlab.vision").joinpath(_SHAPE_WEIGHTS).read_bytes()
    with np.load(io.BytesIO(raw)) as f:
        state = {name: torch.as_tensor(f[name]) for name in f.files}
    net = make_pointnet(width=_SHAPE_WIDTH)
    net.load_state_dict(state)
    return net.eval()
