"""The bias-corrected binary regression on randomized-response labels (private module)."""

from __future__ import annotations

import numbers
import warnings
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy.stats import norm
from sklearn.base import BaseEstimator

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import (
    check_choice,
    check_fraction,
)
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.privacy._rr_fisher import (
    LINKS,
    check_design,
    check_keep,
    check_labels,
    fisher_scoring,
    link_function,
)
from trustlab.privacy._rr_mechanism import PrivatizedLabels

__all__ = [
    "COV_TYPES",
    "LabelDPBinaryRegression",
]

COV_TYPES = ("fisher", "sandwich")


class LabelDPBinaryRegression(ParamsValidationMixin, BaseEstimator):
    """Bias-corrected binary regression on labels released by randomized response.

    Maximises the likelihood of the released labels ``y~`` under
    ``P(y~=1 | x) = (1 - p0) + (p0 + p1 - 1) F(x'beta)`` by Fisher scoring from
    ``beta = 0`` (step halving keeps each step uphill) and reports Wald standard
    errors from the inverse expected Fisher information (``cov_type="fisher"``) or
    the sandwich estimator. Post-processing of the released labels: no budget.

    Parameters
    ----------
    link : {"logit", "probit", "cloglog"}, default "logit"
        ``F``, the inverse link of the binary response model.
    fit_intercept : bool, default True
        Prepend a column of ones to ``X``.
    cov_type : {"fisher", "sandwich"}, default "fisher"
        Expected information (the paper's asymptotic variance) or the robust sandwich.
    max_iter : int, default 100
        Fisher-scoring iterations.
    tol : float, default 1e-8
        Stop when no coefficient moves by more than ``tol * (1 + max |beta|)``.
    p0, p1 : float, optional
        Keep probabilities of the release, when one pair holds for every record (e.g.
        Warner's symmetric RR, ``e^eps / (1 + e^eps)`` for both). Arguments of
        :meth:`fit` override them; one of the two places must give them.
    pos_label : scalar, default 1
        The released label value read as 1; every other value is read as 0.

    Attributes
    ----------
    coef_ : numpy.ndarray of shape (d,)
        Coefficients of the columns of ``X``.
    intercept_ : float
        The intercept (0.0 without ``fit_intercept``).
    params_ : numpy.ndarray
        Intercept (if fitted) followed by ``coef_``.
    cov_params_ : numpy.ndarray
        Estimated covariance of ``params_``.
    bse_ : numpy.ndarray
        Standard errors of ``params_``.
    fisher_information_ : numpy.ndarray
        Expected Fisher information at the estimate.
    n_iter_ : int
    converged_ : bool
    n_features_in_ : int
    feature_names_in_ : numpy.ndarray
        Only when ``X`` was a DataFrame.

    See Also
    --------
    RandomizedResponseLabelDP : releases the labels this estimator fits.

    Notes
    -----
    Passing ``p0 = p1 = 1`` gives ordinary maximum-likelihood binary regression (the
    naive fit when applied to randomized labels; it shrinks ``beta`` toward 0).

    References
    ----------
    Ce Zhang, Yixin Han, Yafei Wang, Xiaodong Yan, Linglong Kong, Ting Li, Bei Jiang.
    "Differentially Private Analysis for Binary Response Models: Optimality,
    Estimation, and Inference". ICML 2025 (PMLR 267:74923-74937).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20000, 2))
    >>> y = (rng.random(20000) < 1 / (1 + np.exp(-(0.5 + X @ [1.0, -1.0])))).astype(int)
    >>> y_tilde = np.where(rng.random(20000) < 0.7311, y, 1 - y)  # stand-in for released labels
    >>> model = LabelDPBinaryRegression().fit(X, y_tilde, p0=0.7311, p1=0.7311)
    >>> model.params_.round(2)
    array([ 0.54,  1.01, -1.09])
    >>> model.conf_int().shape
    (3, 2)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "link": [Options(LINKS)],
        "fit_intercept": ["boolean"],
        "cov_type": [Options(COV_TYPES)],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, 1, closed="neither")],
        "p0": [None, Interval(numbers.Real, 0, 1, closed="both")],
        "p1": [None, Interval(numbers.Real, 0, 1, closed="both")],
        "pos_label": "no_validation",
    }

    def __init__(
        self,
        link: str = "logit",
        *,
        fit_intercept: bool = True,
        cov_type: str = "fisher",
        max_iter: int = 100,
        tol: float = 1e-8,
        p0: float | None = None,
        p1: float | None = None,
        pos_label: Any = 1,
    ) -> None:
        self.link = link
        self.fit_intercept = fit_intercept
        self.cov_type = cov_type
        self.max_iter = max_iter
        self.tol = tol
        self.p0 = p0
        self.p1 = p1
        self.pos_label = pos_label

    def _design(self, X: Any, n: int | None = None) -> tuple[np.ndarray, list[str] | None]:
        arr, names = check_design(X, n)
        if self.fit_intercept:
            arr = np.column_stack([np.ones(arr.shape[0]), arr])
        return arr, names

    def fit(self, X: Any, y: Any, p0: Any = None, p1: Any = None) -> LabelDPBinaryRegression:
        """Fit the corrected model.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, d)
            Public covariates.
        y : array-like of shape (n,) or PrivatizedLabels
            Released labels ``y~`` (``pos_label`` is 1, any other value 0), or the result of
            :meth:`RandomizedResponseLabelDP.privatize` (then ``p0``/``p1`` are taken from it).
        p0, p1 : float or array-like of shape (n,), optional
            Keep probabilities the labels were released with; ``p0 + p1 > 1``. Default:
            the estimator's ``p0`` and ``p1``.

        Returns
        -------
        self
        """
        self._validate_params()
        link, cov_type, max_iter, tol = self.link, self.cov_type, int(self.max_iter), float(self.tol)
        if isinstance(y, PrivatizedLabels):
            if p0 is not None or p1 is not None:
                raise ParameterError(
                    "pass either PrivatizedLabels or y with p0 and p1, not both.", argument="p0"
                )
            y, p0, p1 = y.y_tilde, y.p0, y.p1
        p0 = self.p0 if p0 is None else p0
        p1 = self.p1 if p1 is None else p1
        ya = check_labels(y, "y", self.pos_label)
        n = ya.shape[0]
        Xd, names = self._design(X, n)
        a0 = check_keep(p0, n, "p0")
        a1 = check_keep(p1, n, "p1")
        if np.any(a0 + a1 <= 1.0):
            raise ParameterError(
                "p0 + p1 must exceed 1 for every record (p0 + p1 = 1 makes the released label "
                "independent of the true one; p0 + p1 < 1 means the labels were swapped: "
                "pass 1 - p0 and 1 - p1 and flip y).",
                argument="p0",
            )
        if n <= Xd.shape[1]:
            raise DataError(
                f"need more records than parameters ({Xd.shape[1]}), got n_samples = {n}.", argument="X"
            )
        if np.linalg.matrix_rank(Xd) < Xd.shape[1]:
            raise DataError(
                "X (with the intercept column) is rank deficient; drop constant or collinear columns.",
                argument="X",
            )
        res = fisher_scoring(Xd[None], ya[None], a0[None], a1[None], link, max_iter=max_iter, tol=tol)
        info = res.info[0]
        try:
            inv = np.linalg.inv(info)
        except np.linalg.LinAlgError:
            inv = np.full_like(info, np.nan)
        cov = inv if cov_type == "fisher" else inv @ res.meat[0] @ inv
        self.converged_ = bool(res.converged[0])
        if not self.converged_ or not np.isfinite(inv).all():
            warnings.warn(
                "LabelDPBinaryRegression did not converge (the released labels may be too noisy "
                "or separate the data); estimates and intervals are unreliable. Raise max_iter, "
                "use more records or a larger epsilon.",
                RuntimeWarning,
                stacklevel=2,
            )
        self.params_ = res.beta[0]
        self.intercept_ = float(self.params_[0]) if self.fit_intercept else 0.0
        self.coef_ = self.params_[1:] if self.fit_intercept else self.params_.copy()
        self.fisher_information_ = info
        self.cov_params_ = cov
        self.bse_ = np.sqrt(np.clip(np.diag(cov), 0, None))
        self.n_iter_ = int(res.n_iter)
        self.n_features_in_ = Xd.shape[1] - int(self.fit_intercept)
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "params_"):
            raise NotFittedError(
                "this LabelDPBinaryRegression is not fitted yet; call fit(X, y_tilde, p0, p1) first.",
                argument="fit",
            )

    def conf_int(self, alpha: float = 0.05) -> np.ndarray:
        """Wald intervals ``params_ +- z_{1-alpha/2} bse_``, shape (n_params, 2), intercept first.

        The standard errors come from the corrected model's covariance
        (``cov_type``), so the intervals account for the randomized-response noise
        in the labels. Post-processing of the released labels: no further budget.

        Parameters
        ----------
        alpha : float, default 0.05
            One minus the two-sided confidence level, in ``(0, 1)``.

        Returns
        -------
        numpy.ndarray of shape (n_params, 2)
            Lower and upper bounds, one row per parameter (intercept first when fitted).

        Raises
        ------
        NotFittedError
            When called before :meth:`fit`.
        """
        self._check_fitted()
        alpha = check_fraction(alpha, "alpha")
        z = float(norm.ppf(1 - alpha / 2))
        return np.column_stack([self.params_ - z * self.bse_, self.params_ + z * self.bse_])

    def summary(self, alpha: float = 0.05) -> pd.DataFrame:
        """Estimates, standard errors, z, two-sided p-values and intervals, one row per parameter.

        Parameters
        ----------
        alpha : float, default 0.05
            One minus the confidence level of the ``lower``/``upper`` columns.

        Returns
        -------
        pandas.DataFrame
            Columns ``coef``, ``std_err``, ``z``, ``p_value``, ``lower``, ``upper``;
            index ``"intercept"`` (when fitted) then the feature names (``x0``, ``x1``,
            ... when ``X`` had none).

        Raises
        ------
        NotFittedError
            When called before :meth:`fit`.
        """
        self._check_fitted()
        ci = self.conf_int(alpha)
        names = list(getattr(self, "feature_names_in_", [f"x{j}" for j in range(self.n_features_in_)]))
        index = (["intercept"] if self.fit_intercept else []) + [str(v) for v in names]
        z = self.params_ / self.bse_
        return pd.DataFrame(
            {
                "coef": self.params_,
                "std_err": self.bse_,
                "z": z,
                "p_value": 2 * norm.sf(np.abs(z)),
                "lower": ci[:, 0],
                "upper": ci[:, 1],
            },
            index=index,
        )

    def predict_proba(self, X: Any) -> np.ndarray:
        """``P(y=1 | x)`` of the *true* label, as columns ``[P(y=0), P(y=1)]``.

        The corrected model estimates the true label's probability, not the
        released (randomized) one's.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, d)
            Covariates with the fitted number of features.

        Returns
        -------
        numpy.ndarray of shape (n, 2)
            ``[1 - F(x'beta), F(x'beta)]`` under the fitted link.

        Raises
        ------
        NotFittedError
            When called before :meth:`fit`.
        DataError
            When ``X`` has a different number of features than at fit.
        """
        self._check_fitted()
        Xd, _ = self._design(X)
        if Xd.shape[1] != self.params_.shape[0]:
            raise DataError(
                f"X has {Xd.shape[1] - int(self.fit_intercept)} features, but LabelDPBinaryRegression "
                f"is expecting {self.n_features_in_} features as input (the columns fit saw).",
                argument="X",
            )
        F, _ = link_function(Xd @ self.params_, check_choice(self.link, "link", LINKS))
        return np.column_stack([1 - F, F])

    def predict(self, X: Any) -> np.ndarray:
        """Predicted true label (1 where ``P(y=1 | x) > 1/2``).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, d)
            Covariates with the fitted number of features.

        Returns
        -------
        numpy.ndarray of int64, shape (n,)
            0 or 1 per row.
        """
        return (self.predict_proba(X)[:, 1] > 0.5).astype(np.int64)
