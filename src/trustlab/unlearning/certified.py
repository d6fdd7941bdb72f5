"""Certified unlearning by noisy fine-tuning on the retain data (gradient-clipping variant).

Koloskova, Allouah, Jha, Guerraoui and Koyejo, "Certified Unlearning for Neural Networks"
(ICML 2025). After a deletion request, the trained parameters are projected into a
public ball of radius ``C0`` and ``T`` noisy, clipped gradient steps are taken on the
retain data only::

    x_0 = clip_{C0}(x_hat),   x_{t+1} = (1 - lr * lam) x_t - lr * clip_{C1}(g_t) + N(0, sigma_t^2 I)

Each step uses no forgotten row, so the output is a post-processing of a start point
that the noise washes out: privacy amplification by iteration bounds the Rényi
divergence between this output and the same procedure run from *any* start in the ball
(in particular a model never trained on the forgotten rows) by ``alpha * R``,
``R = D_T^2 / (2 V_T)``, whence an ``(epsilon, delta)`` certificate. Noise-free
fine-tuning on the retain data follows (post-processing: the certificate stands).

Implemented for an L2-regularised logistic regression (scikit-learn's
``LogisticRegression``, binary or multinomial), in NumPy, and for any torch classifier
returning logits (the certificate assumes no convexity); noise is drawn by OpenDP's exact
sampler on the grid ``2**grid_exponent``, whose rounding slack enters ``D_T``. See
``docs/unlearning/certified.md``.
"""

from __future__ import annotations

import copy
import math
import numbers
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import DELTA, Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import make_generator
from trustlab.errors import ParameterError
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_gaussian, grid_slack
from trustlab.unlearning._certified_accountant import (
    calibrate_sigmas,
    default_steps,
    epsilon_to_rho,
    pabi_rho,
    rho_to_epsilon,
)
from trustlab.unlearning._certified_eval import (
    UnlearningComparison,
    compare_to_retraining,
    membership_advantage,
)
from trustlab.unlearning._certified_inputs import (
    check_model,
    check_rows,
    forget_mask,
    l2_per_row,
    model_shape,
)
from trustlab.unlearning._certified_logistic import fit_lbfgs, mean_loss_grad

__all__ = [
    "NoisyFinetuneUnlearner",
    "UnlearningComparison",
    "certificate_epsilon",
    "compare_to_retraining",
    "membership_advantage",
]

GUARANTEE = "certified unlearning"
_POS = Interval(numbers.Real, 0, None, closed="neither")


@validate_params(
    {
        "C0": [_POS],
        "C1": [_POS],
        "lr": [_POS],
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "sigmas": ["array-like", _POS],
        "delta": [Interval(numbers.Real, 0, 1, closed="neither")],
    }
)
def certificate_epsilon(
    C0: float, C1: float, lr: float, weight_decay: float, sigmas: Any, delta: float = 1e-5
) -> tuple[float, float]:
    """The ``(epsilon, R)`` of noisy fine-tuning with these public bounds and noise stds.

    ``R = D_T^2 / (2 V_T)`` with ``rho = 1 - lr * weight_decay``,
    ``D_T = rho^T 2 C0 + sum_t rho^{T-1-t} 2 lr C1`` and
    ``V_T = sum_t rho^{2(T-1-t)} sigma_t^2``; the Rényi divergence of every order
    ``alpha`` is at most ``alpha R``, and
    ``epsilon = min_alpha alpha R + ln((alpha-1)/alpha) - (ln delta + ln alpha)/(alpha-1)``.

    Parameters
    ----------
    C0 : float
        Public radius the start is projected into.
    C1 : float
        Gradient clipping norm.
    lr : float
        Step size.
    weight_decay : float
        ``lam >= 0`` with ``lr * lam < 1``.
    sigmas : float or array-like of float
        Noise std of each step (one value: one step).
    delta : float, default 1e-5
        The certificate's delta.

    Returns
    -------
    tuple of float
        ``(epsilon, R)``.

    References
    ----------
    A. Koloskova, Y. Allouah, A. Jha, R. Guerraoui and S. Koyejo. "Certified Unlearning for
    Neural Networks". ICML 2025 (PMLR 267).

    Examples
    --------
    >>> eps, R = certificate_epsilon(0.1, 10.0, 1e-3, 50.0, [0.0772562962] * 10)
    >>> round(R, 6), round(eps, 3)
    (1.0, 7.077)
    """
    try:
        sig = np.atleast_1d(np.asarray(sigmas, dtype=float))
    except (TypeError, ValueError):
        sig = np.zeros(0)  # ragged or non-numeric: refused below
    if sig.ndim != 1 or sig.size == 0 or not np.all(np.isfinite(sig)) or np.any(sig * sig <= 0):
        raise ParameterError(
            "sigmas must be positive finite noise stds, one per step (squares above the float64 "
            "underflow, about 1e-154).",
            argument="sigmas",
        )
    if not lr * weight_decay < 1:
        raise ParameterError("lr * weight_decay must be < 1 (a contraction).", argument="weight_decay")
    R = pabi_rho(float(C0), float(C1), float(lr), float(weight_decay), sig)
    return rho_to_epsilon(R, float(delta))[0], R


class NoisyFinetuneUnlearner(ParamsValidationMixin):
    """Certified unlearning by projected noisy gradient steps on the retain data, then fine-tuning.

    ``unlearn(model, X, y, forget)`` takes a fitted scikit-learn ``LogisticRegression``
    trained (by anyone) on ``(X, y)`` and the rows to forget, and returns a
    :class:`~trustlab.privacy.release.Release` whose ``value`` is the unlearned model
    (a copy; ``model`` is not changed) and whose ``epsilon``/``delta`` are the
    unlearning certificate (``guarantee="certified unlearning"``: it is not a DP release
    and cannot be charged to a privacy accountant).

    Steps: project the parameters (all coefficients and intercepts, one global L2 norm)
    into the ball of radius ``C0``; ``n_steps`` times, take a retain mini-batch, clip its
    mean-loss gradient to norm ``C1``, set ``x <- (1 - lr*weight_decay) x - lr*g`` and add
    Gaussian noise of std ``sigma_t`` (OpenDP's exact sampler on the grid
    ``2**grid_exponent``); then ``finetune_iter`` noise-free L-BFGS iterations on the
    retain data with the model's own L2 penalty (``1 / (C * n_retain)`` per row).
    ``sigma_t`` is calibrated so that ``R = target_rho`` (or so that the certificate's
    epsilon equals ``epsilon`` when given).

    Parameters
    ----------
    C0 : float
        Public bound on the parameter norm (required, never read off the model: the
        certificate covers every start inside this ball).
    C1 : float, default 1.0
        Gradient clipping norm.
    lr : float, default 0.5
        Step size of the noisy phase.
    weight_decay : float, default 0.5
        ``lam`` of the noisy phase (``lr * lam < 1``); contraction ``1 - lr*lam``.
    target_rho : float, default 1.0
        ``R`` to calibrate the noise to (``R = 1`` gives epsilon 7.08 at delta 1e-5).
    epsilon : float, optional
        Target epsilon instead of ``target_rho``.
    delta : float, default 1e-5
        The certificate's delta.
    n_steps : int, optional
        Noisy steps ``T`` (default ``ceil(C0 / (lr C1))``, or the shorter
        ``ceil(ln(2 lam C0 / C1) / (lr lam))`` when ``lam > 0``).
    noise_schedule : {"constant", "decreasing"}, default "constant"
        Equal stds, or larger noise early (each step adds the same to ``V_T``).
    batch_size : int or None, default 128
        Retain rows per noisy step (None: all).
    finetune_iter : int, default 50
        Noise-free L-BFGS iterations after the noisy phase (0: none).
    grid_exponent : int, default -30
        Noise is drawn on the grid ``2**grid_exponent``; its rounding slack
        ``sqrt(d) 2**grid_exponent`` per step is added to ``D_T``.
    random_state : None, int or numpy.random.Generator
        Drives only the mini-batch order (public; never the noise).

    References
    ----------
    A. Koloskova, Y. Allouah, A. Jha, R. Guerraoui and S. Koyejo. "Certified Unlearning for
    Neural Networks". ICML 2025 (PMLR 267).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = (X[:, 0] > 0).astype(int)
    >>> model = LogisticRegression().fit(X, y)
    >>> release = NoisyFinetuneUnlearner(C0=10.0).unlearn(model, X, y, forget=np.arange(30))
    >>> round(release.epsilon, 2), release.guarantee, release.value.score(X[30:], y[30:]) > 0.9
    (7.08, 'certified unlearning', True)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "C0": [_POS],
        "C1": [_POS],
        "lr": [_POS],
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "target_rho": [Interval(numbers.Real, 1e-8, 1e6, closed="both")],
        "epsilon": [None, Interval(numbers.Real, 1e-3, 1e4, closed="both")],
        "delta": [DELTA],
        "n_steps": [None, Interval(numbers.Integral, 1, 10**6, closed="both")],
        "noise_schedule": [Options({"constant", "decreasing"})],
        "batch_size": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "finetune_iter": [Interval(numbers.Integral, 0, 10**5, closed="both")],
        "grid_exponent": [Interval(numbers.Integral, -60, -10, closed="both")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        C0: float,
        *,
        C1: float = 1.0,
        lr: float = 0.5,
        weight_decay: float = 0.5,
        target_rho: float = 1.0,
        epsilon: float | None = None,
        delta: float = 1e-5,
        n_steps: int | None = None,
        noise_schedule: str = "constant",
        batch_size: int | None = 128,
        finetune_iter: int = 50,
        grid_exponent: int = -30,
        random_state: Any = None,
    ) -> None:
        self.C0 = C0
        self.C1 = C1
        self.lr = lr
        self.weight_decay = weight_decay
        self.target_rho = target_rho
        self.epsilon = epsilon
        self.delta = delta
        self.n_steps = n_steps
        self.noise_schedule = noise_schedule
        self.batch_size = batch_size
        self.finetune_iter = finetune_iter
        self.grid_exponent = grid_exponent
        self.random_state = random_state

    def plan(self, n_params: int) -> dict[str, Any]:
        """The public schedule for a model with ``n_params`` parameters, before any data is touched.

        Parameters
        ----------
        n_params : int
            Number of parameters (coefficients plus intercepts).

        Returns
        -------
        dict
            ``n_steps``, ``sigmas`` (array), ``renyi_rho`` (R), ``alpha``, ``epsilon``,
            ``delta``, ``grid_slack``.
        """
        self._validate_params()
        if self.delta == 0:
            raise ParameterError("delta must be > 0 for an (epsilon, delta) certificate.", argument="delta")
        step_decay = float(self.lr) * float(self.weight_decay)
        if not step_decay < 1:
            raise ParameterError(
                f"lr * weight_decay must be < 1 (a contraction); got {step_decay:g}.",
                argument="weight_decay",
            )
        C0, C1, lr, lam = float(self.C0), float(self.C1), float(self.lr), float(self.weight_decay)
        T = int(self.n_steps) if self.n_steps is not None else default_steps(C0, C1, lr, lam)
        slack = grid_slack(int(self.grid_exponent), int(n_params), "l2")
        R = (
            epsilon_to_rho(float(self.epsilon), float(self.delta))
            if self.epsilon is not None
            else float(self.target_rho)
        )
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                sigmas = calibrate_sigmas(C0, C1, lr, lam, T, R, self.noise_schedule, slack)
                R_check = pabi_rho(C0, C1, lr, lam, sigmas, slack)
        except (OverflowError, ZeroDivisionError):
            sigmas, R_check = np.full(T, np.inf), math.inf
        if not (np.all(np.isfinite(sigmas)) and np.all(sigmas > 0) and math.isfinite(R_check)):
            raise ParameterError(
                "the noise for these bounds does not fit in float64 (C0, C1 or lr far too large, or "
                "the target privacy far too small); rescale the model's parameter bound C0.",
                argument="C0",
            )
        eps, alpha = rho_to_epsilon(R_check, float(self.delta))
        return {
            "n_steps": T,
            "sigmas": sigmas,
            "renyi_rho": R_check,
            "alpha": alpha,
            "epsilon": eps,
            "delta": float(self.delta),
            "grid_slack": slack,
        }

    def unlearn(self, model: Any, X: Any, y: Any, forget: Any) -> Release:
        """Unlearn the rows ``forget`` of the training data ``(X, y)`` from ``model``.

        Parameters
        ----------
        model : sklearn.linear_model.LogisticRegression or torch.nn.Module
            Fitted on ``(X, y)``: a logistic regression (binary or multinomial; L2 or no
            penalty), or a torch classifier mapping a batch of rows to logits (its
            cross-entropy is the loss; fine-tuning is full-batch L-BFGS).
        X : array-like of shape (n, d) (or (n, ...) for a torch module)
            The training rows.
        y : array-like of shape (n,)
            Their labels (for a torch module: class indices ``0..C-1``).
        forget : array-like of int or bool
            Row indices (or a boolean mask) of the rows to forget; not empty, not all.

        Returns
        -------
        Release
            ``value``: the unlearned copy of ``model``; ``epsilon``, ``delta``: the
            certificate; ``parameters``: bounds, steps, noise stds, ``renyi_rho``,
            gradient evaluations of each phase.
        """
        from trustlab.unlearning._certified_torch import is_torch_module

        if is_torch_module(model):
            return self._unlearn_module(model, X, y, forget)
        model = check_model(model)
        Xa, codes = check_rows(model, X, y)
        mask = forget_mask(forget, Xa.shape[0])
        shape = model_shape(model)
        plan = self.plan(shape.size)
        Xr, cr = Xa[~mask], codes[~mask]
        rng = make_generator(self.random_state)
        x_hat = shape.join(model.coef_, model.intercept_ if model.fit_intercept else np.zeros(shape.n_out))
        x = x_hat * min(1.0, float(self.C0) / max(float(np.linalg.norm(x_hat)), 1e-300))
        rho = 1.0 - float(self.lr) * float(self.weight_decay)
        batch = Xr.shape[0] if self.batch_size is None else min(int(self.batch_size), Xr.shape[0])
        order = rng.permutation(Xr.shape[0])
        pos, noisy_evals = 0, 0
        for sigma in plan["sigmas"]:
            if pos + batch > order.size:
                order, pos = rng.permutation(Xr.shape[0]), 0
            rows = order[pos : pos + batch]
            pos += batch
            _, g = mean_loss_grad(shape, x, Xr[rows], cr[rows])
            noisy_evals += rows.size
            g = g * min(1.0, float(self.C1) / max(float(np.linalg.norm(g)), 1e-300))
            x = add_gaussian(rho * x - float(self.lr) * g, float(sigma), k=int(self.grid_exponent))
        l2 = l2_per_row(model, Xr.shape[0])
        x, ft_evals = fit_lbfgs(shape, x, Xr, cr, l2, max_iter=int(self.finetune_iter))
        unlearned = copy.deepcopy(model)
        W, b = shape.split(x)
        unlearned.coef_ = W.copy()
        unlearned.intercept_ = b.copy() if model.fit_intercept else np.zeros(shape.n_out)
        if hasattr(unlearned, "n_iter_"):
            unlearned.n_iter_ = np.array([int(self.finetune_iter)])
        description = f"logistic regression with {int(mask.sum())} training rows unlearned"
        return self._release(unlearned, plan, mask, batch, noisy_evals, ft_evals, description)

    def _unlearn_module(self, module: Any, X: Any, y: Any, forget: Any) -> Release:
        from trustlab.unlearning._certified_torch import check_module_rows, unlearn_module

        Xt, yt, _ = check_module_rows(module, X, y)
        mask = forget_mask(forget, int(Xt.shape[0]))
        n_params = sum(int(p.numel()) for p in module.parameters() if p.requires_grad)
        plan = self.plan(max(n_params, 1))
        keep = np.flatnonzero(~mask)
        n_retain = int(keep.size)
        batch = n_retain if self.batch_size is None else min(int(self.batch_size), n_retain)
        unlearned, noisy_evals, ft_evals = unlearn_module(
            module,
            Xt[keep],
            yt[keep],
            sigmas=plan["sigmas"],
            C0=float(self.C0),
            C1=float(self.C1),
            lr=float(self.lr),
            weight_decay=float(self.weight_decay),
            batch_size=self.batch_size,
            finetune_iter=int(self.finetune_iter),
            grid_exponent=int(self.grid_exponent),
            rng=make_generator(self.random_state),
        )
        description = f"{type(module).__name__} (torch) with {int(mask.sum())} training rows unlearned"
        return self._release(unlearned, plan, mask, batch, noisy_evals, ft_evals, description)

    def _release(
        self,
        value: Any,
        plan: dict[str, Any],
        mask: np.ndarray,
        batch: int,
        noisy_evals: int,
        ft_evals: int,
        description: str,
    ) -> Release:
        sig = plan["sigmas"]
        return Release(
            value=value,
            epsilon=plan["epsilon"],
            delta=plan["delta"],
            mechanism="noisy fine-tuning, gradient clipping (Koloskova et al., ICML 2025)",
            guarantee=GUARANTEE,
            measure="approximate",
            description=description,
            parameters={
                "C0": float(self.C0),
                "C1": float(self.C1),
                "lr": float(self.lr),
                "weight_decay": float(self.weight_decay),
                "n_steps": plan["n_steps"],
                "noise_schedule": self.noise_schedule,
                "sigma_first": float(sig[0]),
                "sigma_last": float(sig[-1]),
                "renyi_rho": plan["renyi_rho"],
                "alpha": plan["alpha"],
                "grid_exponent": int(self.grid_exponent),
                "grid_slack": plan["grid_slack"],
                "batch_size": batch,
                "finetune_iter": int(self.finetune_iter),
                "n_forget": int(mask.sum()),
                "n_retain": int((~mask).sum()),
                "gradient_evaluations_noisy": int(noisy_evals),
                "gradient_evaluations_finetune": int(ft_evals),
                "gradient_evaluations": int(noisy_evals + ft_evals),
                "note": "the model was projected into the C0 ball; only retain rows were used",
            },
        )
