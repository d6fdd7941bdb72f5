"""Central-model baselines of the LTM: MOD-SULQ and SSP ridge on a noisy Gram matrix (private module)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ParameterError
from trustlab.privacy._ltm_inputs import CONSTRAINTS, clip_rows, joint, matrix, privacy, solve
from trustlab.privacy.calibration import DG_ROUNDING_TV, grid_gaussian_sigma
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import MAX_INTEGER_SCALE, add_discrete_gaussian

__all__ = [
    "GRAM_BITS",
    "central_mod_sulq",
    "central_ssp_ridge",
    "noisy_gram",
]

GRAM_BITS = 16


def _int_gram(U: np.ndarray) -> np.ndarray:
    """Exact ``U^T U`` of an int64 matrix, saturated at ``+-2**62`` (chunked products, Python-int sums)."""
    k = U.shape[1]
    peak = int(np.abs(U).max(initial=0))
    chunk = max(1, 2**62 // max(1, peak * peak * 2))
    total = [[0] * k for _ in range(k)]
    for start in range(0, U.shape[0], chunk):
        block = U[start : start + chunk]
        part = block.T @ block
        for i in range(k):
            for j in range(k):
                total[i][j] += int(part[i, j])
    cap = 2**62
    return np.array([[min(cap, max(-cap, v)) for v in row] for row in total], dtype=np.int64)


def noisy_gram(
    Z: np.ndarray, epsilon: float, delta: float, bound: float, neighbouring: str
) -> tuple[np.ndarray, float, float, float]:
    """``Z^T Z`` plus symmetric discrete Gaussian noise on a fixed-point grid (upper triangle, mirrored).

    Rows (already clipped to ``bound``) are rounded to the grid ``bound * 2**-16``; the
    Gram matrix of the rounded rows is formed exactly in integers (saturated at
    ``+-2**62``, a 1-Lipschitz clamp) and OpenDP adds discrete Gaussian noise to its
    upper triangle. The output is a multiple of ``(bound * 2**-16)**2``. Returns the
    matrix, the noise std and the Frobenius sensitivity (data units, rounding
    included), and the grid step.
    """
    # ||z z^T - w w^T||_F^2 = |z|^4 + |w|^4 - 2 (z.w)^2 <= 2 B^4 (replace); B^4 (add/remove), B = max |z|.
    k = Z.shape[1]
    unit = bound * 2.0**-GRAM_BITS
    step = unit * unit
    if not math.isfinite(epsilon):
        sens = bound**2 * (math.sqrt(2.0) if neighbouring == "replace" else 1.0)
        return Z.T @ Z, 0.0, sens, 0.0
    U = np.rint(Z / unit).astype(np.int64)
    # a rounded row has norm <= 2**16 (1 + 1e-12) + sqrt(k) / 2 grid units (clipping's float error included)
    b_int = 2.0**GRAM_BITS * (1 + 1e-12) + math.sqrt(k) / 2
    sens_int = b_int**2 * (math.sqrt(2.0) if neighbouring == "replace" else 1.0)
    n_upper = k * (k + 1) // 2
    sigma_int = grid_gaussian_sigma(epsilon, delta, sens_int, 0.5 * sens_int + n_upper * DG_ROUNDING_TV)
    if sigma_int > MAX_INTEGER_SCALE:
        raise ParameterError(
            f"epsilon={epsilon:g} needs Gram noise beyond 2**52 grid units of (row_bound * 2**-16)**2, more "
            "than integer noise can serve exactly; raise epsilon.",
            argument="epsilon",
        )
    gram = _int_gram(U)
    iu = np.triu_indices(k)
    noisy = np.zeros((k, k), dtype=np.int64)
    noisy[iu] = add_discrete_gaussian(gram[iu], sigma_int)
    noisy = noisy + np.triu(noisy, 1).T
    return noisy.astype(float) * step, sigma_int * step, sens_int * step, step


_CENTRAL = {k: CONSTRAINTS[k] for k in ("epsilon", "delta", "row_bound", "neighbouring")}


def _central_gram(
    rows: np.ndarray, epsilon: float, delta: float, row_bound: float, neighbouring: str, clip_note: str
) -> tuple[np.ndarray, tuple[float, float], dict[str, Any]]:
    """The noisy Gram matrix of the clipped rows, the release's ``(epsilon, delta)`` and its parameters.

    Both central baselines release post-processing of this one Gaussian mechanism
    (:func:`noisy_gram`); ``delta`` is 0 for the non-private ``epsilon=inf``.
    """
    eps, dlt = privacy(epsilon, delta, "gaussian")
    bound = float(row_bound)
    gram, sigma, sens, step = noisy_gram(clip_rows(rows, bound), eps, dlt, bound, neighbouring)
    params = {
        "row_bound": bound,
        "neighbouring": f"{neighbouring} one row",
        "sensitivity_frobenius": sens,
        "sigma": sigma,
        "gram_grid": step,
        "notes": (
            clip_note,
            "rows rounded to row_bound * 2**-16, exact integer Gram matrix, discrete Gaussian noise "
            "on its grid (OpenDP); sensitivity includes the rounding",
        ),
    }
    return gram, (eps, dlt if math.isfinite(eps) else 0.0), params


@validate_params({**_CENTRAL, "n_components": [Interval(numbers.Integral, 1, None, closed="left")]})
def central_mod_sulq(
    A: Any,
    n_components: int,
    epsilon: float,
    delta: float,
    row_bound: float,
    neighbouring: str = "replace",
) -> Release:
    """Central-model baseline: top-``k`` eigenvectors of ``A^T A`` plus symmetric Gaussian noise (MOD-SULQ).

    Rows are clipped to ``row_bound``; the upper triangle of ``A^T A`` gets
    Gaussian noise calibrated by the analytic Gaussian mechanism for its
    Frobenius sensitivity (``sqrt(2) row_bound**2`` for replacement,
    ``row_bound**2`` for add/remove), so that it is compared with the LTM at equal
    ``(epsilon, delta)``. This replaces Chaudhuri et al.'s closed-form noise scale.
    The noise is drawn exactly: rows are rounded to the grid ``row_bound * 2**-16``,
    the integer Gram matrix gets discrete Gaussian noise (OpenDP), and the
    sensitivity and ``delta`` account for the rounding
    (:func:`~trustlab.privacy.calibration.grid_gaussian_sigma`). The eigenvectors are
    post-processing.

    Parameters
    ----------
    A : array-like of shape (n, d)
        The private data, one row per individual.
    n_components : int
        Number of components ``k``, ``1 <= k <= d``.
    epsilon : float
        Epsilon of the release; ``math.inf`` returns the exact (non-private) result
        with delta 0, for comparison.
    delta : float
        Delta of the release, in ``(0, 1)`` for a finite epsilon.
    row_bound : float
        Public L2 bound on each row; rows are clipped to it (never estimated from
        the data).
    neighbouring : {"replace", "add_remove"}, default "replace"
        Neighbouring relation: replacing one row (Frobenius sensitivity
        ``sqrt(2) row_bound**2``) or adding/removing one (``row_bound**2``).

    Returns
    -------
    Release
        ``value`` is the ``(n_components, d)`` matrix of orthonormal components.

    References
    ----------
    Chaudhuri, Sarwate, Sinha. "A near-optimal algorithm for differentially-private
    principal components". JMLR 2013. Used as the central baseline by Burkhardt,
    Keller, Orlandi, Schwiegelshohn, ICML 2025.

    Examples
    --------
    >>> A = np.repeat([[0.6, 0.8]], 100, axis=0)
    >>> rel = central_mod_sulq(A, 1, float("inf"), 0.0, 1.0)
    >>> np.round(np.abs(rel.value), 3).tolist()
    [[0.6, 0.8]]
    """
    A = matrix(A, "A", private=True)
    k = int(n_components)
    if k > A.shape[1]:
        raise ParameterError(f"n_components must be <= d={A.shape[1]}, got {k}.", argument="n_components")
    gram, (eps, dlt), params = _central_gram(
        A, epsilon, delta, row_bound, neighbouring, "inputs clipped to row_bound (L2 per row)"
    )
    _, vecs = np.linalg.eigh(gram)
    comps = vecs[:, ::-1][:, :k].T
    return Release(
        comps,
        eps,
        dlt,
        "Gaussian on A^T A (MOD-SULQ, central model)",
        params,
        f"top-{k} principal directions",
    )


@validate_params({**_CENTRAL, "alpha": [Interval(numbers.Real, 0, None, closed="left")]})
def central_ssp_ridge(
    X: Any,
    y: Any,
    alpha: float,
    epsilon: float,
    delta: float,
    row_bound: float,
    neighbouring: str = "replace",
) -> Release:
    """Central-model baseline: ridge from noisy sufficient statistics ``X^T X`` and ``X^T y`` (SSP).

    Each ``[x_i, y_i]`` is clipped jointly to L2 norm ``row_bound``; the Gram
    matrix of ``[X | y]`` gets symmetric Gaussian noise (as in
    :func:`central_mod_sulq`) and ``coef = (XtX + alpha I)^-1 Xty``. Solving is
    post-processing of the noisy Gram matrix.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Private features, one row per individual.
    y : array-like of shape (n,)
        Private targets.
    alpha : float
        The ridge penalty, ``>= 0``.
    epsilon : float
        Epsilon of the release; ``math.inf`` returns the exact (non-private) result
        with delta 0, for comparison.
    delta : float
        Delta of the release, in ``(0, 1)`` for a finite epsilon.
    row_bound : float
        Public L2 bound on each row ``[x_i, y_i]``; rows are clipped to it (never estimated from
        the data).
    neighbouring : {"replace", "add_remove"}, default "replace"
        Neighbouring relation: replacing one row (Frobenius sensitivity
        ``sqrt(2) row_bound**2``) or adding/removing one (``row_bound**2``).

    Returns
    -------
    Release
        ``value`` is the coefficient vector (no intercept).

    References
    ----------
    Wang. "Revisiting differentially private linear regression: optimal and adaptive
    prediction & estimation in unbounded domain". UAI 2018. Used as the central
    baseline by Burkhardt, Keller, Orlandi, Schwiegelshohn, ICML 2025.

    Examples
    --------
    >>> X = np.array([[0.5, 0.0], [0.0, 0.5]] * 50)
    >>> rel = central_ssp_ridge(X, X @ [0.5, -0.5], 1e-9, float("inf"), 0.0, 1.0)
    >>> np.round(rel.value, 6).tolist()
    [0.5, -0.5]
    """
    Z = joint(X, y, private=True)
    lam = float(alpha)
    gram, (eps, dlt), params = _central_gram(
        Z, epsilon, delta, row_bound, neighbouring, "each [x, y] clipped jointly to row_bound (L2)"
    )
    d = Z.shape[1] - 1
    coef = solve(gram[:d, :d] + lam * np.eye(d), gram[:d, d])
    params = {**params, "alpha": lam}
    return Release(
        coef, eps, dlt, "Gaussian on [X y]^T [X y] (SSP, central model)", params, "ridge coefficients"
    )
