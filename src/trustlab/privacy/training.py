"""Differentially private model training: DP-SGD for a logistic regression and a small MLP.

:class:`DPSGDClassifier` trains a binary classifier with DP-SGD (Abadi et al. 2016):
each step takes a Poisson sample of the rows (or a balanced-iteration-subsampling
batch), clips every per-example gradient to ``clip_norm``, sums them, adds Gaussian
noise of standard deviation ``noise_multiplier * clip_norm`` and takes a gradient
step. The noise multiplier is calibrated from ``(epsilon, delta)`` *before* training
with trustlab's accountants (:class:`~trustlab.privacy.amplification.PoissonAccountant`,
:class:`~trustlab.privacy.amplification.BISAccountant`,
:class:`~trustlab.privacy.amplification.ModelSplitAccountant`, or
:class:`~trustlab.privacy.signsgd.SignMechanismAccountant` for the noisy-SignSGD
optimizer), and the run is charged to an
:class:`~trustlab.privacy.accounting.Accountant` as one ledger line.

``torch`` is imported inside :meth:`DPSGDClassifier.fit` only: ``import trustlab.privacy``
never imports it.

References
----------
Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang. "Deep Learning with
Differential Privacy". CCS 2016. Mironov, Talwar, Zhang. "Renyi Differential Privacy
of the Sampled Gaussian Mechanism". arXiv 1908.10530, 2019. Dong, Chen, Ozgur.
"Leveraging Randomness in Model and Data Partitioning for Privacy Amplification".
ICML 2025. Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might)
Think". ICML 2025.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._param_validation import EPSILON, Interval, Options, ParamsValidationMixin
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, DataTypeError, MissingDependencyError, NotFittedError
from trustlab.privacy.accounting import Accountant, charge
from trustlab.privacy.release import PrivacyMeasure, Release

__all__ = ["DEFAULT_N_HINT", "GUARANTEE_COVERS", "DPSGDClassifier"]

DEFAULT_N_HINT = 1000
"""Public row count assumed when ``n_hint`` is not given (only the step size depends on it)."""

GUARANTEE_COVERS = (
    "add/remove one training row (features and label): the model's weights and everything "
    "computed from them (probabilities, predictions, scores on any data)"
)
"""What the training release's ``(epsilon, delta)`` protects."""

_DEFAULT_LR = {"dpsgd": 0.5, "signsgd": 0.01}


def _import_torch() -> Any:
    try:
        import torch
    except ModuleNotFoundError as err:
        if err.name != "torch":
            raise
        raise MissingDependencyError(
            "DPSGDClassifier needs torch: pip install 'trustlab[torch]' (torch==2.13.0).", argument="torch"
        ) from None
    return torch


class DPSGDClassifier(ClassifierMixin, ParamsValidationMixin, BaseEstimator):
    """Binary classifier trained with DP-SGD: clipped per-example gradients plus Gaussian noise.

    Every step ``t = 1..T`` (``T = round(epochs / sample_rate)``):

    1. a batch ``B_t``: each row joins with probability ``sample_rate`` (Poisson,
       ``sampling="poisson"`` or ``"model_split"``), or every row joins exactly
       ``epochs`` of the ``T`` steps chosen uniformly at random (``sampling="balanced"``);
    2. per-example gradients of the cross-entropy loss, each clipped to l2 norm
       ``clip_norm`` (over all parameters). With ``sampling="model_split"`` the
       parameters are split into ``num_blocks`` fixed disjoint blocks (coordinate ``i``
       of the flattened parameters in block ``i mod num_blocks``); each row of the batch
       draws one block uniformly at random (secretly) and only that block's part of its
       gradient is clipped and kept (Dong, Chen, Ozgur 2025, model splitting);
    3. ``g_t = (sum_{i in B_t} clip(grad_i) + N(0, (noise_multiplier * clip_norm)^2 I)) / L``
       with the public divisor ``L = sample_rate * n_hint / num_blocks`` (``num_blocks``
       is 1 unless model splitting: the expected number of rows updating one coordinate
       in a dataset of ``n_hint`` rows; the true row count is private under
       add/remove-one, so it never enters; a wrong ``n_hint`` only rescales the step
       size);
    4. ``theta <- theta - learning_rate * g_t``.

    With ``optimizer="signsgd"`` steps 3-4 are :class:`~trustlab.privacy.signsgd.NoisySignSGD`
    (one worker: ``theta <- theta - learning_rate * sign(sum clip(grad_i) + noise)``),
    accounted by :class:`~trustlab.privacy.signsgd.SignMechanismAccountant`, which
    credits the sign compressor.

    **Calibration.** With ``noise_multiplier=None`` the smallest noise multiplier
    (to a relative 1e-3) whose run costs at most ``epsilon`` at ``delta`` is found by
    bisection on the accountant before any data is touched (Poisson DP-SGD: the PLD
    accountant of ``dp-accounting``, Renyi DP as the stated fallback; the release's
    ``parameters["accountant"]`` says which); the release states the
    accountant's epsilon for that multiplier (at most ``epsilon``). A given
    ``noise_multiplier`` is used as is and must cost at most ``epsilon``.

    **Noise on a public grid.** DP-SGD's noisy sums are exact: each clipped
    per-example gradient is rounded to the public grid ``h`` (the noise std times
    ``2**-26``, rounded down to a power of two), the rounded rows are summed as integers
    and OpenDP's exact discrete Gaussian of the same std is added on that grid. The
    weights are a function of these grid values alone, so their low bits carry nothing
    more (float noise ``s + Z``, as Opacus adds it, leaks ``s`` through its rounding).
    The accountant prices sensitivity ``clip_norm + sqrt(P) h / 2`` (``P`` parameters)
    and ``delta`` keeps a share ``(1 + e^epsilon) T P 0.021 2**-52`` for the discrete
    noise's distance to the Gaussian (both negligible, both charged). Poisson sampling
    comes from a ``torch.Generator`` seeded from ``os.urandom``; ``random_state`` drives
    only the MLP's initial weights, which do not depend on the data. The signSGD
    optimizer keeps float noise (its release is a sign).

    Parameters
    ----------
    epsilon : float
        Privacy budget of the whole training run, in ``[1e-12, 1e6]``.
    delta : float
        Its delta, in ``(0, 1)``.
    model : {"logistic", "mlp"}, default "logistic"
        A logistic regression, or one hidden ReLU layer of ``hidden`` units.
    hidden : int, default 32
        Hidden units of the MLP.
    clip_norm : float, default 1.0
        Per-example l2 clipping norm ``C``, > 0.
    sample_rate : float, default 0.01
        Poisson rate (public), in ``(0, 1]``.
    epochs : int, default 5
        Expected passes over the data, >= 1; ``T = round(epochs / sample_rate)`` steps.
    learning_rate : float, optional
        Step size; default 0.5 (``"dpsgd"``) or 0.01 (``"signsgd"``).
    noise_multiplier : float, optional
        Noise std over ``clip_norm``; default: calibrated from ``epsilon``.
    optimizer : {"dpsgd", "signsgd"}, default "dpsgd"
        Noisy gradient steps (DP-SGD) or noisy SignSGD.
    sampling : {"poisson", "balanced", "model_split"}, default "poisson"
        Poisson subsampling, balanced iteration subsampling, or Poisson subsampling
        with model splitting (the last two with ``"dpsgd"`` only), accounted by
        :class:`~trustlab.privacy.amplification.PoissonAccountant`,
        :class:`~trustlab.privacy.amplification.BISAccountant` and
        :class:`~trustlab.privacy.amplification.ModelSplitAccountant`.
    num_blocks : int, default 4
        Number of parameter blocks with ``sampling="model_split"`` (ignored otherwise).
    accountant : Accountant, optional
        Checked before the first noise draw and charged after training (one ledger line).
    description : str, default "model training"
        The ledger line's description.
    n_hint : int, optional
        A public estimate of the number of training rows (default
        :data:`DEFAULT_N_HINT`); sets the divisor ``L = sample_rate * n_hint``.
    random_state : None, int or numpy Generator, default None
        Seeds the MLP's initial weights only (never noise or sampling).

    Attributes
    ----------
    classes_ : numpy.ndarray
        ``[0, 1]`` (public: fixed whatever labels the data holds).
    n_features_in_ : int
        Number of features.
    coef_ : numpy.ndarray
        Logistic model: the weights, shape ``(1, n_features)``.
    intercept_ : numpy.ndarray
        Logistic model: the bias, shape ``(1,)``.
    params_ : list of numpy.ndarray
        All fitted parameters (logistic: ``w, b``; MLP: ``W1, b1, w2, b2``).
    noise_multiplier_ : float
        The noise multiplier used.
    steps_ : int
        Number of steps taken.
    release_ : Release
        The training release: its ``epsilon``, ``delta``, ``measure``, and in
        ``parameters`` the sample rate, steps, noise multiplier, clip norm, divisor and
        what the guarantee covers; ``value`` holds the fitted parameters.

    References
    ----------
    Abadi et al. "Deep Learning with Differential Privacy". CCS 2016. Mironov, Talwar,
    Zhang. "Renyi Differential Privacy of the Sampled Gaussian Mechanism". 2019 (the
    Poisson accountant). Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data
    Partitioning for Privacy Amplification". ICML 2025 (``sampling="balanced"`` and
    ``"model_split"``).
    Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
    ICML 2025 (``optimizer="signsgd"``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, (2000, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> clf = DPSGDClassifier(epsilon=1.0, delta=1e-5, sample_rate=0.05, epochs=5, n_hint=2000).fit(X, y)
    >>> clf.release_.epsilon <= 1.0, clf.steps_
    (True, 100)
    >>> float((clf.predict(X) == y).mean()) > 0.8
    True
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "epsilon": [EPSILON],
        "delta": [Interval(numbers.Real, 0, 1, closed="neither")],
        "model": [Options({"logistic", "mlp"})],
        "hidden": [Interval(numbers.Integral, 1, None, closed="left")],
        "clip_norm": [Interval(numbers.Real, 0, None, closed="neither")],
        "sample_rate": [Interval(numbers.Real, 0, 1, closed="right")],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "noise_multiplier": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "optimizer": [Options({"dpsgd", "signsgd"})],
        "sampling": [Options({"poisson", "balanced", "model_split"})],
        "num_blocks": [Interval(numbers.Integral, 1, None, closed="left")],
        "accountant": [Accountant, None],
        "description": [str],
        "n_hint": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        epsilon: float = 1.0,
        delta: float = 1e-6,
        *,
        model: str = "logistic",
        hidden: int = 32,
        clip_norm: float = 1.0,
        sample_rate: float = 0.01,
        epochs: int = 5,
        learning_rate: float | None = None,
        noise_multiplier: float | None = None,
        optimizer: str = "dpsgd",
        sampling: str = "poisson",
        num_blocks: int = 4,
        accountant: Any = None,
        description: str = "model training",
        n_hint: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.model = model
        self.hidden = hidden
        self.clip_norm = clip_norm
        self.sample_rate = sample_rate
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.noise_multiplier = noise_multiplier
        self.optimizer = optimizer
        self.sampling = sampling
        self.num_blocks = num_blocks
        self.accountant = accountant
        self.description = description
        self.n_hint = n_hint
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        # Every fit draws fresh DP noise (never seeded): two fits differ.
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True
        return tags

    # -- planning (public parameters only) ---------------------------------------
    def _steps(self) -> int:
        return max(1, round(int(self.epochs) / float(self.sample_rate)))

    def _blocks(self) -> int:
        return int(self.num_blocks) if self.sampling == "model_split" else 1

    def _n_params(self, d: int) -> int:
        h = int(self.hidden)
        return d + 1 if self.model == "logistic" else h * d + 2 * h + 1

    def _plan(self, d: int) -> tuple[Release, float, int]:
        from trustlab.errors import ParameterError
        from trustlab.privacy._training_calibration import (
            Run,
            calibrate_noise,
            grid_cost,
            grid_inflation,
            grid_step,
            noise_range,
            run_plan,
        )

        steps = self._steps()
        q, eps, delta = float(self.sample_rate), float(self.epsilon), float(self.delta)
        if self.optimizer == "signsgd" and self.sampling != "poisson":
            raise ParameterError(
                "optimizer='signsgd' is accounted for Poisson sampling only; pass sampling='poisson'.",
                argument="sampling",
            )
        grid_on = self.optimizer == "dpsgd"
        n_params = self._n_params(d)
        # the grid's costs (grid_cost): sensitivity C + sqrt(P) h / 2, a delta share and,
        # at large epsilon, a small epsilon share
        eps_grid, delta_acc = grid_cost(eps, steps, n_params, delta) if grid_on else (0.0, delta)
        if not (eps_grid < 0.5 * eps and delta_acc > 0.5 * delta):
            raise ParameterError(
                f"{steps} steps of {n_params} parameters at epsilon={eps:g} leave no room in delta={delta:g} "
                "for the exact-noise grid; raise delta or lower epochs / sample_rate.",
                argument="delta",
            )
        run = Run(self.optimizer, self.sampling, steps, q, int(self.epochs), delta_acc, self._blocks())
        lo, hi = noise_range(self.optimizer)
        if self.noise_multiplier is None:
            target = calibrate_noise(run, eps - eps_grid)  # the multiplier the accountant must see
            sigma = target * grid_inflation(n_params, target) if grid_on else target
        else:
            sigma = float(self.noise_multiplier)
            if not lo <= sigma <= hi:
                raise ParameterError(
                    f"noise_multiplier must lie in [{lo:g}, {hi:g}] for optimizer={self.optimizer!r}; "
                    f"got {sigma:g}.",
                    argument="noise_multiplier",
                )
        clip = float(self.clip_norm)
        grid = grid_step(sigma * clip) if grid_on else 0.0
        # sensitivity C (1 + 1e-9) + sqrt(P) h / 2 (float64 clipping, per-row rounding): the
        # accountant sees the noise multiplier over that sensitivity
        effective = sigma / (1.0 + 1e-9 + math.sqrt(n_params) * grid / (2.0 * clip)) if grid_on else sigma
        plan = run_plan(run, max(lo, effective))
        if plan.epsilon + eps_grid > eps * (1 + 1e-12):
            raise ParameterError(
                f"noise_multiplier={sigma:g} costs epsilon {plan.epsilon + eps_grid:.4g} over {steps} steps, "
                f"more than epsilon={eps:g}; raise noise_multiplier or leave it None to calibrate it.",
                argument="noise_multiplier",
            )
        n_hint = DEFAULT_N_HINT if self.n_hint is None else int(self.n_hint)
        divisor = max(1.0, q * n_hint / self._blocks())
        parameters = dict(plan.parameters)
        parameters.update(
            {
                "model": self.model,
                "optimizer": self.optimizer,
                "sampling": self.sampling,
                "num_blocks": self._blocks(),
                "sample_rate": q,
                "steps": steps,
                "epochs": int(self.epochs),
                "noise_multiplier": sigma,
                "accounted_noise_multiplier": effective,
                "clip_norm": clip,
                "noise_std": sigma * clip,
                "divisor": divisor,
                "n_hint": n_hint,
                "covers": GUARANTEE_COVERS,
            }
        )
        if grid_on:
            parameters.update(
                {
                    "grid": grid,
                    "grid_delta": delta - delta_acc,
                    "grid_epsilon": eps_grid,
                    "noise_source": "OpenDP's exact discrete Gaussian on the public grid (noise_std * 2^-26 "
                    "rounded down to a power of two), added to the exact integer sum of the per-example "
                    "clipped gradients rounded to that grid: the weights are post-processing of grid values",
                }
            )
        else:
            parameters["noise_source"] = (
                "float Gaussian noise, torch.Generator seeded from os.urandom (as Opacus)"
            )
        release = Release(
            None,
            float(plan.epsilon) + eps_grid,
            delta,
            mechanism=f"DP-SGD ({plan.mechanism})",
            parameters=parameters,
            description=self.description,
            measure=PrivacyMeasure.APPROXIMATE,
        )
        return release, sigma, steps

    # -- input checks -------------------------------------------------------------
    @staticmethod
    def _check_X(X: Any, name: str = "X", *, min_rows: int = 1) -> np.ndarray:
        if hasattr(X, "tocsr") or hasattr(X, "toarray"):
            raise DataTypeError(
                f"{name}: sparse input is not supported; pass a dense array (X.toarray()).", argument=name
            )
        if np.iscomplexobj(X):
            raise DataTypeError(f"{name} holds complex numbers; pass real features.", argument=name)
        arr = check_numeric_array(X, name, ndim=2, min_rows=min_rows)
        if arr.shape[1] < 1:
            raise DataError(f"{name} must have at least one column.", argument=name)
        return arr

    def fit(self, X: Any, y: Any) -> DPSGDClassifier:
        """Train the model with DP-SGD and record the run's privacy.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features already scaled into ``[-1, 1]`` by the caller from *public* bounds
            (the class never looks at data ranges and never clips silently).
        y : array-like of shape (n,)
            Labels in ``{0, 1}``; a single class is allowed (the model then learns it).

        Returns
        -------
        DPSGDClassifier
            ``self``, fitted.

        Raises
        ------
        ParameterError
            Invalid parameters, or an epsilon the steps cannot meet.
        DataError
            ``X`` not 2-d, non-finite, or outside ``[-1, 1]``; ``y`` not 0/1 or of
            another length.
        BudgetExceededError
            ``accountant`` cannot afford the run (raised before any noise is drawn).
        MissingDependencyError
            torch is not installed.
        """
        self._validate_params()
        # No rows is legal: the row count is private (add/remove one row), so whether fit
        # raises must not depend on it; every step then adds noise to an empty sum.
        Xa = self._check_X(X, min_rows=0)
        if Xa.size and float(np.max(np.abs(Xa))) > 1.0:
            raise DataError(
                "X must lie in [-1, 1]: scale every feature with its PUBLIC bounds first "
                "((x - low) / (high - low) * 2 - 1); DPSGDClassifier never clips or rescales the data "
                "itself.",
                argument="X",
            )
        ya = check_numeric_array(y, "y", ndim=1, min_rows=0)
        if ya.shape[0] != Xa.shape[0]:
            raise DataError(f"y has {ya.shape[0]} rows but X has {Xa.shape[0]}.", argument="y")
        if not np.all((ya == 0) | (ya == 1)):
            raise DataError("y must hold 0/1 labels; encode the outcome first.", argument="y")
        torch = _import_torch()
        release, sigma, steps = self._plan(int(Xa.shape[1]))
        lr = float(self.learning_rate if self.learning_rate is not None else _DEFAULT_LR[self.optimizer])
        from trustlab.privacy import _training_core as core

        if self.random_state is None:
            rng = np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(16), "little")))
        else:
            rng = make_generator(self.random_state)
        d = int(Xa.shape[1])
        params = core.init_params(self.model, d, int(self.hidden), rng, torch.float64)
        schedule = None
        if self.sampling == "balanced":
            schedule = _balanced_schedule(Xa.shape[0], steps, int(self.epochs))

        def draw() -> list[np.ndarray]:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return core.train(
                    Xa,
                    ya,
                    model=self.model,
                    params=params,
                    clip_norm=float(self.clip_norm),
                    noise_multiplier=sigma,
                    learning_rate=lr,
                    steps=steps,
                    sample_rate=float(self.sample_rate),
                    divisor=float(release.parameters["divisor"]),
                    optimizer=self.optimizer,
                    schedule=schedule,
                    num_blocks=self._blocks() if self.sampling == "model_split" else 0,
                    grid=float(release.parameters.get("grid", 0.0)) or 1.0,
                )
            finally:
                torch.set_num_threads(threads)

        self.release_ = charge(self.accountant, release, draw)
        self.params_ = [np.asarray(p, dtype=float) for p in self.release_.value]
        if self.model == "logistic":
            self.coef_ = self.params_[0].reshape(1, -1)
            self.intercept_ = self.params_[1].reshape(1)
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = d
        self.noise_multiplier_ = sigma
        self.steps_ = steps
        return self

    # -- prediction (post-processing of the release) ------------------------------------
    def decision_function(self, X: Any) -> np.ndarray:
        """Return the logit of class 1 for every row.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features on the same public scale as in ``fit``.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        if not hasattr(self, "params_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit first.", argument="fit")
        Xa = self._check_X(X)
        if Xa.shape[1] != self.n_features_in_:
            raise DataError(
                f"X has {Xa.shape[1]} features; the model was fitted on {self.n_features_in_}.", argument="X"
            )
        if self.model == "logistic":
            w, b = self.params_
            return np.asarray(Xa @ w + b)
        w1, b1, w2, b2 = self.params_
        return np.asarray(np.maximum(Xa @ w1.T + b1, 0.0) @ w2 + b2)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Return ``[P(y=0), P(y=1)]`` for every row.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features on the same public scale as in ``fit``.

        Returns
        -------
        numpy.ndarray of shape (n, 2)
        """
        from scipy.special import expit

        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> np.ndarray:
        """Return the predicted class (0 or 1) of every row.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features on the same public scale as in ``fit``.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return (self.decision_function(X) >= 0).astype(int)


def _balanced_schedule(n: int, steps: int, participations: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, step) pairs of a balanced iteration subsampling schedule, drawn in row chunks.

    Uses :func:`~trustlab.privacy.amplification.bis_schedule` with ``random_state=None``
    (an ``os.urandom``-seeded generator: the schedule stays secret).
    """
    from trustlab.privacy.amplification import bis_schedule

    chunk = max(1, 2_000_000 // max(steps, 1))
    rows, cols = [], []
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        r, c = np.nonzero(bis_schedule(m, steps, participations))
        rows.append(r + start)
        cols.append(c)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(rows).astype(np.int64), np.concatenate(cols).astype(np.int64)
