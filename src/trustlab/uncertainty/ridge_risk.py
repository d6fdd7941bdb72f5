"""Out-of-sample risk of ridge regression under correlated samples: CorrGCV.

Generalised cross-validation (GCV) estimates the test error of ridge regression from its
training error assuming independent rows. When rows are correlated (time series,
repeated measures) with a known correlation ``K`` between samples, GCV badly
underestimates the risk and mis-tunes the ridge. CorrGCV (Atanasov, Zavatone-Veth and
Pehlevan, ICML 2025) corrects it through the S-transform of ``K``:

``CorrGCV = E_tr * S(df1) * df1 / (df1 - df2)``, with ``E_tr`` the training error,
``df1 = (1/T) tr[X'X/T (X'X/T + lambda)^-1]``, ``S(t) = S_K(t)/(1-t)`` and ``df2`` the
renormalised second degrees of freedom. Writing ``t = df1`` and ``L(t) = d log S / dt``
the paper's ``df2 = t + t'/(d log kappa_tilde/d lambda)`` simplifies (``kappa_tilde =
1/(t S(t))`` does not depend on lambda otherwise) to ``df2 = t - 1/(1/t + L(t))``, so

``CorrGCV = E_tr * S(t) * (1 + t L(t))``,

which for independent rows (``S_K = 1``) is exactly GCV, ``E_tr / (1 - t)^2``.

The model is ``X = K^{1/2} Z Sigma^{1/2}``, ``y = X w + eps`` with ``Cov(eps) = sigma^2 K``
(noise correlated like the rows); ridge ``w = (X'X/T + lambda I)^-1 X'y/T`` (scikit-learn's
``Ridge(alpha=T * lambda)``). For a test point correlated with the training rows (a
forecast), :func:`corr_gcv_forecast` adds the part predictable from the training
residuals.

The S-transforms of the row correlation (:class:`STransform`, :func:`s_transform`,
:func:`exponential_correlation`) live in the private module ``_ridge_transform``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from trustlab._param_validation import ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.uncertainty._ridge_transform import (
    STransform,
    _check_correlation,
    exponential_correlation,
    s_transform,
)

__all__ = [
    "CorrGCVRidgeCV",
    "STransform",
    "corr_gcv",
    "corr_gcv_forecast",
    "exponential_correlation",
    "gcv",
    "s_transform",
]


def _check_xy(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    x = check_numeric_array(X, "X", ndim=2, min_rows=2)
    yy = check_numeric_array(y, "y", ndim=1, min_rows=2)
    if yy.shape[0] != x.shape[0]:
        raise DataError(f"y has {yy.shape[0]} rows but X has {x.shape[0]}.", argument="y")
    return x, yy


def _check_lams(lam: Any) -> tuple[np.ndarray, bool]:
    scalar = np.ndim(lam) == 0
    try:
        arr = np.atleast_1d(np.asarray(lam, dtype=float))
    except (TypeError, ValueError):
        raise ParameterError(
            f"lam must be a positive float or array of them, got {lam!r}.", argument="lam"
        ) from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ParameterError(
            "lam must be a positive finite float or a 1-D array of them (the ridge penalty per sample; "
            "scikit-learn's Ridge alpha divided by the number of rows).",
            argument="lam",
        )
    return arr, scalar


def _spectral(x: np.ndarray, y: np.ndarray, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Training error and df1 along ``lams`` from one SVD."""
    T = x.shape[0]
    u, s, _ = linalg.svd(x, full_matrices=False, lapack_driver="gesdd")
    e = s**2 / T  # nonzero eigenvalues of X'X/T (and XX'/T)
    uy = u.T @ y
    rest = float(y @ y - uy @ uy)
    shrink = lams[:, None] / (e[None, :] + lams[:, None])
    e_tr = (max(rest, 0.0) + (shrink**2 * uy[None, :] ** 2).sum(axis=1)) / T
    df1 = (e[None, :] / (e[None, :] + lams[:, None])).sum(axis=1) / T
    return e_tr, df1


def _log_s_full_derivative(S: Any, t: np.ndarray) -> np.ndarray:
    if isinstance(S, STransform):
        d = S.log_derivative(t)
    else:  # a user callable: central differences in t
        h = 1e-5 * np.minimum(t, 1 - t)
        d = (np.log(np.asarray(S(t + h), float)) - np.log(np.asarray(S(t - h), float))) / (2 * h)
    return np.asarray(d, dtype=float) + 1.0 / (1.0 - t)


@validate_params({"s_transform": [None, STransform, callable], "return_details": ["boolean"]})
def corr_gcv(X: Any, y: Any, lam: Any, s_transform: Any = None, *, return_details: bool = False) -> Any:
    """CorrGCV estimate of the out-of-sample risk of ridge regression with correlated rows.

    Estimates ``E_out = E[(y* - w_hat' x*)^2]`` on a fresh test point independent of the
    training rows (noise included), for ridge ``w_hat = (X'X/T + lam I)^-1 X'y/T``.
    One SVD of ``X`` serves the whole ``lam`` path.

    Parameters
    ----------
    X : array-like of shape (T, N)
        Training rows, correlated across rows by a known correlation ``K`` (no intercept:
        centre ``X`` and ``y`` first if needed).
    y : array-like of shape (T,)
        Targets; the noise is assumed correlated like the rows (the paper's setting; with
        a different noise correlation no training-data-only estimator exists).
    lam : float or array-like of float
        Ridge penalties (per sample; scikit-learn's ``Ridge(alpha=T * lam)``).
    s_transform : STransform or callable, optional
        ``S_K`` from :func:`s_transform`; ``None`` means independent rows (then CorrGCV is GCV).
    return_details : bool, default=False
        Also return ``E_tr``, ``df1``, ``df2`` and the S-factor per ``lam``.

    Returns
    -------
    float or numpy.ndarray or dict
        The estimate (an array for an array ``lam``; ``inf`` where ``df1`` reaches the
        rank limit), or a dict of arrays with ``risk``, ``train_error``, ``df1``, ``df2``,
        ``s_full`` when ``return_details``.

    References
    ----------
    A. Atanasov, J. Zavatone-Veth, C. Pehlevan, "Risk and cross validation in ridge
    regression with correlated samples", ICML 2025 (arXiv 2408.04607), the CorrGCV estimator.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> T, N, rho = 400, 50, float(np.exp(-1 / 20))
    >>> z = rng.standard_normal((T, N + 1))
    >>> for t in range(1, T):  # AR(1) rows: exponential correlation with xi = 20
    ...     z[t] = rho * z[t - 1] + np.sqrt(1 - rho**2) * z[t]
    >>> X, noise = z[:, :N], z[:, N]
    >>> y = X @ (np.ones(N) / np.sqrt(N)) + 0.5 * noise
    >>> est = corr_gcv(X, y, 1e-2, s_transform("exponential", xi=20.0))
    >>> naive = gcv(X, y, 1e-2)
    >>> bool(est > 2 * naive)  # GCV is optimistic on correlated rows
    True
    """
    x, yy = _check_xy(X, y)
    lams, scalar = _check_lams(lam)
    S = STransform("iid") if s_transform is None else s_transform
    e_tr, t = _spectral(x, yy, lams)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = (t > 0) & (t < 1 - 1e-12)
        tt = np.where(ok, t, 0.5)
        s_full = np.asarray(S(tt), dtype=float) / (1.0 - tt)
        L = _log_s_full_derivative(S, tt)
        risk = np.where(ok & np.isfinite(s_full), e_tr * s_full * (1.0 + tt * L), np.inf)
        df2 = np.where(ok, tt - 1.0 / (1.0 / tt + L), np.nan)
    if return_details:
        return {
            "risk": risk,
            "train_error": e_tr,
            "df1": t,
            "df2": df2,
            "s_full": np.where(ok, s_full, np.inf),
        }
    return float(risk[0]) if scalar else risk


def gcv(X: Any, y: Any, lam: Any) -> Any:
    """Ordinary generalised cross-validation of ridge: ``E_tr / (1 - df1)^2``.

    Parameters
    ----------
    X : array-like of shape (T, N)
        Training rows.
    y : array-like of shape (T,)
        Targets.
    lam : float or array-like of float
        Ridge penalties (per sample; scikit-learn's ``alpha = T * lam``).

    Returns
    -------
    float or numpy.ndarray
        The GCV estimate per ``lam``.

    References
    ----------
    P. Craven, G. Wahba, "Smoothing noisy data with spline functions", Numerische
    Mathematik 31 (1979); the baseline of Atanasov et al., ICML 2025.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((100, 5)); y = X[:, 0] + rng.standard_normal(100)
    >>> round(gcv(X, y, 0.1), 3)
    0.894
    """
    x, yy = _check_xy(X, y)
    lams, scalar = _check_lams(lam)
    e_tr, t = _spectral(x, yy, lams)
    with np.errstate(divide="ignore"):
        risk = np.where(t < 1 - 1e-12, e_tr / (1.0 - t) ** 2, np.inf)
    return float(risk[0]) if scalar else risk


@validate_params({"s_transform": [None, STransform, callable], "return_details": ["boolean"]})
def corr_gcv_forecast(
    X: Any, y: Any, lam: float, s_transform: Any, K: Any, k: Any, *, return_details: bool = False
) -> Any:
    """Risk of ridge on test points correlated with the training rows (forecasting).

    With ``k`` the correlations between a test row and the ``T`` training rows (same
    structure for the noise), the test row given the training data is
    ``x* = X'K^-1 k + sqrt(c) Sigma^{1/2} xi`` with ``c = 1 - k'K^-1 k``, and likewise
    the noise; since ``X w + eps = y``, the forecast error is
    ``r'K^-1 k + sqrt(c) (independent-point error)`` with ``r = y - X w_hat`` the
    training residual. Hence, conditionally on the training data,

    ``E[(y* - w_hat' x*)^2 | train] = (r'K^-1 k)^2 + (1 - k'K^-1 k) E_out``,

    and the estimate plugs CorrGCV in for ``E_out``. The first term is computed exactly
    from the residuals. (This is trustlab's derivation, checked by Monte Carlo in the
    tests; the paper's notebook gives an averaged deterministic-equivalent form instead.)

    Parameters
    ----------
    X : array-like of shape (T, N)
        Training rows.
    y : array-like of shape (T,)
        Targets.
    lam : float
        Ridge penalty (per sample).
    s_transform : STransform or callable
        ``S_K`` of the training correlation ``K``.
    K : array-like of shape (T, T)
        The training correlation matrix (positive definite, unit diagonal).
    k : array-like of shape (T,) or (T, m)
        Correlations of each of ``m`` test rows with the training rows (e.g. for
        ``K_ts = exp(-|t-s|/xi)`` and a test row ``h`` steps after the last training row,
        ``k_t = exp(-(T - 1 - t + h)/xi)``).
    return_details : bool, default=False
        Also return the two terms.

    Returns
    -------
    float or numpy.ndarray or dict
        Estimated risk per test row (a float for 1-D ``k``).

    Raises
    ------
    DataError
        ``K`` is not a valid positive-definite correlation matrix, or ``k`` has the wrong
        length or ``k'K^-1 k > 1`` (not a valid joint correlation).

    References
    ----------
    A. Atanasov, J. Zavatone-Veth, C. Pehlevan, "Risk and cross validation in ridge
    regression with correlated samples", ICML 2025 (the correlated-test-point extension).

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> T, N, xi = 300, 20, 10.0
    >>> K = exponential_correlation(T + 5, xi)
    >>> Z = np.linalg.cholesky(K) @ rng.standard_normal((T + 5, N + 1))
    >>> X, y = Z[:T, :N], Z[:T, :N].sum(axis=1) / np.sqrt(N) + 0.3 * Z[:T, N]
    >>> horizons = K[:T, T:]  # correlations of the 5 future rows with the training rows
    >>> risk = corr_gcv_forecast(X, y, 1e-2, s_transform("exponential", xi=xi), K[:T, :T], horizons)
    >>> bool(risk[0] < risk[-1])  # the nearer future is easier
    True
    """
    x, yy = _check_xy(X, y)
    lams, scalar = _check_lams(lam)
    if not scalar:
        raise ParameterError("lam of corr_gcv_forecast must be a single float.", argument="lam")
    kk = _check_correlation(K, "K")
    T = x.shape[0]
    if kk.shape[0] != T:
        raise DataError(f"K must be {T} x {T} (one row per training row), got {kk.shape}.", argument="K")
    kv = check_numeric_array(k, "k")
    one = kv.ndim == 1
    kv = kv.reshape(T, -1) if kv.shape[0] == T else None  # type: ignore[assignment]
    if kv is None:
        raise DataError(f"k must have {T} rows (one correlation per training row).", argument="k")
    try:
        cho = linalg.cho_factor(kk, lower=True)
    except linalg.LinAlgError:
        raise DataError(
            "K is not positive definite; a forecast needs K^-1. Check the correlation model (a non-PSD "
            "matrix is not a correlation), or drop duplicated rows.",
            argument="K",
        ) from None
    kinv_k = linalg.cho_solve(cho, kv)
    c = 1.0 - np.einsum("tm,tm->m", kv, kinv_k)
    if (c < -1e-8).any():
        raise DataError(
            "k'K^-1 k exceeds 1 for some test row: k and K are not one valid joint correlation.", argument="k"
        )
    c = np.clip(c, 0.0, None)
    N = x.shape[1]
    w = linalg.solve(x.T @ x / T + lams[0] * np.eye(N), x.T @ yy / T, assume_a="pos")
    r = yy - x @ w
    pred_part = (r @ kinv_k) ** 2
    e_out = corr_gcv(x, yy, float(lams[0]), s_transform)
    risk = pred_part + c * e_out
    if return_details:
        return {"risk": risk, "residual_term": pred_part, "innovation_share": c, "independent_risk": e_out}
    return float(risk[0]) if one else risk


class CorrGCVRidgeCV(ParamsValidationMixin, RegressorMixin, BaseEstimator):
    """Ridge regression whose penalty is chosen by CorrGCV (correlated rows).

    Parameters
    ----------
    lambdas : array-like of float, optional
        Penalties per sample to try (default ``np.logspace(-6, 2, 50)``); scikit-learn's
        ``alpha = T * lambda``.
    s_transform : STransform or callable, optional
        ``S_K`` of the rows' correlation (:func:`s_transform`); ``None``: independent rows
        (plain GCV).
    fit_intercept : bool, default=False
        Centre ``X`` and ``y`` before fitting (centring changes the correlation structure
        slightly; the estimate ignores that).

    Attributes
    ----------
    lambda_ : float
        The penalty with the smallest estimated risk.
    risk_estimates_ : numpy.ndarray
        CorrGCV along ``lambdas``.
    coef_ : numpy.ndarray of shape (n_features,)
    intercept_ : float
    n_features_in_ : int

    References
    ----------
    A. Atanasov, J. Zavatone-Veth, C. Pehlevan, "Risk and cross validation in ridge
    regression with correlated samples", ICML 2025.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 10)); y = X @ np.ones(10) + rng.standard_normal(200)
    >>> model = CorrGCVRidgeCV(s_transform=s_transform("exponential", xi=2.0)).fit(X, y)
    >>> model.predict(X[:2]).shape
    (2,)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "lambdas": [None, "array-like"],
        "s_transform": [None, callable],
        "fit_intercept": ["boolean"],
    }

    def __init__(self, lambdas: Any = None, s_transform: Any = None, fit_intercept: bool = False) -> None:
        self.lambdas = lambdas
        self.s_transform = s_transform
        self.fit_intercept = fit_intercept

    def fit(self, X: Any, y: Any) -> CorrGCVRidgeCV:
        """Estimate the risk along ``lambdas`` and fit ridge at the best one.

        Parameters
        ----------
        X : array-like of shape (T, N)
            Training rows.
        y : array-like of shape (T,)
            Targets.

        Returns
        -------
        CorrGCVRidgeCV
            ``self``.
        """
        self._validate_params()
        x, yy = self._check_fit_data(X, y)
        lams, _ = _check_lams(np.logspace(-6, 2, 50) if self.lambdas is None else self.lambdas)
        x_mean = x.mean(axis=0) if self.fit_intercept else np.zeros(x.shape[1])
        y_mean = float(yy.mean()) if self.fit_intercept else 0.0
        xc, yc = x - x_mean, yy - y_mean
        self.risk_estimates_ = np.asarray(corr_gcv(xc, yc, lams, self.s_transform), dtype=float)
        best = int(np.argmin(self.risk_estimates_))
        self.lambda_ = float(lams[best])
        T, N = xc.shape
        self.coef_ = linalg.solve(xc.T @ xc / T + self.lambda_ * np.eye(N), xc.T @ yc / T, assume_a="pos")
        self.intercept_ = float(y_mean - x_mean @ self.coef_)
        return self

    def _check_fit_data(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        if y is None:
            raise DataError("CorrGCVRidgeCV requires y to be passed, but the target y is None.", argument="y")
        try:  # scikit-learn's checks (names, n_features_in_, warnings), trustlab's error
            x, yy = validate_data(self, X, y, y_numeric=True, ensure_min_samples=2)
        except ValueError as exc:
            raise DataError(f"{exc}", argument="X") from None
        return np.asarray(x, dtype=float), np.asarray(yy, dtype=float)

    def predict(self, X: Any) -> np.ndarray:
        """Predict with the ridge fitted at ``lambda_``.

        Parameters
        ----------
        X : array-like of shape (n, N)
            Rows.

        Returns
        -------
        numpy.ndarray of shape (n,)
            Predictions.
        """
        try:
            check_is_fitted(self, "coef_")
        except Exception:
            raise NotFittedError(
                "This CorrGCVRidgeCV is not fitted yet; call fit(X, y) first.", argument="X"
            ) from None
        try:
            x = validate_data(self, X, reset=False)
        except ValueError as exc:
            raise DataError(f"{exc}", argument="X") from None
        return np.asarray(np.asarray(x, dtype=float) @ self.coef_ + self.intercept_)
