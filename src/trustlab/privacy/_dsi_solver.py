"""The DSI covariance: least-trace Gaussian noise by mirror ascent on the dual (private module).

References
----------
Hanshen Xiao, Zhen Yang, G. Edward Suh. "Trustworthy Machine Learning through
Data-Specific Indistinguishability". ICML 2025 (PMLR 267).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from scipy.linalg import eigh
from threadpoolctl import threadpool_limits

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._dsi_noise import DSINoise

__all__ = [
    "SOLVER_CONSTRAINTS",
    "check_budgets",
    "dsi_gaussian_covariance",
]

# Share of each reference's budget given to the isotropic floor that covers the
# directions dropped by the rank truncation (see ``dsi_gaussian_covariance``).
_FLOOR_SHARE = 0.01
_ETA0 = 10.0
_DECAY = 0.1
_ETA_MIN = 1e-100
_MU0 = 10.0
_VIOLATION_TOL = 1e-3


SOLVER_CONSTRAINTS: dict[str, list[Any]] = {
    "rank_tol": [Interval(numbers.Real, 0, 1, closed="neither")],
    "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
    "tol": [Interval(numbers.Real, 0, None, closed="neither")],
}
"""The solver's scalar constraints (the paper uses ``rank_tol = 1e-3``)."""


def check_budgets(budgets: Any, m: int) -> np.ndarray:
    if budgets is None:
        return np.ones(m)
    if isinstance(budgets, numbers.Real) and not isinstance(budgets, bool):
        budgets = np.full(m, float(budgets))
    try:
        b = np.asarray(budgets, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(
            f"budgets must be a positive number or one positive number per reference, got {budgets!r}.",
            argument="budgets",
        ) from None
    if b.shape != (m,):
        raise ParameterError(
            f"budgets must have one entry per difference ({m}), got shape {b.shape}.",
            argument="budgets",
        )
    if not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ParameterError(
            "budgets must be finite and > 0 (the bound on each Delta_i' Sigma^-1 Delta_i); "
            "pass None for all ones.",
            argument="budgets",
        )
    return b


def _dual(c: np.ndarray, b: np.ndarray, mu: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Dual objective ``g(mu)`` and the eigenpairs of ``M(mu)`` (``-inf`` if singular)."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = (c * mu) @ c.T
    if not np.all(np.isfinite(m)):
        return -math.inf, np.empty(0), np.empty((0, 0))
    try:
        # SciPy's LAPACK call: NumPy's eigh on small matrices was ~100x slower on a
        # shared multi-threaded OpenBLAS here.
        w, v = eigh(m, check_finite=False)
    except np.linalg.LinAlgError:
        return -math.inf, np.empty(0), np.empty((0, 0))
    w = np.clip(w, 0.0, None)
    if w.min() <= 0:
        return -math.inf, w, v
    return float(2.0 * np.sqrt(w).sum() - mu @ b), w, v


def _constraints(c: np.ndarray, w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``Delta_i' Sigma^{-1} Delta_i`` with ``Sigma = V diag(sqrt(w)) V'``."""
    proj = (v.T @ c) * w[:, None] ** -0.25
    return np.sum(proj**2, axis=0)


def _mirror_ascent(
    c: np.ndarray, b: np.ndarray, max_iter: int, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int, bool]:
    """Exponentiated-gradient ascent on the dual (the reference code's ``mirrorpgd``)."""
    mu = np.full(c.shape[1], _MU0)
    f, w, v = _dual(c, b, mu)
    if not math.isfinite(f):  # cannot happen for a full-rank c; kept for safety
        raise ParameterError("the reduced differences are singular; raise rank_tol.", argument="rank_tol")
    eta = _ETA0
    it = 0
    stalled = False
    converged = False
    while True:
        grad = _constraints(c, w, v) - b
        kkt = float(np.linalg.norm(np.minimum(np.abs(grad), mu)))
        if kkt < tol and abs(float(grad.max())) < _VIOLATION_TOL:
            converged = True
            break
        if it >= max_iter or stalled:
            break
        if it % 20 == 1:
            eta = _ETA0
        while True:
            with np.errstate(over="ignore"):
                mu_new = mu * np.exp(eta * grad)
            f_new, w_new, v_new = _dual(c, b, mu_new)
            if f_new > f:
                mu, f, w, v = mu_new, f_new, w_new, v_new
                break
            eta *= _DECAY
            if eta < _ETA_MIN:
                stalled = True
                break
        it += 1
    return mu, w, v, f, it, converged


@validate_params(SOLVER_CONSTRAINTS)
def dsi_gaussian_covariance(
    differences: Any,
    budgets: Any = None,
    *,
    rank_tol: float = 1e-3,
    max_iter: int = 1000,
    tol: float = 1e-5,
) -> DSINoise:
    """Find the Gaussian noise of least trace that hides each listed outcome difference.

    Solves ``min tr(Sigma)`` over ``Sigma > 0`` subject to
    ``Delta_i' Sigma^{-1} Delta_i <= b_i`` for every difference ``Delta_i``
    (Algorithm 1 of the paper): subspace reduction to the span of the differences,
    then exponentiated-gradient ascent on the dual variables ``mu`` (start
    ``mu = 10``, step 10 backtracked by 0.1 and reset every 20 iterations, stop
    when ``||min(|grad|, mu)|| < tol`` and the largest constraint is within
    ``1e-3`` of its bound, or after ``max_iter`` iterations).

    Parameters
    ----------
    differences : array-like of shape (m, d)
        One outcome difference ``F(U) - F(U_i)`` per row.
    budgets : float or array-like of shape (m,), optional
        The bounds ``b_i`` (default 1 for every reference).
    rank_tol : float, default 1e-3
        Singular directions of the differences below ``rank_tol`` times the
        largest are left out of the optimisation (the paper's value); they get a
        small isotropic floor instead (see Notes).
    max_iter : int, default 1000
        Iteration cap of the ascent.
    tol : float, default 1e-5
        KKT tolerance of the stopping rule.

    Returns
    -------
    DSINoise

    Raises
    ------
    DataError
        If ``differences`` is not a finite 2-D array with at least one row.
    ParameterError
        If ``budgets``, ``rank_tol``, ``max_iter`` or ``tol`` is invalid.

    Notes
    -----
    Two changes from the reference code make the guarantee hold exactly for the
    differences as given, not only approximately:

    * The reference code drops the directions with singular value below
      ``rank_tol`` times the largest and puts no noise there, so a difference
      with a component in a dropped direction would be perfectly
      distinguishable. Here those directions get isotropic noise whose variance
      uses 1% of each budget (``floor_std``), and the optimisation runs with the
      remaining 99%.
    * The ascent stops with the largest constraint within ``1e-3`` of its bound,
      possibly above it; the covariance is then scaled by
      ``max(1, max_i Delta_i' Sigma^{-1} Delta_i / b_i)`` so that every
      constraint holds.

    The differences are scaled to ``max_i ||Delta_i||^2 / b_i = 1`` before the
    ascent (the optimum scales with them), so the fixed start ``mu = 10`` and
    step 10 behave the same at any scale. The span is found by a QR
    decomposition of the differences and an SVD of its ``R`` factor (float64),
    rather than an eigendecomposition of the Gram matrix in float32.

    References
    ----------
    Hanshen Xiao, Zhen Yang, G. Edward Suh. "Trustworthy Machine Learning through
    Data-Specific Indistinguishability". ICML 2025 (PMLR 267).

    Examples
    --------
    Two unit differences at 45 degrees need total noise ``1 + sin(45)``, not the
    ``2`` of isotropic noise in their span:

    >>> import numpy as np
    >>> a = np.deg2rad(45)
    >>> noise = dsi_gaussian_covariance([[1.0, 0.0], [np.cos(a), np.sin(a)]])
    >>> round(noise.trace, 4), round(noise.isotropic_trace, 4)
    (1.7071, 2.0)
    >>> bool(noise.max_constraint <= 1.0)
    True
    """
    diffs = check_numeric_array(differences, "differences", ndim=2)
    if diffs.shape[1] == 0:
        raise DataError("differences must have at least one column (d >= 1).", argument="differences")
    m, d = diffs.shape
    b = check_budgets(budgets, m)
    rank_tol, max_iter, tol = float(rank_tol), int(max_iter), float(tol)

    norms2 = np.sum(diffs**2, axis=1)
    scale2 = float(np.max(norms2 / b))
    if scale2 == 0.0:  # every reference gives the same output: no noise is needed
        return DSINoise(
            basis=np.zeros((d, 0)),
            chol=np.zeros((0, 0)),
            floor_basis=np.zeros((d, 0)),
            floor_std=0.0,
            mu=np.zeros(m),
            budgets=b,
            trace=0.0,
            dual_value=0.0,
            isotropic_trace=0.0,
            max_constraint=0.0,
            n_iter=0,
            converged=True,
        )
    scale = math.sqrt(scale2)
    nz = norms2 > 0
    a = (diffs[nz] / scale).T  # d x m', columns are the scaled nonzero differences
    qd, r_fac = np.linalg.qr(a)
    ur, s, vt = np.linalg.svd(r_fac, full_matrices=False)
    keep = s > rank_tol * s[0]
    drop = ~keep & (s > 0)
    basis = qd @ ur[:, keep]
    c = s[keep, None] * vt[keep]  # r x m', the differences in basis coordinates
    b_nz = b[nz]
    resid2 = np.sum((s[drop, None] * vt[drop]) ** 2, axis=0)  # out-of-kept-span energy
    floor_basis = qd @ ur[:, drop]
    if drop.any() and resid2.max() > 0:
        tau2 = float(np.max(resid2 / (_FLOOR_SHARE * b_nz)))
        b_main = b_nz - resid2 / tau2
    else:
        tau2 = 0.0
        floor_basis = np.zeros((d, 0))
        b_main = b_nz

    # The ascent works on r x r matrices (r <= m): single-threaded BLAS, as scikit-learn's
    # KMeans does for its small inner loops; threaded OpenBLAS was 100x slower on a busy machine.
    with threadpool_limits(limits=1, user_api="blas"):
        mu, w, v, f, n_iter, converged = _mirror_ascent(c, b_main, max_iter, tol)
    sqrt_w = np.sqrt(w)
    cons = _constraints(c, w, v)
    repair = max(1.0, float(np.max(cons / b_main)))
    sigma_r = (v * (repair * sqrt_w)) @ v.T
    sigma_r = 0.5 * (sigma_r + sigma_r.T)
    chol = np.linalg.cholesky(sigma_r)
    rho2 = cons / repair + (resid2 / tau2 if tau2 > 0 else 0.0)
    mu_full = np.zeros(m)
    mu_full[nz] = mu * scale2
    k_floor = floor_basis.shape[1]
    return DSINoise(
        basis=basis,
        chol=chol * scale,
        floor_basis=floor_basis,
        floor_std=math.sqrt(tau2) * scale,
        mu=mu_full,
        budgets=b,
        trace=scale2 * (repair * float(sqrt_w.sum()) + k_floor * tau2),
        dual_value=scale2 * f,
        isotropic_trace=scale2 * (basis.shape[1] + k_floor),
        max_constraint=float(np.max(rho2 / b_nz)),
        n_iter=n_iter,
        converged=converged,
    )
