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
from typing import Any

import numpy as np

from trustlab._param_validation import DELTA, EPSILON, Interval, Options, validate_params
from trustlab._validation import (
    check_choice,
    check_epsilon,
    check_numeric_array,
    check_positive,
    check_positive_int,
)
from trustlab.errors import DataError
from trustlab.privacy._dsi_noise import DSINoise
from trustlab.privacy._dsi_solver import SOLVER_CONSTRAINTS, check_budgets, dsi_gaussian_covariance
from trustlab.privacy.calibration import (
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
    check_gaussian_delta,
)
from trustlab.privacy.release import Release

__all__ = [
    "DSIAccountant",
    "DSINoise",
    "dsi_gaussian_covariance",
    "dsi_release",
    "leave_one_group_out_differences",
]


_ACCOUNTING = ("analytic", "rdp")

MECHANISM = "DSI Gaussian (optimal anisotropic)"
GUARANTEE = "data-specific indistinguishability against the listed references only; not differential privacy"


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
        self.delta = check_gaussian_delta(delta)
        self.method = check_choice(method, "method", _ACCOUNTING)

    def epsilon(self, noise_multiplier: float, compositions: int = 1) -> float:
        """Return the epsilon of ``compositions`` releases at ``noise_multiplier``.

        The DSI guarantee (against the listed references only, not differential
        privacy) at this accountant's ``delta``.

        Parameters
        ----------
        noise_multiplier : float
            The multiplier ``sigma_m > 0`` of every release.
        compositions : int, default 1
            Number of releases composed.

        Returns
        -------
        float
            The epsilon at ``delta`` (``"analytic"``: exact; ``"rdp"``: the paper's
            looser conversion).

        Examples
        --------
        >>> round(DSIAccountant().epsilon(3.7306), 3)
        1.0
        >>> DSIAccountant().epsilon(3.7306, compositions=4) > 1.0
        True
        """
        sigma = check_positive(noise_multiplier, "noise_multiplier")
        k = check_positive_int(compositions, "compositions")
        if self.method == "rdp":
            m = sigma / math.sqrt(k)
            return 1.0 / (2 * m * m) + math.sqrt(2 * math.log(1 / self.delta)) / m
        return analytic_gaussian_epsilon(sigma, self.delta, math.sqrt(k))

    def noise_multiplier(self, epsilon: float, compositions: int = 1) -> float:
        """Return the smallest ``sigma_m`` that gives ``(epsilon, delta)`` after ``compositions`` steps.

        Parameters
        ----------
        epsilon : float
            Target epsilon of the whole composition, at this accountant's ``delta``.
        compositions : int, default 1
            Number of releases, each with the returned multiplier.

        Returns
        -------
        float
            The noise multiplier ``sigma_m``; scales as ``sqrt(compositions)``.

        Examples
        --------
        >>> acc = DSIAccountant()
        >>> round(acc.noise_multiplier(1.0, compositions=4) / acc.noise_multiplier(1.0), 6)
        2.0
        """
        eps = check_epsilon(epsilon)
        k = check_positive_int(compositions, "compositions")
        if self.method == "rdp":
            two_log = 2 * math.log(1 / self.delta)
            inv_m = math.sqrt(two_log + 2 * eps) - math.sqrt(two_log)
            return math.sqrt(k) / inv_m
        return analytic_gaussian_sigma(eps, self.delta, math.sqrt(k))


@validate_params(
    {
        "epsilon": [EPSILON],
        "delta": [DELTA],
        "compositions": [Interval(numbers.Integral, 1, None, closed="left")],
        "accounting": [Options(_ACCOUNTING)],
        **SOLVER_CONSTRAINTS,
    }
)
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
    eps, k = float(epsilon), int(compositions)
    accountant = DSIAccountant(delta, method=accounting)  # keeps the hint: delta = 0 is out
    tgt = check_numeric_array(target, "target", ndim=1)
    refs = check_numeric_array(references, "references", ndim=2)
    if refs.shape[1] != tgt.shape[0]:
        raise DataError(
            f"references must have one row per reference set with {tgt.shape[0]} columns "
            f"(the length of target), got shape {refs.shape}.",
            argument="references",
        )
    b = check_budgets(budgets, refs.shape[0])
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


@validate_params({"clip_norm": [None, Interval(numbers.Real, 0, None, closed="neither")]})
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
        clip = float(clip_norm)
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
