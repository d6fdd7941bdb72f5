"""Kandinsky conformal prediction: the estimator :class:`KandinskyConformal`.

Private to :mod:`trustlab.uncertainty.conformal`, which re-exports it; the helper
methods (scores, group features, checks) live in ``_conformal_inputs``.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from trustlab._param_validation import HasMethods, Interval, Options, ParamsValidationMixin
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.uncertainty._conformal_inputs import _is_classifier, _KandinskyInputs
from trustlab.uncertainty._conformal_qr import pinball_fit


class KandinskyConformal(_KandinskyInputs, ParamsValidationMixin, BaseEstimator):
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
    tie_noise : float, default=1e-3
        Scores get ``tie_noise * std(calibration scores) * U``, ``U ~ Uniform(0, 1)``, at
        calibration and at evaluation alike, to break ties (the paper randomises the score;
        this form is trustlab's choice). The noise must stay well above the LP solver's
        tolerance (about 1e-7): with tied scores (a confident few-leaf tree) the fitted
        quantile lands among the ties, and at ``1e-8`` the solver could not order them, so
        coverage collapsed (0.39 overall where split conformal covers 0.91). 0 disables it
        (ties are then all covered: conservative).
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
        tie_noise: float = 1e-3,
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
        raw = self._score(X_cal, y, name="X_cal")
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
