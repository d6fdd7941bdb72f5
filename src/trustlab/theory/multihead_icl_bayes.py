"""The Bayes-optimal in-context predictor beside debiased GD and trained multi-head attention.

Companion of :mod:`trustlab.theory.multihead_icl` (He, Pan, Chen & Yang, ICML 2025). With the
prior ``beta ~ N(0, tau^2 I_d)`` (the paper's ``tau^2 = 1/d``), ``x ~ N(0, I_d)`` and noise
``sigma^2``, the Bayes-optimal predictor is the posterior mean, ridge regression with
``lambda = sigma^2 / tau^2`` (:func:`bayes_predict`); its risk ``sigma^2 + sigma^2 E tr((X^T X +
lambda I)^{-1})`` is computed by Monte Carlo over Wishart eigenvalues (:func:`bayes_risk`) and,
for ``d / L -> xi``, from the Marchenko-Pastur law (:func:`proportional_limit`), beside the
paper's bound on the debiased-GD / Bayes risk ratio (Theorem 1(3) of the authors' summary).
:func:`simulate_debiased_gd` compares a trained model with the debiased GD predictor its pattern
implies, and :func:`compare_with_bayes` places a trained :class:`~trustlab.theory.ICLAttention` between plain
one-step GD, debiased GD at ``eta*`` and the Bayes predictor on the same prompts. See
``docs/theory/multihead-icl.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError
from trustlab.theory.multihead_icl import (
    AttentionPattern,
    DebiasedGDRisk,
    ICLAttention,
    attention_pattern,
    debiased_gd_predict,
    debiased_gd_risk,
    linear_regression_prompts,
)

__all__ = [
    "BayesComparison",
    "BayesRisk",
    "DebiasedGDComparison",
    "ProportionalLimit",
    "bayes_predict",
    "bayes_risk",
    "compare_with_bayes",
    "proportional_limit",
    "simulate_debiased_gd",
]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_INT2 = Interval(numbers.Integral, 2, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")


def _tau2(signal_variance: float | None, dim: int) -> float:
    return 1.0 / dim if signal_variance is None else float(signal_variance)


@validate_params(
    {
        "X": ["array-like"],
        "y": ["array-like"],
        "x_query": ["array-like"],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
    }
)
def bayes_predict(
    X: Any, y: Any, x_query: Any, *, signal_variance: float | None = None, noise_variance: float = 0.1
) -> np.ndarray:
    """The Bayes-optimal prediction: the posterior mean of ``beta``, applied to ``x_q``.

    ``beta_hat = (X^T X + (sigma^2 / tau^2) I)^{-1} X^T y`` (ridge); with ``sigma^2 = 0`` the
    limit, the minimum-norm least-squares fit.

    Parameters
    ----------
    X : array-like ``(m, n, d)``
    y : array-like ``(m, n)``
    x_query : array-like ``(m, d)``
    signal_variance : float, optional
        ``tau^2``; default ``1/d`` (the paper's prior ``N(0, I_d/d)``).
    noise_variance : float, default 0.1

    Returns
    -------
    numpy.ndarray ``(m,)``

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (the Bayes estimator, optimally tuned ridge, their baseline).

    Examples
    --------
    >>> X = np.array([[[1.0], [2.0]]]); y = np.array([[1.0, 2.0]])
    >>> float(bayes_predict(X, y, np.array([[1.0]]), signal_variance=1.0, noise_variance=1.0)[0])
    0.8333333333333334
    """
    x = check_numeric_array(X, "X", ndim=3)
    t = check_numeric_array(y, "y", ndim=2)
    q = check_numeric_array(x_query, "x_query", ndim=2)
    if t.shape != x.shape[:2] or q.shape != (x.shape[0], x.shape[2]):
        raise DataError(
            f"shapes must be X (m, n, d), y (m, n), x_query (m, d); got {x.shape}, {t.shape}, {q.shape}.",
            argument="y",
        )
    lam = float(noise_variance) / _tau2(signal_variance, x.shape[2])
    gram = np.einsum("pni,pnj->pij", x, x)
    rhs = np.einsum("pnd,pn->pd", x, t)
    if lam > 0:
        beta = np.linalg.solve(gram + lam * np.eye(x.shape[2]), rhs[..., None])[..., 0]
    else:
        beta = np.einsum("pij,pj->pi", np.linalg.pinv(gram, hermitian=True), rhs)
    return np.asarray(np.einsum("pd,pd->p", beta, q))


@dataclass(frozen=True)
class BayesRisk:
    """The Bayes risk beside the debiased and plain one-step GD risks (finite ``n``, ``d``).

    Attributes
    ----------
    risk, risk_se : float
        Monte-Carlo Bayes risk ``E (E[y_q | prompt] - y_q)^2`` and its standard error.
    debiased_gd_risk : float
        Exact risk of debiased GD at ``eta*`` (``debiased_gd_risk``).
    plain_gd_risk : float
        Exact risk of plain one-step GD ``eta_v / n sum_i y_i x_i^T x_q`` at its best ``eta_v``.
    ratio : float
        ``debiased_gd_risk / risk``: the paper's "up to a proportional factor".
    plain_step_size : float
        ``eta_v = n tau^2 / (tau^2 (n + 1 + d) + sigma^2)``.

    See Also
    --------
    bayes_risk : computes it.
    """

    risk: float
    risk_se: float
    debiased_gd_risk: float
    plain_gd_risk: float
    ratio: float
    plain_step_size: float


@validate_params(
    {
        "n_context": [_INT2],
        "dim": [_INT1],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
        "n_draws": [_INT2],
        "random_state": ["random_state"],
    }
)
def bayes_risk(
    n_context: int = 40,
    dim: int = 5,
    *,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    n_draws: int = 20_000,
    random_state: Any = 0,
) -> BayesRisk:
    """Bayes risk of in-context linear regression under the Gaussian prior, by Monte Carlo.

    Given the prompt, ``y_q - x_q^T beta_hat`` has variance ``sigma^2 + x_q^T Sigma_post x_q``
    with ``Sigma_post = (X^T X / sigma^2 + I / tau^2)^{-1}``, so the risk is
    ``sigma^2 + E sum_j tau^2 sigma^2 / (tau^2 lambda_j + sigma^2)`` over the eigenvalues
    ``lambda_j`` of the Wishart matrix ``X^T X`` (``n`` degrees of freedom): averaged over
    ``n_draws`` draws (an eigenvalue with ``sigma^2 = 0`` counts ``tau^2`` when it is 0).

    Parameters
    ----------
    n_context, dim : int, default 40, 5
        ``L`` and ``d`` (the paper's experiment).
    signal_variance : float, optional
        ``tau^2``; default ``1/d``.
    noise_variance : float, default 0.1
    n_draws : int, default 20000
    random_state : int, Generator or None, default 0

    Returns
    -------
    BayesRisk

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (Bayes-risk comparison); the posterior is standard
    Gaussian conjugacy.

    Examples
    --------
    >>> r = bayes_risk(40, 5, n_draws=4000)
    >>> bool(r.risk < r.plain_gd_risk < r.debiased_gd_risk), round(r.ratio, 1)
    (True, 2.1)
    """
    n, d, tau2, s2 = n_context, dim, _tau2(signal_variance, dim), float(noise_variance)
    rng = make_generator(random_state)
    x = rng.standard_normal((n_draws, n, d))
    lam = np.linalg.eigvalsh(np.einsum("pni,pnj->pij", x, x))
    if s2 > 0:
        terms = (tau2 * s2 / (tau2 * lam + s2)).sum(axis=1)
    else:
        terms = tau2 * (lam <= 1e-9 * max(n, d)).sum(axis=1)
    risk = s2 + terms
    gd = debiased_gd_risk(n, d, signal_variance=tau2, noise_variance=s2)
    mean = float(risk.mean())
    return BayesRisk(
        mean,
        float(risk.std(ddof=1) / math.sqrt(n_draws)),
        gd.optimal_risk,
        gd.vanilla_optimal_risk,
        gd.optimal_risk / mean if mean > 0 else math.inf,
        n * tau2 / (tau2 * (n + 1 + d) + s2),
    )


@dataclass(frozen=True)
class ProportionalLimit:
    """Limiting risks for ``L -> infinity``, ``d / L -> xi`` (prior ``N(0, I_d/d)``).

    Attributes
    ----------
    debiased_gd_risk : float
        ``1 + sigma^2 - 1 / (1 + (1 + sigma^2) xi)`` (debiased GD at ``eta*``).
    bayes_risk : float
        ``sigma^2 (1 + xi m(-sigma^2 xi))``, ``m`` the Marchenko-Pastur Stieltjes transform.
    ratio : float
        ``debiased_gd_risk / bayes_risk``.
    paper_bound : float
        ``1 + sigma^{-2} / ((1 + xi sigma^2)(1 + sigma^2 + 1/xi))`` (Theorem 1(3)).
    bound_applies : bool
        The theorem's condition ``sigma^2 + 1/xi > 1``.

    See Also
    --------
    proportional_limit : computes it.
    """

    debiased_gd_risk: float
    bayes_risk: float
    ratio: float
    paper_bound: float
    bound_applies: bool


@validate_params({"xi": [_POS], "noise_variance": [_POS]})
def proportional_limit(xi: float, noise_variance: float = 0.1) -> ProportionalLimit:
    """Debiased GD vs Bayes in the proportional limit, with the paper's ratio bound.

    With ``W = X^T X / L`` (Marchenko-Pastur, ratio ``xi``) and ``s = sigma^2 xi``,
    ``m(-s) = (sqrt((1 - xi + s)^2 + 4 xi s) - (1 - xi + s)) / (2 xi s)`` and the Bayes risk is
    ``sigma^2 (1 + xi m(-s))``.

    Parameters
    ----------
    xi : float
        ``d / L``.
    noise_variance : float, default 0.1
        ``sigma^2 > 0`` (the theorem's assumption).

    Returns
    -------
    ProportionalLimit

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (Theorem 1(3) of the authors' summary: the debiased GD at
    ``eta*`` is within ``1 + sigma^{-2} {(1 + xi sigma^2)(1 + sigma^2 + xi^{-1})}^{-1}`` of the
    limiting Bayes risk when ``sigma^2 + xi^{-1} > 1``).

    Examples
    --------
    >>> p = proportional_limit(5 / 40, 0.1)
    >>> round(p.ratio, 3), round(p.paper_bound, 3), p.bound_applies
    (1.937, 2.085, True)
    """
    xi, s2 = float(xi), float(noise_variance)
    s = s2 * xi
    m = (math.sqrt((1 - xi + s) ** 2 + 4 * xi * s) - (1 - xi + s)) / (2 * xi * s)
    bayes = s2 * (1 + xi * m)
    gd = 1 + s2 - 1 / (1 + (1 + s2) * xi)
    bound = 1 + 1 / (s2 * (1 + xi * s2) * (1 + s2 + 1 / xi))
    return ProportionalLimit(gd, bayes, gd / bayes, bound, s2 + 1 / xi > 1)


@dataclass(frozen=True)
class BayesComparison:
    """A trained attention model beside GD and Bayes predictors on the same test prompts.

    Attributes
    ----------
    model_risk, plain_gd_risk, debiased_gd_risk, bayes_risk : float
        Test MSEs of the model, plain one-step GD at ``eta_v``, debiased GD at ``eta*`` and the
        Bayes (posterior-mean) predictor.
    excess_se : dict
        Paired standard errors of ``model_risk - other`` for ``"plain_gd"``, ``"debiased_gd"``,
        ``"bayes"``.
    position : float
        ``(model - Bayes) / (debiased GD - Bayes)``: 0 at Bayes, 1 at debiased GD.
    ratio_to_bayes : float
        ``model_risk / bayes_risk``.

    See Also
    --------
    compare_with_bayes : computes it.
    """

    model_risk: float
    plain_gd_risk: float
    debiased_gd_risk: float
    bayes_risk: float
    excess_se: dict[str, float]
    position: float
    ratio_to_bayes: float


@validate_params(  # model is checked by hand (its type cannot be built by the coverage test)
    {
        "n_context": [_INT2],
        "n_test": [_INT2],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
        "random_state": ["random_state"],
    }
)
def compare_with_bayes(
    model: ICLAttention,
    n_context: int = 40,
    *,
    n_test: int = 20_000,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    random_state: Any = 2024,
) -> BayesComparison:
    """Where a trained attention model sits between one-step GD, debiased GD and Bayes.

    Parameters
    ----------
    model : ICLAttention
    n_context : int, default 40
    n_test : int, default 20000
    signal_variance : float, optional
        ``tau^2``; default ``1/d``.
    noise_variance : float, default 0.1
    random_state : int, Generator or None, default 2024

    Returns
    -------
    BayesComparison

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (multi-head attention is near Bayes-optimal up to a factor).

    Examples
    --------
    >>> kq = np.zeros((2, 6, 5)); kq[0, :5] = 0.01 * np.eye(5); kq[1, :5] = -0.01 * np.eye(5)
    >>> ov = np.zeros((2, 6)); ov[:, 5] = [44.0, -44.0]
    >>> c = compare_with_bayes(ICLAttention(kq, ov, np.zeros(1)), n_test=4000)
    >>> bool(c.bayes_risk < c.model_risk), round(c.position, 1)
    (True, 1.0)
    """
    if not isinstance(model, ICLAttention):
        raise DataError(f"model must be an ICLAttention, got {type(model).__name__}.", argument="model")
    d = model.key_query.shape[2]
    tau2, s2 = _tau2(signal_variance, d), float(noise_variance)
    x, y, xq, yq = linear_regression_prompts(
        n_test, n_context, d, signal_variance=tau2, noise_variance=s2, random_state=random_state
    )
    eta_star = debiased_gd_risk(n_context, d, signal_variance=tau2, noise_variance=s2).optimal_step_size
    eta_v = n_context * tau2 / (tau2 * (n_context + 1 + d) + s2)
    errs = {
        "model": (model.predict(x, y, xq) - yq) ** 2,
        "plain_gd": (eta_v / n_context * np.einsum("pn,pnd,pd->p", y, x, xq) - yq) ** 2,
        "debiased_gd": (debiased_gd_predict(x, y, xq, eta_star) - yq) ** 2,
        "bayes": (bayes_predict(x, y, xq, signal_variance=tau2, noise_variance=s2) - yq) ** 2,
    }
    r = {k: float(v.mean()) for k, v in errs.items()}
    se = {
        k: float((errs["model"] - errs[k]).std(ddof=1) / math.sqrt(n_test))
        for k in ("plain_gd", "debiased_gd", "bayes")
    }
    gap = r["debiased_gd"] - r["bayes"]
    return BayesComparison(
        r["model"],
        r["plain_gd"],
        r["debiased_gd"],
        r["bayes"],
        se,
        (r["model"] - r["bayes"]) / gap if gap > 0 else math.nan,
        r["model"] / r["bayes"] if r["bayes"] > 0 else math.inf,
    )


@dataclass(frozen=True)
class DebiasedGDComparison:
    """A trained model beside the debiased GD predictor on the same test prompts.

    Attributes
    ----------
    pattern : AttentionPattern
    model_risk : float
        Test MSE of the trained attention.
    theory_risk : float
        Closed-form risk of debiased GD at the learned ``eta`` (``pattern.step_size``).
    theory_mc_risk : float
        Test MSE of debiased GD at the learned ``eta`` on the same prompts.
    agreement : float
        ``mean (model - debiased GD)^2 / mean (debiased GD)^2``: 0 when the model *is* the
        predictor.
    optimal : DebiasedGDRisk
        The closed-form optimum.
    risk_se : float
        Standard error of ``model_risk`` (the tolerance of comparisons with it).

    See Also
    --------
    simulate_debiased_gd : computes it.
    """

    pattern: AttentionPattern
    model_risk: float
    theory_risk: float
    theory_mc_risk: float
    agreement: float
    optimal: DebiasedGDRisk
    risk_se: float


@validate_params(
    {
        "model": [ICLAttention],
        "n_context": [_INT2],
        "n_test": [_INT2],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
        "random_state": ["random_state"],
    }
)
def simulate_debiased_gd(
    model: ICLAttention,
    n_context: int = 40,
    *,
    n_test: int = 20_000,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    random_state: Any = 12345,
) -> DebiasedGDComparison:
    """Compare a trained attention model with the debiased GD predictor its pattern implies.

    Parameters
    ----------
    model : ICLAttention
    n_context : int, default 40
    n_test : int, default 20000
        Test prompts.
    signal_variance, noise_variance : float
        As in training.
    random_state : int, Generator or None, default 12345

    Returns
    -------
    DebiasedGDComparison

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (multi-head attention approximately implements debiased GD).

    Examples
    --------
    >>> kq = np.zeros((2, 3, 2)); kq[0, :2] = 0.05 * np.eye(2); kq[1, :2] = -0.05 * np.eye(2)
    >>> ov = np.zeros((2, 3)); ov[:, 2] = [8.0, -8.0]
    >>> c = simulate_debiased_gd(ICLAttention(kq, ov, np.zeros(1)), 16, n_test=2000)
    >>> round(c.pattern.step_size, 2), bool(c.agreement < 0.01)
    (0.8, True)
    """
    d = model.key_query.shape[2]
    prior: dict[str, Any] = {"signal_variance": signal_variance, "noise_variance": noise_variance}
    x, y, xq, yq = linear_regression_prompts(n_test, n_context, d, random_state=random_state, **prior)
    pattern = attention_pattern(model)
    pred = model.predict(x, y, xq)
    gd = debiased_gd_predict(x, y, xq, pattern.step_size)
    err = (pred - yq) ** 2
    return DebiasedGDComparison(
        pattern,
        float(err.mean()),
        debiased_gd_risk(n_context, d, step_size=pattern.step_size, **prior).risk,
        float(((gd - yq) ** 2).mean()),
        float(((pred - gd) ** 2).mean() / (gd**2).mean()),
        debiased_gd_risk(n_context, d, **prior),
        float(err.std(ddof=1) / math.sqrt(n_test)),
    )
