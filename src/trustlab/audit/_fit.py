"""The Audit's model: fit one trustlab names (DP-SGD in private mode), load or check the user's, score.

:func:`fit_model` returns the model, its name in the report and a status line;
:func:`positive_proba` scores rows with it. In private mode nothing about the rows raises:
a model that cannot be fitted or cannot predict is replaced by a constant 0.5 one, and
the status says so (with the exception's type only: its text might quote a value).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit._private_model import DP_MODEL, fit_private_model
from trustlab.audit._scale_threads import native_threads
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError, ModelError
from trustlab.models import MODEL_NAMES, ConstantModel, check_model, load_model, make_model
from trustlab.privacy.accounting import Accountant

__all__ = ["TRAINING_SHARE", "fit_model", "fits_model", "positive_proba"]

TRAINING_SHARE = 0.25
"""Share of a private audit's epsilon spent training the model when trustlab fits it."""


def fits_model(model: Any) -> bool:
    """Whether trustlab fits ``model`` itself (a model name, not a path or an estimator)."""
    return isinstance(model, str | Path) and str(model) in MODEL_NAMES


def fit_model(
    model: Any,
    X_train: pd.DataFrame,
    y_train: np.ndarray,
    schema: Schema,
    *,
    private: bool,
    training_budget: Accountant | None,
    delta: float,
    test_size: float,
    random_state: int,
) -> tuple[Any, str, str]:
    """The model, its name and a status line (private mode falls back to a constant model).

    Parameters
    ----------
    model : str, path or estimator
        The Audit's ``model``.
    X_train : pandas.DataFrame
        The training rows' features.
    y_train : numpy.ndarray
        Their 0/1 outcomes.
    schema : Schema
        The public schema (the DP model's encoding).
    private : bool
        Private mode: a model name is trained with DP-SGD on ``training_budget``.
    training_budget : Accountant or None
        The DP-SGD run's budget (private mode with a model name).
    delta, test_size, random_state
        The Audit's parameters of the same names.

    Returns
    -------
    tuple
        ``(fitted model, name, status)``.

    Raises
    ------
    DataError, ModelError
        Raw mode: the model cannot be fitted, or a path names no pickled classifier.
    """
    if private and fits_model(model):
        assert training_budget is not None
        fitted, status = fit_private_model(
            X_train,
            y_train,
            schema,
            accountant=training_budget,
            delta=delta,
            train_fraction=1.0 - float(test_size),
        )
        if str(model) != "logistic":
            status += f"; '{model}' has no DP trainer in trustlab, so a logistic regression was trained"
        return fitted, DP_MODEL, status
    if fits_model(model):
        try:
            fitted = make_model(str(model), X_train, random_state=random_state)
            with native_threads():
                fitted.fit(X_train, y_train)
            return fitted, str(model), "fitted on the training rows"
        except ModelError:
            raise
        except Exception as exc:
            if private:
                return (
                    ConstantModel(),
                    str(model),
                    f"the training rows could not fit the model ({type(exc).__name__}); "
                    "a constant 0.5 model was used",
                )
            raise DataError(
                f"the model could not be fitted on the training rows ({type(exc).__name__}: "
                f"{exc}); the data needs rows of both outcomes on the training side.",
                argument="data",
            ) from None
    if isinstance(model, str | Path):
        if not str(model).endswith((".pkl", ".pickle", ".joblib")) and not Path(model).exists():
            raise ModelError(
                f"model must be one of {', '.join(MODEL_NAMES)} or a path to a pickled "
                f"fitted classifier (.pkl), got {str(model)!r}.",
                argument="model",
            )
        return load_model(model), Path(model).name, "given by the user"
    return check_model(model), type(model).__name__, "given by the user"


def positive_proba(
    model: Any, X: pd.DataFrame, positive: Any, *, private: bool, own: bool
) -> tuple[np.ndarray, str | None]:
    """Predicted probabilities of the positive label (and, in private mode, a fallback note).

    Parameters
    ----------
    model : fitted classifier
        What :func:`fit_model` returned.
    X : pandas.DataFrame
        The rows to score.
    positive : object
        The user's positive label (matched against a user model's ``classes_``).
    private : bool
        Private mode: a model that cannot predict scores 0.5, with a note.
    own : bool
        Whether trustlab fitted the model (it learnt the 0/1 encoding, 1 = positive).

    Returns
    -------
    tuple
        ``(probabilities in [0, 1], note or None)``.

    Raises
    ------
    ModelError
        Raw mode: ``predict_proba`` fails or returns the wrong shape.
    """
    if len(X) == 0:
        return np.zeros(0), None
    try:
        classes = getattr(model, "classes_", None)
        if classes is not None and len(classes) != 2:  # e.g. fitted on a single outcome
            raise ModelError(
                f"the model knows {len(classes)} class(es); a binary classifier is needed.",
                argument="model",
            )
        with native_threads():
            proba = np.asarray(model.predict_proba(X), dtype=float)
        if proba.ndim != 2 or proba.shape != (len(X), 2):
            raise ModelError(f"predict_proba must return shape (n, 2), got {proba.shape}.", argument="model")
    except Exception as exc:
        if private:  # our own messages carry no data; others might quote a value: type only
            why = str(exc) if isinstance(exc, ModelError) else type(exc).__name__
            return np.full(len(X), 0.5), (
                f"the model could not predict the held-out rows ({why}); a constant 0.5 was used"
            )
        if isinstance(exc, ModelError):
            raise
        raise ModelError(
            f"the model's predict_proba failed on the audit's features ({type(exc).__name__}: "
            f"{exc}); check it was trained on the same columns (target and --ignore'd "
            "columns removed).",
            argument="model",
        ) from None
    classes = list(getattr(model, "classes_", [0, 1]))
    col = 1
    own = own or isinstance(model, ConstantModel)
    for i, c in enumerate(classes):
        # a model trustlab fitted learnt the 0/1 encoding (1 = positive): never match the
        # user's label there (positive=0 would pick the negative class's column)
        if (c == 1) if own else str(c) == str(positive):
            col = i
    p = proba[:, col]
    return np.clip(np.where(np.isfinite(p), p, 0.5), 0.0, 1.0), None
