"""SAFE and SAFE+: sparse and flat pruning by an augmented Lagrangian with sharpness-aware x-steps.

SAFE solves ``min_{||x||_0 <= d} max_{||e|| <= rho} f(x + e)`` by splitting ``x = z``:
the x-step is a SAM step on ``f`` plus the proximal pull ``lam (x - z + u)``; every
``K`` steps ``z = proj_{||.||_0 <= d}(x + u)`` (keep the ``d`` largest magnitudes) and the
scaled dual ``u += x - z``; the result is ``proj(x_T)``, with no retraining. SAFE+
(``projection="wanda"``) projects in the metric ``P = diag(A^T A)`` instead (keep the
largest ``||A_j|| |x_ij|``), ``P`` re-estimated at each z-step (``"snip"`` and ``"obd"``,
Optimal Brain Damage's diagonal Hessian, are the paper's other examples of ``P``).
``sparse_gradient=True`` is SAFE+SG (the paper's Section 4.5): the gradient at the projected
point, ``grad f(proj(x))``, is added to every x-step. ``rho = 0`` gives plain
ADMM pruning (the paper's non-flat baseline); ``method="magnitude"`` trains densely, prunes
globally by magnitude with ``torch.nn.utils.prune`` and fine-tunes with the mask, on the
same number of epochs. :func:`sharpness` measures the largest Hessian eigenvalue of the
loss on the kept weights.

References
----------
D. Lee, K. Lee, J. Chung, N. Lee, "SAFE: Finding Sparse and Flat Minima to Improve
Pruning", ICML 2025.
P. Foret, A. Kleiner, H. Mobahi, B. Neyshabur, "Sharpness-Aware Minimization for
Efficiently Improving Generalization", ICLR 2021.
"""

from __future__ import annotations

import copy
import math
import numbers
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import make_generator
from trustlab.efficiency._projection import PROJECTIONS, importance
from trustlab.efficiency._projection import project as _project
from trustlab.efficiency._trained import TrainedModelMixin
from trustlab.errors import ModelError
from trustlab.vision.classifiers import (
    _logits_width,
    check_images,
    check_labels,
    check_model,
    one_thread,
    require_torch,
    torch_generator,
    train_classifier,
)

__all__ = [
    "OPTIMIZERS",
    "PROJECTIONS",
    "PRUNING_METHODS",
    "SAFEPruning",
    "prunable_weights",
    "sharpness",
    "sparsity_of",
]

PRUNING_METHODS = ("safe", "admm", "magnitude")
"""``"safe"`` (SAM x-steps), ``"admm"`` (the same with ``rho = 0``), ``"magnitude"``
(dense training, global magnitude pruning, masked fine-tuning)."""

OPTIMIZERS = ("adam", "sgd")
"""``"adam"``: Adam at a constant rate (the authors' released PyTorch code); ``"sgd"``: the
paper's image recipe, SGD with momentum 0.9 and weight decay 1e-4, the rate warmed up
linearly over 5 epochs (at most a tenth of the run) and then decayed along a cosine."""


def prunable_weights(model: Any) -> list[Any]:
    """The weights of every ``Linear`` and ``Conv2d`` layer of ``model`` (biases and norms stay dense).

    Parameters
    ----------
    model : torch.nn.Module
        Any model.

    Returns
    -------
    list of torch.nn.Parameter

    Examples
    --------
    >>> from trustlab.vision import make_classifier
    >>> len(prunable_weights(make_classifier("cnn", width=4)))
    4
    """
    return [m.weight for m in _prunable_layers(model)]


def _prunable_layers(model: Any) -> list[Any]:
    torch = require_torch()
    check_model(model)
    out = [m for m in model.modules() if isinstance(m, torch.nn.Linear | torch.nn.Conv2d)]
    if not out:
        raise ModelError("model has no torch.nn.Linear or torch.nn.Conv2d weight to prune.", argument="model")
    return out


def sparsity_of(model: Any) -> float:
    """Share of zero entries among the prunable weights of ``model``.

    Parameters
    ----------
    model : torch.nn.Module
        Any model with Linear/Conv2d layers.

    Returns
    -------
    float

    Examples
    --------
    >>> from trustlab.vision import make_classifier
    >>> sparsity_of(make_classifier("mlp", width=4))
    0.0
    """
    ws = prunable_weights(model)
    zeros = sum(int((w == 0).sum()) for w in ws)
    return zeros / sum(w.numel() for w in ws)


@validate_params({"n_iter": [Interval(numbers.Integral, 1, None, closed="left")]})
def sharpness(model: Any, X: Any, y: Any, *, n_iter: int = 20, random_state: Any = 0) -> float:
    """The largest Hessian eigenvalue of the mean cross-entropy over the non-zero weights.

    Power iteration with Hessian-vector products (double backpropagation) on the
    parameters of ``model``, the direction kept at zero on pruned (zero) entries of the
    Linear/Conv2d weights, so that it is the sharpness of the sparse subnetwork (the
    paper's Figure 1 measure).

    Parameters
    ----------
    model : torch.nn.Module
        Returns logits (no dropout / batch-norm updates: it is evaluated in eval mode).
    X : array-like of shape (n, ...)
        Images in [0, 1] (the training data, usually).
    y : array-like of shape (n,)
        Integer labels.
    n_iter : int >= 1, default=20
        Power-iteration steps.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the starting direction.

    Returns
    -------
    float
        The estimate of lambda_max (the Rayleigh quotient of the last iterate; when the
        dominant eigenvalue is negative, a second run on the shifted Hessian finds the top one).

    Examples
    --------
    >>> from trustlab.vision import digits_split, make_classifier
    >>> X_tr, X_te, y_tr, y_te = digits_split()
    >>> sharpness(make_classifier("mlp", width=4), X_tr[:200], y_tr[:200], n_iter=5) > 0
    True
    """
    torch = require_torch()
    check_model(model)
    Xt = torch.as_tensor(check_images(X))
    params = [p for p in model.parameters() if p.requires_grad]
    weight_ids = {id(w) for w in prunable_weights(model)}
    masks = [(p != 0).to(p.dtype) if id(p) in weight_ids else torch.ones_like(p) for p in params]
    gen = torch_generator(random_state)
    was_training = model.training
    model.eval()
    try:
        with one_thread():  # labels checked against the logits of one image, in eval mode
            yt = torch.as_tensor(check_labels(y, len(Xt), _logits_width(model, Xt)))
            loss = torch.nn.functional.cross_entropy(model(Xt), yt)
            grads = torch.autograd.grad(loss, params, create_graph=True)

            def power(shift: float) -> float:
                v = [torch.randn(p.shape, generator=gen) * m for p, m in zip(params, masks, strict=True)]
                eig = 0.0
                for _ in range(int(n_iter)):
                    norm = torch.sqrt(sum((vi * vi).sum() for vi in v))
                    v = [vi / (norm + 1e-30) for vi in v]
                    hv = torch.autograd.grad(grads, params, grad_outputs=v, retain_graph=True)
                    hv = [(h.detach() - shift * vi) * m for h, vi, m in zip(hv, v, masks, strict=True)]
                    eig = float(sum((h * vi).sum() for h, vi in zip(hv, v, strict=True)))
                    v = hv
                return eig + shift

            # power iteration finds the eigenvalue largest in magnitude; when it is negative (away
            # from a minimum), iterate on H - eig I, whose dominant eigenvalue is lambda_max - eig
            eig = power(0.0)
            if eig < 0:
                eig = power(eig)
    finally:
        model.train(was_training)
    return eig


class SAFEPruning(TrainedModelMixin, ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Train a sparse copy of a torch classifier with SAFE or SAFE+ (or ADMM / magnitude pruning).

    Parameters
    ----------
    model : torch.nn.Module
        The architecture and initial weights (copied; not changed). Every Linear/Conv2d
        weight is prunable; sparsity is global over them.
    sparsity : float in [0, 1), default=0.9
        Share of prunable weights set to zero (``d = round((1 - sparsity) * total)`` kept).
    method : {"safe", "admm", "magnitude"}, default="safe"
        See :data:`PRUNING_METHODS`.
    projection : {"magnitude", "wanda", "snip", "obd"}, default="magnitude"
        The metric ``P`` of the z-step and of the final projection (:data:`PROJECTIONS`):
        ``"magnitude"`` is SAFE (``P = I``), ``"wanda"`` is the paper's SAFE+
        (``P = diag(A^T A)``, re-estimated at each z-step on a fixed calibration batch of up
        to 512 training images at the current weights), ``"snip"`` the squared gradient,
        ``"obd"`` the diagonal of the loss's Hessian (Hutchinson, 16 probes), on that batch.
        Ignored by ``method="magnitude"``.
    sparse_gradient : bool, default=False
        SAFE+SG: add ``grad f(proj(x))``, the minibatch gradient at the projection of the
        current weights (in the metric of the last z-step), to each x-step, as CrAM+ adds its
        dense gradient (one more forward/backward pass per step). Ignored by "magnitude".
    scope : {"global", "layer"}, default="global"
        ``"global"``: one budget ``d`` over all prunable weights (the paper's image setting);
        ``"layer"``: each layer keeps ``round((1 - sparsity) * its size)`` (the authors' LLM
        code and their ``sp_scope="layerwise"``); also for ``method="magnitude"``.
    rho : float >= 0, default=0.1
        SAM's perturbation radius (the authors' CIFAR setting); ignored by "admm".
    lam : float > 0, default=1.0
        The penalty ``lambda``, reached by a cosine ramp from 0 (the paper's schedule). The
        authors use 1e-4 with 300 epochs of SGD on CIFAR (~10^5 steps); these runs of a few
        hundred steps need a stronger pull to reach the constraint (docs/efficiency/safe.md).
    dual_interval : int >= 1, default=32
        ``K``: steps between z/u updates (the authors' setting).
    optimizer : {"adam", "sgd"}, default="adam"
        See :data:`OPTIMIZERS` (``"sgd"`` with ``lr=0.1`` is the paper's CIFAR recipe).
    epochs : int, default=30
        Passes over the data (for "magnitude": the first half dense, the rest fine-tuning).
    lr : float, default=3e-3
        The (peak) learning rate.
    batch_size : int, default=64
        Minibatch size.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the batch order and the calibration batch.

    Attributes
    ----------
    model_ : torch.nn.Module
        The pruned model (pruned weights are exact zeros), in eval mode; batch-norm
        statistics re-estimated on the training images after the final projection (the
        paper's batch-norm tuning), when the model has any.
    sparsity_ : float
        The measured share of zero prunable weights.
    constraint_gap_ : float
        ``||x_T - proj(x_T)|| / ||x_T||`` before the final projection (0 for "magnitude"):
        how far the iterate still was from the sparsity constraint.
    classes_ : numpy.ndarray
        Labels seen in ``fit``.

    References
    ----------
    D. Lee, K. Lee, J. Chung, N. Lee, "SAFE: Finding Sparse and Flat Minima to Improve
    Pruning", ICML 2025.

    Examples
    --------
    >>> from trustlab.vision import digits_split, make_classifier
    >>> X_tr, X_te, y_tr, y_te = digits_split()
    >>> safe = SAFEPruning(make_classifier("mlp", width=8), sparsity=0.8, epochs=4).fit(X_tr, y_tr)
    >>> round(safe.sparsity_, 2)
    0.8
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "sparsity": [Interval(numbers.Real, 0, 1, closed="left")],
        "method": [Options(PRUNING_METHODS)],
        "projection": [Options(PROJECTIONS)],
        "sparse_gradient": ["boolean"],
        "scope": [Options(("global", "layer"))],
        "rho": [Interval(numbers.Real, 0, None, closed="left")],
        "lam": [Interval(numbers.Real, 0, None, closed="neither")],
        "dual_interval": [Interval(numbers.Integral, 1, None, closed="left")],
        "optimizer": [Options(OPTIMIZERS)],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        model: Any = None,
        *,
        sparsity: float = 0.9,
        method: str = "safe",
        projection: str = "magnitude",
        sparse_gradient: bool = False,
        scope: str = "global",
        rho: float = 0.1,
        lam: float = 1.0,
        dual_interval: int = 32,
        optimizer: str = "adam",
        epochs: int = 30,
        lr: float = 3e-3,
        batch_size: int = 64,
        random_state: Any = 0,
    ) -> None:
        self.model = model
        self.sparsity = sparsity
        self.method = method
        self.projection = projection
        self.sparse_gradient = sparse_gradient
        self.scope = scope
        self.rho = rho
        self.lam = lam
        self.dual_interval = dual_interval
        self.optimizer = optimizer
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> SAFEPruning:
        """Prune a copy of ``model`` while training it on ``(X, y)``.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Images in [0, 1].
        y : array-like of shape (n,)
            Integer labels 0..C-1.

        Returns
        -------
        SAFEPruning
            ``self``.
        """
        self._validate_params()
        torch = require_torch()
        check_model(self.model)
        Xa = check_images(X)
        ya = check_labels(y, len(Xa))
        net = copy.deepcopy(self.model)
        layers = _prunable_layers(net)
        weights = [m.weight for m in layers]
        total = sum(w.numel() for w in weights)
        keep: int | list[int] = max(1, round((1.0 - float(self.sparsity)) * total))
        if self.scope == "layer":
            keep = [max(1, round((1.0 - float(self.sparsity)) * w.numel())) for w in weights]
        self.constraint_gap_ = 0.0
        if self.method == "magnitude":
            rs = self.random_state
            self.model_ = self._magnitude(net, Xa, ya, np.random.default_rng(None if rs is None else rs))
        else:
            calib = make_generator(self.random_state).choice(len(Xa), size=min(len(Xa), 512), replace=False)
            Xc, yc = torch.as_tensor(Xa[calib]), torch.as_tensor(ya[calib])

            def metric() -> list[Any] | None:
                with one_thread():
                    return importance(net, layers, self.projection, Xc, yc)

            self.model_ = self._admm(net, weights, keep, Xa, ya, metric)
            with torch.no_grad():
                final = _project([w.detach() for w in weights], keep, metric())
                num = sum(float(((w - p) ** 2).sum()) for w, p in zip(weights, final, strict=True))
                den = sum(float((w**2).sum()) for w in weights)
                self.constraint_gap_ = math.sqrt(num / den) if den > 0 else 0.0
                for w, p in zip(weights, final, strict=True):
                    w.copy_(p)
            _batch_norm_tuning(self.model_, Xa)
        self.model_.eval()
        self.sparsity_ = sparsity_of(self.model_)
        self.classes_ = np.unique(ya)
        return self

    def _optimizer(self, params: list[Any], total_steps: int, steps_per_epoch: int) -> tuple[Any, Any]:
        """The optimiser and ``schedule(t)``, which sets step ``t``'s learning rate."""
        torch = require_torch()
        lr = float(self.lr)
        if self.optimizer == "adam":
            return torch.optim.Adam(params, lr=lr), lambda t: None
        opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)
        warm = max(1, min(5 * steps_per_epoch, total_steps // 10))

        def schedule(t: int) -> None:
            if t < warm:
                rate = lr * (t + 1) / warm
            else:
                rate = lr * 0.5 * (1.0 + math.cos(math.pi * (t - warm) / max(total_steps - warm, 1)))
            for group in opt.param_groups:
                group["lr"] = rate

        return opt, schedule

    def _admm(
        self, net: Any, weights: list[Any], keep: Any, X: np.ndarray, y: np.ndarray, metric: Any
    ) -> Any:
        torch = require_torch()
        params = [p for p in net.parameters() if p.requires_grad]
        rho = 0.0 if self.method == "admm" else float(self.rho)
        n_batches = math.ceil(len(X) / int(self.batch_size))
        total_steps = n_batches * int(self.epochs)
        opt, schedule = self._optimizer(params, total_steps, n_batches)
        state: dict[str, Any] = {"t": 0, "p_diag": metric()}
        with torch.no_grad():
            z = _project([w.detach().clone() for w in weights], keep, state["p_diag"])
            u = [torch.zeros_like(w) for w in weights]
        loss_fn = torch.nn.functional.cross_entropy

        def step(model: Any, xb: Any, yb: Any) -> None:
            t = state["t"]
            schedule(t)
            lam_t = float(self.lam) * 0.5 * (1.0 - math.cos(math.pi * min(t / max(total_steps - 1, 1), 1.0)))
            opt.zero_grad()
            loss_fn(model(xb), yb).backward()
            if rho > 0:
                with torch.no_grad():
                    gnorm = torch.sqrt(sum((p.grad * p.grad).sum() for p in params if p.grad is not None))
                    eps = [p.grad * (rho / (gnorm + 1e-12)) if p.grad is not None else None for p in params]
                    for p, e in zip(params, eps, strict=True):
                        if e is not None:
                            p.add_(e)
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                with torch.no_grad():
                    for p, e in zip(params, eps, strict=True):
                        if e is not None:
                            p.sub_(e)
            if self.sparse_gradient:  # SAFE+SG: + grad f(C(x)), accumulated into .grad
                with torch.no_grad():
                    saved = [w.detach().clone() for w in weights]
                    for w, c in zip(weights, _project(saved, keep, state["p_diag"]), strict=True):
                        w.copy_(c)
                loss_fn(model(xb), yb).backward()
                with torch.no_grad():
                    for w, s in zip(weights, saved, strict=True):
                        w.copy_(s)
            with torch.no_grad():
                for w, zi, ui in zip(weights, z, u, strict=True):
                    w.grad.add_(lam_t * (w - zi + ui))
            opt.step()
            if (t + 1) % int(self.dual_interval) == 0:
                p_diag = state["p_diag"] = metric()
                with torch.no_grad():
                    new_z = _project([w + ui for w, ui in zip(weights, u, strict=True)], keep, p_diag)
                    for w, zi, ui, nz in zip(weights, z, u, new_z, strict=True):
                        ui.add_(w - nz)
                        zi.copy_(nz)
            state["t"] = t + 1

        return train_classifier(
            net,
            X,
            y,
            epochs=self.epochs,
            lr=self.lr,
            batch_size=self.batch_size,
            random_state=self.random_state,
            step=step,
        )

    def _magnitude(self, net: Any, X: np.ndarray, y: np.ndarray, gen: Any) -> Any:
        torch = require_torch()
        from torch.nn.utils import prune

        n_batches = math.ceil(len(X) / int(self.batch_size))
        loss_fn = torch.nn.functional.cross_entropy

        def phase(epochs: int) -> None:
            params = [p for p in net.parameters() if p.requires_grad]
            opt, schedule = self._optimizer(params, n_batches * epochs, n_batches)
            state = {"t": 0}

            def step(model: Any, xb: Any, yb: Any) -> None:
                schedule(state["t"])
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                opt.step()
                state["t"] += 1

            bs = self.batch_size
            train_classifier(net, X, y, epochs=epochs, batch_size=bs, random_state=gen, step=step)

        dense_epochs = max(1, int(self.epochs) // 2)
        phase(dense_epochs)
        layers = [m for m in net.modules() if isinstance(m, torch.nn.Linear | torch.nn.Conv2d)]
        if self.sparsity > 0 and self.scope == "layer":
            for m in layers:
                prune.l1_unstructured(m, "weight", amount=float(self.sparsity))
        elif self.sparsity > 0:
            prune.global_unstructured(
                [(m, "weight") for m in layers],
                pruning_method=prune.L1Unstructured,
                amount=float(self.sparsity),
            )
        rest = int(self.epochs) - dense_epochs
        if rest > 0:
            phase(rest)
        if self.sparsity > 0:
            for m in layers:
                prune.remove(m, "weight")
        return net


def _batch_norm_tuning(net: Any, X: np.ndarray) -> None:
    """Re-estimate batch-norm running statistics of the pruned ``net`` on ``X`` (no weight changes)."""
    torch = require_torch()
    norms = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the passes
    net.train()
    with torch.no_grad(), one_thread():
        for start in range(0, len(X), 256):
            net(torch.as_tensor(X[start : start + 256]))
    for m, momentum in zip(norms, momenta, strict=True):
        m.momentum = momentum
    net.eval()
