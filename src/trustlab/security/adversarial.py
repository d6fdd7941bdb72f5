"""PGD adversarial training and its cross-class features (Wei, Guo and Wang, ICML 2025).

The paper studies adversarial training (AT) through *class-wise feature attribution*:
for a classifier ``f = W g`` (feature extractor ``g``, linear head ``W``), class ``i``'s
attribution vector is the mean of ``g(x_adv) * W[i]`` over adversarial examples of
class ``i``; the cosine similarity of two classes' vectors measures how much the model
relies on features shared by both (*cross-class features*). The paper finds that the
sum of positive similarities (class attribution similarity, CAS) rises until the
best-robustness checkpoint and falls as robust overfitting sets in, and that soft-label
training (knowledge distillation, label smoothing) keeps it higher.

This module gives the pieces to measure that: :func:`pgd_attack` (L-infinity PGD),
:func:`cross_class_attribution` (the matrix and CAS) and :func:`adversarial_train`
(PGD-AT with optional soft labels, CAS and robust accuracy tracked every epoch). See
``docs/security/adversarial.md`` for what was measured on digits.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.security._adversarial_core import (
    attribution_matrix,
    cas_of,
    distill_weight_at,
    ema_update,
    pgd,
    soft_loss,
)
from trustlab.security._backdoor_layers import check_inputs, check_labels, one_thread, read_chain
from trustlab.security._nets import require_torch

__all__ = [
    "AdversarialTrainingResult",
    "CrossClassAttribution",
    "adversarial_train",
    "cross_class_attribution",
    "pgd_attack",
]

_POS = [Interval(numbers.Real, 0, None, closed="neither")]
_STEPS = [Interval(numbers.Integral, 1, None, closed="left")]


def _setup(
    model: Any, X: Any, y: Any, caller: str, xname: str = "X", yname: str = "y"
) -> tuple[Any, Any, Any]:
    """Check ``model`` (a Sequential ending in a Linear head), ``X`` and ``y``; return tensors."""
    torch = require_torch()
    chain = read_chain(model, caller)
    if not isinstance(chain.layers[-1], torch.nn.Linear):
        raise ModelError(
            f"model of {caller} must end in a Linear layer (the head W of f = W g); its last layer is "
            f"a {type(chain.layers[-1]).__name__}. Drop trailing layers (a softmax) from the Sequential.",
            argument="model",
        )
    Xa = check_inputs(X, chain, xname)
    ya = check_labels(y, len(Xa), chain.n_classes, yname)
    return chain, torch.as_tensor(Xa), torch.as_tensor(ya)


def _check_bounds(bounds: Any) -> tuple[float, float] | None:
    if bounds is None:
        return None
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ParameterError(
            f"bounds must be None or a pair (low, high) of numbers; got {bounds!r}.", argument="bounds"
        ) from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ParameterError(f"bounds must be finite with low < high; got {bounds!r}.", argument="bounds")
    return lo, hi


def _check_ramp(ramp: Any) -> tuple[float, float] | None:
    if ramp is None:
        return None
    try:
        start, end = (float(r) for r in ramp)
    except (TypeError, ValueError):
        raise ParameterError(
            f"distill_ramp must be None or a pair (start, end) of epochs; got {ramp!r}.",
            argument="distill_ramp",
        ) from None
    if not (np.isfinite(start) and np.isfinite(end) and 0 <= start < end):
        raise ParameterError(
            f"distill_ramp must be finite epochs with 0 <= start < end; got {ramp!r}.",
            argument="distill_ramp",
        )
    return start, end


def _seed(random_state: Any) -> Any:
    torch = require_torch()
    return torch.Generator().manual_seed(int(make_generator(random_state).integers(2**62)))


@validate_params(
    {
        "eps": _POS,
        "step_size": [None, *_POS],
        "steps": _STEPS,
        "random_start": ["boolean"],
        "random_state": ["random_state"],
    }
)
def pgd_attack(
    model: Any,
    X: Any,
    y: Any,
    *,
    eps: float,
    step_size: float | None = None,
    steps: int = 10,
    random_start: bool = True,
    bounds: Any = (0.0, 1.0),
    random_state: Any = 0,
) -> np.ndarray:
    """L-infinity projected gradient descent (PGD) adversarial examples.

    ``steps`` signed-gradient steps of size ``step_size`` on the cross-entropy, each
    projected on the ``eps`` ball around ``X`` and on ``bounds``.

    Parameters
    ----------
    model : torch.nn.Sequential
        A classifier returning logits (Linear/Conv2d layers with ReLU between).
    X : array-like
        Inputs in the shape the model takes.
    y : array-like of shape (n,)
        True labels.
    eps : float > 0
        L-infinity radius.
    step_size : float > 0, optional
        Step size; ``None`` uses ``eps / 4`` (the paper's 2/255 for eps 8/255).
    steps : int, default=10
        Number of steps (the paper trains with 10 and evaluates with 20).
    random_start : bool, default=True
        Start from a uniform point of the ball.
    bounds : (float, float) or None, default=(0.0, 1.0)
        The valid input range (data scaled to [0, 1]); ``None`` does not clip.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the random start.

    Returns
    -------
    numpy.ndarray
        The adversarial inputs (float32), same shape as ``X``.

    References
    ----------
    A. Madry, A. Makelov, L. Schmidt, D. Tsipras, A. Vladu, "Towards Deep Learning Models
    Resistant to Adversarial Attacks", ICLR 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.security._nets import digits, make_net, train
    >>> from trustlab.security.adversarial import pgd_attack
    >>> X, y = digits()
    >>> net = train(make_net("mlp"), X[:500], y[:500], epochs=10)
    >>> X_adv = pgd_attack(net, X[500:600], y[500:600], eps=0.1)
    >>> bool(np.abs(X_adv - X[500:600]).max() <= 0.1 + 1e-6)
    True
    """
    _, Xt, yt = _setup(model, X, y, "pgd_attack")
    lo_hi = _check_bounds(bounds)
    with one_thread():
        out = pgd(
            model,
            Xt,
            yt,
            eps=float(eps),
            step_size=float(step_size if step_size is not None else eps / 4),
            steps=int(steps),
            random_start=bool(random_start),
            bounds=lo_hi,
            generator=_seed(random_state),
        )
    return out.numpy()


@dataclass(frozen=True)
class CrossClassAttribution:
    """Class-wise feature attribution of a model (the paper's Algorithm 1).

    Attributes
    ----------
    matrix : numpy.ndarray of shape (K, K)
        ``C[i, j]``: cosine similarity of the attribution vectors of classes ``i`` and ``j``.
    cas : float
        Class attribution similarity: the sum of the positive off-diagonal entries of
        ``matrix`` (the authors' summary; at most ``K (K - 1)``).
    robust_accuracy : float
        Accuracy on the inputs the attribution was computed on (adversarial ones when
        ``eps`` was given, else clean).

    See Also
    --------
    cross_class_attribution : builds it.
    """

    matrix: np.ndarray
    cas: float
    robust_accuracy: float


def _attribution(chain: Any, model: Any, X_in: Any, y: Any) -> CrossClassAttribution:
    torch = require_torch()
    head = chain.layers[-1]
    with torch.no_grad():
        feats = X_in
        for layer in chain.layers[:-1]:
            feats = layer(feats)
        feats = feats.reshape(len(X_in), -1)
        acc = float((head(feats).argmax(1) == y).float().mean())
        C = attribution_matrix(feats, head.weight, y, chain.n_classes)
    return CrossClassAttribution(C, cas_of(C), acc)


@validate_params(
    {
        "eps": [None, *_POS],
        "step_size": [None, *_POS],
        "steps": _STEPS,
        "random_state": ["random_state"],
    }
)
def cross_class_attribution(
    model: Any,
    X: Any,
    y: Any,
    *,
    eps: float | None,
    step_size: float | None = None,
    steps: int = 20,
    bounds: Any = (0.0, 1.0),
    random_state: Any = 0,
) -> CrossClassAttribution:
    """The feature attribution correlation matrix and CAS of ``model`` on ``(X, y)``.

    With ``f = W g`` (``W`` the last Linear layer, ``g`` the layers before it), class
    ``i``'s attribution vector is ``A_i = mean_{x of class i} g(x_adv) * W[i]`` (element-
    wise), with ``x_adv`` a PGD example (``steps`` steps, radius ``eps``); ``C[i, j]`` is
    the cosine similarity of ``A_i`` and ``A_j``.

    Parameters
    ----------
    model : torch.nn.Sequential
        A classifier whose last layer is Linear.
    X : array-like
        Evaluation inputs (the paper uses the test set).
    y : array-like of shape (n,)
        Their labels.
    eps : float > 0 or None
        PGD radius; ``None`` computes the attribution on the clean inputs.
    step_size : float > 0, optional
        PGD step; ``None`` uses ``eps / 4``.
    steps : int, default=20
        PGD steps (PGD-20, as the authors evaluate).
    bounds : (float, float) or None, default=(0.0, 1.0)
        Valid input range for PGD.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds PGD's random start.

    Returns
    -------
    CrossClassAttribution

    References
    ----------
    Z. Wei, Y. Guo, Y. Wang, "Identifying and Understanding Cross-Class Features in
    Adversarial Training", ICML 2025. Code: github.com/PKU-ML/Cross-Class-Features-AT.

    Examples
    --------
    >>> from trustlab.security._nets import digits, make_net, train
    >>> from trustlab.security.adversarial import cross_class_attribution
    >>> X, y = digits()
    >>> net = train(make_net("mlp"), X[:500], y[:500], epochs=10)
    >>> res = cross_class_attribution(net, X[500:800], y[500:800], eps=0.1)
    >>> res.matrix.shape, bool(abs(res.matrix[0, 0] - 1) < 1e-6), 0 <= res.cas <= 90
    ((10, 10), True, True)
    """
    chain, Xt, yt = _setup(model, X, y, "cross_class_attribution")
    lo_hi = _check_bounds(bounds)
    model.eval()
    with one_thread():
        if eps is not None:
            Xt = pgd(
                model,
                Xt,
                yt,
                eps=float(eps),
                step_size=float(step_size if step_size is not None else eps / 4),
                steps=int(steps),
                random_start=True,
                bounds=lo_hi,
                generator=_seed(random_state),
            )
        return _attribution(chain, model, Xt, yt)


@dataclass(frozen=True)
class AdversarialTrainingResult:
    """What :func:`adversarial_train` produced and measured.

    Attributes
    ----------
    model : torch.nn.Module
        The model after the last epoch (the input model itself, trained in place).
    best_model : torch.nn.Module
        A copy of the model at ``best_epoch``.
    best_epoch : int
        The epoch (1-based) of highest robust accuracy on the evaluation set.
    history : pandas.DataFrame
        One row per epoch: ``epoch``, ``lr``, ``train_loss`` (on the training PGD
        examples), ``clean_accuracy``, ``robust_accuracy`` (PGD on the evaluation set) and
        ``cas`` (class attribution similarity on those PGD examples).

    See Also
    --------
    adversarial_train : builds it.
    """

    model: Any
    best_model: Any
    best_epoch: int
    history: pd.DataFrame


@validate_params(
    {
        "eps": _POS,
        "step_size": [None, *_POS],
        "steps": _STEPS,
        "eval_steps": _STEPS,
        "epochs": _STEPS,
        "lr": _POS,
        "batch_size": _STEPS,
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "label_smoothing": [Interval(numbers.Real, 0, 1, closed="left")],
        "temperature": _POS,
        "distill_weight": [Interval(numbers.Real, 0, 1, closed="both")],
        "ema_decay": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
    }
)
def adversarial_train(
    model: Any,
    X: Any,
    y: Any,
    X_eval: Any,
    y_eval: Any,
    *,
    eps: float,
    step_size: float | None = None,
    steps: int = 10,
    eval_steps: int = 20,
    epochs: int = 30,
    lr: float = 0.1,
    batch_size: int = 128,
    weight_decay: float = 5e-4,
    label_smoothing: float = 0.0,
    teacher: Any = None,
    temperature: float = 2.0,
    distill_weight: float = 0.5,
    ema_decay: float = 0.999,
    distill_ramp: Any = None,
    bounds: Any = (0.0, 1.0),
    random_state: Any = 0,
) -> AdversarialTrainingResult:
    """PGD adversarial training (Madry et al.), tracking robust accuracy and CAS every epoch.

    Each mini-batch is replaced by its PGD examples (``steps`` steps of ``step_size``
    in the ``eps`` ball) and the model takes an SGD step (momentum 0.9, ``weight_decay``)
    on the loss at those examples: cross-entropy to the labels (smoothed by
    ``label_smoothing``) or, with a ``teacher``, mixed with knowledge distillation to the
    teacher's predictions at the same examples. The learning rate is ``lr``, divided by
    10 at half and again at three quarters of the epochs (the paper's piecewise schedule,
    200 epochs decayed at 100 and 150). After each epoch, PGD-``eval_steps`` on
    ``(X_eval, y_eval)`` gives the robust accuracy and the class attribution similarity.

    Parameters
    ----------
    model : torch.nn.Sequential
        The classifier to train (in place); last layer Linear.
    X, y : array-like
        Training inputs and labels.
    X_eval, y_eval : array-like
        Evaluation inputs and labels (the paper uses the test set).
    eps : float > 0
        L-infinity radius (8/255 on CIFAR-10 in the paper).
    step_size : float > 0, optional
        PGD step; ``None`` uses ``eps / 4``.
    steps : int, default=10
        PGD steps in training.
    eval_steps : int, default=20
        PGD steps in evaluation.
    epochs : int, default=30
        Training epochs.
    lr : float, default=0.1
        Initial SGD learning rate.
    batch_size : int, default=128
        Mini-batch size.
    weight_decay : float, default=5e-4
        SGD weight decay.
    label_smoothing : float in [0, 1), default=0.0
        Label smoothing of the cross-entropy (a soft-label variant).
    teacher : torch.nn.Module or "ema", optional
        A trained model whose softened predictions on the adversarial examples are
        distilled (the paper's knowledge-distillation soft labels), or ``"ema"``: a
        self-teacher, the exponential moving average of the model's own weights
        (updated after every step with ``ema_decay``).
    temperature : float, default=2.0
        Distillation temperature.
    distill_weight : float in [0, 1], default=0.5
        Weight of the distillation term (used only with a ``teacher``).
    ema_decay : float in (0, 1), default=0.999
        Per-step decay of the ``"ema"`` teacher (the authors' script carried 0.999,
        i.e. an average over about 1,000 steps; scale it to the number of steps).
    distill_ramp : (float, float) or None, default=None
        Epochs ``(start, end)`` (1-based): the distillation weight is 0 before
        ``start`` and rises linearly to ``distill_weight`` at ``end`` (the authors'
        script carried a ramp from epoch 90 to 110 of 200). ``None``: the full weight
        from the first epoch.
    bounds : (float, float) or None, default=(0.0, 1.0)
        Valid input range for PGD.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds batch order and PGD starts.

    Returns
    -------
    AdversarialTrainingResult

    References
    ----------
    Z. Wei, Y. Guo, Y. Wang, "Identifying and Understanding Cross-Class Features in
    Adversarial Training", ICML 2025. A. Madry et al., ICLR 2018 (PGD-AT). G. Hinton,
    O. Vinyals, J. Dean, "Distilling the Knowledge in a Neural Network", 2015.

    Examples
    --------
    >>> from trustlab.security._nets import digits, make_net
    >>> from trustlab.security.adversarial import adversarial_train
    >>> X, y = digits()
    >>> res = adversarial_train(make_net("mlp"), X[:400], y[:400], X[1500:], y[1500:], eps=0.1, epochs=2)
    >>> list(res.history.columns)
    ['epoch', 'lr', 'train_loss', 'clean_accuracy', 'robust_accuracy', 'cas']
    """
    torch = require_torch()
    chain, Xt, yt = _setup(model, X, y, "adversarial_train")
    _, Xe, ye = _setup(model, X_eval, y_eval, "adversarial_train", "X_eval", "y_eval")
    if Xe.shape[1:] != Xt.shape[1:]:
        raise DataError(
            f"X_eval rows have shape {tuple(Xe.shape[1:])} but X rows {tuple(Xt.shape[1:])}; "
            "pass evaluation data shaped like the training data.",
            argument="X_eval",
        )
    ema = isinstance(teacher, str) and teacher == "ema"
    if teacher is not None and not ema and not isinstance(teacher, torch.nn.Module):
        raise ModelError(
            f"teacher must be a torch.nn.Module, 'ema' or None; got {teacher!r}.", argument="teacher"
        )
    lo_hi = _check_bounds(bounds)
    ramp = _check_ramp(distill_ramp)
    if ema:
        teacher = copy.deepcopy(model)
    alpha = float(step_size if step_size is not None else eps / 4)
    gen = _seed(random_state)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=weight_decay)
    attack = {"eps": float(eps), "step_size": alpha, "random_start": True, "bounds": lo_hi, "generator": gen}
    if teacher is not None:
        teacher.eval()
    rows: list[dict[str, float]] = []
    best_epoch, best_acc, best_state = 0, -1.0, None
    with one_thread():
        for epoch in range(epochs):
            rate = lr * (1.0 if epoch < epochs * 0.5 else 0.1 if epoch < epochs * 0.75 else 0.01)
            for group in opt.param_groups:
                group["lr"] = rate
            weight = distill_weight_at(epoch + 1, float(distill_weight), ramp)
            order = torch.randperm(len(Xt), generator=gen)
            total = 0.0
            for start in range(0, len(Xt), batch_size):
                idx = order[start : start + batch_size]
                x_adv = pgd(model, Xt[idx], yt[idx], steps=steps, **attack)
                model.train()
                logits = model(x_adv)
                t_logits = None
                if teacher is not None and weight > 0:
                    with torch.no_grad():
                        t_logits = teacher(x_adv)
                loss = soft_loss(
                    logits,
                    yt[idx],
                    n_classes=chain.n_classes,
                    label_smoothing=float(label_smoothing),
                    teacher_logits=t_logits,
                    temperature=float(temperature),
                    distill_weight=weight,
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
                if ema:
                    ema_update(teacher, model, float(ema_decay))
                total += float(loss.detach()) * len(idx)
            model.eval()
            x_eval_adv = pgd(model, Xe, ye, steps=eval_steps, **attack)
            attribution = _attribution(chain, model, x_eval_adv, ye)
            with torch.no_grad():
                clean = float((model(Xe).argmax(1) == ye).float().mean())
            rows.append(
                {
                    "epoch": epoch + 1,
                    "lr": rate,
                    "train_loss": total / len(Xt),
                    "clean_accuracy": clean,
                    "robust_accuracy": attribution.robust_accuracy,
                    "cas": attribution.cas,
                }
            )
            if attribution.robust_accuracy > best_acc:
                best_epoch, best_acc = epoch + 1, attribution.robust_accuracy
                best_state = copy.deepcopy(model.state_dict())
    best = copy.deepcopy(model)
    best.load_state_dict(best_state)
    return AdversarialTrainingResult(model.eval(), best.eval(), best_epoch, pd.DataFrame(rows))
