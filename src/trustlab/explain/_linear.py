"""One reader of a model's linear form, shared by counterfactuals, recourse and the audit.

A binary linear classifier scores ``w . x + b`` and predicts ``classes_[1]`` where the
score is positive. The functions here read ``(w, b)`` from a fitted model without
relying on scikit-learn's private class hierarchy:

- :func:`coef_intercept`: the ``coef_`` / ``intercept_`` of one estimator with a single
  output (the fourth reader, in the audit's Explain section, can call it too);
- :func:`pipeline_linear_form`: ``(w, b)`` of a model, or of a ``Pipeline`` whose steps
  before the linear final estimator are ``StandardScaler`` s (composed exactly), in the
  model's input space, checked against the model's own ``decision_function``;
- :func:`standardisation`: the composed ``StandardScaler`` steps of a ``Pipeline``;
- :func:`decision_scores`: a classifier's score (``decision_function``, or the logit of
  ``predict_proba``), the quantity :func:`~trustlab.explain.recourse_audit.linearize` probes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["coef_intercept", "decision_scores", "final_estimator", "pipeline_linear_form", "standardisation"]


def final_estimator(model: Any) -> Any:
    """The last step of a scikit-learn ``Pipeline``, or ``model`` itself.

    Parameters
    ----------
    model : estimator or Pipeline

    Returns
    -------
    estimator
    """
    from sklearn.pipeline import Pipeline

    return model[-1] if isinstance(model, Pipeline) else model


def coef_intercept(estimator: Any) -> tuple[np.ndarray, float] | None:
    """``(w, b)`` of a fitted linear estimator with one output, or None.

    Reads ``coef_`` of shape ``(d,)`` or ``(1, d)`` (dense or sparse) and
    ``intercept_`` (0 when the estimator has none). Estimators without such a
    ``coef_`` (trees, kernel SVMs, multiclass linear models) give None.

    Parameters
    ----------
    estimator : object
        A fitted estimator (not a ``Pipeline``: see :func:`final_estimator`).

    Returns
    -------
    tuple of (numpy.ndarray of shape (d,), float) or None

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]])
    >>> w, b = coef_intercept(LogisticRegression().fit(X, [0, 0, 1, 1]))
    >>> w.shape, isinstance(b, float)
    ((2,), True)
    >>> coef_intercept(object()) is None
    True
    """
    try:
        coef = estimator.coef_
    except Exception:  # a missing attribute, or a property that refuses (SVC with a non-linear kernel)
        return None
    if hasattr(coef, "toarray"):
        coef = coef.toarray()
    try:
        w = np.asarray(coef, dtype=float)
        b = np.ravel(np.asarray(getattr(estimator, "intercept_", 0.0), dtype=float))
    except (TypeError, ValueError):
        return None
    if w.size == 0 or w.ndim not in (1, 2) or (w.ndim == 2 and w.shape[0] != 1) or b.size > 1:
        return None
    return w.ravel(), float(b[0]) if b.size else 0.0


def standardisation(model: Any, d: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(mean, scale)`` of the ``StandardScaler`` steps before a ``Pipeline``'s final estimator.

    The steps compose to ``z = (x - mean) / scale`` in the model's column order
    (``passthrough`` and ``None`` steps are skipped; no steps gives zeros and ones).

    Parameters
    ----------
    model : estimator or Pipeline
    d : int
        Number of input features.

    Returns
    -------
    tuple of two numpy.ndarray of shape (d,), or None
        None when another kind of step precedes the final estimator.
    """
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    mean, scale = np.zeros(d), np.ones(d)
    steps = [step for _, step in model.steps[:-1]] if isinstance(model, Pipeline) else []
    for step in steps:
        if step is None or step == "passthrough":
            continue
        if not isinstance(step, StandardScaler):
            return None
        m = step.mean_ if step.with_mean else np.zeros(d)
        sc = step.scale_ if step.with_std and step.scale_ is not None else np.ones(d)
        mean, scale = mean + m * scale, scale * sc
    return mean, scale


def pipeline_linear_form(model: Any, columns: list[str] | None = None) -> tuple[np.ndarray, float] | None:
    """``(w, b)`` in the model's input space with ``w . x + b > 0`` <=> class ``classes_[1]``.

    The model is a binary linear classifier with ``decision_function`` (e.g.
    ``LogisticRegression``, ``LinearSVC``, ``SGDClassifier``, ``RidgeClassifier``,
    ``Perceptron``), optionally the last step of a ``Pipeline`` after
    ``StandardScaler`` steps. The form is checked against ``decision_function`` on
    three probe rows, so a model whose score is not ``w . x + b`` gives None.

    Parameters
    ----------
    model : fitted classifier or Pipeline
    columns : list of str, optional
        The model's input column names, when it was fitted on a DataFrame.

    Returns
    -------
    tuple of (numpy.ndarray of shape (d,), float) or None

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> X = np.array([[0.0, 10.0], [1.0, 30.0], [2.0, 10.0], [3.0, 30.0]])
    >>> pipe = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, [0, 0, 1, 1])
    >>> w, b = pipeline_linear_form(pipe)
    >>> bool(np.allclose(X @ w + b, pipe.decision_function(X)))
    True
    """
    est = final_estimator(model)
    lin = coef_intercept(est)
    if lin is None or not hasattr(est, "decision_function") or len(getattr(est, "classes_", ())) != 2:
        return None
    w, b = lin
    standardise = standardisation(model, w.size)
    if standardise is None:
        return None
    mean, scale = standardise
    w = w / scale  # w . (x - mean) / scale + b
    b = b - float(w @ mean)
    probe = np.vstack([np.zeros(w.size), np.ones(w.size), np.arange(w.size, dtype=float)])
    try:
        frame: Any = probe
        if columns is not None:
            import pandas as pd

            frame = pd.DataFrame(probe, columns=columns)
        score = np.ravel(np.asarray(model.decision_function(frame), dtype=float))
    except Exception:  # a model that cannot score plain numeric rows has no usable linear form
        return None
    mine = probe @ w + b
    if score.shape != mine.shape or not np.allclose(score, mine, rtol=1e-6, atol=1e-6):
        return None
    return w, b


def decision_scores(model: Any, X: Any) -> np.ndarray:
    """A binary classifier's score of each row: ``decision_function``, else the logit of ``predict_proba``.

    Parameters
    ----------
    model : fitted classifier with ``decision_function`` or ``predict_proba``
    X : array-like or DataFrame
        Rows in the model's input columns.

    Returns
    -------
    numpy.ndarray of shape (n,)
    """
    if hasattr(model, "decision_function"):
        out = np.asarray(model.decision_function(X), dtype=float)
    else:
        p = np.clip(np.asarray(model.predict_proba(X), dtype=float)[:, 1], 1e-300, 1 - 1e-16)
        out = np.log(p) - np.log1p(-p)
    return out.ravel()
