"""The S-transform of a correlation matrix between samples, for CorrGCV.

Private to :mod:`trustlab.uncertainty.ridge_risk`, which re-exports :class:`STransform`,
:func:`s_transform` and :func:`exponential_correlation`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from scipy import linalg, optimize

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError

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
        "eigenvalues": [None, "array-like"],
    }
)
def s_transform(
    kind: str = "iid",
    *,
    xi: float | None = None,
    b: float | None = None,
    K: Any = None,
    eigenvalues: Any = None,
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
        ``"matrix"``: any correlation matrix, numerically from its eigenvalues (pass
        ``eigenvalues`` when you have them: ``K`` costs a dense ``T x T`` matrix and an
        ``O(T^3)`` eigendecomposition). The closed forms are the paper's, rewritten to
        avoid 0/0 at ``t -> 1``.
    xi : float, optional
        Correlation length, required for ``"exponential"``.
    b : float in (-1, 1), optional
        Required for ``"nearest_neighbor"``.
    K : array-like of shape (T, T), optional
        For ``"matrix"`` (this or ``eigenvalues``): symmetric positive semi-definite with
        unit diagonal.
    eigenvalues : array-like of shape (T,), optional
        For ``"matrix"``, the fast path: the eigenvalues of ``K`` (non-negative, mean 1
        since ``tr K = T``), e.g. in closed form for a circulant or Toeplitz ``K``, or
        computed once and reused. Gives the same transform as ``K`` without forming it
        (measured: 12 ms instead of 1.8 s at ``T`` about 2,900; ``K`` at ``T = 30,000``
        would need 7 GB).

    Returns
    -------
    STransform
        Callable on ``t``, with a ``log_derivative`` method.

    Raises
    ------
    ParameterError
        A required parameter is missing for ``kind``.
    DataError
        ``K`` is not square, not symmetric, not positive semi-definite or lacks a unit
        diagonal; ``eigenvalues`` are negative, non-finite or do not average 1.

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
    >>> T = 400  # exponential correlation: K from its eigenvalues, no T x T matrix needed
    >>> K = np.exp(-np.abs(np.subtract.outer(np.arange(T), np.arange(T))) / 5.0)
    >>> ev = np.linalg.eigvalsh(K)
    >>> bool(np.isclose(s_transform("matrix", eigenvalues=ev)(0.4), s_transform("matrix", K=K)(0.4)))
    True
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
        if K is not None and eigenvalues is not None:
            raise ParameterError(
                "s_transform(kind='matrix') takes K or its eigenvalues, not both; pass eigenvalues "
                "(the fast path) alone.",
                argument="eigenvalues",
            )
        if eigenvalues is not None:
            return STransform(kind, eigenvalues=_check_eigenvalues(eigenvalues))
        if K is None:
            raise ParameterError(
                "s_transform(kind='matrix') needs the eigenvalues of the T x T correlation matrix "
                "(eigenvalues=..., fast) or the matrix itself (K=...).",
                argument="eigenvalues",
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


def _check_eigenvalues(eigenvalues: Any) -> np.ndarray:
    """Eigenvalues of a correlation matrix: finite, >= 0 (up to rounding), mean 1."""
    ev = check_numeric_array(eigenvalues, "eigenvalues", ndim=1)
    scale = max(1.0, float(ev.max()))
    if ev.min() < -1e-8 * scale:
        raise DataError(
            f"eigenvalues must be >= 0 (a correlation matrix is positive semi-definite); the smallest "
            f"is {ev.min():.3g}.",
            argument="eigenvalues",
        )
    mean = float(ev.mean())
    if abs(mean - 1.0) > 1e-6:
        raise DataError(
            f"eigenvalues must average 1 (a correlation matrix has unit diagonal, so tr K = T); they "
            f"average {mean:.6g}: divide a covariance's eigenvalues by their mean only if its "
            "diagonal is constant.",
            argument="eigenvalues",
        )
    return np.clip(ev, 0.0, None)


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


@validate_params(
    {
        "n": [Interval(numbers.Integral, 1, None, closed="left")],
        "xi": [Interval(numbers.Real, 0, None, closed="neither")],
    }
)
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
    idx = np.arange(int(n))
    return np.exp(-np.abs(idx[:, None] - idx[None, :]) / float(xi))
