"""The binary response model on randomized-response labels: links, Fisher information (private module).

References
----------
Zhang et al. "Differentially Private Analysis for Binary Response Models:
Optimality, Estimation, and Inference". ICML 2025.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import expit, ndtr

from trustlab._param_validation import Options, validate_params
from trustlab._validation import (
    check_numeric_array,
)
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._ltm_inputs import reject_complex

__all__ = [
    "G_CLIP",
    "LINKS",
    "check_design",
    "check_keep",
    "check_labels",
    "fisher_scoring",
    "info_ratio",
    "link_function",
    "rr_fisher_trace",
]

LINKS = ("logit", "probit", "cloglog")
G_CLIP = 1e-12


def check_labels(y: Any, name: str = "y", pos_label: Any = 1) -> np.ndarray:
    """Binary labels: 1 where ``y == pos_label``, 0 for every other value (NaN included).

    Only public facts raise (``y`` is not a 1-d array, or is empty): what the labels
    are never does, because an exception that depends on a private label is itself a
    release. A value that is not the declared positive label counts as a negative
    (a deterministic public rule), so ``[0, 1, 2, nan]`` is read as ``[0, 1, 0, 0]``
    and booleans as ``True == 1``.
    """
    if isinstance(y, str | bytes) or y is None:
        raise DataError(f"{name} must be a 1-d array of labels, got {type(y).__name__}.", argument=name)
    if sp.issparse(y):
        raise DataError(f"{name} must be a dense 1-d array of labels.", argument=name)
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-dimensional, got shape {arr.shape}.", argument=name)
    if arr.shape[0] == 0:
        raise DataError(f"{name} is empty; pass at least one label.", argument=name)
    if np.ndim(pos_label) != 0:
        raise ParameterError(f"pos_label must be one label value, got {pos_label!r}.", argument="pos_label")
    positive = np.asarray(arr == pos_label)
    if positive.shape != arr.shape:  # e.g. strings compared with a number: compare as objects
        positive = np.fromiter((v == pos_label for v in arr.astype(object)), dtype=bool, count=arr.size)
    if positive.dtype != bool:
        raise ParameterError(f"pos_label must be one label value, got {pos_label!r}.", argument="pos_label")
        raise ParameterError(f"pos_label must be one label value, got {pos_label!r}.", argument="pos_label")
    return positive.astype(np.int64)


def check_design(X: Any, n: int | None = None, name: str = "X") -> tuple[np.ndarray, list[str] | None]:
    names = [str(c) for c in X.columns] if isinstance(X, pd.DataFrame) else None
    if sp.issparse(X):
        raise DataError(
            f"{name} is a sparse matrix; sparse input is not supported, pass {name}.toarray().",
            argument=name,
        )
    reject_complex(X, name)
    if isinstance(X, np.ndarray | list | tuple) and np.ndim(X) == 1:
        raise DataError(
            f"{name} must be 2-dimensional, got shape {np.shape(X)}. Reshape your data with "
            f"{name}.reshape(-1, 1) for one covariate or {name}.reshape(1, -1) for one record.",
            argument=name,
        )
    arr = check_numeric_array(X, name, ndim=2)
    if arr.shape[1] == 0:
        raise DataError(
            f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required; pass at "
            "least one covariate.",
            argument=name,
        )
    if n is not None and arr.shape[0] != n:
        raise DataError(
            f"{name} has {arr.shape[0]} rows but y has {n} labels; pass one row per label.", argument=name
        )
    return arr, names


def check_keep(p: Any, n: int, name: str) -> np.ndarray:
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


def link_function(eta: np.ndarray, link: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``F(eta)`` and its derivative ``f(eta)``."""
    if link == "logit":
        F = expit(eta)
        return F, F * (1.0 - F)
    if link == "probit":
        return ndtr(eta), np.exp(-0.5 * eta * eta) / math.sqrt(2 * math.pi)
    e = np.exp(np.clip(eta, -700.0, 30.0))
    return -np.expm1(-e), e * np.exp(-e)


def info_ratio(p0: np.ndarray, p1: np.ndarray, F: np.ndarray) -> np.ndarray:
    """``R = c^2 / (G (1 - G))``: the information factor of RR labels at success probability F."""
    c = p0 + p1 - 1.0
    G = np.clip((1.0 - p0) + c * F, G_CLIP, 1 - G_CLIP)
    return c * c / (G * (1.0 - G))


@validate_params({"link": [Options(LINKS)]})
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
    Xa, _ = check_design(X)
    b = check_numeric_array(beta, "beta", ndim=1)
    if b.shape[0] != Xa.shape[1]:
        raise DataError(f"beta has {b.shape[0]} entries; X has {Xa.shape[1]} columns.", argument="beta")
    n = Xa.shape[0]
    a0 = check_keep(p0, n, "p0")
    a1 = check_keep(p1, n, "p1")
    F, f = link_function(Xa @ b, link)
    return float(np.sum(f * f * np.sum(Xa * Xa, axis=1) * info_ratio(a0, a1, F)))


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
    F, f = link_function(eta, link)
    c = p0 + p1 - 1.0
    G = np.clip((1.0 - p0) + c * F, G_CLIP, 1 - G_CLIP)
    v = G * (1.0 - G)
    ll = np.sum(y * np.log(G) + (1 - y) * np.log1p(-G), axis=1)
    return ll, (y - G) * c * f / v, (c * f) ** 2 / v


def fisher_scoring(
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
