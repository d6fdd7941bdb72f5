"""Evaluation of certified unlearning against retraining from scratch, and a loss-threshold MIA."""

from __future__ import annotations

import copy
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import HasMethods, Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError
from trustlab.privacy.release import Release


def _losses(model: Any, X: Any, y: Any, name: str) -> np.ndarray:
    # a DataFrame goes to the model as is (e.g. a pipeline that encodes its own columns)
    Xa = X if isinstance(X, pd.DataFrame) else check_numeric_array(X, name, ndim=2)
    try:
        ya = np.asarray(y)
    except (TypeError, ValueError):
        raise DataError(f"the labels of {name} must be a 1-D array.", argument=name) from None
    if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
        raise DataError(f"the labels of {name} must be 1-D with one per row.", argument=name)
    classes = np.asarray(getattr(model, "classes_", []))
    try:
        pos = np.searchsorted(classes, ya)
        ok = (pos < classes.size) & (classes[np.minimum(pos, max(classes.size - 1, 0))] == ya)
    except TypeError:
        ok = np.zeros(ya.shape[0], dtype=bool)
    if classes.size == 0 or not np.all(ok):
        raise DataError(f"the labels of {name} must be among the model's classes_.", argument=name)
    try:
        proba = np.asarray(model.predict_proba(Xa), dtype=float)
    except Exception as exc:  # the user's model failing on the user's rows
        raise ModelError(f"model.predict_proba failed on {name}: {exc}", argument="model") from exc
    p = proba[np.arange(Xa.shape[0]), pos]
    return -np.log(np.clip(p, 1e-300, 1.0))


@validate_params(
    {
        "model": [HasMethods(["predict_proba"])],
        "X_members": ["array-like"],
        "X_nonmembers": ["array-like"],
    }
)
def membership_advantage(
    model: Any, X_members: Any, y_members: Any, X_nonmembers: Any, y_nonmembers: Any
) -> float:
    """Advantage of the best loss-threshold membership-inference attack.

    The attacker says "member" when a row's cross-entropy loss is at most ``tau``; the
    advantage is ``max_tau P(loss <= tau | member) - P(loss <= tau | non-member)`` over
    every threshold (0 when no threshold helps): a one-sided two-sample
    Kolmogorov–Smirnov statistic of the losses (Yeom et al., CSF 2018). With ``m`` members
    and ``n`` non-members drawn from one distribution it stays below
    ``1.224 sqrt(1/m + 1/n)`` with probability 0.95.

    Parameters
    ----------
    model : classifier with predict_proba and classes_
        The model attacked.
    X_members, y_members : array-like
        Rows whose membership is tested (e.g. the forgotten rows). A pandas DataFrame
        is passed to ``model.predict_proba`` as it is (for a pipeline that encodes its
        own columns); anything else must be numeric.
    X_nonmembers, y_nonmembers : array-like
        Rows never trained on (e.g. a test split).

    Returns
    -------
    float
        The advantage in ``[0, 1]``.

    References
    ----------
    S. Yeom, I. Giacomelli, M. Fredrikson and S. Jha. "Privacy Risk in Machine Learning:
    Analyzing the Connection to Overfitting". IEEE CSF 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] > 0).astype(int)
    >>> model = LogisticRegression().fit(X[:100], y[:100])
    >>> membership_advantage(model, X[:100], y[:100], X[100:], y[100:]) < 0.2
    True
    """
    lm = _losses(model, X_members, y_members, "X_members")
    ln = _losses(model, X_nonmembers, y_nonmembers, "X_nonmembers")
    taus = np.unique(np.concatenate([lm, ln]))
    cm = np.searchsorted(np.sort(lm), taus, side="right") / lm.size
    cn = np.searchsorted(np.sort(ln), taus, side="right") / ln.size
    return float(max(0.0, np.max(cm - cn)))


@dataclass(frozen=True)
class UnlearningComparison:
    """Certified unlearning beside retraining from scratch on the retain rows.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per model (``original``, ``unlearned``, ``retrained``); columns
        ``retain_accuracy``, ``forget_accuracy``, ``test_accuracy``, ``mia_advantage``
        (forget rows vs test rows) and ``gradient_evaluations`` (per-example gradients
        computed after the deletion request; 0 for the original).
    release : Release
        The unlearner's release (the unlearned model and its certificate).
    retrained : Any
        The retrained model (L-BFGS from zero to convergence, the model's own penalty).
    compute_ratio : float
        Unlearning's gradient evaluations over retraining's.
    mia_noise_level : float
        ``1.224 sqrt(1/n_forget + 1/n_test)``: an advantage below it is not
        distinguishable from 0 at the 95% level.

    See Also
    --------
    compare_to_retraining : builds it.
    """

    table: pd.DataFrame
    release: Release
    retrained: Any
    compute_ratio: float
    mia_noise_level: float


@validate_params({"retrain_max_iter": [Interval(numbers.Integral, 1, None, closed="left")]})
def compare_to_retraining(
    unlearner: Any,
    model: Any,
    X: Any,
    y: Any,
    forget: Any,
    X_test: Any,
    y_test: Any,
    *,
    retrain_max_iter: int = 10_000,
) -> UnlearningComparison:
    """Unlearn ``forget`` and retrain from scratch; compare accuracy, MIA advantage and compute.

    Parameters
    ----------
    unlearner : NoisyFinetuneUnlearner
        The configured unlearner.
    model : sklearn.linear_model.LogisticRegression
        The model fitted on ``(X, y)``.
    X, y : array-like
        The training rows and labels.
    forget : array-like of int or bool
        The rows to forget.
    X_test, y_test : array-like
        Held-out rows (the non-members of the membership attack).
    retrain_max_iter : int, default 10000
        L-BFGS iterations allowed to the retraining (it stops at convergence).

    Returns
    -------
    UnlearningComparison
        The table, the release, the retrained model and the ratios.

    References
    ----------
    A. Koloskova, Y. Allouah, A. Jha, R. Guerraoui and S. Koyejo. "Certified Unlearning for
    Neural Networks". ICML 2025 (PMLR 267).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.unlearning.certified import NoisyFinetuneUnlearner
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 3)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> model = LogisticRegression().fit(X[:300], y[:300])
    >>> out = compare_to_retraining(NoisyFinetuneUnlearner(C0=20.0), model, X[:300], y[:300],
    ...                             np.arange(30), X[300:], y[300:])
    >>> list(out.table.index)
    ['original', 'unlearned', 'retrained']
    """
    from trustlab.unlearning._certified_inputs import (
        check_model,
        check_rows,
        forget_mask,
        l2_per_row,
        model_shape,
    )
    from trustlab.unlearning._certified_logistic import fit_lbfgs

    model = check_model(model)
    Xa, codes = check_rows(model, X, y)
    Xt, _ = check_rows(model, X_test, y_test, name="X_test")
    yt = np.asarray(y_test)
    mask = forget_mask(forget, Xa.shape[0])
    release = unlearner.unlearn(model, Xa, np.asarray(y), mask)
    shape = model_shape(model)
    Xr, cr = Xa[~mask], codes[~mask]
    x, retrain_evals = fit_lbfgs(
        shape, np.zeros(shape.size), Xr, cr, l2_per_row(model, Xr.shape[0]), max_iter=int(retrain_max_iter)
    )
    retrained = copy.deepcopy(model)
    W, b = shape.split(x)
    retrained.coef_, retrained.intercept_ = W.copy(), b.copy()
    ya = np.asarray(y)
    rows = {}
    for name, m, evals in (
        ("original", model, 0),
        ("unlearned", release.value, release.parameters["gradient_evaluations"]),
        ("retrained", retrained, retrain_evals),
    ):
        rows[name] = {
            "retain_accuracy": float(np.mean(m.predict(Xr) == ya[~mask])),
            "forget_accuracy": float(np.mean(m.predict(Xa[mask]) == ya[mask])),
            "test_accuracy": float(np.mean(m.predict(Xt) == yt)),
            "mia_advantage": membership_advantage(m, Xa[mask], ya[mask], Xt, yt),
            "gradient_evaluations": int(evals),
        }
    table = pd.DataFrame.from_dict(rows, orient="index")
    return UnlearningComparison(
        table=table,
        release=release,
        retrained=retrained,
        compute_ratio=float(release.parameters["gradient_evaluations"]) / max(retrain_evals, 1),
        mia_noise_level=1.224 * math.sqrt(1.0 / int(mask.sum()) + 1.0 / Xt.shape[0]),
    )
