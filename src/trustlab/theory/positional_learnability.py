"""In-distribution learnability of positional Transformers: test error against training-set size.

Back de Luca et al. (ICML 2025) bound the generalisation gap of positional Transformers
(Theorem 6.1, per the paper's summaries: ``O~((H L_s B_2)^{cL} B_{2,1} sqrt(log(H d m n) / m))``
for ``m`` samples, with no dependence on the query-key norms that enters the standard
Transformer's bound) and show in-distribution that, at ``n = 8`` with 5,000 to 50,000 training
sequences, the test loss of both positional and standard Transformers decreases as the number
of samples grows (Figure 2). :func:`simulate_positional_sample_complexity` measures that trend:
both models, nested training sets of increasing size, one fixed step budget (so that only the
number of distinct samples changes), and the in-distribution test error on one shared test
set. The bound's constants are not given, so it is not evaluated numerically.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import DataError, ParameterError
from trustlab.theory.positional_attention import (
    ALGORITHMIC_TASKS,
    PositionalTransformerRegressor,
    algorithmic_task,
)

__all__ = ["PositionalSampleComplexity", "simulate_positional_sample_complexity"]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")


@dataclass(frozen=True)
class PositionalSampleComplexity:
    """Train and in-distribution test MSE of positional and standard attention per training size.

    Attributes
    ----------
    task : str
    n_train : numpy.ndarray
        Training-set sizes ``m`` (increasing; the sets are nested).
    test_mse, train_mse : numpy.ndarray
        ``(2, n_seeds, n_sizes)``: positional (index 0) and standard (1); the training MSE is
        measured on the model's whole training set after training.
    decrease_se : numpy.ndarray
        ``(2, n_seeds, n_sizes - 1)``: standard error of the paired per-sequence difference of the
        test squared error between consecutive sizes (the sample-size tolerance of a decrease).
    n_steps : numpy.ndarray
        Adam steps of each size's fits.

    See Also
    --------
    simulate_positional_sample_complexity : computes it.
    """

    task: str
    n_train: np.ndarray
    test_mse: np.ndarray
    train_mse: np.ndarray
    decrease_se: np.ndarray
    n_steps: np.ndarray

    @property
    def gap(self) -> np.ndarray:
        """Generalisation gap ``test - train`` MSE, ``(2, n_seeds, n_sizes)``."""
        return np.asarray(self.test_mse - self.train_mse)


@validate_params(
    {
        "task": [Options(ALGORITHMIC_TASKS)],
        "n_train": ["array-like"],
        "length": [_INT1],
        "n_test": [Interval(numbers.Integral, 2, None, closed="left")],
        "train_bound": [Interval(numbers.Real, 0, None, closed="neither")],
        "n_seeds": [_INT1],
        "epochs": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
        "estimator_params": [dict, None],
    }
)
def simulate_positional_sample_complexity(
    task: str = "sum",
    n_train: Any = (5000, 10_000, 20_000, 50_000),
    *,
    length: int = 8,
    n_test: int = 1000,
    train_bound: float = 2.0,
    n_seeds: int = 1,
    epochs: float | None = None,
    random_state: int = 0,
    estimator_params: dict[str, Any] | None = None,
) -> PositionalSampleComplexity:
    """In-distribution test MSE of positional and standard Transformers per training-set size.

    Per seed, one pool of ``max(n_train)`` sequences in ``[-b, b]`` is drawn and each size trains
    on its first ``m`` sequences (nested sets); every fit gets the same step budget
    (``estimator_params``) unless ``epochs`` is given, and all sizes share one in-distribution
    test set.

    Parameters
    ----------
    task : str, default "sum"
        One of :data:`~trustlab.theory.ALGORITHMIC_TASKS` (cumulative version).
    n_train : array-like of int, default (5000, 10000, 20000, 50000)
        Strictly increasing training-set sizes (the paper's Figure 2 spans 5,000 to 50,000).
    length : int, default 8
    n_test : int, default 1000
    train_bound : float, default 2
    n_seeds : int, default 1
    epochs : float, optional
        Train each size for this many passes over its data, ``ceil(epochs * m / batch)`` steps (the
        authors' protocol: larger sets then also get more steps); then ``estimator_params`` must
        not set ``steps``. By default every size gets the same steps.
    random_state : int, default 0
    estimator_params : dict, optional
        Passed to :class:`~trustlab.theory.PositionalTransformerRegressor`.

    Returns
    -------
    PositionalSampleComplexity

    References
    ----------
    A. Back de Luca, G. Giapitzakis, S. Yang, P. Velickovic and K. Fountoulakis, "Positional
    Attention: Expressivity and Learnability of Algorithmic Computation", ICML 2025 (PMLR 267),
    Theorem 6.1 and Figure 2 (as summarised from the paper; see the docs page).

    Examples
    --------
    >>> r = simulate_positional_sample_complexity("min", [32, 64], length=4, n_test=16,
    ...     estimator_params={"width": 8, "mlp_hidden": 8, "steps": 3})
    >>> r.test_mse.shape
    (2, 1, 2)
    """
    sizes = np.asarray(n_train)
    if sizes.ndim != 1 or len(sizes) < 2 or not np.issubdtype(sizes.dtype, np.integer):
        raise DataError(
            f"n_train must be a 1-D list of at least two integer sizes, got {n_train!r}.", argument="n_train"
        )
    if sizes[0] < 1 or np.any(np.diff(sizes) <= 0):
        raise DataError(
            f"n_train must be positive and strictly increasing, got {sizes.tolist()}.", argument="n_train"
        )
    params = dict(estimator_params or {})
    if "attention" in params or "random_state" in params:
        raise ParameterError(
            "estimator_params sets attention/random_state; they are set per run, remove them.",
            argument="estimator_params",
        )
    if epochs is not None and "steps" in params:
        raise ParameterError("give epochs or estimator_params['steps'], not both.", argument="epochs")
    default = PositionalTransformerRegressor()
    batch = int(params.get("batch_size", default.batch_size))
    if epochs is None:
        n_steps = np.full(len(sizes), int(params.get("steps", default.steps)))
    else:
        n_steps = np.array([max(1, math.ceil(epochs * m / min(batch, m))) for m in sizes])
    b = float(train_bound)
    test = np.zeros((2, n_seeds, len(sizes)))
    train = np.zeros_like(test)
    dse = np.zeros((2, n_seeds, len(sizes) - 1))
    for s in range(n_seeds):
        seed = random_state + 1000 * s
        x, y = algorithmic_task(task, int(sizes[-1]), length, low=-b, high=b, random_state=seed)
        xt, yt = algorithmic_task(task, n_test, length, low=-b, high=b, random_state=seed + 1)
        for k, kind in enumerate(("positional", "standard")):
            sq = []
            for j, m in enumerate(sizes):
                fit_params = {**params, "steps": int(n_steps[j])}
                reg = PositionalTransformerRegressor(kind, random_state=seed, **fit_params).fit(x[:m], y[:m])
                sq.append(((reg.predict(xt) - yt) ** 2).mean(axis=1))
                test[k, s, j] = sq[-1].mean()
                train[k, s, j] = ((reg.predict(x[:m]) - y[:m]) ** 2).mean()
            for j in range(len(sizes) - 1):
                diff = sq[j] - sq[j + 1]
                dse[k, s, j] = diff.std(ddof=1) / math.sqrt(len(diff))
    return PositionalSampleComplexity(task, sizes, test, train, dse, n_steps)
