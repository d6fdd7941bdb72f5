"""The classifier a counterfactual explains: called in the SCM's column order, its linear or MLP form."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab.errors import DataError, ModelError
from trustlab.explain._linear import final_estimator, pipeline_linear_form, standardisation
from trustlab.explain.scm import AdditiveNoiseSCM

__all__ = ["SUPPORTED", "CounterfactualModel", "check_model"]

SUPPORTED = (
    "any fitted binary classifier with predict (solver='search'); the exact solver needs a LinearSCM and a "
    "linear scikit-learn classifier (LogisticRegression, LinearSVC, SGDClassifier, RidgeClassifier, "
    "Perceptron), optionally in a Pipeline after StandardScaler"
)

_Activation = tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray, np.ndarray], np.ndarray]]
_ACTIVATIONS: dict[str, _Activation] = {
    "relu": (lambda z: np.maximum(z, 0), lambda z, a: (z > 0).astype(float)),
    "tanh": (np.tanh, lambda z, a: 1 - a * a),
    "logistic": (lambda z: 1 / (1 + np.exp(-z)), lambda z, a: a * (1 - a)),
    "identity": (lambda z: z, lambda z, a: np.ones_like(z)),
}


@dataclass
class CounterfactualModel:
    """A binary classifier, how to call it on rows in the SCM's column order, and its linear form."""

    model: Any
    classes: np.ndarray
    perm: np.ndarray | None  # SCM column order -> model column order
    columns: list[str] | None

    def frame(self, X: np.ndarray) -> Any:
        """Rows in the SCM's order as the model's input (its column order; a DataFrame when named)."""
        Z = X if self.perm is None else X[:, self.perm]
        return pd.DataFrame(Z, columns=self.columns) if self.columns is not None else Z

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The model's predicted classes of rows in the SCM's column order."""
        return np.asarray(self.model.predict(self.frame(np.atleast_2d(X))))

    def _to_scm_order(self, v: np.ndarray) -> np.ndarray:
        if self.perm is None:
            return v
        out = np.empty_like(v)
        out[self.perm] = v
        return out

    def linear(self) -> tuple[np.ndarray, float] | None:
        """``(w, b)`` in SCM column order with ``w . x + b > 0`` <=> class ``classes[1]``, or None."""
        lin = pipeline_linear_form(self.model, self.columns)
        if lin is None:
            return None
        w, b = lin
        return self._to_scm_order(w), b

    def differentiable(self) -> Callable[[np.ndarray], tuple[float, np.ndarray]] | None:
        """``x -> (logit of classes[1], its gradient)`` in SCM column order, or None.

        Linear classifiers and binary ``MLPClassifier`` s, optionally after a
        ``StandardScaler`` in a ``Pipeline``.
        """
        lin = self.linear()
        if lin is not None:
            w, b = lin
            return lambda x: (float(w @ x + b), w)
        from sklearn.neural_network import MLPClassifier

        est = final_estimator(self.model)
        if not isinstance(est, MLPClassifier) or est.n_outputs_ != 1 or est.out_activation_ != "logistic":
            return None
        standardise = standardisation(self.model, len(est.coefs_[0]))
        if standardise is None or est.activation not in _ACTIVATIONS:
            return None
        mean, scale = standardise
        perm = self.perm
        act, dact = _ACTIVATIONS[est.activation]
        W, B = est.coefs_, est.intercepts_

        def f(x: np.ndarray) -> tuple[float, np.ndarray]:
            xm = x if perm is None else x[perm]
            a = (xm - mean) / scale
            derivs = []
            for Wi, bi in zip(W[:-1], B[:-1], strict=True):
                z = a @ Wi + bi
                a = act(z)
                derivs.append(dact(z, a))
            logit = float(a @ W[-1][:, 0] + B[-1][0])
            g = W[-1][:, 0]
            for Wi, di in zip(reversed(W[:-1]), reversed(derivs), strict=True):
                g = Wi @ (g * di)
            return logit, self._to_scm_order(g / scale)

        return f


def check_model(model: Any, scm: AdditiveNoiseSCM) -> CounterfactualModel:
    """``model`` as a :class:`CounterfactualModel` over ``scm``'s features, or a clear error.

    Parameters
    ----------
    model : fitted binary classifier
    scm : fitted AdditiveNoiseSCM
        Over exactly the model's input features (matched by name when the model has them).

    Returns
    -------
    CounterfactualModel
    """
    if not hasattr(model, "predict"):
        raise ModelError(f"model has no predict method; supported: {SUPPORTED}.", argument="model")
    classes = getattr(model, "classes_", None)
    if classes is None:
        raise ModelError(
            f"model must be a fitted classifier with classes_ ({type(model).__name__} has none); "
            f"supported: {SUPPORTED}.",
            argument="model",
        )
    classes = np.asarray(classes)
    if len(classes) != 2:
        raise ModelError(
            f"model must be a binary classifier, got {len(classes)} classes; supported: {SUPPORTED}.",
            argument="model",
        )
    names = [str(n) for n in scm.feature_names_in_]
    model_names = getattr(model, "feature_names_in_", None)
    if model_names is not None:
        mn = [str(n) for n in model_names]
        if sorted(mn) != sorted(names):
            raise DataError(
                f"the SCM's nodes {names} differ from the model's features {mn}; build the SCM's graph "
                "over exactly the model's input columns.",
                argument="scm",
            )
        perm = np.array([names.index(n) for n in mn])
        return CounterfactualModel(model, classes, None if np.all(perm == np.arange(len(perm))) else perm, mn)
    n_in = getattr(model, "n_features_in_", len(names))
    if n_in != len(names):
        raise DataError(
            f"the model takes {n_in} features but the SCM has {len(names)} nodes {names}; build the SCM "
            "over exactly the model's input columns (in the model's order).",
            argument="scm",
        )
    return CounterfactualModel(model, classes, None, None)
