"""Small image classifiers on scikit-learn's digits: data, models, one training loop, checks.

The substrate the compression rows (:mod:`trustlab.efficiency`) and later image methods
train on. Methods take *any* ``torch.nn.Module`` that maps a float batch to logits; these
helpers only build and train the small models that tests, docs and benchmarks need, in
seconds on one CPU thread (no download: the 1,797 8x8 digits ship with scikit-learn).
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, MissingDependencyError, ModelError

__all__ = [
    "KINDS",
    "accuracy",
    "check_images",
    "check_labels",
    "digits_split",
    "make_classifier",
    "one_thread",
    "predict",
    "require_torch",
    "torch_generator",
    "train_classifier",
]

KINDS = ("mlp", "relu_mlp", "cnn")
"""Model kinds :func:`make_classifier` builds."""

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]
_POS = [Interval(numbers.Real, 0, None, closed="neither")]


def require_torch() -> Any:
    """Import torch or raise :class:`~trustlab.errors.MissingDependencyError` naming the extra.

    Returns
    -------
    module
        The ``torch`` module.

    Examples
    --------
    >>> require_torch().__name__
    'torch'
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the dev extra
        raise MissingDependencyError(
            "trustlab.vision needs torch; install it with `pip install trustlab[torch]`.", argument="torch"
        ) from exc
    return torch


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (the models are tiny; threads only cost here).

    Yields
    ------
    None

    Examples
    --------
    >>> with one_thread():
    ...     pass
    """
    torch = require_torch()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def torch_generator(random_state: Any) -> Any:
    """A ``torch.Generator`` seeded from ``random_state`` (None, an int or a NumPy Generator).

    Parameters
    ----------
    random_state : None, int or numpy.random.Generator
        The seed.

    Returns
    -------
    torch.Generator

    Examples
    --------
    >>> torch_generator(0).initial_seed() == torch_generator(0).initial_seed()
    True
    """
    torch = require_torch()
    return torch.Generator().manual_seed(int(make_generator(random_state).integers(2**62)))


@validate_params({"test_size": [Interval(numbers.Real, 0, 1, closed="neither")], "image": ["boolean"]})
def digits_split(
    *, image: bool = True, test_size: float = 0.3, random_state: Any = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits in [0, 1], split stratified into train and test.

    Parameters
    ----------
    image : bool, default=True
        ``(n, 1, 8, 8)`` images; ``False`` gives flat ``(n, 64)`` rows.
    test_size : float in (0, 1), default=0.3
        Share of the 1,797 images held out.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the split.

    Returns
    -------
    X_train, X_test, y_train, y_test : numpy.ndarray
        float32 pixels in [0, 1] (the 17 grey levels / 16) and int64 labels 0-9.

    Examples
    --------
    >>> X_tr, X_te, y_tr, y_te = digits_split()
    >>> X_tr.shape, X_te.shape
    ((1257, 1, 8, 8), (540, 1, 8, 8))
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    X = (bunch.data / 16.0).astype(np.float32)
    X = X.reshape(-1, 1, 8, 8) if image else X
    seed = int(make_generator(random_state).integers(2**31 - 1))
    parts = train_test_split(
        X, bunch.target.astype(np.int64), test_size=test_size, random_state=seed, stratify=bunch.target
    )
    return parts[0], parts[1], parts[2], parts[3]


@validate_params(
    {
        "kind": [Options(KINDS)],
        "width": _POS_INT,
        "n_classes": [Interval(numbers.Integral, 2, None, closed="left")],
    }
)
def make_classifier(kind: str = "cnn", *, width: int = 32, n_classes: int = 10, seed: int = 0) -> Any:
    """A small digits classifier (a ``torch.nn.Sequential`` returning logits).

    Parameters
    ----------
    kind : {"mlp", "relu_mlp", "cnn"}, default="cnn"
        ``"mlp"``: pre-norm blocks as in a Llama MLP: Flatten - Linear(64, 4w) -
        2 x [LayerNorm - Linear(4w, 4w) - GELU] - LayerNorm - Linear(4w, C) (every hidden
        Linear reads a normalised, zero-mean input). ``"relu_mlp"``: Flatten - Linear(64, 4w)
        - ReLU - Linear(4w, 4w) - ReLU - Linear(4w, C). ``"cnn"``: Conv(1, w, 3) - ReLU -
        Conv(w, 2w, 3, stride 2) - ReLU - Flatten - Linear(2w * 16, 4w) - ReLU - Linear(4w, C).
    width : int >= 1, default=32
        The width ``w``.
    n_classes : int >= 2, default=10
        Number of classes ``C``.
    seed : int, default=0
        Seeds the initial weights (``torch.manual_seed``; the global generator is restored).

    Returns
    -------
    torch.nn.Sequential
        Takes ``(n, 1, 8, 8)`` float images in [0, 1].

    Examples
    --------
    >>> net = make_classifier("relu_mlp", width=8)
    >>> sum(p.numel() for p in net.parameters())
    3466
    """
    torch = require_torch()
    nn = torch.nn
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        w = int(width)
        if kind == "mlp":
            h = 4 * w
            return nn.Sequential(
                nn.Flatten(),
                nn.Linear(64, h),
                nn.LayerNorm(h),
                nn.Linear(h, h),
                nn.GELU(),
                nn.LayerNorm(h),
                nn.Linear(h, h),
                nn.GELU(),
                nn.LayerNorm(h),
                nn.Linear(h, n_classes),
            )
        if kind == "relu_mlp":
            return nn.Sequential(
                nn.Flatten(),
                nn.Linear(64, 4 * w),
                nn.ReLU(),
                nn.Linear(4 * w, 4 * w),
                nn.ReLU(),
                nn.Linear(4 * w, n_classes),
            )
        return nn.Sequential(
            nn.Conv2d(1, w, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(w, 2 * w, 3, padding=1, stride=2),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(2 * w * 16, 4 * w),
            nn.ReLU(),
            nn.Linear(4 * w, n_classes),
        )


def check_model(model: Any, name: str = "model") -> Any:
    """Raise :class:`~trustlab.errors.ModelError` unless ``model`` is a ``torch.nn.Module``."""
    torch = require_torch()
    if not isinstance(model, torch.nn.Module):
        raise ModelError(
            f"{name} must be a torch.nn.Module mapping a float batch to logits; got {type(model).__name__}.",
            argument=name,
        )
    return model


def check_images(X: Any, name: str = "X", *, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """Check a batch of images: numeric, finite, non-empty, values in ``[low, high]``.

    Parameters
    ----------
    X : array-like of shape (n, ...)
        The images (any trailing shape the model takes).
    name : str, default="X"
        The argument name used in error messages.
    low, high : float, default=(0.0, 1.0)
        The valid pixel range.

    Returns
    -------
    numpy.ndarray
        ``X`` as C-contiguous float32 (torch cannot wrap a reversed or strided view).

    Raises
    ------
    DataError
        Empty, non-numeric, NaN/inf, fewer than 2 dimensions or values outside the range.

    Examples
    --------
    >>> check_images(np.zeros((2, 1, 8, 8))).dtype
    dtype('float32')
    """
    if isinstance(X, str | bytes) or X is None:
        raise DataError(f"{name} must be an array of images, got {type(X).__name__}.", argument=name)
    try:
        arr = np.asarray(X, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name} must be an array of numbers ({exc}).", argument=name) from None
    if arr.ndim < 2 or arr.shape[0] == 0:
        raise DataError(
            f"{name} must be a non-empty batch of shape (n, ...); got shape {arr.shape}.", argument=name
        )
    if not np.all(np.isfinite(arr)):
        raise DataError(f"{name} contains NaN or infinite pixels; drop or repair them.", argument=name)
    if arr.min() < low or arr.max() > high:
        raise DataError(
            f"{name} must hold pixels in [{low}, {high}]; got [{arr.min():.3g}, {arr.max():.3g}]. "
            "Scale the images first (e.g. divide 8-bit images by 255).",
            argument=name,
        )
    return np.ascontiguousarray(arr)


def check_labels(y: Any, n: int, n_classes: int | None = None, name: str = "y") -> np.ndarray:
    """Check integer class labels of length ``n`` (and below ``n_classes`` when given).

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels (integers, or floats holding whole numbers).
    n : int
        The number of images they label.
    n_classes : int, optional
        The model's number of classes.
    name : str, default="y"
        The argument name used in error messages.

    Returns
    -------
    numpy.ndarray
        ``y`` as int64.

    Examples
    --------
    >>> check_labels([0, 2.0, 1], 3)
    array([0, 2, 1])
    """
    arr = np.asarray(y)
    if arr.ndim != 1 or len(arr) != n:
        raise DataError(f"{name} must be a 1-d array of {n} labels; got shape {arr.shape}.", argument=name)
    if not np.issubdtype(arr.dtype, np.integer):
        if not (
            np.issubdtype(arr.dtype, np.floating)
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
        ):
            raise DataError(f"{name} must hold integer class labels; got dtype {arr.dtype}.", argument=name)
    arr = arr.astype(np.int64)
    if arr.min() < 0 or (n_classes is not None and arr.max() >= n_classes):
        raise DataError(
            f"{name} must hold labels 0..{'C-1' if n_classes is None else n_classes - 1}; "
            f"got [{arr.min()}, {arr.max()}].",
            argument=name,
        )
    return arr


def _logits_width(model: Any, X: Any) -> int:
    torch = require_torch()
    with torch.no_grad():
        try:
            out = model(X[:1])
        except RuntimeError as exc:
            raise DataError(
                f"X does not fit the model's input ({exc}); pass images in the shape the model takes.",
                argument="X",
            ) from None
    if out.ndim != 2:
        raise ModelError(
            f"model must return logits of shape (n, C); got {tuple(out.shape)}.", argument="model"
        )
    return int(out.shape[1])


@validate_params({"epochs": _POS_INT, "lr": _POS, "batch_size": _POS_INT})
def train_classifier(
    model: Any,
    X: Any,
    y: Any,
    *,
    epochs: int = 20,
    lr: float = 3e-3,
    batch_size: int = 64,
    random_state: Any = 0,
    step: Callable[[Any, Any, Any], Any] | None = None,
) -> Any:
    """Train ``model`` in place with Adam on cross-entropy; return it in eval mode.

    Parameters
    ----------
    model : torch.nn.Module
        Maps a float batch of ``X`` to logits.
    X : array-like of shape (n, ...)
        Images in [0, 1].
    y : array-like of shape (n,)
        Integer labels.
    epochs, batch_size : int, default=(20, 64)
        Passes over the data and minibatch size (batch order from ``random_state``).
    lr : float, default=3e-3
        Adam's learning rate.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the batch order.
    step : callable, optional
        ``step(model, xb, yb)`` replacing the default Adam step (methods with their own
        update, e.g. SAM, pass it); it must run the whole update.

    Returns
    -------
    torch.nn.Module
        ``model``, trained, in eval mode.

    Examples
    --------
    >>> X_tr, X_te, y_tr, y_te = digits_split()
    >>> net = train_classifier(make_classifier("mlp", width=8), X_tr, y_tr, epochs=5)
    >>> accuracy(net, X_te, y_te) > 0.8
    True
    """
    torch = require_torch()
    check_model(model)
    Xt = torch.as_tensor(check_images(X))
    yt = torch.as_tensor(check_labels(y, len(Xt), _logits_width(model, Xt)))
    gen = torch_generator(random_state)
    opt = torch.optim.Adam(model.parameters(), lr=float(lr)) if step is None else None
    loss_fn = torch.nn.functional.cross_entropy
    with one_thread():
        model.train()
        for _ in range(int(epochs)):
            order = torch.randperm(len(Xt), generator=gen)
            for start in range(0, len(Xt), int(batch_size)):
                idx = order[start : start + int(batch_size)]
                if step is not None:
                    step(model, Xt[idx], yt[idx])
                    continue
                assert opt is not None
                opt.zero_grad()
                loss_fn(model(Xt[idx]), yt[idx]).backward()
                opt.step()
    return model.eval()


def predict(model: Any, X: Any) -> np.ndarray:
    """Predicted labels of ``model`` on images ``X`` (no gradients, eval mode).

    Parameters
    ----------
    model : torch.nn.Module
        Returns logits.
    X : array-like of shape (n, ...)
        Images in [0, 1].

    Returns
    -------
    numpy.ndarray of shape (n,)

    Examples
    --------
    >>> predict(make_classifier("mlp", width=4), np.zeros((3, 1, 8, 8))).shape
    (3,)
    """
    torch = require_torch()
    check_model(model)
    Xt = torch.as_tensor(check_images(X))
    was_training = model.training
    model.eval()
    with torch.no_grad(), one_thread():
        out = model(Xt).argmax(1).numpy()
    model.train(was_training)
    return out


def accuracy(model: Any, X: Any, y: Any) -> float:
    """Share of ``X`` that ``model`` labels as ``y``.

    Parameters
    ----------
    model : torch.nn.Module
        Returns logits.
    X : array-like of shape (n, ...)
        Images in [0, 1].
    y : array-like of shape (n,)
        Integer labels.

    Returns
    -------
    float

    Examples
    --------
    >>> X_tr, X_te, y_tr, y_te = digits_split()
    >>> 0.0 <= accuracy(make_classifier("mlp", width=4), X_te, y_te) <= 1.0
    True
    """
    pred = predict(model, X)
    return float(np.mean(pred == check_labels(y, len(pred))))
