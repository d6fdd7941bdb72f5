"""Source-free class unlearning (DSDA): synthesise data from the model, then multitask fine-tuning.

Wang, Chen, Liu, Liao, Wang and Zheng, "Efficient Source-free Unlearning via
Energy-Guided Data Synthesis and Discrimination-Aware Multitask Optimization"
(ICML 2025). Only the trained classifier and the class labels are used; the training
data never is. Stage 1 (AEGDS) draws per-class inputs by Langevin dynamics on the
energy ``E(x, y) = -log p_theta(y | x)``, accelerated by a Heun (second-order
Runge-Kutta) step and momentum. Stage 2 (DAMO) fine-tunes a copy of the model on the
synthetic retain/forget sets with a retain loss, a forget loss and a discriminative
feature alignment (Circle-loss form), combined by a conflict-averse (CAGrad-type)
update direction. Torch is imported only when used (``pip install trustlab[torch]``).
See ``docs/unlearning/source-free.md``.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.unlearning._source_free_inputs import (
    check_classes,
    check_input_range,
    check_model,
    find_head,
    import_torch,
)
from trustlab.unlearning._source_free_objective import cagrad_weights, damo
from trustlab.unlearning._source_free_results import SourceFreeReport, SyntheticSamples
from trustlab.unlearning._source_free_synthesis import class_score, run_chain

__all__ = [
    "SourceFreeReport",
    "SourceFreeUnlearner",
    "SyntheticSamples",
    "conflict_averse_direction",
    "synthesize",
]

_POS = Interval(numbers.Real, 0, None, closed="neither")
_SYNTH_CONSTRAINTS: dict[str, list[Any]] = {
    "n_per_class": [Interval(numbers.Integral, 1, None, closed="left")],
    "input_shape": [None, tuple, list],
    "steps": [Interval(numbers.Integral, 1, None, closed="left")],
    "dt": [_POS],
    "alpha": [_POS],
    "momentum": [Interval(numbers.Real, 0, 1, closed="left")],
    "integrator": [Options({"heun", "euler"})],
    "eta": [Interval(numbers.Real, 0.5, None, closed="left")],
    "energy": [Options({"softmax", "logit"})],
    "input_range": [tuple, list],
    "keep": [Options({"argmax", "all"})],
    "random_state": ["random_state"],
}
"""The options of :func:`synthesize`; all but ``random_state`` are the keyword options of ``_synthesize``."""


def _torch_generator(random_state: Any) -> Any:
    torch = import_torch()
    rng = make_generator(random_state)
    return torch.Generator().manual_seed(int(rng.integers(0, 2**62)))


def _synthesize(
    model: Any,
    classes: Any,
    *,
    n_classes_name: str,
    n_per_class: int,
    input_shape: Any,
    steps: int,
    dt: float,
    alpha: float,
    momentum: float,
    integrator: str,
    eta: float,
    energy: str,
    input_range: Any,
    keep: str,
    generator: Any,
    allow_all: bool,
) -> tuple[SyntheticSamples, Any, Any, int]:
    torch = import_torch()
    low, high = check_input_range(input_range)
    shape, n_classes, dtype = check_model(model, input_shape, low, high)
    cls = check_classes(classes, n_classes, n_classes_name, allow_all=allow_all)
    was_training = model.training
    model.eval()
    req = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        y = torch.as_tensor(np.repeat(np.asarray(cls, dtype=np.int64), n_per_class))
        x0 = low + (high - low) * torch.rand((y.numel(), *shape), generator=generator, dtype=dtype)
        x, trace, evals = run_chain(
            class_score(model, energy),
            x0,
            y,
            steps=int(steps),
            dt=float(dt),
            alpha=float(alpha),
            momentum=float(momentum),
            integrator=integrator,
            eta=float(eta),
            low=low,
            high=high,
            noise=True,
            generator=generator,
        )
        with torch.no_grad():
            hit = model(x).argmax(dim=1) == y
    finally:
        for p, r in zip(model.parameters(), req, strict=True):
            p.requires_grad_(r)
        model.train(was_training)
    keep_mask = hit if keep == "argmax" else torch.ones_like(hit)
    yn, hn, kn = y.numpy(), hit.numpy(), keep_mask.numpy()
    samples = SyntheticSamples(
        X=x[keep_mask].numpy(),
        y=yn[kn],
        generated={c: int(n_per_class) for c in cls},
        kept={c: int(kn[yn == c].sum()) for c in cls},
        hit_rate={c: float(hn[yn == c].mean()) for c in cls},
        energy_trace=tuple(trace),
        score_evals=int(evals),
    )
    return samples, shape, n_classes, len(cls)


@validate_params({"model": "no_validation", "classes": "no_validation", **_SYNTH_CONSTRAINTS})
def synthesize(
    model: Any,
    classes: Any,
    n_per_class: int = 100,
    *,
    input_shape: Any = None,
    steps: int = 20,
    dt: float = 1.0,
    alpha: float = 0.05,
    momentum: float = 0.9,
    integrator: str = "heun",
    eta: float = 1.0,
    energy: str = "softmax",
    input_range: Any = (-1.0, 1.0),
    keep: str = "argmax",
    random_state: Any = None,
) -> SyntheticSamples:
    """Draw inputs of the given classes from a trained classifier by energy-guided Langevin dynamics.

    AEGDS (Algorithm 1 of the paper): per class ``y``, chains start uniform in
    ``input_range`` with ``v = 0``; each step draws ``eps ~ N(0, I)`` once and, with
    ``s = -grad_x E(x, y)`` and ``h = dt``,
    ``x' = x + eta h alpha s(x) + sqrt(2 alpha h) eps`` (Heun predictor),
    ``v_hat = (1 - 1/(2 eta)) s(x) + 1/(2 eta) s(x')`` (Euler: ``v_hat = s(x)``),
    ``v = momentum v + alpha v_hat``, ``x = clip(x + h v + sqrt(2 alpha h) eps)``.
    ``integrator="euler", momentum=0`` is plain SGLD (EGDS, Eq. 3).

    Parameters
    ----------
    model : torch.nn.Module
        A trained classifier mapping ``(batch, *input_shape)`` to logits ``(batch, K)``;
        not modified.
    classes : list of int
        Class indices to draw for.
    n_per_class : int, default 100
        Chains per class.
    input_shape : tuple of int, optional
        Shape of one input (default: ``(in_features,)`` of the first ``nn.Linear``).
    steps : int, default 20
        Langevin steps (the paper's ``N``).
    dt : float, default 1.0
        Step ``Delta t`` of the time grid.
    alpha : float, default 0.05
        Step size ``alpha`` (drift ``alpha dt s``, noise std ``sqrt(2 alpha dt)``).
    momentum : float, default 0.9
        Momentum decay ``gamma`` in ``[0, 1)``.
    integrator : {"heun", "euler"}, default "heun"
        Second-order Runge-Kutta (two score evaluations per step) or Euler.
    eta : float, default 1.0
        Predictor fraction of the two-stage RK2 (Eq. 5; 1 is Heun, 0.5 the midpoint rule).
    energy : {"softmax", "logit"}, default "softmax"
        ``-log softmax(M(x))[y]`` (the paper's) or ``-M(x)[y]``.
    input_range : tuple of float, default (-1.0, 1.0)
        The box inputs live in: chains start uniform in it and are clipped to it.
    keep : {"argmax", "all"}, default "argmax"
        Keep only samples the model assigns to their class, or all.
    random_state : None, int or numpy.random.Generator
        Seeds the start points and the Langevin noise.

    Returns
    -------
    SyntheticSamples
        The samples, their classes and the chain's diagnostics.

    References
    ----------
    X. Wang, C. Chen, W. Liu, X. Liao, F. Wang and X. Zheng. "Efficient Source-free
    Unlearning via Energy-Guided Data Synthesis and Discrimination-Aware Multitask
    Optimization". ICML 2025 (PMLR 267:62518-62528).

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Linear(4, 3)
    >>> s = synthesize(model, [0, 2], n_per_class=50, random_state=0)
    >>> s.X.shape[1], sorted(s.kept), s.energy_trace[-1] < s.energy_trace[0]
    (4, [0, 2], True)
    """
    gen = _torch_generator(random_state)
    samples, *_ = _synthesize(
        model,
        classes,
        n_classes_name="classes",
        n_per_class=n_per_class,
        input_shape=input_shape,
        steps=steps,
        dt=dt,
        alpha=alpha,
        momentum=momentum,
        integrator=integrator,
        eta=eta,
        energy=energy,
        input_range=input_range,
        keep=keep,
        generator=gen,
        allow_all=True,
    )
    return samples


@validate_params(
    {
        "grads": ["array-like"],
        "weights": [None, "array-like"],
        "c": [Interval(numbers.Real, 0, 1, closed="left")],
    }
)
def conflict_averse_direction(grads: Any, weights: Any = None, c: float = 0.5) -> np.ndarray:
    """The conflict-averse update direction of DAMO (Theorems 3.2-3.3; CAGrad-type).

    With ``g_T = sum_i lam_i g_i`` and ``phi = c^2 ||g_T||^2``: ``w*`` minimises
    ``g_w . g_T + sqrt(phi) ||g_w||`` over the simplex (``g_w = sum_i w_i g_i``) and
    ``d* = g_T + sqrt(phi) g_w* / ||g_w*||``. It stays within ``c ||g_T||`` of ``g_T``
    and raises the smallest inner product ``min_i <g_i, d>`` over ``g_T``'s.

    Parameters
    ----------
    grads : array-like of shape (n_tasks, n_params)
        One gradient per task (finite).
    weights : array-like of shape (n_tasks,), optional
        Non-negative task weights ``lam`` (default all ones).
    c : float, default 0.5
        Radius ``c`` in ``[0, 1)``; 0 returns ``g_T``.

    Returns
    -------
    numpy.ndarray
        ``d*``, shape ``(n_params,)``.

    References
    ----------
    X. Wang et al. "Efficient Source-free Unlearning via Energy-Guided Data Synthesis and
    Discrimination-Aware Multitask Optimization". ICML 2025. B. Liu, X. Liu, X. Jin,
    P. Stone and Q. Liu. "Conflict-Averse Gradient Descent for Multi-task Learning".
    NeurIPS 2021.

    Examples
    --------
    >>> d = conflict_averse_direction([[1.0, 0.0], [-1.0, 0.2], [0.0, 1.0]], c=0.5)
    >>> d.round(3).tolist()
    [0.177, 1.773]
    """
    try:
        G = np.asarray(grads, dtype=float)
    except (TypeError, ValueError):
        G = np.zeros((0, 0))
    if G.ndim != 2 or G.shape[0] < 1 or G.shape[1] < 1 or not np.all(np.isfinite(G)):
        raise DataError(
            "grads must be a finite 2-D array, one task gradient per row (n_tasks, n_params).",
            argument="grads",
        )
    if weights is None:
        lam = np.ones(G.shape[0])
    else:
        try:
            lam = np.asarray(weights, dtype=float).ravel()
        except (TypeError, ValueError):
            lam = np.full(1, np.nan)
        if lam.shape != (G.shape[0],) or not np.all(np.isfinite(lam)) or np.any(lam < 0):
            raise ParameterError(
                f"weights must be {G.shape[0]} non-negative finite numbers, one per row of grads.",
                argument="weights",
            )
    scale = float(np.abs(G).max()) or 1.0
    Gs = G / scale
    _, coef = cagrad_weights(Gs @ Gs.T, lam, float(c))
    return np.asarray(coef @ G, dtype=float)


class SourceFreeUnlearner(ParamsValidationMixin):
    """Source-free class unlearning (DSDA): AEGDS synthesis, then DAMO fine-tuning of a copy.

    ``fit(model, forget_classes)`` never receives training data. It synthesises
    ``n_per_class`` inputs for every class of ``model`` with :func:`synthesize` (kept
    when the model assigns them to their class), then fine-tunes a copy of ``model``
    for ``epochs`` passes over the synthetic retain set with Adam, each update
    following the conflict-averse direction (:func:`conflict_averse_direction`) of
    three losses: ``L_R`` (cross-entropy on synthetic retain samples, or distillation
    of the original model's probabilities), ``L_F`` on synthetic forget samples
    (``"mass"``: ``-log(1 - sum_{c in C_f} p_c)``; ``"relabel"``: cross-entropy to the
    original model's best retain class) and ``L_Disc`` (Eq. 7: cosine similarities of
    the features entering the last ``nn.Linear`` to fixed class centres, the original
    model's mean feature of each synthetic retain class). The model is fine-tuned in
    eval mode (dropout off, batch-norm statistics frozen).

    Parameters
    ----------
    n_per_class : int, default 100
        Langevin chains per class.
    steps : int, default 20
        Langevin steps per chain.
    dt, alpha, momentum, integrator, eta, energy : see :func:`synthesize`
        Defaults 1.0, 0.05, 0.9, ``"heun"``, 1.0, ``"softmax"``.
    input_shape : tuple of int, optional
        Shape of one input (default: read off the first ``nn.Linear``).
    input_range : tuple of float, default (-1.0, 1.0)
        The box the model's inputs live in (public: e.g. the normalisation's range).
    keep : {"argmax", "all"}, default "argmax"
        Which synthetic samples to keep.
    retain_loss : {"ce", "distill"}, default "ce"
        ``L_R``: cross-entropy to the synthesis class (the paper's), or cross-entropy to
        the original model's probabilities.
    forget_loss : {"mass", "relabel"}, default "mass"
        ``L_F`` (the paper's formula was not recovered; see the docs page).
    weights : tuple of float, default (1.0, 1.0, 1.0)
        ``lam`` of ``L_R``, ``L_F``, ``L_Disc`` (``lam_3 = 0`` drops ``L_Disc``).
    c : float, default 0.5
        Conflict-averse radius in ``[0, 1)`` (0: plain weighted sum).
    epochs : int, default 5
        Passes over the synthetic retain set.
    lr : float, default 1e-3
        Adam step size.
    batch_size : int, default 32
        Synthetic retain samples per update (forget samples are spread evenly).
    disc_scale, disc_o_p, disc_o_n : float, default 64.0, 1.25, -0.25
        ``delta``, ``O_p``, ``O_n`` of ``L_Disc``.
    random_state : None, int or numpy.random.Generator
        Seeds the synthesis and the batch order.

    Attributes
    ----------
    input_shape_ : tuple of int
        Shape of one input.
    n_classes_ : int
        Logits of the model.
    model_ : torch.nn.Module
        The unlearned copy (``model`` itself is not changed).
    report_ : SourceFreeReport
        The synthesis diagnostics and the objective history.

    References
    ----------
    X. Wang, C. Chen, W. Liu, X. Liao, F. Wang and X. Zheng. "Efficient Source-free
    Unlearning via Energy-Guided Data Synthesis and Discrimination-Aware Multitask
    Optimization". ICML 2025 (PMLR 267:62518-62528).

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    >>> unlearner = SourceFreeUnlearner(n_per_class=40, epochs=3, random_state=0)
    >>> unlearner = unlearner.fit(model, forget_classes=[1])
    >>> unlearner.report_.retain_classes, len(unlearner.report_.objective_history["forget"])
    ((0, 2), 3)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_SYNTH_CONSTRAINTS,
        "retain_loss": [Options({"ce", "distill"})],
        "forget_loss": [Options({"mass", "relabel"})],
        "weights": [tuple, list],
        "c": [Interval(numbers.Real, 0, 1, closed="left")],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [_POS],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "disc_scale": [_POS],
        "disc_o_p": [Interval(numbers.Real, None, None, closed="neither")],
        "disc_o_n": [Interval(numbers.Real, None, None, closed="neither")],
    }

    def __init__(
        self,
        n_per_class: int = 100,
        steps: int = 20,
        *,
        dt: float = 1.0,
        alpha: float = 0.05,
        momentum: float = 0.9,
        integrator: str = "heun",
        eta: float = 1.0,
        energy: str = "softmax",
        input_shape: Any = None,
        input_range: Any = (-1.0, 1.0),
        keep: str = "argmax",
        retain_loss: str = "ce",
        forget_loss: str = "mass",
        weights: Any = (1.0, 1.0, 1.0),
        c: float = 0.5,
        epochs: int = 5,
        lr: float = 1e-3,
        batch_size: int = 32,
        disc_scale: float = 64.0,
        disc_o_p: float = 1.25,
        disc_o_n: float = -0.25,
        random_state: Any = None,
    ) -> None:
        self.n_per_class = n_per_class
        self.steps = steps
        self.dt = dt
        self.alpha = alpha
        self.momentum = momentum
        self.integrator = integrator
        self.eta = eta
        self.energy = energy
        self.input_shape = input_shape
        self.input_range = input_range
        self.keep = keep
        self.retain_loss = retain_loss
        self.forget_loss = forget_loss
        self.weights = weights
        self.c = c
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.disc_scale = disc_scale
        self.disc_o_p = disc_o_p
        self.disc_o_n = disc_o_n
        self.random_state = random_state

    def _check_weights(self) -> np.ndarray:
        try:
            lam = np.asarray(self.weights, dtype=float).ravel()
        except (TypeError, ValueError):
            lam = np.full(1, np.nan)
        if lam.shape != (3,) or not np.all(np.isfinite(lam)) or np.any(lam < 0) or lam[:2].sum() <= 0:
            raise ParameterError(
                "weights must be three non-negative finite numbers (lam_R, lam_F, lam_Disc), not both of "
                f"the first two zero; got {self.weights!r}.",
                argument="weights",
            )
        return lam

    def fit(self, model: Any, forget_classes: Any) -> SourceFreeUnlearner:
        """Unlearn ``forget_classes`` from a copy of ``model`` without any training data.

        Parameters
        ----------
        model : torch.nn.Module
            A trained classifier returning logits ``(batch, n_classes)``; not modified.
        forget_classes : list of int
            Class indices to forget (not all of them).

        Returns
        -------
        SourceFreeUnlearner
            ``self``, with ``model_`` and ``report_``.
        """
        self._validate_params()
        lam = self._check_weights()
        import_torch()
        low, high = check_input_range(self.input_range)
        shape, n_classes, _ = check_model(model, self.input_shape, low, high)
        forget = check_classes(forget_classes, n_classes, "forget_classes", allow_all=False)
        retain = tuple(c for c in range(n_classes) if c not in forget)
        gen = _torch_generator(self.random_state)
        chain = {name: getattr(self, name) for name in _SYNTH_CONSTRAINTS if name != "random_state"}
        samples, *_ = _synthesize(
            model, list(range(n_classes)), n_classes_name="model", generator=gen, allow_all=True, **chain
        )
        empty = [c for c, k in samples.kept.items() if k == 0]
        if empty:
            raise DataError(
                f"no synthetic sample of class(es) {empty} was assigned to its class by the model; raise "
                "steps or alpha, or pass keep='all'.",
                argument="steps",
            )
        torch = import_torch()
        dtype = next(p for p in model.parameters()).dtype
        X = torch.as_tensor(samples.X, dtype=dtype)
        y = torch.as_tensor(samples.y)
        is_f = torch.as_tensor(np.isin(samples.y, forget))
        head = find_head(model)
        head_path = None
        if head is not None:
            head_path = next(name for name, m in model.named_modules() if m is head)
        used_disc = bool(lam[2] > 0 and head_path is not None and len(retain) > 1)
        self.model_, history, n_steps = damo(
            model,
            X[~is_f],
            y[~is_f],
            X[is_f],
            forget=forget,
            retain=retain,
            head_path=head_path,
            retain_kind=self.retain_loss,
            forget_kind=self.forget_loss,
            weights=lam,
            c=float(self.c),
            epochs=int(self.epochs),
            lr=float(self.lr),
            batch_size=int(self.batch_size),
            scale=float(self.disc_scale),
            o_p=float(self.disc_o_p),
            o_n=float(self.disc_o_n),
            generator=gen,
        )
        self.input_shape_, self.n_classes_ = shape, n_classes
        self.report_ = SourceFreeReport(
            forget_classes=forget,
            retain_classes=retain,
            synthesis=samples,
            synthesis_steps=int(self.steps),
            objective_history={k: tuple(v) for k, v in history.items()},
            optimizer_steps=n_steps,
            used_disc=used_disc,
        )
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Class predictions of the unlearned model.

        Parameters
        ----------
        X : array-like of shape (n, *input_shape)
            Inputs.

        Returns
        -------
        numpy.ndarray
            The argmax of the unlearned model's logits, shape ``(n,)``.
        """
        if not hasattr(self, "model_"):
            raise NotFittedError("call fit(model, forget_classes) before predict.", argument="X")
        torch = import_torch()
        dtype = next(p for p in self.model_.parameters()).dtype
        try:
            Xa = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            Xa = np.zeros(0)
        if Xa.ndim < 1 or tuple(Xa.shape[1:]) != self.input_shape_ or not np.all(np.isfinite(Xa)):
            raise DataError(
                f"X must be a finite array of inputs of shape (n, *{self.input_shape_}); "
                f"got shape {Xa.shape}.",
                argument="X",
            )
        Xt = torch.as_tensor(Xa, dtype=dtype)
        with torch.no_grad():
            return self.model_(Xt).argmax(dim=1).numpy()
