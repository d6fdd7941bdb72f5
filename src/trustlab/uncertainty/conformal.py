"""Kandinsky conformal prediction, and coverage per (overlapping, fractional) group.

Split conformal prediction covers the label with probability ``1 - alpha`` on average
only. Kandinsky conformal prediction (Bairaktari, Wu and Wu, ICML 2025) targets
``1 - alpha`` coverage simultaneously over a class of groups that may overlap, have
fractional membership and be defined on covariates *and labels*: with a group-feature
map ``Phi(x, y) in [0, 1]^d`` (column j = weight of ``(x, y)`` in group j) it fits the
linear ``(1 - alpha)``-quantile regression of the calibration scores on ``Phi``,

``beta = argmin_beta sum_i rho_{1-alpha}(S_i - beta' Phi(x_i, y_i))``

(``rho`` the pinball loss), and predicts ``C(x) = {y : S(x, y) <= beta' Phi(x, y)}``; the
threshold depends on the candidate label because ``Phi`` does. A constant ``Phi`` is
split conformal, the one-hot of the class is class-conditional conformal, indicators of
disjoint cells are Mondrian conformal, covariate-only ``Phi`` is group-conditional
conformal (Gibbs, Cherian and Candes; batch multivalid) — all through the one class
:class:`KandinskyConformal`.

:func:`group_coverage` is the evaluation side: coverage and mean set size overall and
per group (indicator or fractional weights), with confidence intervals and a status.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from trustlab._param_validation import HasMethods, Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_columns, check_frame, check_numeric_array
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.uncertainty._conformal_qr import pinball_fit

__all__ = [
    "KandinskyConformal",
    "conformal_coverage",
    "group_coverage",
    "group_indicators",
    "weighted_coverage_deviation",
]

_WEIGHT_TOL = 1e-9


def _is_classifier(estimator: Any) -> bool:
    return callable(getattr(estimator, "predict_proba", None)) and hasattr(estimator, "classes_")


class KandinskyConformal(ParamsValidationMixin, BaseEstimator):
    """Conformal prediction with coverage over overlapping, fractional, label-aware groups.

    Wraps a *fitted* model. ``fit(X_cal, y_cal)`` computes the nonconformity scores of
    the calibration data and the ``(1 - alpha)`` linear quantile regression of the
    scores on the group features; ``predict`` returns prediction sets (classification:
    a boolean ``(n, n_classes)`` matrix) or intervals (regression).

    Parameters
    ----------
    estimator : fitted estimator
        A classifier with ``predict_proba`` and ``classes_``, or a regressor with
        ``predict``. It is not refitted.
    group_features : callable, "class" or None, default=None
        ``group_features(X, y) -> array or DataFrame of shape (n, d)`` with entries in
        [0, 1]: column j is the weight of row ``(x, y)`` in group j. It is called on
        the calibration data with the true labels and, at prediction time, once per
        candidate label with ``y`` a vector of that label (class labels as in
        ``estimator.classes_``, numbers for regression), so it must accept a label
        vector. ``None`` gives split conformal (only the constant column);
        ``"class"`` gives class-conditional conformal (one-hot of the label).
    alpha : float in (0, 1), default=0.1
        Miscoverage level: the target coverage is ``1 - alpha``.
    score : {"auto", "lac", "absolute"} or callable, default="auto"
        Nonconformity score. ``"lac"``: ``1 - p_hat(y|x)`` (classification);
        ``"absolute"``: ``|y - mu_hat(x)|`` (regression); ``"auto"`` picks by the model
        type. A callable ``score(estimator, X, y) -> (n,)`` (y a label vector) is also
        accepted.
    fit_intercept : bool, default=True
        Prepend a constant column to the group features so that marginal coverage is
        targeted too (the paper includes one).
    tie_noise : float, default=1e-8
        Scores get ``tie_noise * std(calibration scores) * U``, ``U ~ Uniform(0, 1)``, to
        break ties (the paper randomises the score; this form is trustlab's choice). 0
        disables it.
    label_dependent : "auto" or bool, default="auto"
        Regression only: whether ``group_features`` depends on ``y``. If not, intervals
        are exact, ``[mu - q(x), mu + q(x)]``; if so, the candidate labels are scanned on
        a grid. ``"auto"`` compares ``group_features`` at the true labels with it at
        three constant labels on the calibration data.
    y_grid_size : int, default=1000
        Regression, label-dependent groups: grid points over the calibration label
        range padded by 10% on each side.
    random_state : None, int or numpy Generator, default=None
        Drives the tie-breaking noise (and the subsample of the exact large-n solver).

    Attributes
    ----------
    coef_ : numpy.ndarray of shape (d,)
        The quantile-regression coefficients ``beta`` (constant column first when
        ``fit_intercept``).
    group_names_ : list of str
        Names of the columns of the group features.
    classes_ : numpy.ndarray
        Classification: the model's classes.
    n_calibration_ : int
    calibration_scores_ : numpy.ndarray
        The (tie-broken) calibration scores.
    label_dependent_ : bool
        Regression: whether the groups depend on the label.

    Notes
    -----
    The quantile regression is solved exactly (HiGHS on its dual LP; for more than
    5,000 rows on a band of points around a pilot fit, verified on all rows), in
    ``O(n d)`` memory: no ``n x n`` array is formed.

    The fit is the paper's plain pinball minimisation, without a ``(n + 1)`` finite-sample
    correction: in-sample weighted coverage is at least ``1 - alpha`` for every column
    (the LP's optimality conditions) and exceeds it by at most ``d max(Phi) / n``;
    out of sample the weighted coverage deviation is ``O(||beta||_1 sqrt(d / n))``
    (Theorem 3.1). With a constant ``Phi`` the threshold is the
    ``ceil(n (1 - alpha))``-th smallest score, one order statistic below split
    conformal's ``ceil((n + 1)(1 - alpha))``-th.

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction: Beyond Class- and
    Covariate-Conditional Coverage", ICML 2025 (PMLR 267; arXiv 2502.17264),
    Algorithms 1 and 2, Theorem 3.1.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> X, y = make_classification(n_samples=3000, n_classes=3, n_informative=4, random_state=0)
    >>> model = LogisticRegression().fit(X[:1000], y[:1000])
    >>> def groups(X, y):  # overlapping: a covariate group and a label group
    ...     return np.column_stack([X[:, 0] > 0, y == 2])
    >>> cp = KandinskyConformal(model, group_features=groups, alpha=0.1, random_state=0)
    >>> sets = cp.fit(X[1000:2000], y[1000:2000]).predict(X[2000:])
    >>> sets.shape
    (1000, 3)
    >>> covered = cp.covered(X[2000:], y[2000:])
    >>> bool(abs(covered.mean() - 0.9) < 0.04)
    True
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "estimator": [HasMethods(["predict"])],
        "group_features": [None, callable, Options({"class"})],
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "score": [Options({"auto", "lac", "absolute"}), callable],
        "fit_intercept": ["boolean"],
        "tie_noise": [Interval(numbers.Real, 0, 1, closed="both")],
        "label_dependent": [Options({"auto"}), "boolean"],
        "y_grid_size": [Interval(numbers.Integral, 10, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        estimator: Any,
        *,
        group_features: Callable[[Any, Any], Any] | str | None = None,
        alpha: float = 0.1,
        score: str | Callable[[Any, Any, Any], Any] = "auto",
        fit_intercept: bool = True,
        tie_noise: float = 1e-8,
        label_dependent: str | bool = "auto",
        y_grid_size: int = 1000,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.group_features = group_features
        self.alpha = alpha
        self.score = score
        self.fit_intercept = fit_intercept
        self.tie_noise = tie_noise
        self.label_dependent = label_dependent
        self.y_grid_size = y_grid_size
        self.random_state = random_state

    # ----------------------------------------------------------------- helpers
    def _score(self, X: Any, y: np.ndarray) -> np.ndarray:
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
            proba = self._proba(X)
            idx = self._class_index(y, "y")
            return 1.0 - proba[np.arange(len(idx)), idx]
        return np.abs(np.asarray(y, dtype=float) - self._mean(X))

    def _proba(self, X: Any) -> np.ndarray:
        proba = np.asarray(self.estimator.predict_proba(X), dtype=float)
        if proba.ndim != 2 or proba.shape[1] != len(self.classes_):
            raise ModelError(
                f"estimator.predict_proba returned shape {proba.shape}; expected (n, {len(self.classes_)}).",
                argument="estimator",
            )
        return proba

    def _mean(self, X: Any) -> np.ndarray:
        return np.asarray(self.estimator.predict(X), dtype=float).ravel()

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

    # --------------------------------------------------------------------- fit
    def fit(self, X_cal: Any, y_cal: Any) -> KandinskyConformal:
        """Calibrate on held-out data: scores, group features, quantile regression.

        Parameters
        ----------
        X_cal : array-like or DataFrame of shape (n, ...)
            Calibration inputs, in whatever form ``estimator`` and ``group_features`` take.
        y_cal : array-like of shape (n,)
            Calibration labels.

        Returns
        -------
        KandinskyConformal
            ``self``.

        Raises
        ------
        ParameterError
            An invalid parameter (e.g. ``alpha`` outside (0, 1)).
        NotFittedError
            ``estimator`` is not fitted.
        DataError
            Weights outside [0, 1], a group without calibration members, labels unknown
            to the model, NaN labels, mismatched lengths.
        """
        self._validate_params()
        try:
            check_is_fitted(self.estimator)
        except Exception:
            raise NotFittedError(
                f"estimator {type(self.estimator).__name__} is not fitted; KandinskyConformal calibrates "
                "a model "
                "already fitted on training data: fit it first (on data other than the calibration set).",
                argument="estimator",
            ) from None
        self._classification = _is_classifier(self.estimator)
        score = self.score
        if score == "lac" and not self._classification:
            raise ParameterError("score='lac' needs a classifier with predict_proba.", argument="score")
        if score == "absolute" and self._classification:
            raise ParameterError(
                "score='absolute' is for regressors; use 'lac' for classifiers.", argument="score"
            )
        if self.group_features == "class" and not self._classification:
            raise ParameterError(
                "group_features='class' is class-conditional conformal and needs a classifier; for "
                "regression, "
                "pass a callable of label bins.",
                argument="group_features",
            )
        n = self._n_rows(X_cal, "X_cal")
        y = np.asarray(y_cal)
        if y.ndim != 1 or y.shape[0] != n:
            raise DataError(
                f"y_cal must be 1-D with {n} labels (one per row of X_cal), got shape {y.shape}.",
                argument="y_cal",
            )
        if self._classification:
            self.classes_ = np.asarray(self.estimator.classes_)
            if pd.isna(y).any():
                raise DataError("y_cal has missing labels; drop those rows.", argument="y_cal")
            self._class_index(y, "y_cal")
        else:
            y = check_numeric_array(y, "y_cal", ndim=1)
        rng = (
            np.random.default_rng(self.random_state)
            if not isinstance(self.random_state, np.random.RandomState)
            else np.random.default_rng(self.random_state.randint(0, 2**31 - 1))
        )
        self._seed_ = int(rng.integers(0, 2**63 - 1))
        raw = self._score(X_cal, y)
        if not np.all(np.isfinite(raw)):
            raise DataError(
                "the calibration scores are not finite; check the model's outputs.", argument="X_cal"
            )
        spread = float(np.std(raw))
        self.noise_scale_ = float(self.tie_noise) * (spread if spread > 0 else 1.0)
        scores = raw + self.noise_scale_ * rng.random(n)
        phi = self._phi(X_cal, y, n, check_empty=True)
        self.coef_ = pinball_fit(phi, scores, 1.0 - float(self.alpha), rng)
        self.calibration_scores_ = scores
        self.n_calibration_ = n
        if not self._classification:
            self._y_range = (float(y.min()), float(y.max()))
            if self.label_dependent == "auto":
                base = self._phi(X_cal, y, n)
                probes = (float(y.min()), float(np.median(y)), float(y.max()))
                self.label_dependent_ = any(
                    not np.array_equal(base, self._phi(X_cal, np.full(n, v), n)) for v in probes
                )
            else:
                self.label_dependent_ = bool(self.label_dependent)
        return self

    # ----------------------------------------------------------------- predict
    def threshold(self, X: Any, y: Any) -> np.ndarray:
        """The fitted score threshold ``beta' Phi(x, y)`` at given labels.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, ...)
            Inputs.
        y : array-like of shape (n,)
            Labels (candidate or true).

        Returns
        -------
        numpy.ndarray of shape (n,)
            The thresholds.
        """
        self._check_fitted()
        n = self._n_rows(X, "X")
        y = np.asarray(y)
        if y.shape != (n,):
            raise DataError(f"y must be 1-D with {n} labels, got shape {y.shape}.", argument="y")
        return self._phi(X, y, n) @ self.coef_

    def covered(self, X: Any, y: Any) -> np.ndarray:
        """Whether each true label lies in its prediction set (``S(x, y) <= beta' Phi(x, y)``).

        Exact for both tasks (no set is built, so no grid is involved).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, ...)
            Test inputs.
        y : array-like of shape (n,)
            True labels.

        Returns
        -------
        numpy.ndarray of bool, shape (n,)
            Coverage indicators, e.g. for :func:`group_coverage`.
        """
        self._check_fitted()
        n = self._n_rows(X, "X")
        y = np.asarray(y)
        if y.shape != (n,):
            raise DataError(f"y must be 1-D with {n} labels, got shape {y.shape}.", argument="y")
        if self._classification:
            self._class_index(y, "y")
        else:
            y = check_numeric_array(y, "y", ndim=1)
        if self._classification:  # the same noise as predict_set draws for (row, class)
            noise = self.noise_scale_ * self._rng().random((n, len(self.classes_)))
            noise = noise[np.arange(n), self._class_index(y, "y")]
        else:
            noise = self.noise_scale_ * self._rng().random(n)
        s = self._score(X, y) + noise
        return np.asarray(s <= self._phi(X, y, n) @ self.coef_)

    def predict(self, X: Any) -> np.ndarray:
        """Prediction sets (classification) or the interval hull of the sets (regression).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, ...)
            Test inputs.

        Returns
        -------
        numpy.ndarray
            Classification: bool ``(n, n_classes)``, column k true when ``classes_[k]`` is
            in the set. Regression: ``(n, 2)`` lower and upper ends (the hull of
            :meth:`predict_intervals`; NaN rows for empty sets).
        """
        self._check_fitted()
        if self._classification:
            return self.predict_set(X)
        out = []
        for iv in self.predict_intervals(X):
            out.append([iv[0, 0], iv[-1, 1]] if len(iv) else [np.nan, np.nan])
        return np.asarray(out, dtype=float).reshape(-1, 2)

    def predict_set(self, X: Any) -> np.ndarray:
        """Classification prediction sets: ``{y : S(x, y) <= beta' Phi(x, y)}``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, ...)
            Test inputs.

        Returns
        -------
        numpy.ndarray of bool, shape (n, n_classes)
            Column k true when ``classes_[k]`` is in the set.
        """
        self._check_fitted()
        if not self._classification:
            raise ModelError("predict_set is for classifiers; use predict_intervals.", argument="estimator")
        n = self._n_rows(X, "X")
        proba = None if callable(self.score) else self._proba(X)
        noise = self.noise_scale_ * self._rng().random((n, len(self.classes_)))
        out = np.zeros((n, len(self.classes_)), dtype=bool)
        for k, label in enumerate(self.classes_):
            yk = np.full(n, label, dtype=self.classes_.dtype)
            s = self._score(X, yk) if proba is None else 1.0 - proba[:, k]
            out[:, k] = s + noise[:, k] <= self._phi(X, yk, n) @ self.coef_
        return out

    def predict_intervals(self, X: Any, y_grid: Any = None) -> list[np.ndarray]:
        """Regression prediction sets as unions of intervals.

        With the absolute-residual score and groups that do not depend on the label the
        set is exactly ``[mu(x) - q(x), mu(x) + q(x)]``. Otherwise candidate labels are
        scanned on ``y_grid`` (default ``y_grid_size`` points over the calibration label
        range padded 10% each side) and each run of accepted grid points becomes an
        interval (exact up to the grid step; the set is clipped to the grid's range).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, ...)
            Test inputs.
        y_grid : array-like of float, optional
            Sorted candidate labels.

        Returns
        -------
        list of numpy.ndarray
            One ``(m_i, 2)`` array of ``[lower, upper]`` rows per input (``m_i = 0``: empty set).
        """
        self._check_fitted()
        if self._classification:
            raise ModelError("predict_intervals is for regressors; use predict_set.", argument="estimator")
        n = self._n_rows(X, "X")
        if not self.label_dependent_ and not callable(self.score) and y_grid is None:
            mu = self._mean(X)
            q = self._phi(X, mu, n) @ self.coef_
            return [
                np.array([[m - h, m + h]]) if h >= 0 else np.zeros((0, 2)) for m, h in zip(mu, q, strict=True)
            ]
        grid = self._grid(y_grid)
        keep = np.zeros((n, grid.size), dtype=bool)
        centre = None if callable(self.score) else self._mean(X)
        rng = self._rng()
        for g, v in enumerate(grid):
            yv = np.full(n, v)
            s = np.abs(v - centre) if centre is not None else self._score(X, yv)
            keep[:, g] = s + self.noise_scale_ * rng.random(n) <= self._phi(X, yv, n) @ self.coef_
        return [_runs(grid, row) for row in keep]

    def _grid(self, y_grid: Any) -> np.ndarray:
        if y_grid is not None:
            grid = check_numeric_array(y_grid, "y_grid", ndim=1, min_rows=2)
            if np.any(np.diff(grid) <= 0):
                raise DataError("y_grid must be strictly increasing.", argument="y_grid")
            return grid
        lo, hi = self._y_range
        pad = 0.1 * (hi - lo) if hi > lo else 1.0
        return np.linspace(lo - pad, hi + pad, int(self.y_grid_size))

    def set_size(self, X: Any, y_grid: Any = None) -> np.ndarray:
        """Size of each prediction set: number of classes, or total interval length.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, ...)
            Test inputs.
        y_grid : array-like of float, optional
            Regression: the candidate grid (see :meth:`predict_intervals`).

        Returns
        -------
        numpy.ndarray of shape (n,)
            Set sizes.
        """
        self._check_fitted()
        if self._classification:
            return self.predict_set(X).sum(axis=1).astype(float)
        return np.array([float(np.sum(iv[:, 1] - iv[:, 0])) for iv in self.predict_intervals(X, y_grid)])


def _runs(grid: np.ndarray, row: np.ndarray) -> np.ndarray:
    if not row.any():
        return np.zeros((0, 2))
    x = np.concatenate([[False], row, [False]]).astype(np.int8)
    d = np.diff(x)
    starts = np.flatnonzero(d == 1)
    ends = np.flatnonzero(d == -1) - 1
    return np.column_stack([grid[starts], grid[ends]])


# ----------------------------------------------------------------- evaluation
def _weights(groups: Any, n: int, name: str = "groups") -> tuple[np.ndarray, list[str]]:
    if groups is None:
        return np.zeros((n, 0)), []
    if isinstance(groups, pd.Series) or (
        isinstance(groups, np.ndarray | list | tuple) and np.ndim(groups) == 1
    ):
        labels = pd.Series(np.asarray(groups) if not isinstance(groups, pd.Series) else groups.to_numpy())
        if len(labels) != n:
            raise DataError(f"{name} has {len(labels)} rows, expected {n}.", argument=name)
        if labels.isna().any():
            raise DataError(f"{name} has missing labels; fill or drop them.", argument=name)
        prefix = f"{groups.name}=" if isinstance(groups, pd.Series) and groups.name is not None else ""
        values = sorted(pd.unique(labels), key=str)
        w = np.column_stack([(labels == v).to_numpy(float) for v in values])
        return w, [f"{prefix}{v}" for v in values]
    if isinstance(groups, pd.DataFrame):
        names = [str(c) for c in groups.columns]
        try:
            w = groups.to_numpy(dtype=float)
        except (TypeError, ValueError):
            raise DataError(
                f"{name} must hold numeric weights in [0, 1]; for categorical columns build indicators with "
                "trustlab.uncertainty.group_indicators(frame, columns).",
                argument=name,
            ) from None
    else:
        w = check_numeric_array(groups, name, ndim=2)
        names = [f"g{j}" for j in range(w.shape[1])]
    if w.shape[0] != n:
        raise DataError(f"{name} has {w.shape[0]} rows, expected {n}.", argument=name)
    if not np.all(np.isfinite(w)):
        raise DataError(f"{name} has NaN or inf weights.", argument=name)
    if (w < -_WEIGHT_TOL).any() or (w > 1 + _WEIGHT_TOL).any():
        j = int(np.argmax((w < -_WEIGHT_TOL).any(axis=0) | (w > 1 + _WEIGHT_TOL).any(axis=0)))
        raise DataError(
            f"{name}: group {names[j]!r} has weights outside [0, 1] "
            f"([{w[:, j].min():.4g}, {w[:, j].max():.4g}]); "
            "weights are membership probabilities: rescale or clip them to [0, 1].",
            argument=name,
        )
    return np.clip(w, 0.0, 1.0), names


def _check_covered(covered: Any) -> np.ndarray:
    c = np.asarray(covered)
    if c.ndim != 1 or c.size == 0:
        raise DataError(
            f"covered must be a non-empty 1-D array of booleans, got shape {c.shape}.", argument="covered"
        )
    if c.dtype != bool:
        if not np.isin(c, (0, 1)).all():
            raise DataError(
                "covered must hold booleans (or 0/1): whether each label is in its set.", argument="covered"
            )
        c = c.astype(bool)
    return c


@validate_params({"alpha": [Interval(numbers.Real, 0, 1, closed="neither")]})
def weighted_coverage_deviation(covered: Any, weights: Any, alpha: float) -> np.ndarray:
    """Signed weighted coverage deviation per group: ``mean_i w_ij (1{covered_i} - (1 - alpha))``.

    The quantity Kandinsky conformal prediction bounds (its absolute value is the
    paper's wCD); dividing by the group mass ``mean_i w_ij`` gives the coverage gap
    inside the group.

    Parameters
    ----------
    covered : array-like of bool, shape (n,)
        Whether each label is in its prediction set.
    weights : array-like of shape (n, d) or DataFrame
        Group weights in [0, 1].
    alpha : float in (0, 1)
        Miscoverage level.

    Returns
    -------
    numpy.ndarray of shape (d,)
        One deviation per group (positive: over-coverage).

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction: Beyond Class- and
    Covariate-Conditional Coverage", ICML 2025 (the weighted coverage deviation).

    Examples
    --------
    >>> weighted_coverage_deviation([True, True, False, True], [[1, 0], [1, 1], [0, 1], [0, 1]], 0.25)
    array([ 0.125 , -0.0625])
    """
    c = _check_covered(covered)
    w, _ = _weights(
        np.asarray(weights, dtype=float) if not isinstance(weights, pd.DataFrame) else weights,
        c.size,
        "weights",
    )
    return np.asarray((w * (c.astype(float) - (1.0 - float(alpha)))[:, None]).mean(axis=0))


@validate_params(
    {
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "confidence": [Interval(numbers.Real, 0, 1, closed="neither")],
        "tolerance": [Interval(numbers.Real, 0, 1, closed="left")],
    }
)
def group_coverage(
    covered: Any,
    groups: Any = None,
    *,
    set_size: Any = None,
    alpha: float = 0.1,
    confidence: float = 0.95,
    tolerance: float = 0.0,
) -> pd.DataFrame:
    """Coverage and mean set size of conformal sets, overall and per group, with intervals.

    A pure function of the coverage indicators (e.g. :meth:`KandinskyConformal.covered`)
    and set sizes; groups may overlap and have fractional weights. For a group with
    weights ``w``: coverage ``sum w c / sum w`` with a Wilson score interval at the
    effective size ``n_eff = (sum w)^2 / sum w^2`` (Kish; the row count for an indicator
    group), and mean set size with a normal interval on the weighted standard error.

    Parameters
    ----------
    covered : array-like of bool, shape (n,)
        Whether each test label is in its prediction set.
    groups : DataFrame, array of shape (n, d), 1-D labels or None
        Group weights in [0, 1] (columns = groups, may overlap), or one label per row (a
        partition; one group per value). ``None``: only the overall row.
    set_size : array-like of shape (n,), optional
        Size of each prediction set (number of classes, or interval length).
    alpha : float in (0, 1), default=0.1
        Target miscoverage; the target coverage is ``1 - alpha``.
    confidence : float in (0, 1), default=0.95
        Level of the intervals.
    tolerance : float in [0, 1), default=0.0
        Shortfall tolerated before a group is flagged: ``status`` is ``"short"`` when
        the interval lies below ``1 - alpha - tolerance``, ``"ok"`` when it lies at or
        above it, ``"inconclusive"`` when it straddles it.

    Returns
    -------
    pandas.DataFrame
        Indexed by group (first row ``"all"``): ``weight`` (sum of weights), ``n_eff``,
        ``coverage``, ``coverage_low``, ``coverage_high``, ``target``, ``gap``
        (coverage - target), ``mean_set_size``, ``set_size_low``, ``set_size_high``
        (NaN without ``set_size``) and ``status``.

    Raises
    ------
    DataError
        Weights outside [0, 1], a group with total weight 0, mismatched lengths.

    References
    ----------
    E. B. Wilson, "Probable inference, the law of succession, and statistical inference",
    JASA 1927 (the interval); K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal
    Prediction", ICML 2025 (group-conditional coverage).

    Examples
    --------
    >>> covered = np.array([1, 1, 1, 0, 1, 1, 0, 1], dtype=bool)
    >>> groups = pd.DataFrame({"a": [1, 1, 1, 1, 0, 0, 0, 0], "b": [0, 0, 1, 1, 1, 1, 1, 1]})
    >>> table = group_coverage(covered, groups, set_size=np.arange(8.0), alpha=0.2)
    >>> table.index.tolist(), table["coverage"].round(3).tolist(), table["mean_set_size"].tolist()
    (['all', 'a', 'b'], [0.75, 0.75, 0.667], [3.5, 1.5, 4.5])
    >>> table["status"].tolist()  # 8 rows cannot show coverage >= 0.8
    ['inconclusive', 'inconclusive', 'inconclusive']
    """
    c = _check_covered(covered)
    n = c.size
    w, names = _weights(groups, n)
    w = np.column_stack([np.ones(n), w])
    names = ["all", *names]
    if len(set(names)) != len(names):
        raise DataError(f"groups has duplicated names {names[1:]} (or one named 'all').", argument="groups")
    mass = w.sum(axis=0)
    if (mass <= 0).any():
        j = int(np.argmax(mass <= 0))
        raise DataError(
            f"group {names[j]!r} has no members in this data (total weight 0); drop it or add rows from it.",
            argument="groups",
        )
    size = None
    if set_size is not None:
        size = check_numeric_array(set_size, "set_size", ndim=1)
        if size.shape[0] != n:
            raise DataError(f"set_size has {size.shape[0]} rows, expected {n}.", argument="set_size")
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    n_eff = mass**2 / (w**2).sum(axis=0)
    cov = (w * c[:, None]).sum(axis=0) / mass
    denom = 1.0 + z * z / n_eff
    centre = (cov + z * z / (2 * n_eff)) / denom
    half = z * np.sqrt(cov * (1 - cov) / n_eff + z * z / (4 * n_eff**2)) / denom
    low, high = np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
    target = 1.0 - float(alpha)
    floor = target - float(tolerance)
    status = np.where(high < floor, "short", np.where(low >= floor, "ok", "inconclusive"))
    if size is not None:
        mean = (w * size[:, None]).sum(axis=0) / mass
        var = (w * (size[:, None] - mean) ** 2).sum(axis=0) / mass
        se = np.sqrt(var / np.maximum(n_eff - 1.0, 1.0))
        s_low, s_high = mean - z * se, mean + z * se
    else:
        mean = s_low = s_high = np.full(len(names), np.nan)
    return pd.DataFrame(
        {
            "weight": mass,
            "n_eff": n_eff,
            "coverage": cov,
            "coverage_low": low,
            "coverage_high": high,
            "target": target,
            "gap": cov - target,
            "mean_set_size": mean,
            "set_size_low": s_low,
            "set_size_high": s_high,
            "status": status,
        },
        index=pd.Index(names, name="group"),
    )


def group_indicators(
    data: pd.DataFrame, columns: str | Iterable[str], *, intersections: bool = False
) -> pd.DataFrame:
    """0/1 indicator columns ``"col=value"`` for each value of each named column.

    Groups from different columns overlap (a row is in one group per column); with
    ``intersections=True`` the groups of every combination of values are added
    (``"sex=female & race=yes"``). Feed the result to :func:`group_coverage`, or use it
    inside a ``group_features`` callable of :class:`KandinskyConformal`.

    Parameters
    ----------
    data : pandas.DataFrame
        The rows.
    columns : str or list of str
        Categorical (or discrete) columns.
    intersections : bool, default=False
        Also add one group per observed combination of values (with two or more columns).

    Returns
    -------
    pandas.DataFrame
        Float 0/1 columns, same index as ``data``.

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction", ICML 2025
    (overlapping groups).

    Examples
    --------
    >>> frame = pd.DataFrame({"sex": ["f", "m", "f"], "race": ["a", "a", "b"]})
    >>> list(group_indicators(frame, ["sex", "race"]).columns)
    ['sex=f', 'sex=m', 'race=a', 'race=b']
    """
    frame = check_frame(data, "data")
    cols = check_columns(frame, columns, "columns")
    if not cols:
        raise DataError("columns must name at least one column.", argument="columns")
    out: dict[str, np.ndarray] = {}
    for col in cols:
        values = frame[col]
        if values.isna().any():
            raise DataError(
                f"column {col!r} has missing values; fill them (e.g. 'missing') first.", argument="columns"
            )
        for v in sorted(pd.unique(values), key=str):
            out[f"{col}={v}"] = (values == v).to_numpy(float)
    if intersections and len(cols) > 1:
        keys = frame[cols].apply(lambda r: " & ".join(f"{c}={r[c]}" for c in cols), axis=1)
        for k in sorted(pd.unique(keys)):
            out[k] = (keys == k).to_numpy(float)
    return pd.DataFrame(out, index=frame.index)


def _as_group_frame(groups: Any, n: int, name: str) -> pd.DataFrame:
    """Weights frame from a weights frame/array or a frame/Series of categorical columns."""
    if groups is None:
        return pd.DataFrame(index=range(n))
    if isinstance(groups, pd.Series):
        groups = groups.to_frame(name=groups.name if groups.name is not None else "group")
    if isinstance(groups, pd.DataFrame):
        if len(groups) != n:
            raise DataError(f"{name} has {len(groups)} rows, expected {n}.", argument=name)
        numeric = all(
            pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for t in groups.dtypes
        )
        if numeric and groups.size and float(groups.min().min()) >= 0 and float(groups.max().max()) <= 1:
            w, names = _weights(groups, n, name)
            return pd.DataFrame(w, columns=names)
        frame = groups.reset_index(drop=True).astype(str)
        return group_indicators(frame, list(frame.columns), intersections=frame.shape[1] > 1)
    w, names = _weights(groups, n, name)
    return pd.DataFrame(w, columns=names)


@validate_params(
    {
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "method": [Options({"kandinsky", "split"})],
        "label_groups": ["boolean"],
        "confidence": [Interval(numbers.Real, 0, 1, closed="neither")],
        "tolerance": [Interval(numbers.Real, 0, 1, closed="left")],
        "random_state": ["random_state"],
    }
)
def conformal_coverage(
    estimator: Any,
    X_cal: Any,
    y_cal: Any,
    X_test: Any,
    y_test: Any,
    *,
    groups_cal: Any = None,
    groups_test: Any = None,
    alpha: float = 0.1,
    method: str = "kandinsky",
    label_groups: bool = True,
    confidence: float = 0.95,
    tolerance: float = 0.0,
    random_state: Any = None,
) -> pd.DataFrame:
    """Calibrate conformal sets for a fitted model and report coverage per group, in one call.

    The groups may live outside the model's inputs (e.g. sensitive columns the model does
    not see): pass them row-aligned as ``groups_cal`` and ``groups_test``. Numeric
    columns in [0, 1] are weights; other columns are categorical and become one
    indicator group per value, plus one per combination of values when there are
    several columns (overlapping groups). With ``method="kandinsky"`` the sets are
    calibrated with :class:`KandinskyConformal` on those groups (and, for classifiers
    with ``label_groups=True``, on the class of the label, i.e. class-conditional
    coverage as well); ``method="split"`` calibrates plain split conformal for
    comparison. Coverage and mean set size per group (and per class) with intervals come
    from :func:`group_coverage`.

    Parameters
    ----------
    estimator : fitted estimator
        Classifier with ``predict_proba`` or regressor.
    X_cal, y_cal : array-like or DataFrame, array-like
        Calibration data (not used to train ``estimator``).
    X_test, y_test : array-like or DataFrame, array-like
        Evaluation data.
    groups_cal, groups_test : DataFrame, Series, array or None
        Row-aligned group columns or weights for the calibration and test rows (both or
        neither).
    alpha : float in (0, 1), default=0.1
        Target miscoverage.
    method : {"kandinsky", "split"}, default="kandinsky"
        Calibration method.
    label_groups : bool, default=True
        Classifiers: also target, and report, coverage per class of the label.
    confidence : float in (0, 1), default=0.95
        Level of the intervals.
    tolerance : float in [0, 1), default=0.0
        Shortfall tolerated by the ``status`` column (see :func:`group_coverage`).
    random_state : None, int or numpy Generator
        Tie-breaking noise.

    Returns
    -------
    pandas.DataFrame
        :func:`group_coverage`'s table (rows ``all``, each group, and ``y=<class>``).

    Raises
    ------
    DataError
        Groups without calibration members, weights outside [0, 1], mismatched rows.

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction: Beyond Class- and
    Covariate-Conditional Coverage", ICML 2025.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((3000, 3)); y = (X[:, 0] + rng.standard_normal(3000) > 0).astype(int)
    >>> sex = pd.Series(rng.choice(["f", "m"], 3000), name="sex")
    >>> model = LogisticRegression().fit(X[:1000], y[:1000])
    >>> table = conformal_coverage(model, X[1000:2000], y[1000:2000], X[2000:], y[2000:],
    ...                            groups_cal=sex[1000:2000], groups_test=sex[2000:], random_state=0)
    >>> table.index.tolist()
    ['all', 'sex=f', 'sex=m', 'y=0', 'y=1']
    >>> bool((table["coverage"] - 0.9).abs().max() < 0.06)
    True
    """
    if (groups_cal is None) != (groups_test is None):
        raise DataError(
            "pass groups for both the calibration and the test rows (groups_cal and groups_test), "
            "or neither.",
            argument="groups_cal" if groups_cal is None else "groups_test",
        )
    if X_test is X_cal:  # the group lookup below tells the two apart by identity
        X_test = X_test.copy() if hasattr(X_test, "copy") else list(X_test)
    n_cal = KandinskyConformal._n_rows(X_cal, "X_cal")
    n_test = KandinskyConformal._n_rows(X_test, "X_test")
    g_cal = _as_group_frame(groups_cal, n_cal, "groups_cal")
    g_test = _as_group_frame(groups_test, n_test, "groups_test")
    missing = [c for c in g_cal.columns if c not in g_test.columns]
    for c in missing:  # a value seen only in calibration: an empty test group
        g_test[c] = 0.0
    extra = [c for c in g_test.columns if c not in g_cal.columns]
    if extra:
        raise DataError(
            f"groups {extra} occur in the test rows but not in the calibration rows; their coverage "
            "cannot be calibrated: add calibration rows from them or merge them into other groups.",
            argument="groups_cal",
        )
    g_test = g_test[list(g_cal.columns)]
    classification = _is_classifier(estimator)
    table_by_x = {id(X_cal): g_cal.to_numpy(float), id(X_test): g_test.to_numpy(float)}
    classes = np.asarray(estimator.classes_) if classification else None
    use_labels = classification and label_groups

    label_names = [f"y={c}" for c in classes.tolist()] if use_labels and classes is not None else []
    names = [str(c) for c in g_cal.columns] + label_names

    def features(X: Any, y: Any) -> pd.DataFrame:
        cols = [table_by_x[id(X)]]
        if use_labels:
            assert classes is not None
            cols.append((np.asarray(y)[:, None] == classes[None, :]).astype(float))
        return pd.DataFrame(np.column_stack(cols), columns=names)

    cp = KandinskyConformal(
        estimator,
        group_features=features if method == "kandinsky" else None,
        alpha=alpha,
        random_state=random_state,
    )
    try:
        cp.fit(X_cal, y_cal)
    except DataError as exc:
        if exc.argument == "group_features":
            raise DataError(str(exc), argument="groups_cal") from None
        raise
    covered = cp.covered(X_test, y_test)
    sizes = cp.set_size(X_test)
    report = g_test.copy()
    report.index = pd.RangeIndex(n_test)
    if use_labels:
        assert classes is not None
        yt = np.asarray(y_test)
        for c in classes.tolist():
            report[f"y={c}"] = (yt == c).astype(float)
    report = report.loc[:, report.sum(axis=0) > 0]
    return group_coverage(
        covered,
        report if report.shape[1] else None,
        set_size=sizes,
        alpha=alpha,
        confidence=confidence,
        tolerance=tolerance,
    )
