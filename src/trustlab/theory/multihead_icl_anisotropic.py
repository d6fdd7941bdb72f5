"""Anisotropic covariates: multi-head attention learns preconditioned debiased GD.

He, Pan, Chen & Yang (ICML 2025) report that with ``x ~ N(0, Sigma)`` the two heads keep the
last-entry-only, opposite-sign OV pattern while each KQ block becomes ``+-gamma Omega`` with
``Omega`` close to ``Sigma^{-1}`` (closer for large ``L``), so that the model approximates the
debiased *preconditioned* GD predictor ``y_hat = 1/L sum_l y_l (x_l - x_bar)^T A x_q`` with
``A = 2 gamma mu Omega``. For Gaussian data the best ``A`` has a closed form (derived here from
the Wishart moments of the centred design, ``E[S B S] = m(m+1) Sigma B Sigma + m tr(B Sigma)
Sigma``, ``m = L - 1``):

``A* = (Sigma + (tr Sigma + sigma^2 / tau^2) / L * I)^{-1}``,

which tends to ``Sigma^{-1}`` as ``L`` grows and equals the isotropic ``eta*`` at ``Sigma = I``.
:func:`preconditioned_gd_risk` gives the exact risk of any ``A`` and of ``A*``;
:func:`simulate_preconditioned_gd` reads a trained model's effective ``A = sum_h mu_h KQ_h`` and
compares it with ``A*`` and ``Sigma^{-1}``. See ``docs/theory/multihead-icl.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.theory.multihead_icl import ICLAttention, linear_regression_prompts

__all__ = [
    "AnisotropicComparison",
    "PreconditionedGDRisk",
    "ar1_covariance",
    "preconditioned_gd_predict",
    "preconditioned_gd_risk",
    "simulate_preconditioned_gd",
]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_INT2 = Interval(numbers.Integral, 2, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")


@validate_params({"dim": [_INT1], "rho": [Interval(numbers.Real, -1, 1, closed="neither")]})
def ar1_covariance(dim: int = 5, rho: float = 0.5) -> np.ndarray:
    """``Sigma_ij = rho^|i - j|``: the anisotropic covariance of the authors' code.

    Parameters
    ----------
    dim : int, default 5
    rho : float, default 0.5

    Returns
    -------
    numpy.ndarray ``(dim, dim)``

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (code ``XintianPan/ICL_linear``, ``generate_covariance_matrix``).

    Examples
    --------
    >>> ar1_covariance(3, 0.5)[0].tolist()
    [1.0, 0.5, 0.25]
    """
    i = np.arange(dim)
    return np.asarray(float(rho) ** np.abs(i[:, None] - i[None, :]))


def _sigma(covariance: Any) -> np.ndarray:
    c = check_numeric_array(covariance, "covariance", ndim=2)
    if c.shape[0] != c.shape[1] or not np.allclose(c, c.T) or np.linalg.eigvalsh(c)[0] <= 0:
        raise DataError(
            "covariance must be a symmetric positive-definite square matrix.", argument="covariance"
        )
    return c


@validate_params(
    {"X": ["array-like"], "y": ["array-like"], "x_query": ["array-like"], "preconditioner": ["array-like"]}
)
def preconditioned_gd_predict(X: Any, y: Any, x_query: Any, preconditioner: Any) -> np.ndarray:
    """Debiased preconditioned GD: ``1/n sum_i y_i (x_i - x_bar)^T A x_q`` for each prompt.

    Parameters
    ----------
    X : array-like ``(m, n, d)``
    y : array-like ``(m, n)``
    x_query : array-like ``(m, d)``
    preconditioner : array-like ``(d, d)``
        ``A`` (``eta I`` gives debiased GD).

    Returns
    -------
    numpy.ndarray ``(m,)``

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (the anisotropic extension).

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [-1.0, 0.0]]]); y = np.array([[2.0, -2.0]])
    >>> float(preconditioned_gd_predict(X, y, [[1.0, 1.0]], [[0.5, 0.0], [0.5, 1.0]])[0])
    1.0
    """
    x = check_numeric_array(X, "X", ndim=3)
    t = check_numeric_array(y, "y", ndim=2)
    q = check_numeric_array(x_query, "x_query", ndim=2)
    a = check_numeric_array(preconditioner, "preconditioner", ndim=2)
    d = x.shape[2]
    if t.shape != x.shape[:2] or q.shape != (x.shape[0], d) or a.shape != (d, d):
        raise DataError(
            f"shapes must be X (m, n, d), y (m, n), x_query (m, d), preconditioner (d, d); got "
            f"{x.shape}, {t.shape}, {q.shape}, {a.shape}.",
            argument="preconditioner",
        )
    g = np.einsum("pn,pnd->pd", t, x - x.mean(axis=1, keepdims=True)) / x.shape[1]
    return np.asarray(np.einsum("pd,de,pe->p", g, a, q))


@dataclass(frozen=True)
class PreconditionedGDRisk:
    """Exact risks of debiased preconditioned GD on ``x ~ N(0, Sigma)`` prompts.

    Attributes
    ----------
    risk : float or None
        Risk of the given preconditioner (None when none was given).
    optimal_preconditioner : numpy.ndarray ``(d, d)``
        ``A* = (Sigma + (tr Sigma + sigma^2 / tau^2) / L I)^{-1}``.
    optimal_risk : float
        Risk of ``A*``.
    isotropic_step, isotropic_risk : float
        The best ``eta`` for ``A = eta I`` (debiased GD ignoring ``Sigma``) and its risk.
    null_risk : float
        ``tau^2 tr Sigma + sigma^2``.

    See Also
    --------
    preconditioned_gd_risk : computes it.
    """

    risk: float | None
    optimal_preconditioner: np.ndarray
    optimal_risk: float
    isotropic_step: float
    isotropic_risk: float
    null_risk: float


@validate_params(
    {
        "n_context": [_INT2],
        "covariance": ["array-like"],
        "preconditioner": ["array-like", None],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
    }
)
def preconditioned_gd_risk(
    n_context: int,
    covariance: Any,
    *,
    preconditioner: Any = None,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
) -> PreconditionedGDRisk:
    """Exact risk of debiased preconditioned GD, and the optimal preconditioner.

    With ``g = 1/L sum_l y_l (x_l - x_bar)``: ``E g beta^T = (m/L) tau^2 Sigma`` and
    ``E g g^T = (m/L^2) (tau^2 (L Sigma^2 + tr(Sigma) Sigma) + sigma^2 Sigma)``, so
    ``R(A) = tr(A Sigma A^T E gg^T) - 2 (m/L) tau^2 tr(Sigma A^T Sigma) + tau^2 tr Sigma + sigma^2``.

    Parameters
    ----------
    n_context : int
        ``L``.
    covariance : array-like ``(d, d)``
        ``Sigma``.
    preconditioner : array-like ``(d, d)``, optional
        An ``A`` to evaluate.
    signal_variance : float, optional
        ``tau^2``; default ``1/d``.
    noise_variance : float, default 0.1

    Returns
    -------
    PreconditionedGDRisk

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (preconditioned GD for anisotropic covariates; the exact
    risk and ``A*`` are derived here).

    Examples
    --------
    >>> r = preconditioned_gd_risk(40, np.eye(5))
    >>> round(float(r.optimal_preconditioner[0, 0]), 4), round(r.isotropic_step, 4)
    (0.8791, 0.8791)
    """
    s = _sigma(covariance)
    d, n = s.shape[0], n_context
    tau2, s2 = 1.0 / d if signal_variance is None else float(signal_variance), float(noise_variance)
    m = n - 1
    gg = m / n**2 * (tau2 * (n * s @ s + np.trace(s) * s) + s2 * s)

    def risk(a: np.ndarray) -> float:
        return float(
            np.trace(a @ s @ a.T @ gg) - 2 * m / n * tau2 * np.trace(s @ a.T @ s) + tau2 * np.trace(s) + s2
        )

    a_star = np.linalg.inv(s + (np.trace(s) + s2 / tau2) / n * np.eye(d))
    eta = m / n * tau2 * np.trace(s @ s) / np.trace(s @ gg)
    given = None
    if preconditioner is not None:
        a = check_numeric_array(preconditioner, "preconditioner", ndim=2)
        if a.shape != (d, d):
            raise DataError(f"preconditioner must be ({d}, {d}); got {a.shape}.", argument="preconditioner")
        given = risk(a)
    return PreconditionedGDRisk(
        given, a_star, risk(a_star), float(eta), risk(eta * np.eye(d)), tau2 * float(np.trace(s)) + s2
    )


@dataclass(frozen=True)
class AnisotropicComparison:
    """A model trained on ``x ~ N(0, Sigma)`` beside preconditioned debiased GD.

    Attributes
    ----------
    effective_preconditioner : numpy.ndarray ``(d, d)``
        ``A = sum_h mu_h KQ_h[:d, :d]`` (the first-order expansion of the softmax).
    error_to_optimal : float
        ``||A - A*||_F / ||A*||_F``.
    error_to_inverse_covariance : float
        ``||c A - Sigma^{-1}||_F / ||Sigma^{-1}||_F`` at the best scale ``c``.
    head_errors : numpy.ndarray ``(H,)``
        Each head's ``||KQ_h - c_h A*||_F / ||KQ_h||_F`` at its best ``c_h`` (0: proportional).
    head_isotropic_errors : numpy.ndarray ``(H,)``
        The same against ``c_h I`` (how far from the isotropic pattern).
    model_risk, model_risk_se : float
        Test MSE of the model and its standard error.
    risk_at_effective, optimal_risk, isotropic_risk : float
        Exact risks of preconditioned GD at ``A``, at ``A*`` and of the best ``eta I``.
    agreement : float
        ``mean (model - preconditioned GD at A)^2 / mean (preconditioned GD at A)^2``.

    See Also
    --------
    simulate_preconditioned_gd : computes it.
    """

    effective_preconditioner: np.ndarray
    error_to_optimal: float
    error_to_inverse_covariance: float
    head_errors: np.ndarray
    head_isotropic_errors: np.ndarray
    model_risk: float
    model_risk_se: float
    risk_at_effective: float
    optimal_risk: float
    isotropic_risk: float
    agreement: float


def _rel_to_span(k: np.ndarray, b: np.ndarray) -> float:
    """``||k - c b|| / ||k||`` at the least-squares scale ``c``."""
    c = float(np.sum(k * b) / np.sum(b * b))
    return float(np.linalg.norm(k - c * b)) / max(float(np.linalg.norm(k)), 1e-300)


@validate_params(  # model is checked by hand (its type cannot be built by the coverage test)
    {
        "covariance": ["array-like"],
        "n_context": [_INT2],
        "n_test": [_INT2],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
        "random_state": ["random_state"],
    }
)
def simulate_preconditioned_gd(
    model: ICLAttention,
    covariance: Any,
    n_context: int = 40,
    *,
    n_test: int = 20_000,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    random_state: Any = 99,
) -> AnisotropicComparison:
    """Compare a model trained on anisotropic covariates with preconditioned debiased GD.

    Parameters
    ----------
    model : ICLAttention
        Trained with ``covariance`` (``train_icl_attention(..., covariance=Sigma)``).
    covariance : array-like ``(d, d)``
    n_context : int, default 40
    n_test : int, default 20000
    signal_variance : float, optional
        ``tau^2``; default ``1/d``.
    noise_variance : float, default 0.1
    random_state : int, Generator or None, default 99

    Returns
    -------
    AnisotropicComparison

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (KQ ~ +-gamma Omega with Omega close to Sigma^{-1}).

    Examples
    --------
    >>> s = ar1_covariance(3, 0.5)
    >>> a = preconditioned_gd_risk(20, s).optimal_preconditioner
    >>> kq = np.zeros((2, 4, 3)); kq[0, :3], kq[1, :3] = 0.01 * a, -0.01 * a
    >>> ov = np.zeros((2, 4)); ov[:, 3] = [50.0, -50.0]
    >>> c = simulate_preconditioned_gd(ICLAttention(kq, ov, np.zeros(1)), s, 20, n_test=2000)
    >>> round(c.error_to_optimal, 6), bool(c.agreement < 1e-3)
    (0.0, True)
    """
    if not isinstance(model, ICLAttention):
        raise DataError(f"model must be an ICLAttention, got {type(model).__name__}.", argument="model")
    s = _sigma(covariance)
    d = model.key_query.shape[2]
    if s.shape != (d, d):
        raise DataError(
            f"covariance must be ({d}, {d}) for this model; got {s.shape}.", argument="covariance"
        )
    prior: dict[str, Any] = {"signal_variance": signal_variance, "noise_variance": noise_variance}
    blocks, mu = model.key_query[:, :d, :d], model.output_value[:, d]
    a = np.einsum("h,hij->ij", mu, blocks)
    r = preconditioned_gd_risk(n_context, s, preconditioner=a, **prior)
    a_star, s_inv = r.optimal_preconditioner, np.linalg.inv(s)
    x, y, xq, yq = linear_regression_prompts(
        n_test, n_context, d, random_state=random_state, covariance=s, **prior
    )
    pred, gd = model.predict(x, y, xq), preconditioned_gd_predict(x, y, xq, a)
    err = (pred - yq) ** 2
    return AnisotropicComparison(
        a,
        float(np.linalg.norm(a - a_star) / np.linalg.norm(a_star)),
        float(np.linalg.norm(_scaled(a, s_inv) - s_inv) / np.linalg.norm(s_inv)),
        np.array([_rel_to_span(k, a_star) for k in blocks]),
        np.array([_rel_to_span(k, np.eye(d)) for k in blocks]),
        float(err.mean()),
        float(err.std(ddof=1) / math.sqrt(n_test)),
        float(r.risk if r.risk is not None else math.nan),
        r.optimal_risk,
        r.isotropic_risk,
        float(((pred - gd) ** 2).mean() / max(float((gd**2).mean()), 1e-300)),
    )


def _scaled(a: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``c a`` at the least-squares scale ``c`` onto ``target``."""
    return a * float(np.sum(a * target) / max(float(np.sum(a * a)), 1e-300))
