"""Multi-head softmax attention learns a debiased gradient-descent predictor in context.

In-context linear regression: ``x_i ~ N(0, I_d)``, ``w ~ N(0, tau^2 I_d)`` (the paper's
``tau^2 = 1/d`` by default), ``y_i = w^T x_i + eps_i`` with ``eps_i ~ N(0, sigma^2)``; tokens
``z_i = (x_i, y_i)`` and a query ``(x_q, 0)``. He, Pan, Chen & Yang (ICML 2025) show that
one layer of ``H``-head softmax attention trained on this task converges to a diagonal,
homogeneous key-query pattern ``KQ_h = omega_h [I_d; 0]`` and a last-entry-only, zero-sum
output-value pattern ``OV_h = mu_h e_{d+1}``, ``sum_h mu_h = 0``; expanding the softmax to first order, the
prediction is then the *debiased* GD predictor

``y_hat = eta / n * sum_i y_i (x_i - x_bar)^T x_q``, ``eta = sum_h mu_h omega_h``,

one gradient step on centred covariates, whereas one head keeps a bias ``mu ybar``.
:func:`debiased_gd_predict` and :func:`debiased_gd_risk` are the closed forms,
:func:`train_icl_attention` trains the attention model, :func:`attention_pattern` reads the
pattern off it; ``simulate_debiased_gd`` (in :mod:`~trustlab.theory.multihead_icl_bayes`)
compares the trained model with the theory.
Defaults are the paper's experiment (``d = 5``, ``n = L = 40``, ``sigma^2 = 0.1``). The Bayes
comparison is in :mod:`~trustlab.theory.multihead_icl_bayes`, the paper's approximate loss and
training dynamics in :mod:`~trustlab.theory.multihead_icl_dynamics`.
See ``docs/theory/multihead-icl.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._threads import one_thread
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, MissingDependencyError

__all__ = [
    "AttentionPattern",
    "DebiasedGDRisk",
    "ICLAttention",
    "attention_pattern",
    "debiased_gd_predict",
    "debiased_gd_risk",
    "linear_regression_prompts",
    "train_icl_attention",
]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_INT2 = Interval(numbers.Integral, 2, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_REAL = Interval(numbers.Real, None, None, closed="neither")  # finite, not NaN
_NONNEG = Interval(numbers.Real, 0, None, closed="left")


@validate_params(
    {
        "n_prompts": [_INT1],
        "n_context": [_INT2],
        "dim": [_INT1],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
        "random_state": ["random_state"],
        "covariance": ["array-like", None],
    }
)
def linear_regression_prompts(
    n_prompts: int,
    n_context: int,
    dim: int,
    *,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    random_state: Any = 0,
    covariance: Any = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Draw in-context linear-regression prompts.

    Parameters
    ----------
    n_prompts, n_context, dim : int
        Number of prompts, examples per prompt ``n`` and covariate dimension ``d``.
    signal_variance : float, optional
        ``tau^2``: ``w ~ N(0, tau^2 I_d)``; default ``1/d`` (the paper's ``N(0, I_d/d)``).
    noise_variance : float, default 0.1
        ``sigma^2`` of the label noise (on the context and the query; the paper's 0.1).
    random_state : int, Generator or None, default 0
    covariance : array-like ``(d, d)``, optional
        ``x ~ N(0, Sigma)`` (the paper's anisotropic extension); default ``I_d``.

    Returns
    -------
    X : numpy.ndarray ``(n_prompts, n, d)``
    y : numpy.ndarray ``(n_prompts, n)``
    x_query : numpy.ndarray ``(n_prompts, d)``
    y_query : numpy.ndarray ``(n_prompts,)``

    Examples
    --------
    >>> X, y, xq, yq = linear_regression_prompts(3, 5, 2)
    >>> X.shape, y.shape, xq.shape, yq.shape
    ((3, 5, 2), (3, 5), (3, 2), (3,))
    """
    rng = make_generator(random_state)
    w = rng.standard_normal((n_prompts, dim)) * math.sqrt(_tau2(signal_variance, dim))
    x = rng.standard_normal((n_prompts, n_context + 1, dim))
    if covariance is not None:
        x = x @ _cholesky(covariance, dim).T
    y = np.einsum("pnd,pd->pn", x, w) + math.sqrt(noise_variance) * rng.standard_normal(
        (n_prompts, n_context + 1)
    )
    return x[:, :-1], y[:, :-1], x[:, -1], y[:, -1]


def _cholesky(covariance: Any, dim: int) -> np.ndarray:
    """Cholesky factor of a ``(dim, dim)`` symmetric positive-definite ``covariance``."""
    c = check_numeric_array(covariance, "covariance", ndim=2)
    if c.shape != (dim, dim) or not np.allclose(c, c.T) or np.linalg.eigvalsh(c)[0] <= 0:
        raise DataError(
            f"covariance must be a symmetric positive-definite ({dim}, {dim}) matrix.", argument="covariance"
        )
    return np.linalg.cholesky(c)


def _tau2(signal_variance: float | None, dim: int) -> float:
    """The prior variance per coordinate: the paper's ``1/d`` unless given."""
    return 1.0 / dim if signal_variance is None else float(signal_variance)


@validate_params({"X": ["array-like"], "y": ["array-like"], "x_query": ["array-like"], "step_size": [_REAL]})
def debiased_gd_predict(X: Any, y: Any, x_query: Any, step_size: float) -> np.ndarray:
    """The debiased GD predictor ``eta / n * sum_i y_i (x_i - x_bar)^T x_q`` for each prompt.

    Parameters
    ----------
    X : array-like ``(m, n, d)``
    y : array-like ``(m, n)``
    x_query : array-like ``(m, d)``
    step_size : float
        ``eta``.

    Returns
    -------
    numpy.ndarray ``(m,)``

    References
    ----------
    J. He, X. Pan, S. Chen and Z. Yang, "In-Context Linear Regression Demystified: Training
    Dynamics and Mechanistic Interpretability of Multi-Head Softmax Attention", ICML 2025
    (arXiv:2503.12734).

    Examples
    --------
    >>> X = np.array([[[1.0], [-1.0]]]); y = np.array([[2.0, -2.0]])
    >>> float(debiased_gd_predict(X, y, np.array([[0.5]]), 1.0)[0])
    1.0
    """
    x = check_numeric_array(X, "X", ndim=3)
    t = check_numeric_array(y, "y", ndim=2)
    q = check_numeric_array(x_query, "x_query", ndim=2)
    if t.shape != x.shape[:2] or q.shape != (x.shape[0], x.shape[2]):
        raise DataError(
            f"shapes must be X (m, n, d), y (m, n), x_query (m, d); got {x.shape}, {t.shape}, {q.shape}.",
            argument="y",
        )
    centred = x - x.mean(axis=1, keepdims=True)
    g = np.einsum("pn,pnd->pd", t, centred) / x.shape[1]
    return np.asarray(float(step_size) * np.einsum("pd,pd->p", g, q))


@dataclass(frozen=True)
class DebiasedGDRisk:
    """Closed-form prediction risks on isotropic Gaussian prompts.

    Attributes
    ----------
    step_size : float
        The ``eta`` evaluated (the optimum when none was given).
    risk : float
        ``E (y_hat - y_q)^2`` of the debiased GD predictor at ``step_size``.
    optimal_step_size, optimal_risk : float
        ``eta* = n tau^2 / (tau^2 (n + d) + sigma^2)`` and its risk.
    vanilla_optimal_risk : float
        The risk of plain one-step GD ``eta / n sum_i y_i x_i^T x_q`` at its best ``eta``.
    bias_variance : float
        ``E ybar^2 = (tau^2 d + sigma^2) / n``: what a head's output ``mu ybar`` adds per unit
        ``mu^2`` when the heads' ``mu`` do not sum to zero.
    null_risk : float
        ``tau^2 d + sigma^2`` (predicting 0).

    See Also
    --------
    debiased_gd_risk : computes it.
    """

    step_size: float
    risk: float
    optimal_step_size: float
    optimal_risk: float
    vanilla_optimal_risk: float
    bias_variance: float
    null_risk: float


@validate_params(
    {
        "n_context": [_INT2],
        "dim": [_INT1],
        "step_size": [_REAL, None],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
    }
)
def debiased_gd_risk(
    n_context: int,
    dim: int,
    *,
    step_size: float | None = None,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
) -> DebiasedGDRisk:
    """Exact risk of the debiased GD predictor (and of plain GD) for Gaussian covariates.

    With ``g = (1/n) sum_i y_i (x_i - x_bar)``, ``S = sum_i (x_i - x_bar)(x_i - x_bar)^T`` is
    Wishart with ``m = n - 1`` degrees of freedom, so ``E g = (m/n) w``,
    ``E|g|^2 = m (tau^2 d (m + 1 + d) + sigma^2 d) / n^2`` and
    ``R(eta) = eta^2 E|g|^2 - 2 eta (m/n) tau^2 d + tau^2 d + sigma^2``.

    Parameters
    ----------
    n_context, dim : int
    step_size : float, optional
        ``eta``; default the optimum.
    signal_variance, noise_variance : float, default 1/d, 0.1
        ``tau^2`` and ``sigma^2``. With ``tau^2 = 1/d``, ``eta* = (1 + (1 + sigma^2) d / n)^{-1}``:
        the paper's optimal step (Theorem 1(2) of the authors' summary).

    Returns
    -------
    DebiasedGDRisk

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (the debiased GD predictor; the risk is derived here).

    Examples
    --------
    >>> r = debiased_gd_risk(40, 5)
    >>> round(r.optimal_step_size, 4), round(1 / (1 + 1.1 * 5 / 40), 4), bool(r.optimal_risk < r.null_risk)
    (0.8791, 0.8791, True)
    """
    n, d, tau2, s2 = n_context, dim, _tau2(signal_variance, dim), float(noise_variance)
    m = n - 1
    cross = m / n * tau2 * d
    sq = m * (tau2 * d * (m + 1 + d) + s2 * d) / n**2
    null = tau2 * d + s2
    eta_star = cross / sq
    eta = eta_star if step_size is None else float(step_size)
    sq_v = (tau2 * d * (n + 1 + d) + s2 * d) / n  # plain GD: X^T X is Wishart with n degrees
    return DebiasedGDRisk(
        eta,
        eta**2 * sq - 2 * eta * cross + null,
        eta_star,
        null - cross**2 / sq,
        null - (tau2 * d) ** 2 / sq_v,
        (tau2 * d + s2) / n,
        null,
    )


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the torch extra
        raise MissingDependencyError(
            "train_icl_attention needs torch; install it with `pip install trustlab[torch]`."
        ) from exc
    return torch


@dataclass(frozen=True)
class ICLAttention:
    """A trained one-layer ``H``-head softmax attention for in-context regression.

    Attributes
    ----------
    key_query : numpy.ndarray ``(H, d + 1, d)``
        Merged ``W_K^T W_Q`` restricted to the query's covariate block (its label entry is 0):
        head ``h`` scores token ``z_i`` by ``z_i^T key_query[h] x_q``.
    output_value : numpy.ndarray ``(H, d + 1)``
        The row of ``W_O W_V`` that writes the prediction: head ``h`` adds
        ``output_value[h] . sum_i softmax_i z_i``.
    losses : numpy.ndarray
        Training MSE per step.
    trajectory : numpy.ndarray ``(k, 2, H)`` or None
        With ``record_every = r``: row ``j`` holds each head's mean KQ diagonal ``omega_h`` and
        label output ``mu_h`` after step ``(j + 1) r``.

    See Also
    --------
    train_icl_attention : trains it.
    """

    key_query: np.ndarray
    output_value: np.ndarray
    losses: np.ndarray
    trajectory: np.ndarray | None = None

    def predict(self, X: Any, y: Any, x_query: Any) -> np.ndarray:
        """The model's prediction of ``y_q`` for each prompt (NumPy forward pass).

        Parameters
        ----------
        X : array-like ``(m, n, d)``
        y : array-like ``(m, n)``
        x_query : array-like ``(m, d)``

        Returns
        -------
        numpy.ndarray ``(m,)``
        """
        x = check_numeric_array(X, "X", ndim=3)
        t = check_numeric_array(y, "y", ndim=2)
        q = check_numeric_array(x_query, "x_query", ndim=2)
        if x.shape[2] + 1 != self.key_query.shape[1] or t.shape != x.shape[:2] or len(q) != len(x):
            raise DataError(
                f"prompts must be X (m, n, {self.key_query.shape[1] - 1}), y (m, n), x_query (m, d); "
                f"got {x.shape}, {t.shape}, {q.shape}.",
                argument="X",
            )
        z = np.concatenate([x, t[..., None]], axis=2)
        s = np.matmul(np.einsum("hkd,pd->phk", self.key_query, q), z.transpose(0, 2, 1))  # (m, H, n)
        s = np.exp(s - s.max(axis=2, keepdims=True))
        p = s / s.sum(axis=2, keepdims=True)
        return np.asarray((np.matmul(p, z) * self.output_value).sum(axis=(1, 2)))


@validate_params(
    {
        "n_heads": [_INT1],
        "dim": [_INT1],
        "n_context": [_INT2],
        "steps": [_INT1],
        "batch_size": [_INT1],
        "learning_rate": [_POS],
        "init_scale": [_POS],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
        "record_every": [_INT1, None],
        "covariance": ["array-like", None],
    }
)
def train_icl_attention(
    n_heads: int = 2,
    dim: int = 5,
    n_context: int = 40,
    *,
    steps: int = 1500,
    batch_size: int = 256,
    learning_rate: float = 1e-2,
    init_scale: float = 0.1,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    random_state: int = 0,
    record_every: int | None = None,
    covariance: Any = None,
) -> ICLAttention:
    """Train one layer of multi-head softmax attention on fresh in-context regression prompts.

    Parameters are the merged key-query and output-value matrices (the paper's
    parameterisation), from a Gaussian initialisation of scale ``init_scale``; Adam on the
    query's squared error, a fresh batch of prompts each step. Requires torch.

    Parameters
    ----------
    n_heads, dim, n_context : int, default 2, 5, 40
    steps, batch_size : int, default 1500, 256
    learning_rate : float, default 1e-2
    init_scale : float, default 0.1
    signal_variance, noise_variance : float, default 1/d, 0.1
    random_state : int, default 0
    record_every : int, optional
        Keep each head's ``(omega_h, mu_h)`` every this many steps (``ICLAttention.trajectory``).
    covariance : array-like ``(d, d)``, optional
        Covariate covariance (default ``I_d``), as in :func:`linear_regression_prompts`.

    Returns
    -------
    ICLAttention

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (the trained model whose patterns emerge).

    Examples
    --------
    >>> m = train_icl_attention(steps=2, batch_size=8)
    >>> m.key_query.shape, m.output_value.shape
    ((2, 6, 5), (2, 6))
    """
    torch = _torch()
    if covariance is not None:
        _cholesky(covariance, dim)  # fail before training
    rng = np.random.default_rng(random_state)
    torch.manual_seed(random_state)
    d, h = dim, n_heads
    kq = torch.nn.Parameter(init_scale * torch.randn(h, d + 1, d, dtype=torch.float64))
    ov = torch.nn.Parameter(init_scale * torch.randn(h, d + 1, dtype=torch.float64))
    opt = torch.optim.Adam([kq, ov], lr=learning_rate)
    losses, trajectory = np.empty(steps), []
    with one_thread():
        for k in range(steps):
            x, y, xq, yq = (
                torch.from_numpy(a)
                for a in linear_regression_prompts(
                    batch_size,
                    n_context,
                    d,
                    signal_variance=signal_variance,
                    noise_variance=noise_variance,
                    random_state=rng,
                    covariance=covariance,
                )
            )
            z = torch.cat([x, y.unsqueeze(-1)], dim=2)
            u = torch.einsum("hkd,pd->phk", kq, xq)  # each head's key direction for this query
            p = torch.softmax(torch.bmm(u, z.transpose(1, 2)), dim=2)
            pred = (torch.bmm(p, z) * ov).sum(dim=(1, 2))
            loss = ((pred - yq) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[k] = float(loss.detach())
            if record_every and (k + 1) % record_every == 0:
                w, v = kq.detach().numpy(), ov.detach().numpy()
                trajectory.append([np.einsum("hii->hi", w[:, :d, :d]).mean(axis=1), v[:, d]])
    hist = np.asarray(trajectory) if record_every else None
    return ICLAttention(kq.detach().numpy().copy(), ov.detach().numpy().copy(), losses, hist)


@dataclass(frozen=True)
class AttentionPattern:
    """The key-query and output-value structure of a trained :class:`ICLAttention`.

    Attributes
    ----------
    omega : numpy.ndarray ``(H,)``
        Mean diagonal of each head's covariate block ``KQ_h[:d, :d]``.
    mu : numpy.ndarray ``(H,)``
        Each head's last output-value entry.
    off_diagonal : float
        Largest ``|off-diagonal and label-row entries of KQ_h| / |omega_h|`` over heads.
    diagonal_spread : float
        Largest ``std(diag KQ_h) / |omega_h|`` (0: homogeneous).
    other_entries : float
        Largest ``|OV_h[:d]|_max / |mu_h|`` (0: last-entry-only).
    zero_sum : float
        ``|sum_h mu_h| / sum_h |mu_h|`` (0: the heads' label outputs cancel).
    step_size : float
        ``eta = sum_h mu_h omega_h``, the debiased GD step the pattern implements.

    See Also
    --------
    attention_pattern : computes it.
    """

    omega: np.ndarray
    mu: np.ndarray
    off_diagonal: float
    diagonal_spread: float
    other_entries: float
    zero_sum: float
    step_size: float


def attention_pattern(model: ICLAttention) -> AttentionPattern:
    """Read the diagonal-homogeneous KQ and last-entry-only zero-sum OV pattern off ``model``.

    Parameters
    ----------
    model : ICLAttention

    Returns
    -------
    AttentionPattern

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (the emergent patterns).

    Examples
    --------
    >>> kq = np.zeros((2, 3, 2)); kq[0, :2] = 0.5 * np.eye(2); kq[1, :2] = -0.5 * np.eye(2)
    >>> ov = np.zeros((2, 3)); ov[:, 2] = [1.0, -1.0]
    >>> p = attention_pattern(ICLAttention(kq, ov, np.zeros(1)))
    >>> p.step_size, p.zero_sum, p.off_diagonal
    (1.0, 0.0, 0.0)
    """
    if not isinstance(model, ICLAttention):
        raise DataError(f"model must be an ICLAttention, got {type(model).__name__}.", argument="model")
    kq, ov = model.key_query, model.output_value
    d = kq.shape[2]
    diag = np.einsum("hii->hi", kq[:, :d, :d])
    omega = diag.mean(axis=1)
    off = kq.copy()
    off[:, np.arange(d), np.arange(d)] = 0.0
    scale = np.maximum(np.abs(omega), 1e-12)
    mu = ov[:, d]
    mscale = np.maximum(np.abs(mu), 1e-12)
    return AttentionPattern(
        omega,
        mu,
        float((np.abs(off).reshape(len(kq), -1).max(axis=1) / scale).max()),
        float((diag.std(axis=1) / scale).max()),
        float((np.abs(ov[:, :d]).max(axis=1, initial=0.0) / mscale).max()),
        float(abs(mu.sum()) / max(np.abs(mu).sum(), 1e-12)),
        float((mu * omega).sum()),
    )
