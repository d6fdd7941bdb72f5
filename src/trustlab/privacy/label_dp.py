"""Label-private binary regression: optimal randomized response, a bias-corrected MLE and Wald intervals.

Binary labels ``y`` are sensitive, covariates ``X`` are public. Label differential
privacy (LabelDP) protects each label: neighbouring datasets differ in one label,
features fixed. This module implements the procedure of Zhang et al. (ICML 2025):

1. :class:`RandomizedResponseLabelDP` releases every label once through randomized
   response (RR) with keep probabilities ``p0 = P(y~=0 | y=0)`` and
   ``p1 = P(y~=1 | y=1)`` chosen to maximise the trace of the Fisher information
   of the binary response model ``P(y=1 | x) = F(x'beta)`` subject to the
   ``(epsilon, delta)``-LabelDP constraints. Under pure ``epsilon``-LabelDP the
   optimum is Warner's symmetric RR with keep probability
   ``e^eps / (1 + e^eps)`` for every record. With ``delta > 0`` the one-sided
   vertices ``(p0, p1) = (1, delta)`` and ``(delta, 1)`` carry more information
   where ``F(x'beta)`` is near 0 or 1; the choice then needs ``beta``, which a
   pilot share of records (released by symmetric RR) estimates.
2. :class:`LabelDPBinaryRegression` fits ``beta`` by the likelihood of the
   *released* labels, ``P(y~=1 | x) = (1 - p0) + (p0 + p1 - 1) F(x'beta)``, which
   removes the attenuation of a naive fit on ``y~``, and gives Wald intervals from
   the expected Fisher information. Fitting and intervals are post-processing:
   they spend no further budget.

The RR coins come from OpenDP's exact Bernoulli samplers (the bit-vector
randomized response ``make_randomized_response_bitvec``, used as a vectorised
exact Bernoulli draw), never from NumPy. OpenDP's randomness cannot be seeded:
``random_state`` governs only the public pilot split.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, ndtr
from scipy.stats import norm
from sklearn.base import BaseEstimator

from trustlab._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_fraction,
    check_numeric_array,
    check_positive_int,
    make_generator,
)
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import _dp, bernoulli

__all__ = [
    "LabelDPBinaryRegression",
    "PrivatizedLabels",
    "RandomizedResponseLabelDP",
    "rr_fisher_trace",
    "rr_hockey_stick",
    "rr_is_feasible",
    "rr_vertices",
]

LINKS = ("logit", "probit", "cloglog")
MODES = ("pointwise", "global", "symmetric")
COV_TYPES = ("fisher", "sandwich")
_G_CLIP = 1e-12
_MECHANISM = "randomized response (label DP)"


# ----------------------------------------------------------------------------- checks


def _check_labels(y: Any, name: str = "y") -> np.ndarray:
    arr = check_numeric_array(y, name, ndim=1)
    if not np.isin(arr, (0.0, 1.0)).all():
        bad = np.unique(arr[~np.isin(arr, (0.0, 1.0))])[:5]
        raise DataError(
            f"{name} must hold binary labels 0/1 (or booleans), got values such as {bad.tolist()}; "
            "recode the outcome to 0/1 first.",
            argument=name,
        )
    return arr.astype(np.int64)


def _check_design(X: Any, n: int | None = None, name: str = "X") -> tuple[np.ndarray, list[str] | None]:
    names = [str(c) for c in X.columns] if isinstance(X, pd.DataFrame) else None
    arr = check_numeric_array(X, name, ndim=2)
    if arr.shape[1] == 0:
        raise DataError(f"{name} has no columns; pass at least one covariate.", argument=name)
    if n is not None and arr.shape[0] != n:
        raise DataError(
            f"{name} has {arr.shape[0]} rows but y has {n} labels; pass one row per label.", argument=name
        )
    return arr, names


def _check_keep(p: Any, n: int, name: str) -> np.ndarray:
    if p is None:
        raise ParameterError(
            f"{name} is required: pass the keep probabilities the labels were released with "
            "(e.g. released.p0 and released.p1 from RandomizedResponseLabelDP.privatize).",
            argument=name,
        )
    if isinstance(p, bool):
        raise ParameterError(f"{name} must be a probability or an array of them.", argument=name)
    if isinstance(p, numbers.Real):
        arr = np.full(n, float(p))
    else:
        arr = check_numeric_array(p, name, ndim=1)
        if arr.shape[0] != n:
            raise DataError(f"{name} has {arr.shape[0]} entries; y has {n}.", argument=name)
    if not (np.isfinite(arr).all() and (arr >= 0).all() and (arr <= 1).all()):
        raise ParameterError(f"{name} must lie in [0, 1].", argument=name)
    return arr.astype(float)


# ----------------------------------------------------------------------------- links


def _link(eta: np.ndarray, link: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``F(eta)`` and its derivative ``f(eta)``."""
    if link == "logit":
        F = expit(eta)
        return F, F * (1.0 - F)
    if link == "probit":
        return ndtr(eta), np.exp(-0.5 * eta * eta) / math.sqrt(2 * math.pi)
    e = np.exp(np.clip(eta, -700.0, 30.0))
    return -np.expm1(-e), e * np.exp(-e)


# ----------------------------------------------------------------------------- privacy geometry


def rr_is_feasible(p0: Any, p1: Any, epsilon: float, delta: float = 0.0, *, tol: float = 1e-12) -> Any:
    """Whether randomized response with keep probabilities ``(p0, p1)`` is ``(epsilon, delta)``-LabelDP.

    The four per-output constraints are ``p1 <= e^eps (1 - p0) + delta``,
    ``p0 <= e^eps (1 - p1) + delta``, ``1 - p0 <= e^eps p1 + delta`` and
    ``1 - p1 <= e^eps p0 + delta``.

    Parameters
    ----------
    p0, p1 : float or array-like
        ``P(y~=0 | y=0)`` and ``P(y~=1 | y=1)``.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, default 0
        In ``[0, 1)``.
    tol : float, default 1e-12
        Slack allowed for floating-point rounding.

    Returns
    -------
    bool or numpy.ndarray of bool

    References
    ----------
    Ce Zhang, Yixin Han, Yafei Wang, Xiaodong Yan, Linglong Kong, Ting Li, Bei Jiang.
    "Differentially Private Analysis for Binary Response Models: Optimality,
    Estimation, and Inference". ICML 2025.

    Examples
    --------
    >>> bool(rr_is_feasible(0.731, 0.731, 1.0)), bool(rr_is_feasible(0.8, 0.8, 1.0))
    (True, False)
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    a = np.asarray(p0, dtype=float)
    b = np.asarray(p1, dtype=float)
    e = math.exp(epsilon)
    ok = (
        (b <= e * (1 - a) + delta + tol)
        & (a <= e * (1 - b) + delta + tol)
        & (1 - a <= e * b + delta + tol)
        & (1 - b <= e * a + delta + tol)
        & (a >= -tol)
        & (a <= 1 + tol)
        & (b >= -tol)
        & (b <= 1 + tol)
    )
    return ok if ok.ndim else bool(ok)


def rr_hockey_stick(p0: Any, p1: Any, epsilon: float) -> Any:
    """Exact hockey-stick divergence of randomized response between the two label values.

    Returns ``max over y, y' of sum_o max(0, P(o | y) - e^eps P(o | y'))``: the
    smallest ``delta`` for which the mechanism is ``(epsilon, delta)``-LabelDP. It is
    0 exactly when the largest log-ratio of output probabilities is at most ``epsilon``.

    Examples
    --------
    >>> float(rr_hockey_stick(1.0, 0.01, 1.0))
    0.01
    """
    e = math.exp(check_epsilon(epsilon, allow_inf=False))
    a = np.asarray(p0, dtype=float)
    b = np.asarray(p1, dtype=float)
    given1 = (1 - b, b)  # P(y~=0 | y=1), P(y~=1 | y=1)
    given0 = (a, 1 - a)
    fwd = sum(np.maximum(0.0, u - e * v) for u, v in zip(given1, given0, strict=True))
    bwd = sum(np.maximum(0.0, v - e * u) for u, v in zip(given1, given0, strict=True))
    return np.maximum(fwd, bwd)


@lru_cache(maxsize=64)
def _symmetric_keep(epsilon: float, delta: float) -> float:
    """Keep probability of the symmetric vertex, rounded so it never exceeds the budget."""
    p = (math.exp(epsilon) + delta) / (1.0 + math.exp(epsilon)) if delta > 0 else float(expit(epsilon))
    if delta == 0.0:
        # OpenDP's privacy map for randomized response rounds conservatively; step the
        # keep probability down by ulps until OpenDP certifies epsilon.
        dp = _dp()
        while p > 0.5 and dp.m.make_randomized_response_bool(p).map(1) > epsilon:
            p = float(np.nextafter(p, 0.5))
    else:
        p = float(np.nextafter(np.nextafter(p, 0.5), 0.5))
    return p


def rr_vertices(epsilon: float, delta: float = 0.0) -> np.ndarray:
    """The informative vertices ``(p0, p1)`` of the ``(epsilon, delta)``-LabelDP polygon.

    The Fisher information of randomized-response labels is convex in ``(p0, p1)``,
    so its maximum over the feasible polygon sits at a vertex. Row 0 is the symmetric
    vertex ``p0 = p1 = (e^eps + delta) / (1 + e^eps)`` (Warner's RR when
    ``delta = 0``); for ``delta > 0`` rows 1 and 2 are the one-sided vertices
    ``(1, delta)`` (zeros kept, a one is shown as one only with probability ``delta``)
    and ``(delta, 1)``. Their label-swapped mirrors carry the same information and
    are left out. Probabilities are rounded toward more privacy by a few ulps.

    Parameters
    ----------
    epsilon : float
        > 0.
    delta : float, default 0
        In ``[0, 1)``.

    Returns
    -------
    numpy.ndarray of shape (1, 2) or (3, 2)

    References
    ----------
    Zhang et al. "Differentially Private Analysis for Binary Response Models:
    Optimality, Estimation, and Inference". ICML 2025.

    Examples
    --------
    >>> rr_vertices(1.0).round(4)
    array([[0.7311, 0.7311]])
    >>> rr_vertices(1.0, 0.01).round(4)
    array([[0.7337, 0.7337],
           [1.    , 0.01  ],
           [0.01  , 1.    ]])
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    s = _symmetric_keep(epsilon, delta)
    if delta == 0.0:
        return np.array([[s, s]])
    return np.array([[s, s], [1.0, delta], [delta, 1.0]])


def _info_ratio(p0: np.ndarray, p1: np.ndarray, F: np.ndarray) -> np.ndarray:
    """``R = c^2 / (G (1 - G))``: the information factor of RR labels at success probability F."""
    c = p0 + p1 - 1.0
    G = np.clip((1.0 - p0) + c * F, _G_CLIP, 1 - _G_CLIP)
    return c * c / (G * (1.0 - G))


def rr_fisher_trace(p0: Any, p1: Any, X: Any, beta: Any, link: str = "logit") -> float:
    """Trace of the Fisher information of ``beta`` from randomized-response labels.

    ``tr I(beta) = sum_i f_i^2 ||x_i||^2 c_i^2 / (G_i (1 - G_i))`` with
    ``c = p0 + p1 - 1``, ``G = (1 - p0) + c F(x'beta)`` and ``f = F'``: the
    criterion the optimal mechanism maximises.

    Parameters
    ----------
    p0, p1 : float or array-like of shape (n,)
        Keep probabilities per record.
    X : array-like of shape (n, d)
        The design matrix (include a column of ones for an intercept).
    beta : array-like of shape (d,)
    link : {"logit", "probit", "cloglog"}

    Returns
    -------
    float

    Examples
    --------
    >>> X = [[1.0, 0.0], [1.0, 1.0]]
    >>> round(rr_fisher_trace(1.0, 1.0, X, [0.0, 0.0]), 4)  # non-private: sum f^2 |x|^2 / (F(1-F))
    0.75
    """
    link = check_choice(link, "link", LINKS)
    Xa, _ = _check_design(X)
    b = check_numeric_array(beta, "beta", ndim=1)
    if b.shape[0] != Xa.shape[1]:
        raise DataError(f"beta has {b.shape[0]} entries; X has {Xa.shape[1]} columns.", argument="beta")
    n = Xa.shape[0]
    a0 = _check_keep(p0, n, "p0")
    a1 = _check_keep(p1, n, "p1")
    F, f = _link(Xa @ b, link)
    return float(np.sum(f * f * np.sum(Xa * Xa, axis=1) * _info_ratio(a0, a1, F)))


# ----------------------------------------------------------------------------- coins


def _bernoulli(prob: np.ndarray) -> np.ndarray:
    """Independent exact Bernoulli draws with per-entry probabilities (few distinct values)."""
    out = np.zeros(prob.shape[0], dtype=bool)
    for value in np.unique(prob):
        idx = np.flatnonzero(prob == value)
        out[idx] = bernoulli(float(value), idx.size)
    return out


def _randomize(y: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    keep = _bernoulli(np.where(y == 1, p1, p0))
    return np.where(keep, y, 1 - y).astype(np.int64)


# ----------------------------------------------------------------------------- estimation core


@dataclass(frozen=True)
class _Fit:
    beta: np.ndarray  # (B, d)
    info: np.ndarray  # (B, d, d) expected information at beta
    meat: np.ndarray  # (B, d, d) sum of score outer products at beta
    converged: np.ndarray  # (B,)
    n_iter: int


def _pieces(
    X: np.ndarray, y: np.ndarray, p0: np.ndarray, p1: np.ndarray, beta: np.ndarray, link: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log-likelihood (B,), per-record score weights (B, n), information weights (B, n)."""
    eta = np.einsum("bnd,bd->bn", X, beta)
    F, f = _link(eta, link)
    c = p0 + p1 - 1.0
    G = np.clip((1.0 - p0) + c * F, _G_CLIP, 1 - _G_CLIP)
    v = G * (1.0 - G)
    ll = np.sum(y * np.log(G) + (1 - y) * np.log1p(-G), axis=1)
    return ll, (y - G) * c * f / v, (c * f) ** 2 / v


def _fisher_scoring(
    X: np.ndarray,
    y: np.ndarray,
    p0: np.ndarray,
    p1: np.ndarray,
    link: str,
    *,
    max_iter: int = 100,
    tol: float = 1e-8,
) -> _Fit:
    """Batched Fisher scoring with step halving for the corrected likelihood.

    ``X`` has shape (B, n, d); ``y``, ``p0``, ``p1`` have shape (B, n). Starts at
    ``beta = 0``; a step is halved (up to 30 times) while it lowers the
    log-likelihood; fits that have converged drop out of the batch.
    """
    B, n, d = X.shape
    y, p0, p1 = (np.broadcast_to(a, (B, n)) for a in (y, p0, p1))
    beta = np.zeros((B, d))
    done = np.zeros(B, dtype=bool)
    ll, s_w, i_w = _pieces(X, y, p0, p1, beta, link)
    n_iter = 0
    eye = np.eye(d)
    for n_iter in range(1, max_iter + 1):  # noqa: B007
        act: Any = np.flatnonzero(~done)
        if act.size == B:
            act = slice(None)  # views, no copies, while every fit is still running
        Xa, ya, a0, a1, ba = X[act], y[act], p0[act], p1[act], beta[act]
        score = np.einsum("bnd,bn->bd", Xa, s_w[act])
        info = np.matmul(np.swapaxes(Xa * i_w[act][..., None], 1, 2), Xa)
        scale = np.maximum(np.trace(info, axis1=1, axis2=2) / d, 1e-300)[:, None, None]
        step = np.linalg.solve(info + 1e-12 * scale * eye, score[..., None])[..., 0]
        ll_new, s_new, i_new = _pieces(Xa, ya, a0, a1, ba + step, link)
        for _ in range(30):
            worse = ll_new < ll[act] - 1e-10 * (1 + np.abs(ll[act]))
            if not worse.any():
                break
            step[worse] *= 0.5
            ll_new, s_new, i_new = _pieces(Xa, ya, a0, a1, ba + step, link)
        beta[act] = ba + step
        ll[act], s_w[act], i_w[act] = ll_new, s_new, i_new
        done[act] = np.max(np.abs(step), axis=1) < tol * (1 + np.max(np.abs(beta[act]), axis=1))
        if done.all():
            break
    info = np.matmul(np.swapaxes(X * i_w[..., None], 1, 2), X)
    Xs = X * s_w[..., None]
    meat = np.matmul(np.swapaxes(Xs, 1, 2), Xs)
    return _Fit(beta=beta, info=info, meat=meat, converged=done, n_iter=n_iter)


# ----------------------------------------------------------------------------- estimator


class LabelDPBinaryRegression(BaseEstimator):
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

    def __init__(
        self,
        link: str = "logit",
        *,
        fit_intercept: bool = True,
        cov_type: str = "fisher",
        max_iter: int = 100,
        tol: float = 1e-8,
    ) -> None:
        self.link = link
        self.fit_intercept = fit_intercept
        self.cov_type = cov_type
        self.max_iter = max_iter
        self.tol = tol

    def _design(self, X: Any, n: int | None = None) -> tuple[np.ndarray, list[str] | None]:
        arr, names = _check_design(X, n)
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
            Released labels ``y~`` in {0, 1}, or the result of
            :meth:`RandomizedResponseLabelDP.privatize` (then ``p0``/``p1`` are taken from it).
        p0, p1 : float or array-like of shape (n,)
            Keep probabilities the labels were released with; ``p0 + p1 > 1``.

        Returns
        -------
        self
        """
        link = check_choice(self.link, "link", LINKS)
        cov_type = check_choice(self.cov_type, "cov_type", COV_TYPES)
        if not isinstance(self.fit_intercept, bool | np.bool_):
            raise ParameterError("fit_intercept must be True or False.", argument="fit_intercept")
        max_iter = check_positive_int(self.max_iter, "max_iter")
        tol = check_fraction(self.tol, "tol", low=0.0, high=1.0)
        if isinstance(y, PrivatizedLabels):
            if p0 is not None or p1 is not None:
                raise ParameterError(
                    "pass either PrivatizedLabels or y with p0 and p1, not both.", argument="p0"
                )
            y, p0, p1 = y.y_tilde, y.p0, y.p1
        ya = _check_labels(y, "y")
        n = ya.shape[0]
        Xd, names = self._design(X, n)
        a0 = _check_keep(p0, n, "p0")
        a1 = _check_keep(p1, n, "p1")
        if np.any(a0 + a1 <= 1.0):
            raise ParameterError(
                "p0 + p1 must exceed 1 for every record (p0 + p1 = 1 makes the released label "
                "independent of the true one; p0 + p1 < 1 means the labels were swapped: "
                "pass 1 - p0 and 1 - p1 and flip y).",
                argument="p0",
            )
        if n <= Xd.shape[1]:
            raise DataError(f"need more records than parameters ({Xd.shape[1]}), got {n}.", argument="X")
        if np.linalg.matrix_rank(Xd) < Xd.shape[1]:
            raise DataError(
                "X (with the intercept column) is rank deficient; drop constant or collinear columns.",
                argument="X",
            )
        res = _fisher_scoring(Xd[None], ya[None], a0[None], a1[None], link, max_iter=max_iter, tol=tol)
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
        """Wald intervals ``params_ +- z_{1-alpha/2} bse_``, shape (n_params, 2), intercept first."""
        self._check_fitted()
        alpha = check_fraction(alpha, "alpha")
        z = float(norm.ppf(1 - alpha / 2))
        return np.column_stack([self.params_ - z * self.bse_, self.params_ + z * self.bse_])

    def summary(self, alpha: float = 0.05) -> pd.DataFrame:
        """Estimates, standard errors, z, two-sided p-values and intervals, one row per parameter."""
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
        """``P(y=1 | x)`` of the *true* label, as columns ``[P(y=0), P(y=1)]``."""
        self._check_fitted()
        Xd, _ = self._design(X)
        if Xd.shape[1] != self.params_.shape[0]:
            raise DataError(
                f"X has {Xd.shape[1] - int(self.fit_intercept)} columns; the model was fitted on "
                f"{self.n_features_in_}.",
                argument="X",
            )
        F, _ = _link(Xd @ self.params_, check_choice(self.link, "link", LINKS))
        return np.column_stack([1 - F, F])

    def predict(self, X: Any) -> np.ndarray:
        """Predicted true label (1 where ``P(y=1 | x) > 1/2``)."""
        return (self.predict_proba(X)[:, 1] > 0.5).astype(np.int64)


# ----------------------------------------------------------------------------- mechanism


def _release_labels(
    y: np.ndarray,
    Xd: np.ndarray | None,
    verts: np.ndarray,
    mode: str,
    link: str,
    rho: float,
    rng: np.random.Generator,
    randomize: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, list[str]]:
    """Choose each record's vertex and randomize its label once with ``randomize``.

    ``mode="symmetric"`` (or ``Xd is None``): the symmetric vertex ``verts[0]`` for all.
    Otherwise a pilot share ``rho`` (chosen by ``rng``, public) is released by the
    symmetric vertex, the corrected MLE on it gives ``beta~``, and the remaining records
    get the vertex maximising their information factor (``"pointwise"``) or one vertex
    maximising the summed Fisher trace (``"global"``).
    """
    n = y.shape[0]
    p0 = np.full(n, verts[0, 0])
    p1 = np.full(n, verts[0, 1])
    pilot = np.zeros(n, dtype=bool)
    pilot_coef: np.ndarray | None = None
    notes = ["each label randomized once; vertex choice uses only public X and released labels"]
    if mode == "symmetric" or Xd is None:
        return randomize(y, p0, p1), p0, p1, pilot, None, notes
    m = round(rho * n)
    pilot[rng.permutation(n)[:m]] = True
    y_tilde = np.zeros(n, dtype=np.int64)
    y_tilde[pilot] = randomize(y[pilot], p0[pilot], p1[pilot])
    rest = ~pilot
    if m >= 10 * Xd.shape[1] and np.linalg.matrix_rank(Xd[pilot]) == Xd.shape[1]:
        fit = _fisher_scoring(Xd[pilot][None], y_tilde[pilot][None], p0[pilot][None], p1[pilot][None], link)
        if bool(fit.converged[0]) and np.isfinite(fit.beta).all():
            pilot_coef = fit.beta[0]
    if pilot_coef is None:
        notes.append("pilot too small or its fit failed: symmetric vertex for all records")
    else:
        F, f = _link(Xd[rest] @ pilot_coef, link)
        R = np.stack([_info_ratio(v[0], v[1], F) for v in verts])  # (k, n_rest)
        if mode == "pointwise":
            choice = np.argmax(R, axis=0)
        else:
            weight = f * f * np.sum(Xd[rest] ** 2, axis=1)
            choice = np.full(int(rest.sum()), int(np.argmax(R @ weight)))
        p0[rest] = verts[choice, 0]
        p1[rest] = verts[choice, 1]
    y_tilde[rest] = randomize(y[rest], p0[rest], p1[rest])
    return y_tilde, p0, p1, pilot, pilot_coef, notes


@dataclass(frozen=True)
class PrivatizedLabels:
    """Labels released under LabelDP, with the keep probabilities each was released with.

    Attributes
    ----------
    y_tilde : numpy.ndarray of int
        Released labels.
    p0, p1 : numpy.ndarray of float
        Per-record ``P(y~=0 | y=0)`` and ``P(y~=1 | y=1)`` (public).
    pilot : numpy.ndarray of bool
        Records in the pilot share (released by symmetric RR); all False when no pilot ran.
    pilot_coef : numpy.ndarray or None
        The pilot estimate of ``beta`` (intercept first when fitted) that chose the vertices.
    release : Release
        The privacy record: epsilon, delta, mechanism, parameters and notes.
    """

    y_tilde: np.ndarray
    p0: np.ndarray
    p1: np.ndarray
    pilot: np.ndarray
    pilot_coef: np.ndarray | None
    release: Release = field(repr=False)

    @property
    def epsilon(self) -> float:
        """Epsilon spent (per label)."""
        return self.release.epsilon

    @property
    def delta(self) -> float:
        """Delta spent (per label)."""
        return self.release.delta


class RandomizedResponseLabelDP(BaseEstimator):
    """Release binary labels by Fisher-information-optimal randomized response under LabelDP.

    Each label is randomized once: kept with probability ``p0`` (if 0) or ``p1`` (if 1),
    flipped otherwise. ``(p0, p1)`` is a vertex of the ``(epsilon, delta)``-LabelDP
    polygon (see :func:`rr_vertices`) chosen to maximise the trace of the Fisher
    information of the binary response model.

    - ``delta = 0``: Warner's symmetric RR, keep probability ``e^eps / (1 + e^eps)``,
      is optimal for every record and every ``beta``; all modes give it.
    - ``delta > 0`` and ``mode="pointwise"`` (default): a random pilot share
      (``pilot_fraction``) is released by the symmetric vertex; the corrected MLE on it
      gives ``beta~``; every other record gets the vertex maximising its information
      at ``F(x_i'beta~)``. ``mode="global"`` uses one vertex for all non-pilot
      records (the one maximising the summed trace). ``mode="symmetric"`` uses the
      symmetric vertex for all.

    Vertex choices use only public ``X`` and already released labels, and each label
    is randomized once, so the whole release is ``(epsilon, delta)``-LabelDP.

    Parameters
    ----------
    epsilon : float
        Per-label privacy parameter, > 0.
    delta : float, default 0
        In ``[0, 1)``. The one-sided vertices reveal a true label with probability
        ``delta``; keep ``delta`` well below ``1 / n`` or use ``mode="symmetric"``.
    mode : {"pointwise", "global", "symmetric"}, default "pointwise"
    link : {"logit", "probit", "cloglog"}, default "logit"
        The model whose information is maximised (used only when ``delta > 0``).
    fit_intercept : bool, default True
        Whether that model has an intercept.
    pilot_fraction : float, default 0.2
        Share of records in the pilot (used only when ``delta > 0`` and mode is not
        ``"symmetric"``).
    random_state : None, int or numpy.random.Generator
        Chooses the pilot records (public randomness). The RR coins come from
        OpenDP and cannot be seeded.

    References
    ----------
    Ce Zhang, Yixin Han, Yafei Wang, Xiaodong Yan, Linglong Kong, Ting Li, Bei Jiang.
    "Differentially Private Analysis for Binary Response Models: Optimality,
    Estimation, and Inference". ICML 2025 (PMLR 267:74923-74937).
    Warner. "Randomized Response: A Survey Technique for Eliminating Evasive
    Answer Bias". JASA 1965.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 1, 1, 0, 1] * 200)
    >>> released = RandomizedResponseLabelDP(epsilon=1.0).privatize(None, y)
    >>> released.y_tilde.shape, released.epsilon, float(released.p0[0].round(4))
    ((1000,), 1.0, 0.7311)
    """

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        mode: str = "pointwise",
        link: str = "logit",
        fit_intercept: bool = True,
        pilot_fraction: float = 0.2,
        random_state: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.mode = mode
        self.link = link
        self.fit_intercept = fit_intercept
        self.pilot_fraction = pilot_fraction
        self.random_state = random_state

    def vertices(self) -> np.ndarray:
        """The candidate ``(p0, p1)`` pairs for this budget (see :func:`rr_vertices`)."""
        return rr_vertices(self.epsilon, self.delta)

    def privatize(self, X: Any, y: Any) -> PrivatizedLabels:
        """Release ``y`` under ``(epsilon, delta)``-LabelDP.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, d), or None
            Public covariates. Needed only when ``delta > 0`` and ``mode`` is not
            ``"symmetric"``; otherwise ``None`` is allowed.
        y : array-like of shape (n,)
            True labels in {0, 1}.

        Returns
        -------
        PrivatizedLabels
        """
        epsilon = check_epsilon(self.epsilon)
        delta = check_delta(self.delta)
        mode = check_choice(self.mode, "mode", MODES)
        link = check_choice(self.link, "link", LINKS)
        rho = check_fraction(self.pilot_fraction, "pilot_fraction")
        if not isinstance(self.fit_intercept, bool | np.bool_):
            raise ParameterError("fit_intercept must be True or False.", argument="fit_intercept")
        rng = make_generator(self.random_state)
        ya = _check_labels(y, "y")
        n = ya.shape[0]
        adaptive = delta > 0 and mode != "symmetric"
        if X is None and adaptive:
            raise ParameterError(
                f"X is needed to choose the mechanism per record (delta > 0, mode={mode!r}); "
                "pass the public covariates or use mode='symmetric'.",
                argument="X",
            )
        Xa = None if X is None else _check_design(X, n)[0]
        verts = rr_vertices(epsilon, delta)
        Xd = None
        if adaptive:
            assert Xa is not None
            Xd = np.column_stack([np.ones(n), Xa]) if self.fit_intercept else Xa
        y_tilde, p0, p1, pilot, pilot_coef, notes = _release_labels(
            ya, Xd, verts, mode if adaptive else "symmetric", link, rho, rng, _randomize
        )
        counts = [int(np.sum((p0 == a) & (p1 == b))) for a, b in verts]
        used = {f"({a:.6g}, {b:.6g})": k for (a, b), k in zip(verts, counts, strict=True)}
        if sum(counts[1:]):
            notes.append(f"one-sided vertices reveal a true label with probability delta={delta:g}")
        release = Release(
            value=y_tilde,
            epsilon=epsilon,
            delta=delta,
            mechanism=_MECHANISM,
            parameters={
                "neighbouring": "change one label, features fixed (LabelDP)",
                "mode": mode if adaptive else "symmetric",
                "link": link,
                "pilot_fraction": rho if adaptive else 0.0,
                "vertices_used": used,
                "coins": "OpenDP exact Bernoulli (make_randomized_response_bitvec)",
                "notes": tuple(notes),
            },
            description=f"{n} binary labels released by randomized response",
        )
        return PrivatizedLabels(
            y_tilde=y_tilde, p0=p0, p1=p1, pilot=pilot, pilot_coef=pilot_coef, release=release
        )
