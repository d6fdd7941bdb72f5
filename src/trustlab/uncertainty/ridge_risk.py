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
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from scipy import linalg, optimize
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, NotFittedError, ParameterError

__all__ = [
    "CorrGCVRidgeCV",
    "STransform",
    "corr_gcv",
    "corr_gcv_forecast",
    "exponential_correlation",
    "gcv",
    "s_transform",
]

_KINDS = ("iid", "exponential", "nearest_neighbor", "matrix")


class STransform:
    """The S-transform ``S_K(t)`` of a sample-correlation matrix ``K`` (unit diagonal).

    ``S_K(t) = (1 - t) / (kappa t)`` where ``kappa > 0`` solves
    ``(1/T) tr[K (K + kappa I)^-1] = t``, for ``t`` in (0, 1). Build one with
    :func:`s_transform`; call it on an array of ``t``; :meth:`log_derivative` gives
    ``d log S_K / dt`` (closed form or implicit differentiation, no finite differences).

    Parameters
    ----------
    kind : {"iid", "exponential", "nearest_neighbor", "matrix"}
        Which correlation.
    xi : float, optional
        Correlation length of ``K_ts = exp(-|t - s| / xi)`` (``kind="exponential"``).
    b : float, optional
        Off-diagonal ``b/2`` of the tridiagonal ``K`` (``kind="nearest_neighbor"``).
    eigenvalues : ndarray, optional
        Eigenvalues of ``K`` (``kind="matrix"``).

    Examples
    --------
    >>> S = s_transform("exponential", xi=5.0)
    >>> round(float(S(0.398)), 2)
    3.03
    """

    def __init__(
        self, kind: str, *, xi: float | None = None, b: float | None = None, eigenvalues: Any = None
    ) -> None:
        self.kind = kind
        self.xi = xi
        self.b = b
        self.eigenvalues = eigenvalues
        if kind == "exponential":
            assert xi is not None
            self._coth = 1.0 / math.tanh(1.0 / xi)
        self._t_max = 1.0
        if kind == "matrix":
            ev = np.asarray(eigenvalues, dtype=float)
            self._t_max = float(np.mean(ev > 1e-12 * ev.max()))

    def __repr__(self) -> str:
        extra = {"exponential": f", xi={self.xi}", "nearest_neighbor": f", b={self.b}"}.get(self.kind, "")
        return f"STransform({self.kind!r}{extra})"

    def _kappa(self, t: float) -> float:
        ev = np.asarray(self.eigenvalues, dtype=float)

        def f(log_k: float) -> float:
            k = math.exp(log_k)
            return float(np.mean(ev / (ev + k))) - t

        lo, hi = -60.0, 60.0
        return math.exp(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500))

    def __call__(self, t: Any) -> np.ndarray:
        """``S_K(t)``, elementwise; ``inf`` where ``t`` is at or beyond ``rank(K)/T``.

        Parameters
        ----------
        t : float or array-like
            Points in (0, 1).

        Returns
        -------
        numpy.ndarray
            ``S_K(t)``.
        """
        t = np.asarray(t, dtype=float)
        if self.kind == "iid":
            return np.ones_like(t)
        if self.kind == "exponential":
            c = self._coth
            return (np.sqrt(1.0 + (c * c - 1.0) * t * t) + c * t) / (1.0 + t)
        if self.kind == "nearest_neighbor":
            b2 = float(self.b) ** 2  # type: ignore[arg-type]
            return (2.0 - t) / (np.sqrt(1.0 - b2 * t * (2.0 - t)) + 1.0 - t)
        out = np.full(t.shape, np.inf)
        flat_t, flat_o = t.reshape(-1), out.reshape(-1)
        for i, ti in enumerate(flat_t):
            if 0.0 < ti < self._t_max * (1 - 1e-12):
                k = self._kappa(float(ti))
                flat_o[i] = (1.0 - ti) / (k * ti)
        return out

    def log_derivative(self, t: Any) -> np.ndarray:
        """``d log S_K(t) / dt``, elementwise.

        Parameters
        ----------
        t : float or array-like
            Points in (0, 1).

        Returns
        -------
        numpy.ndarray
            The derivative of ``log S_K`` at ``t``.
        """
        t = np.asarray(t, dtype=float)
        if self.kind == "iid":
            return np.zeros_like(t)
        if self.kind == "exponential":
            c = self._coth
            r = np.sqrt(1.0 + (c * c - 1.0) * t * t)
            return ((c * c - 1.0) * t / r + c) / (r + c * t) - 1.0 / (1.0 + t)
        if self.kind == "nearest_neighbor":
            b2 = float(self.b) ** 2  # type: ignore[arg-type]
            r = np.sqrt(1.0 - b2 * t * (2.0 - t))
            dr = -b2 * (1.0 - t) / r
            return -1.0 / (2.0 - t) - (dr - 1.0) / (r + 1.0 - t)
        ev = np.asarray(self.eigenvalues, dtype=float)
        out = np.full(t.shape, np.nan)
        flat_t, flat_o = t.reshape(-1), out.reshape(-1)
        for i, ti in enumerate(flat_t):
            if 0.0 < ti < self._t_max * (1 - 1e-12):
                k = self._kappa(float(ti))
                dg = -float(np.mean(ev / (ev + k) ** 2))  # dt/dkappa
                flat_o[i] = -1.0 / (1.0 - ti) - 1.0 / ti - 1.0 / (k * dg)
        return out


@validate_params(
    {
        "kind": [Options(set(_KINDS))],
        "xi": [None, Interval(numbers.Real, 0, None, closed="neither")],
        "b": [None, Interval(numbers.Real, -1, 1, closed="neither")],
        "K": [None, "array-like"],
    }
)
def s_transform(
    kind: str = "iid", *, xi: float | None = None, b: float | None = None, K: Any = None
) -> STransform:
    """The S-transform of a sample-correlation structure, for :func:`corr_gcv`.

    Parameters
    ----------
    kind : {"iid", "exponential", "nearest_neighbor", "matrix"}, default="iid"
        ``"iid"``: independent rows (``S_K = 1``). ``"exponential"``:
        ``K_ts = exp(-|t - s|/xi)`` (an AR(1) process with coefficient ``exp(-1/xi)``),
        closed form ``S_K(t) = (sqrt(1 + (c^2 - 1) t^2) + c t)/(1 + t)`` with
        ``c = coth(1/xi)`` (the large-T limit). ``"nearest_neighbor"``: tridiagonal
        ``K`` with off-diagonal ``b/2``, ``S_K(t) = (2 - t)/(sqrt(1 - b^2 t (2 - t)) + 1 - t)``.
        ``"matrix"``: any correlation matrix ``K`` (numerical, from its eigenvalues).
        The closed forms are the paper's, rewritten to avoid 0/0 at ``t -> 1``.
    xi : float, optional
        Correlation length, required for ``"exponential"``.
    b : float in (-1, 1), optional
        Required for ``"nearest_neighbor"``.
    K : array-like of shape (T, T), optional
        Required for ``"matrix"``: symmetric positive semi-definite with unit diagonal.

    Returns
    -------
    STransform
        Callable on ``t``, with a ``log_derivative`` method.

    Raises
    ------
    ParameterError
        A required parameter is missing for ``kind``.
    DataError
        ``K`` is not square, not symmetric, not positive semi-definite or lacks a unit diagonal.

    References
    ----------
    A. Atanasov, J. Zavatone-Veth, C. Pehlevan, "Risk and cross validation in ridge
    regression with correlated samples", ICML 2025 (arXiv 2408.04607).

    Examples
    --------
    >>> round(float(s_transform("nearest_neighbor", b=0.5)(0.5)), 4)
    1.0704
    >>> float(s_transform()(0.3))
    1.0
    """
    if kind == "exponential":
        if xi is None:
            raise ParameterError(
                "s_transform(kind='exponential') needs xi, the correlation length.", argument="xi"
            )
        return STransform(kind, xi=float(xi))
    if kind == "nearest_neighbor":
        if b is None:
            raise ParameterError("s_transform(kind='nearest_neighbor') needs b in (-1, 1).", argument="b")
        return STransform(kind, b=float(b))
    if kind == "matrix":
        if K is None:
            raise ParameterError(
                "s_transform(kind='matrix') needs K, the T x T correlation matrix.", argument="K"
            )
        return STransform(kind, eigenvalues=_correlation_eigenvalues(K))
    return STransform("iid")


def _check_correlation(K: Any, name: str = "K") -> np.ndarray:
    k = check_numeric_array(K, name, ndim=2)
    if k.shape[0] != k.shape[1]:
        raise DataError(f"{name} must be square (T x T), got shape {k.shape}.", argument=name)
    if not np.allclose(k, k.T, rtol=0, atol=1e-10):
        raise DataError(
            f"{name} must be symmetric; pass (K + K.T) / 2 if it is only rounding.", argument=name
        )
    if not np.allclose(np.diag(k), 1.0, rtol=0, atol=1e-8):
        raise DataError(
            f"{name} must be a correlation matrix with unit diagonal; divide a covariance C by "
            "sqrt(diag(C)) on both sides.",
            argument=name,
        )
    return k


def _correlation_eigenvalues(K: Any, name: str = "K") -> np.ndarray:
    k = _check_correlation(K, name)
    ev = linalg.eigvalsh(k)
    if ev.min() < -1e-8 * max(1.0, ev.max()):
        raise DataError(
            f"{name} is not positive semi-definite (smallest eigenvalue {ev.min():.3g}); it cannot be a "
            "correlation matrix. Fix the model of the correlation, or project it: clip the negative "
            "eigenvalues to 0 and rescale to unit diagonal.",
            argument=name,
        )
    return np.clip(ev, 0.0, None)


def exponential_correlation(n: int, xi: float) -> np.ndarray:
    """The ``n x n`` matrix ``K_ts = exp(-|t - s|/xi)`` (AR(1) rows), for tests and forecasts.

    Parameters
    ----------
    n : int
        Size.
    xi : float
        Correlation length (> 0).

    Returns
    -------
    numpy.ndarray of shape (n, n)

    References
    ----------
    Atanasov, Zavatone-Veth, Pehlevan, "Risk and cross validation in ridge regression with
    correlated samples", ICML 2025 (their exponential correlation).

    Examples
    --------
    >>> np.round(exponential_correlation(3, 1.0), 3)
    array([[1.   , 0.368, 0.135],
           [0.368, 1.   , 0.368],
           [0.135, 0.368, 1.   ]])
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ParameterError(f"n must be a positive int, got {n!r}.", argument="n")
    if isinstance(xi, bool) or not isinstance(xi, numbers.Real) or not (0 < xi < math.inf):
        raise ParameterError(f"xi must be a positive finite float, got {xi!r}.", argument="xi")
    idx = np.arange(int(n))
    return np.exp(-np.abs(idx[:, None] - idx[None, :]) / float(xi))


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


def _resolve_s(s: Any) -> STransform | Callable[[Any], Any]:
    if s is None:
        return STransform("iid")
    if isinstance(s, STransform) or callable(s):
        return s
    raise ParameterError(
        f"s_transform must be an STransform (from trustlab.uncertainty.s_transform) or a callable S_K(t), "
        f"got {type(s).__name__}.",
        argument="s_transform",
    )


def _log_s_full_derivative(S: Any, t: np.ndarray) -> np.ndarray:
    if isinstance(S, STransform):
        d = S.log_derivative(t)
    else:  # a user callable: central differences in t
        h = 1e-5 * np.minimum(t, 1 - t)
        d = (np.log(np.asarray(S(t + h), float)) - np.log(np.asarray(S(t - h), float))) / (2 * h)
    return np.asarray(d, dtype=float) + 1.0 / (1.0 - t)


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
    S = _resolve_s(s_transform)
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
