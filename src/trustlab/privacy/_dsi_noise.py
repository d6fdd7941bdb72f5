"""The optimal DSI Gaussian noise: its covariance factors, Mahalanobis check and sampler (private module)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from trustlab._validation import (
    check_numeric_array,
    check_positive,
    check_positive_int,
)
from trustlab.errors import DataError
from trustlab.privacy.samplers import gaussian

__all__ = [
    "DSINoise",
]


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

    See Also
    --------
    trustlab.privacy.dsi_gaussian_covariance : Solves for this noise and builds it.

    Examples
    --------
    >>> from trustlab.privacy import dsi_gaussian_covariance
    >>> noise = dsi_gaussian_covariance([[1.0, 0.0], [0.0, 2.0]])
    >>> noise.dim, noise.rank, noise.sample(3, noise_multiplier=2.0).shape
    (2, 2, (3, 2))
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
        """Return the ``d x d`` covariance matrix (dense; for small ``d``).

        Returns
        -------
        ndarray of shape (d, d)
            ``Sigma = B L L' B' + floor_std^2 P P'``, the covariance of one draw at
            noise multiplier 1 (multiply by ``noise_multiplier**2`` for a release).
            Singular when the differences do not span all ``d`` directions.

        Examples
        --------
        >>> from trustlab.privacy import dsi_gaussian_covariance
        >>> dsi_gaussian_covariance([[1.0, 0.0, 0.0]]).covariance().round(6).tolist()
        [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        """
        half = self.basis @ self.chol
        cov = half @ half.T
        if self.floor_basis.shape[1]:
            cov = cov + self.floor_std**2 * (self.floor_basis @ self.floor_basis.T)
        return cov

    def mahalanobis(self, differences: Any) -> np.ndarray:
        """Return ``rho_i^2 = Delta_i' Sigma^+ Delta_i`` for each row of ``differences``.

        A difference with a component outside the noise's span gets ``inf``: the
        two outputs would then be distinguishable with certainty.

        Parameters
        ----------
        differences : array-like of shape (n, d)
            Outcome differences, one per row, in the data's units.

        Returns
        -------
        ndarray of shape (n,)
            The squared Mahalanobis norms at noise multiplier 1 (divide by
            ``noise_multiplier**2`` for a release); at most the budget ``b_i`` for
            each difference the noise was built for.

        Raises
        ------
        DataError
            When ``differences`` is not a 2-D numeric array with ``d`` columns.

        Examples
        --------
        >>> from trustlab.privacy import dsi_gaussian_covariance
        >>> noise = dsi_gaussian_covariance([[1.0, 0.0, 0.0]])
        >>> noise.mahalanobis([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).round(6).tolist()
        [1.0, inf]
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
