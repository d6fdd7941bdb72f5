"""Data-specific indistinguishability (DSI): the optimal anisotropic Gaussian noise.

A processing function ``F`` (a statistic, one training step, a whole training
run) is applied to a target set ``U``; reference sets ``U_1 .. U_m`` are the
"safe" versions of ``U`` (without a sensitive record, a suspected poisoned
subset, an artist's works). DSI releases ``F(U) + n`` with Gaussian ``n`` whose
covariance is fitted to the actual outcome differences
``Delta_i = F(U) - F(U_i)``, so that the release is as indistinguishable from
``F(U_i) + n`` as a scalar Gaussian mechanism of sensitivity ``sqrt(b_i)`` and
noise multiplier ``sigma_m`` is, at the least expected noise energy
``E||n||^2 = sigma_m^2 tr(Sigma)``.

The covariance solves ``min tr(Sigma) s.t. Delta_i' Sigma^{-1} Delta_i <= b_i``
(Xiao, Yang, Suh, ICML 2025, Algorithm 1) by exponentiated-gradient ascent on the
dual ``g(mu) = 2 tr(M(mu)^{1/2}) - sum_i mu_i b_i`` with
``M(mu) = sum_i mu_i Delta_i Delta_i'``; the primal solution is ``M(mu)^{1/2}``.

DSI is **not** differential privacy: it protects ``U`` only against the listed
references, and the noise shape is computed from the data themselves, so it can
reveal information about ``U`` beyond those references.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import eigh, solve_triangular
from threadpoolctl import threadpool_limits

from trustlab._validation import (
    check_choice,
    check_epsilon,
    check_numeric_array,
    check_positive,
    check_positive_int,
)
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.calibration import (
    _check_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
)
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import gaussian

__all__ = [
    "DSIAccountant",
    "DSINoise",
    "dsi_gaussian_covariance",
    "dsi_release",
    "leave_one_group_out_differences",
]

# Share of each reference's budget given to the isotropic floor that covers the
# directions dropped by the rank truncation (see ``dsi_gaussian_covariance``).
_FLOOR_SHARE = 0.01
_ETA0 = 10.0
_DECAY = 0.1
_ETA_MIN = 1e-100
_MU0 = 10.0
_VIOLATION_TOL = 1e-3
_ACCOUNTING = ("analytic", "rdp")

MECHANISM = "DSI Gaussian (optimal anisotropic)"
GUARANTEE = "data-specific indistinguishability against the listed references only; not differential privacy"


@dataclass(frozen=True, eq=False)
class DSINoise:
    """The optimal DSI Gaussian noise for a set of outcome differences.

    The covariance is ``Sigma = B L L' B' + floor_std^2 P P'`` with ``B = basis``,
    ``L = chol`` and ``P = floor_basis``; it lives in the span of the differences.

    Attributes
    ----------
    basis : ndarray of shape (d, r)
        Orthonormal basis of the kept principal directions of the differences.
    chol : ndarray of shape (r, r)
        Lower Cholesky factor of the covariance in ``basis`` coordinates.
    floor_basis : ndarray of shape (d, k)
        Orthonormal basis of the directions dropped by the rank truncation
        (``k = 0`` when none carries any difference).
    floor_std : float
        Standard deviation of the isotropic noise on ``floor_basis`` (0 if ``k = 0``).
    mu : ndarray of shape (m,)
        Dual variables (in the data's units); positive only on active constraints.
    budgets : ndarray of shape (m,)
        The bounds ``b_i`` on ``Delta_i' Sigma^{-1} Delta_i``.
    trace : float
        ``tr(Sigma)``, the expected squared norm of one draw at noise multiplier 1.
    dual_value : float
        The dual objective at ``mu``: a lower bound on the smallest trace of the
        kept-directions problem (weak duality), so ``trace / dual_value - 1``
        bounds the optimality gap when nothing is dropped.
    isotropic_trace : float
        Trace of the isotropic-in-span baseline with the same guarantee:
        ``rank * max_i ||Delta_i||^2 / b_i``.
    max_constraint : float
        ``max_i Delta_i' Sigma^+ Delta_i / b_i`` computed on the full differences;
        at most 1 (the covariance is rescaled until it is).
    n_iter : int
        Exponentiated-gradient iterations run.
    converged : bool
        Whether the paper's stopping rule was met (KKT residual ``< tol`` and
        largest constraint within ``1e-3`` of its bound) before ``max_iter``.
    """

    basis: np.ndarray
    chol: np.ndarray
    floor_basis: np.ndarray
    floor_std: float
    mu: np.ndarray
    budgets: np.ndarray
    trace: float
    dual_value: float
    isotropic_trace: float
    max_constraint: float
    n_iter: int
    converged: bool

    @property
    def dim(self) -> int:
        """Dimension ``d`` of the released vector."""
        return int(self.basis.shape[0])

    @property
    def rank(self) -> int:
        """Number of directions the noise occupies (kept plus floor)."""
        return int(self.basis.shape[1] + self.floor_basis.shape[1])

    def covariance(self) -> np.ndarray:
        """Return the ``d x d`` covariance matrix (dense; for small ``d``)."""
        half = self.basis @ self.chol
        cov = half @ half.T
        if self.floor_basis.shape[1]:
            cov = cov + self.floor_std**2 * (self.floor_basis @ self.floor_basis.T)
        return cov

    def mahalanobis(self, differences: Any) -> np.ndarray:
        """Return ``rho_i^2 = Delta_i' Sigma^+ Delta_i`` for each row of ``differences``.

        A difference with a component outside the noise's span gets ``inf``: the
        two outputs would then be distinguishable with certainty.
        """
        diffs = check_numeric_array(differences, "differences", ndim=2)
        if diffs.shape[1] != self.dim:
            raise DataError(
                f"differences must have {self.dim} columns (the noise's dimension), got shape {diffs.shape}.",
                argument="differences",
            )
        coords = diffs @ self.basis
        rho2 = np.zeros(diffs.shape[0])
        if coords.shape[1]:
            white = solve_triangular(self.chol, coords.T, lower=True)
            rho2 += np.sum(white**2, axis=0)
        inside = coords @ self.basis.T
        if self.floor_basis.shape[1]:
            fcoords = diffs @ self.floor_basis
            rho2 += np.sum(fcoords**2, axis=1) / self.floor_std**2
            inside = inside + fcoords @ self.floor_basis.T
        outside = np.linalg.norm(diffs - inside, axis=1)
        norms = np.linalg.norm(diffs, axis=1)
        rho2[outside > 1e-9 * np.maximum(norms, np.finfo(float).tiny)] = np.inf
        return rho2

    def sample(self, size: int | None = None, *, noise_multiplier: float = 1.0) -> np.ndarray:
        """Draw noise ``noise_multiplier * (B L z + floor_std * P w)``.

        ``z`` and ``w`` are standard normal vectors from OpenDP's floating-point-safe
        sampler (:func:`trustlab.privacy.samplers.gaussian`); only ``rank`` normals
        are drawn per sample, however large ``d`` is. OpenDP's randomness cannot be
        seeded, so draws are not reproducible.

        Parameters
        ----------
        size : int, optional
            Number of draws; ``None`` returns one vector of shape ``(d,)``.
        noise_multiplier : float, default 1.0
            The multiplier ``sigma_m`` (e.g. from :class:`DSIAccountant`).

        Returns
        -------
        ndarray of shape (d,) or (size, d)
        """
        sigma = check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
        n = 1 if size is None else check_positive_int(size, "size")
        r = self.basis.shape[1]
        k = self.floor_basis.shape[1]
        out = np.zeros((n, self.dim))
        if r + k and sigma > 0:
            z = gaussian(sigma, n * (r + k)).reshape(n, r + k)
            if r:
                out += (z[:, :r] @ self.chol.T) @ self.basis.T
            if k:
                out += (self.floor_std * z[:, r:]) @ self.floor_basis.T
        return out[0] if size is None else out


def _check_budgets(budgets: Any, m: int) -> np.ndarray:
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
    b = _check_budgets(budgets, m)
    if isinstance(rank_tol, bool) or not isinstance(rank_tol, numbers.Real) or not (0 < rank_tol < 1):
        raise ParameterError(
            f"rank_tol must lie in (0, 1), got {rank_tol!r}; the paper uses 1e-3.", argument="rank_tol"
        )
    max_iter = check_positive_int(max_iter, "max_iter")
    check_positive(tol, "tol")

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


class DSIAccountant:
    """Converts between ``(epsilon, delta)`` and the DSI noise multiplier ``sigma_m``.

    With covariance ``sigma_m^2 Sigma*`` every reference satisfies
    ``rho_i^2 = Delta_i' (sigma_m^2 Sigma*)^{-1} Delta_i <= 1 / sigma_m^2`` (budgets 1),
    so the release is exactly as indistinguishable from each reference's as a
    scalar Gaussian mechanism with sensitivity 1 and noise ``sigma_m``.

    Parameters
    ----------
    delta : float, default 1e-5
        The delta of the guarantee (the paper's value), in (0, 1).
    method : {"analytic", "rdp"}, default "analytic"
        ``"analytic"``: the exact Gaussian privacy profile (Balle & Wang 2018);
        ``k`` compositions of such steps are one Gaussian mechanism with
        sensitivity ``sqrt(k)`` (Gaussian differential privacy composes exactly,
        also adaptively). ``"rdp"``: the paper's conversion
        ``epsilon = 1/(2 m^2) + sqrt(2 ln(1/delta)) / m`` with ``m = sigma_m / sqrt(k)``,
        which reproduces its noise-multiplier table and is looser.

    References
    ----------
    Hanshen Xiao, Zhen Yang, G. Edward Suh. "Trustworthy Machine Learning through
    Data-Specific Indistinguishability". ICML 2025 (PMLR 267).
    Borja Balle, Yu-Xiang Wang. "Improving the Gaussian Mechanism for Differential
    Privacy: Analytical Calibration and Optimal Denoising". ICML 2018.

    Examples
    --------
    The paper's multiplier for epsilon = 1, delta = 1e-5 (its table: 4.90056):

    >>> round(DSIAccountant(method="rdp").noise_multiplier(1.0), 4)
    4.9006
    >>> round(DSIAccountant().noise_multiplier(1.0), 4)
    3.7306
    """

    def __init__(self, delta: float = 1e-5, *, method: str = "analytic") -> None:
        self.delta = _check_gaussian_delta(delta)
        self.method = check_choice(method, "method", _ACCOUNTING)

    def epsilon(self, noise_multiplier: float, compositions: int = 1) -> float:
        """Return the epsilon of ``compositions`` releases at ``noise_multiplier``."""
        sigma = check_positive(noise_multiplier, "noise_multiplier")
        k = check_positive_int(compositions, "compositions")
        if self.method == "rdp":
            m = sigma / math.sqrt(k)
            return 1.0 / (2 * m * m) + math.sqrt(2 * math.log(1 / self.delta)) / m
        return analytic_gaussian_epsilon(sigma, self.delta, math.sqrt(k))

    def noise_multiplier(self, epsilon: float, compositions: int = 1) -> float:
        """Return the smallest ``sigma_m`` that gives ``(epsilon, delta)`` after ``compositions`` steps."""
        eps = check_epsilon(epsilon)
        k = check_positive_int(compositions, "compositions")
        if self.method == "rdp":
            two_log = 2 * math.log(1 / self.delta)
            inv_m = math.sqrt(two_log + 2 * eps) - math.sqrt(two_log)
            return math.sqrt(k) / inv_m
        return analytic_gaussian_sigma(eps, self.delta, math.sqrt(k))


def dsi_release(
    target: Any,
    references: Any,
    *,
    epsilon: float,
    delta: float = 1e-5,
    compositions: int = 1,
    budgets: Any = None,
    accounting: str = "analytic",
    rank_tol: float = 1e-3,
    max_iter: int = 1000,
    tol: float = 1e-5,
) -> Release:
    """Release a vector with the optimal DSI Gaussian noise for the given references.

    Computes ``Delta_i = target - references[i]``, the covariance of
    :func:`dsi_gaussian_covariance`, the noise multiplier of :class:`DSIAccountant`
    for ``(epsilon, delta)`` over ``compositions`` steps, and returns
    ``target + noise``. The output is ``(epsilon, delta)``-indistinguishable from
    ``references[i] + noise`` for every listed reference; it is **not**
    differentially private.

    Parameters
    ----------
    target : array-like of shape (d,)
        ``F(U)``, e.g. a model's parameters or one training update.
    references : array-like of shape (m, d)
        ``F(U_i)`` for each reference set, one per row.
    epsilon : float
        Indistinguishability parameter, > 0.
    delta : float, default 1e-5
        In (0, 1); the paper's value is the default.
    compositions : int, default 1
        Number of such releases (e.g. training steps) the ``(epsilon, delta)``
        must cover; each gets multiplier ``sqrt(compositions)`` times larger.
    budgets : float or array-like of shape (m,), optional
        Relative budgets ``b_i``; they are divided by their maximum, so the
        reference with the largest budget gets exactly ``(epsilon, delta)`` and a
        reference with budget ``b_i`` is protected as sensitivity ``sqrt(b_i / max b)``.
    accounting : {"analytic", "rdp"}, default "analytic"
        See :class:`DSIAccountant`.
    rank_tol, max_iter, tol
        Passed to :func:`dsi_gaussian_covariance`.

    Returns
    -------
    Release
        ``value`` is the noisy vector; ``parameters`` hold the noise multiplier,
        the expected squared noise norm (``noise_energy``), that of isotropic noise
        in the span at the same guarantee (``isotropic_energy``), the rank, the
        solver's status and notes.

    Raises
    ------
    DataError
        If ``target``/``references`` are not finite arrays of matching dimension.
    ParameterError
        If ``epsilon``, ``delta``, ``compositions``, ``budgets`` or ``accounting`` is invalid.

    Notes
    -----
    The noise is ``sigma_m B L z``: a linear transform of standard normals drawn
    by OpenDP's floating-point-safe sampler. The matrix product and the addition
    to ``target`` are ordinary floating-point operations, so the output is plain
    float64 on no public grid and its low-order bits are not protected the way
    OpenDP's own outputs are (Mironov 2012); the guarantee holds for the
    real-valued mechanism. That is acceptable here because DSI is not differential
    privacy: the covariance is itself computed from the data. No seed is taken;
    the noise cannot be seeded.

    References
    ----------
    Hanshen Xiao, Zhen Yang, G. Edward Suh. "Trustworthy Machine Learning through
    Data-Specific Indistinguishability". ICML 2025 (PMLR 267).

    Examples
    --------
    >>> import numpy as np
    >>> target = np.array([1.0, 2.0, 3.0])
    >>> refs = target - np.array([[0.1, 0.0, 0.0], [0.0, 0.1, 0.0]])
    >>> rel = dsi_release(target, refs, epsilon=1.0)
    >>> rel.value.shape, rel.epsilon, rel.delta, rel.parameters["rank"]
    ((3,), 1.0, 1e-05, 2)
    """
    eps = check_epsilon(epsilon)
    accountant = DSIAccountant(delta, method=check_choice(accounting, "accounting", _ACCOUNTING))
    k = check_positive_int(compositions, "compositions")
    tgt = check_numeric_array(target, "target", ndim=1)
    refs = check_numeric_array(references, "references", ndim=2)
    if refs.shape[1] != tgt.shape[0]:
        raise DataError(
            f"references must have one row per reference set with {tgt.shape[0]} columns "
            f"(the length of target), got shape {refs.shape}.",
            argument="references",
        )
    b = _check_budgets(budgets, refs.shape[0])
    noise = dsi_gaussian_covariance(
        tgt[None, :] - refs, b / b.max(), rank_tol=rank_tol, max_iter=max_iter, tol=tol
    )
    sigma_m = accountant.noise_multiplier(eps, k)
    value = tgt + noise.sample(noise_multiplier=sigma_m)
    notes = [
        GUARANTEE,
        "the noise covariance is computed from the data and can reveal information "
        "about the target beyond the listed references",
        "noise = sigma_m * B L z with z from OpenDP's Gaussian sampler; the linear "
        "transform and the addition are plain floating point",
    ]
    if noise.rank == 0:
        notes.append("all references give the target's output: released without noise")
    if not noise.converged:
        notes.append(
            "the ascent stopped before its tolerance: the noise is feasible but may exceed the optimum"
        )
    return Release(
        value=value,
        epsilon=eps,
        delta=accountant.delta,
        mechanism=MECHANISM,
        parameters={
            "noise_multiplier": sigma_m,
            "noise_energy": sigma_m**2 * noise.trace,
            "isotropic_energy": sigma_m**2 * noise.isotropic_trace,
            "rank": noise.rank,
            "n_references": int(refs.shape[0]),
            "max_constraint": noise.max_constraint,
            "compositions": k,
            "accounting": accountant.method,
            "converged": noise.converged,
            "n_iter": noise.n_iter,
            "neighbouring": "the listed reference outputs F(U_i)",
            "notes": tuple(notes),
        },
        description=f"vector of length {tgt.shape[0]} under DSI against {refs.shape[0]} references",
        guarantee="data-specific indistinguishability (not differential privacy)",
    )


def leave_one_group_out_differences(
    values: Any,
    groups: Any = None,
    *,
    clip_norm: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Mean of per-entry vectors and its change when each group is left out.

    For one averaged-gradient step (Algorithm 2 of the paper) the target is the
    mean ``S / B`` of the ``B`` clipped per-entry gradients and reference ``i``
    leaves out group ``i`` (a sample and its augmentations): the difference is
    ``S / B - (S - S_i) / (B - n_i)``.

    Parameters
    ----------
    values : array-like of shape (B, d)
        Per-entry vectors (e.g. per-example gradients).
    groups : array-like of shape (B,), optional
        Group tag of each entry; default: each entry is its own group.
    clip_norm : float, optional
        Clip each entry to this L2 norm first (the paper clips per-entry
        gradients to 1).

    Returns
    -------
    mean : ndarray of shape (d,)
    differences : ndarray of shape (n_groups, d)
        One row per group, in the order of ``numpy.unique(groups)``.

    References
    ----------
    Hanshen Xiao, Zhen Yang, G. Edward Suh. "Trustworthy Machine Learning through
    Data-Specific Indistinguishability". ICML 2025 (PMLR 267).

    Examples
    --------
    >>> mean, diffs = leave_one_group_out_differences([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> np.round(diffs[0], 4).tolist()
    [0.1667, -0.3333]
    """
    x = check_numeric_array(values, "values", ndim=2, min_rows=2)
    if clip_norm is not None:
        clip = check_positive(clip_norm, "clip_norm")
        norms = np.linalg.norm(x, axis=1)
        x = x * np.minimum(1.0, clip / np.maximum(norms, np.finfo(float).tiny))[:, None]
    n = x.shape[0]
    if groups is None:
        codes = np.arange(n)
    else:
        g = np.asarray(groups)
        if g.shape != (n,):
            raise DataError(
                f"groups must have one tag per row of values ({n}), got shape {g.shape}.",
                argument="groups",
            )
        _, codes = np.unique(g, return_inverse=True)
    n_groups = int(codes.max()) + 1
    if n_groups < 2:
        raise DataError(
            "groups must name at least two groups; leaving out the only group leaves nothing.",
            argument="groups",
        )
    total = x.sum(axis=0)
    sums = np.zeros((n_groups, x.shape[1]))
    np.add.at(sums, codes, x)
    counts = np.bincount(codes, minlength=n_groups).astype(float)
    mean = total / n
    diffs = mean[None, :] - (total[None, :] - sums) / (n - counts)[:, None]
    return mean, diffs
