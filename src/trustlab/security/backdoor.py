"""Backdoor purification by Two-stage Symmetry Connectivity (TSC), and a BadNets poisoning helper.

TSC (Peng et al., ICML 2025) purifies a backdoored network with a small set of clean
samples. Each round has two stages, each a permutation of hidden units followed by a
quadratic Bezier curve trained on the clean samples:

1. permute a copy of the model so that its units are *least* correlated with the
   model's (a functionally identical copy in a distant loss basin), train the curve
   between the model and that copy, take the point at ``t``;
2. permute the round's model so that its units are *most* correlated with that point,
   train the curve between them, take the point at ``t``.

Clean loss stays low along a curve trained on clean data, while the backdoor (which
the clean samples do not constrain) is not carried along it; see ``docs/security/backdoor.md``.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.security._backdoor_curve import curve_point, has_batchnorm
from trustlab.security._backdoor_layers import (
    as_float32,
    check_inputs,
    check_labels,
    one_thread,
    permute_to,
    read_chain,
)
from trustlab.security._nets import require_torch

__all__ = [
    "PoisonedData",
    "TSCResult",
    "add_trigger",
    "attack_success_rate",
    "badnets_poison",
    "tsc_purify",
]

_PATCH = [Interval(numbers.Integral, 1, None, closed="left")]
_VALUE = [Interval(numbers.Real, None, None, closed="neither")]
_LABEL = [Interval(numbers.Integral, 0, None, closed="left")]


def _image_view(X: np.ndarray, name: str, patch_size: int) -> np.ndarray:
    """A (n, channels, height, width) view of images given flat (square), 3-D or 4-D."""
    if X.ndim == 2:
        side = round(float(np.sqrt(X.shape[1])))
        if side * side != X.shape[1]:
            raise DataError(
                f"{name} has {X.shape[1]} columns, not a square image; pass images as "
                "(n, height, width) or (n, channels, height, width).",
                argument=name,
            )
        view = X.reshape(len(X), 1, side, side)
    elif X.ndim == 3:
        view = X[:, None]
    elif X.ndim == 4:
        view = X
    else:
        raise DataError(f"{name} must be 2-, 3- or 4-dimensional images; got shape {X.shape}.", argument=name)
    if patch_size > min(view.shape[-2:]):
        raise DataError(
            f"patch_size={patch_size} does not fit {name}'s {view.shape[-2]}x{view.shape[-1]} images; "
            "pass a smaller patch_size.",
            argument="patch_size",
        )
    return view


@validate_params({"patch_size": _PATCH, "value": _VALUE})
def add_trigger(X: Any, *, patch_size: int = 2, value: float = 1.0) -> np.ndarray:
    """Stamp a BadNets patch trigger (a square of ``value``) on each image's bottom-right corner.

    Parameters
    ----------
    X : array-like
        Images: flat square images ``(n, side*side)``, ``(n, height, width)`` or
        ``(n, channels, height, width)``.
    patch_size : int, default=2
        Side of the square patch, in pixels.
    value : float, default=1.0
        Pixel value of the patch (the maximum of data scaled to ``[0, 1]``).

    Returns
    -------
    numpy.ndarray
        A float32 copy of ``X`` with the patch stamped, same shape.

    References
    ----------
    T. Gu, B. Dolan-Gavitt, S. Garg, "BadNets: Identifying Vulnerabilities in the
    Machine Learning Model Supply Chain", arXiv:1708.06733, 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.security.backdoor import add_trigger
    >>> add_trigger(np.zeros((1, 16)), patch_size=2).reshape(4, 4)
    array([[0., 0., 0., 0.],
           [0., 0., 0., 0.],
           [0., 0., 1., 1.],
           [0., 0., 1., 1.]], dtype=float32)
    """
    arr = as_float32(X, "X").copy()
    view = _image_view(arr, "X", patch_size)
    view[..., -patch_size:, -patch_size:] = value
    return arr


@dataclass(frozen=True)
class PoisonedData:
    """A training set poisoned by :func:`badnets_poison`.

    Attributes
    ----------
    X : numpy.ndarray
        The inputs, the poisoned rows carrying the trigger (float32).
    y : numpy.ndarray
        The labels, the poisoned rows relabelled to ``target``.
    poisoned : numpy.ndarray
        Boolean mask of the poisoned rows.
    target : int
        The attacker's target label.
    patch_size : int
        Side of the trigger patch.
    value : float
        Pixel value of the trigger patch.

    See Also
    --------
    badnets_poison : builds it.
    """

    X: np.ndarray
    y: np.ndarray
    poisoned: np.ndarray
    target: int
    patch_size: int
    value: float


@validate_params(
    {
        "rate": [Interval(numbers.Real, 0, 1, closed="right")],
        "target": _LABEL,
        "patch_size": _PATCH,
        "value": _VALUE,
        "random_state": ["random_state"],
    }
)
def badnets_poison(
    X: Any,
    y: Any,
    *,
    rate: float = 0.1,
    target: int = 0,
    patch_size: int = 2,
    value: float = 1.0,
    random_state: Any = 0,
) -> PoisonedData:
    """Poison a share ``rate`` of the rows BadNets-style: stamp the trigger and relabel to ``target``.

    The poisoned rows are drawn uniformly among the rows whose label is not ``target``.

    Parameters
    ----------
    X : array-like
        Images (see :func:`add_trigger` for the accepted shapes).
    y : array-like of shape (n,)
        Integer labels.
    rate : float in (0, 1], default=0.1
        Share of all rows to poison.
    target : int, default=0
        The label the trigger should force.
    patch_size, value
        The trigger (see :func:`add_trigger`).
    random_state : None, int or numpy.random.Generator, default=0
        Chooses the poisoned rows.

    Returns
    -------
    PoisonedData

    References
    ----------
    T. Gu, B. Dolan-Gavitt, S. Garg, "BadNets", arXiv:1708.06733, 2017.

    Examples
    --------
    >>> from trustlab.security._nets import digits
    >>> from trustlab.security.backdoor import badnets_poison
    >>> X, y = digits()
    >>> data = badnets_poison(X, y, rate=0.1, target=0)
    >>> int(data.poisoned.sum()), bool((data.y[data.poisoned] == 0).all())
    (180, True)
    """
    Xa = as_float32(X, "X")
    ya = check_numeric_array(y, "y", ndim=1)
    if len(ya) != len(Xa):
        raise DataError(
            f"y has {len(ya)} labels for {len(Xa)} rows of X; pass one label per row.", argument="y"
        )
    if not np.all(ya == np.round(ya)):
        raise DataError("y must hold integer class labels.", argument="y")
    ya = ya.astype(np.int64)
    _image_view(Xa, "X", patch_size)
    candidates = np.flatnonzero(ya != target)
    k = round(float(rate) * len(ya))
    if k > len(candidates):
        raise DataError(
            f"rate={rate} asks for {k} poisoned rows but only {len(candidates)} rows are not of the "
            "target class; lower rate.",
            argument="rate",
        )
    rng = make_generator(random_state)
    chosen = rng.choice(candidates, size=k, replace=False)
    mask = np.zeros(len(ya), dtype=bool)
    mask[chosen] = True
    Xp = Xa.copy()
    Xp[mask] = add_trigger(Xa[mask], patch_size=patch_size, value=value) if k else Xp[mask]
    yp = ya.copy()
    yp[mask] = target
    return PoisonedData(Xp, yp, mask, int(target), int(patch_size), float(value))


def _predict(model: Any, X: np.ndarray, batch: int = 4096) -> np.ndarray:
    torch = require_torch()
    model.eval()
    with torch.no_grad():
        return np.concatenate(
            [model(torch.as_tensor(X[i : i + batch])).argmax(1).numpy() for i in range(0, len(X), batch)]
        )


@validate_params({"target": _LABEL, "patch_size": _PATCH, "value": _VALUE})
def attack_success_rate(
    model: Any, X: Any, y: Any, *, target: int, patch_size: int = 2, value: float = 1.0
) -> float:
    """Share of triggered inputs (of true class other than ``target``) that ``model`` labels ``target``.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning logits.
    X : array-like
        Clean test images, in the shape the model takes.
    y : array-like of shape (n,)
        Their true labels; rows of class ``target`` are left out.
    target : int
        The attacker's target label.
    patch_size, value
        The trigger (see :func:`add_trigger`).

    Returns
    -------
    float
        The attack success rate (ASR) in ``[0, 1]``.

    References
    ----------
    J. Peng et al., "Circumventing Backdoor Space via Weight Symmetry", ICML 2025 (the
    ASR as reported there).

    Examples
    --------
    >>> import numpy as np, torch
    >>> from trustlab.security.backdoor import attack_success_rate
    >>> always_zero = torch.nn.Sequential(torch.nn.Linear(16, 2))
    >>> with torch.no_grad():
    ...     _ = always_zero[0].weight.zero_(), always_zero[0].bias.copy_(torch.tensor([1.0, 0.0]))
    >>> attack_success_rate(always_zero, np.zeros((4, 16)), [0, 1, 1, 1], target=0)
    1.0
    """
    Xa = as_float32(X, "X")
    ya = check_numeric_array(y, "y", ndim=1)
    if len(ya) != len(Xa):
        raise DataError(
            f"y has {len(ya)} labels for {len(Xa)} rows of X; pass one label per row.", argument="y"
        )
    keep = ya != target
    if not keep.any():
        raise DataError("every row of y is the target class; pass rows of other classes.", argument="y")
    triggered = add_trigger(Xa[keep], patch_size=patch_size, value=value)
    return float(np.mean(_predict(model, triggered) == target))


@dataclass(frozen=True)
class TSCResult:
    """The purified model of :func:`tsc_purify` and what each round measured.

    Attributes
    ----------
    model : torch.nn.Module
        The purified model (a new module; the input model is unchanged), in eval mode.
    clean_loss : tuple of float
        Cross-entropy of the model on the clean samples after each round.
    stage1_correlation : tuple of float
        Per round, the mean activation correlation of the units matched in stage 1 (the
        permutation that *minimises* it: negative values mean the copy was pushed far).
    stage2_correlation : tuple of float
        Per round, the mean correlation of the units matched in stage 2 (maximised).
    pseudo_labels : bool
        Whether the clean samples were labelled by the input model (``y_clean=None``).

    See Also
    --------
    tsc_purify : builds it.
    """

    model: Any
    clean_loss: tuple[float, ...]
    stage1_correlation: tuple[float, ...]
    stage2_correlation: tuple[float, ...]
    pseudo_labels: bool


def _fine_tune(
    model: Any, X: Any, y: Any, *, epochs: int, lr: float, batch_size: int, generator: Any
) -> None:
    """The authors' between-round fine-tuning: SGD (momentum 0.9, weight decay 5e-4), cosine."""
    torch = require_torch()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    min_rows = 2 if has_batchnorm(model) else 1  # batch statistics need two rows
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(X), generator=generator)
        for start in range(0, len(X), batch_size):
            idx = order[start : start + batch_size]
            if len(idx) < min_rows:
                continue
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(X[idx]), y[idx]).backward()
            opt.step()
        sched.step()
    model.eval()


@validate_params(
    {
        "rounds": [Interval(numbers.Integral, 1, None, closed="left")],
        "t": [Interval(numbers.Real, 0, 1, closed="neither")],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "l2": [Interval(numbers.Real, 0, None, closed="left")],
        "finetune_epochs": [Interval(numbers.Integral, 0, None, closed="left")],
        "finetune_lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }
)
def tsc_purify(
    model: Any,
    X_clean: Any,
    y_clean: Any = None,
    *,
    rounds: int = 3,
    t: float = 0.4,
    epochs: int = 200,
    lr: float = 0.02,
    batch_size: int = 256,
    l2: float = 1e-4,
    finetune_epochs: int = 10,
    finetune_lr: float = 1e-4,
    random_state: Any = 0,
) -> TSCResult:
    """Purify a backdoored network with Two-stage Symmetry Connectivity (TSC).

    Each of ``rounds`` rounds, with ``M`` the round's model:

    1. ``B`` = ``M`` with its hidden units permuted to *minimise* the correlation of
       matched units' activations on ``X_clean`` (the same function, far in weight
       space); train a quadratic Bezier curve from ``M`` to ``B`` on the clean samples;
       ``T1`` = the curve's point at ``t``;
    2. ``M'`` = ``M`` permuted to *maximise* the correlation with ``T1``; train the curve
       from ``M'`` to ``T1``; the round's result is its point at ``t``;
    3. between rounds, ``finetune_epochs`` epochs of fine-tuning at ``finetune_lr``.

    Parameters
    ----------
    model : torch.nn.Sequential
        The (possibly backdoored) classifier: Linear/Conv2d layers, each optionally
        followed directly by a BatchNorm1d/BatchNorm2d, with ReLU, Flatten, Dropout,
        Identity or pooling between them. It is not modified. BatchNorm layers are
        permuted with their units, and the running statistics of each point taken on a
        curve are re-estimated on ``X_clean``.
    X_clean : array-like
        The small set of clean samples, in the shape the model takes (the paper uses 5%
        of the training set).
    y_clean : array-like of shape (n,), optional
        Their labels. ``None`` labels them with the input model's predictions (no labels
        needed; clean samples rarely trip the backdoor).
    rounds : int, default=3
        Number of two-stage rounds (the authors' ``TSPC_epoch``).
    t : float in (0, 1), default=0.4
        Where on each curve the model is taken (the authors' ``curve_t`` for CIFAR-10).
    epochs : int, default=200
        Curve-training epochs over the clean samples, per curve.
    lr : float, default=0.02
        Curve-training learning rate (SGD, momentum 0.9, cosine schedule).
    batch_size : int, default=256
        Mini-batch size (one ``t`` is drawn per mini-batch); at least 2 for a model with
        BatchNorm (a trailing one-row batch is then skipped).
    l2 : float, default=1e-4
        Weight of the curve regulariser ``0.5 * l2 * ||theta(t)||^2``.
    finetune_epochs : int, default=10
        Fine-tuning epochs between rounds (none after the last).
    finetune_lr : float, default=1e-4
        Fine-tuning learning rate.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the mini-batch order and the ``t`` draws.

    Returns
    -------
    TSCResult

    Raises
    ------
    ModelError
        ``model`` is not a Sequential of the layers above (the message names the layer),
        e.g. a BatchNorm not directly after a Linear/Conv2d, a grouped convolution, a
        residual block or attention.
    ParameterError
        ``batch_size`` < 2 for a model with BatchNorm; a parameter out of its range.
    DataError
        ``X_clean`` is empty, non-finite or of the wrong shape; ``y_clean`` does not fit.

    References
    ----------
    J. Peng, H. Yang, J. Zhao, H. Dong, H. He, W. Zhang, H. He, "Circumventing Backdoor
    Space via Weight Symmetry", ICML 2025 (PMLR 267). Code: github.com/JiePeng104/TSC.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.security._nets import digits, make_net, train
    >>> from trustlab.security.backdoor import attack_success_rate, badnets_poison, tsc_purify
    >>> X, y = digits()
    >>> data = badnets_poison(X[:500], y[:500], rate=0.1, target=0)
    >>> net = train(make_net("mlp"), data.X, data.y, epochs=5)
    >>> clean = np.flatnonzero(~data.poisoned)[:100]
    >>> result = tsc_purify(net, X[clean], y[clean], rounds=1, epochs=5, batch_size=50)
    >>> len(result.clean_loss), result.stage1_correlation[0] < result.stage2_correlation[0]
    (1, True)
    """
    torch = require_torch()
    chain = read_chain(model, "tsc_purify", batchnorm=True)
    if any(pos is not None for pos in chain.norms) and batch_size < 2:
        raise ParameterError(
            f"batch_size={batch_size}: a model with BatchNorm is trained on mini-batch statistics, "
            "which need at least 2 rows; pass batch_size >= 2.",
            argument="batch_size",
        )
    X = check_inputs(X_clean, chain, "X_clean", min_rows=2)
    Xt = torch.as_tensor(X)
    base = copy.deepcopy(model).eval()
    try:
        with torch.no_grad():
            logits = base(Xt)
    except RuntimeError as exc:
        raise DataError(
            f"the model cannot run on X_clean of shape {X.shape} ({exc}); pass inputs the model takes.",
            argument="X_clean",
        ) from None
    if y_clean is None:
        yt = logits.argmax(1)
    else:
        yt = torch.as_tensor(check_labels(y_clean, len(X), chain.n_classes, "y_clean"))
    seed = int(make_generator(random_state).integers(2**62))
    gen = torch.Generator().manual_seed(seed)
    curve = {"epochs": epochs, "lr": lr, "batch_size": batch_size, "l2": l2, "generator": gen, "t": t}
    with one_thread():
        return _rounds(base, Xt, yt, rounds, curve, finetune_epochs, finetune_lr, batch_size, y_clean is None)


def _rounds(
    base: Any,
    Xt: Any,
    yt: Any,
    rounds: int,
    curve: dict[str, Any],
    finetune_epochs: int,
    finetune_lr: float,
    batch_size: int,
    pseudo: bool,
) -> TSCResult:
    torch = require_torch()
    gen = curve["generator"]
    current = base
    losses, corr1, corr2 = [], [], []
    for r in range(rounds):
        far, c1 = permute_to(current, current, Xt, align=False)
        t1, _ = curve_point(current, far, Xt, yt, **curve)
        aligned, c2 = permute_to(t1, current, Xt, align=True)
        current, _ = curve_point(aligned, t1, Xt, yt, **curve)
        if r < rounds - 1 and finetune_epochs > 0:
            _fine_tune(
                current, Xt, yt, epochs=finetune_epochs, lr=finetune_lr, batch_size=batch_size, generator=gen
            )
        with torch.no_grad():
            losses.append(float(torch.nn.functional.cross_entropy(current(Xt), yt)))
        corr1.append(c1)
        corr2.append(c2)
    return TSCResult(current.eval(), tuple(losses), tuple(corr1), tuple(corr2), pseudo)
