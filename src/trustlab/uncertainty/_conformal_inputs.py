"""Scores, group features and input checks of :class:`KandinskyConformal`.

Private to :mod:`trustlab.uncertainty.conformal`: the base class holds the helper
methods that the estimator (in ``_conformal_kandinsky``) calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError
from trustlab.uncertainty._conformal_groups import _WEIGHT_TOL


def _is_classifier(estimator: Any) -> bool:
    return callable(getattr(estimator, "predict_proba", None)) and hasattr(estimator, "classes_")


class _KandinskyInputs:
    """Helper methods of :class:`KandinskyConformal`: scores, group features, checks."""

    estimator: Any
    group_features: Callable[[Any, Any], Any] | str | None
    score: str | Callable[[Any, Any, Any], Any]
    fit_intercept: bool
    classes_: np.ndarray
    group_names_: list[str]
    _classification: bool
    _seed_: int

    def _score(self, X: Any, y: np.ndarray, name: str = "X") -> np.ndarray:
        """Raw nonconformity scores of (X, y) (no tie noise)."""
        if callable(self.score):
            out = np.asarray(self.score(self.estimator, X, y), dtype=float).ravel()
            if out.shape[0] != len(y) or not np.all(np.isfinite(out)):
                raise DataError(
                    f"score returned {out.shape[0]} values (or non-finite ones) for {len(y)} rows; it must "
                    "return one finite score per row.",
                    argument="score",
                )
            return out
        if self._classification:
            proba = self._proba(X, name)
            idx = self._class_index(y, "y")
            return 1.0 - proba[np.arange(len(idx)), idx]
        return np.abs(np.asarray(y, dtype=float) - self._mean(X, name))

    def _model_call(self, method: str, X: Any, name: str) -> np.ndarray:
        """``estimator.<method>(X)``; the model's own ValueError (NaN, wrong width) names ``name``."""
        try:
            return np.asarray(getattr(self.estimator, method)(X), dtype=float)
        except TrustlabError:
            raise
        except ValueError as exc:
            raise DataError(
                f"the model could not score {name}: {type(self.estimator).__name__}.{method} raised "
                f"ValueError: {str(exc).splitlines()[0] if str(exc) else exc!r}. Impute or drop missing "
                f"values in {name} (or use a model that accepts them) and pass the columns it was fitted on.",
                argument=name,
            ) from exc

    def _proba(self, X: Any, name: str = "X") -> np.ndarray:
        proba = self._model_call("predict_proba", X, name)
        if proba.ndim != 2 or proba.shape[1] != len(self.classes_):
            raise ModelError(
                f"estimator.predict_proba returned shape {proba.shape}; expected (n, {len(self.classes_)}).",
                argument="estimator",
            )
        return proba

    def _mean(self, X: Any, name: str = "X") -> np.ndarray:
        return self._model_call("predict", X, name).ravel()

    def _class_index(self, y: Any, name: str) -> np.ndarray:
        y = np.asarray(y)
        lookup = {c: i for i, c in enumerate(self.classes_.tolist())}
        try:
            return np.fromiter((lookup[v] for v in y.tolist()), dtype=np.int64, count=y.size)
        except KeyError as exc:
            raise DataError(
                f"{name} holds the label {exc.args[0]!r}, which is not one of the model's classes "
                f"{self.classes_.tolist()}; calibrate on labels the model knows.",
                argument=name,
            ) from None

    def _phi(self, X: Any, y: np.ndarray, n: int, *, check_empty: bool = False) -> np.ndarray:
        gf = self.group_features
        if gf is None:
            cols = np.zeros((n, 0))
        elif gf == "class":
            cols = (self._class_index(y, "y")[:, None] == np.arange(len(self.classes_))[None, :]).astype(
                float
            )
        else:
            assert callable(gf)
            try:
                raw = gf(X, y)
            except Exception as exc:  # the user's callable: name it and say what it got
                raise DataError(
                    f"group_features(X, y) raised {type(exc).__name__}: {exc}. It is called with a vector of "
                    "candidate labels too, so it must accept any label vector.",
                    argument="group_features",
                ) from exc
            cols = np.asarray(raw, dtype=float)
            if cols.ndim == 1:
                cols = cols[:, None]
            if cols.ndim != 2 or cols.shape[0] != n:
                raise DataError(
                    f"group_features(X, y) must return an array of shape (n_rows={n}, n_groups), "
                    f"got {cols.shape}.",
                    argument="group_features",
                )
            if not np.all(np.isfinite(cols)):
                raise DataError(
                    "group_features(X, y) returned NaN or inf weights.", argument="group_features"
                )
            lo, hi = cols.min(initial=0.0), cols.max(initial=0.0)
            if lo < -_WEIGHT_TOL or hi > 1 + _WEIGHT_TOL:
                j = int(np.argmax((cols < -_WEIGHT_TOL).any(axis=0) | (cols > 1 + _WEIGHT_TOL).any(axis=0)))
                raise DataError(
                    f"group_features(X, y) returned weights outside [0, 1] (group "
                    f"{self._names_from(raw, j)!r} ranges over [{cols[:, j].min():.4g}, "
                    f"{cols[:, j].max():.4g}]); a weight is a membership "
                    "probability: rescale (e.g. a calibrated probability) or clip it to [0, 1].",
                    argument="group_features",
                )
            cols = np.clip(cols, 0.0, 1.0)
            if check_empty:
                self.group_names_ = self._all_names(raw, cols.shape[1])
        if self.fit_intercept:
            cols = np.column_stack([np.ones(n), cols])
        if check_empty:
            if gf is None:
                self.group_names_ = []
            elif gf == "class":
                self.group_names_ = [f"y={c}" for c in self.classes_.tolist()]
            if self.fit_intercept:
                self.group_names_ = ["all", *self.group_names_]
            if cols.shape[1] == 0:
                raise ParameterError(
                    "with group_features=None, fit_intercept must be True (split conformal needs the "
                    "constant "
                    "column).",
                    argument="fit_intercept",
                )
            mass = cols.sum(axis=0)
            if (mass <= 0).any():
                j = int(np.argmax(mass <= 0))
                raise DataError(
                    f"group {self.group_names_[j]!r} has no calibration members (total weight 0); its "
                    "threshold "
                    "cannot be calibrated. Drop the group or add calibration rows from it.",
                    argument="group_features",
                )
        return cols

    @staticmethod
    def _names_from(raw: Any, j: int) -> str:
        if isinstance(raw, pd.DataFrame):
            return str(raw.columns[j])
        return f"g{j}"

    @staticmethod
    def _all_names(raw: Any, d: int) -> list[str]:
        if isinstance(raw, pd.DataFrame):
            return [str(c) for c in raw.columns]
        return [f"g{j}" for j in range(d)]

    def _rng(self) -> np.random.Generator:
        return np.random.default_rng(self._seed_)

    def _check_fitted(self) -> None:
        try:
            check_is_fitted(self, "coef_")
        except Exception:
            raise NotFittedError(
                "This KandinskyConformal is not fitted yet; call fit(X_cal, y_cal) first.", argument="X"
            ) from None

    @staticmethod
    def _n_rows(X: Any, name: str) -> int:
        if X is None or isinstance(X, str | bytes) or not hasattr(X, "__len__"):
            raise DataError(
                f"{name} must be array-like or a DataFrame, got {type(X).__name__}.", argument=name
            )
        n = len(X)
        if n == 0:
            raise DataError(f"{name} is empty.", argument=name)
        return n
