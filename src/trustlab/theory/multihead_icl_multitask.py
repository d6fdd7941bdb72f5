"""Multi-task in-context regression: heads specialise per task, or superpose.

He, Pan, Chen & Yang (ICML 2025; the authors' summary, "In-Context Multi-Task Regression") let
``N`` tasks share ``beta ~ N(0, I_d/d)`` on supports ``S_n``: ``y_n = beta_{S_n}^T x_{S_n} +
eps_n``. Tokens are ``(x, y) in R^{d+N}`` and the model predicts ``y_q in R^N``. They report that
the trained heads keep a diagonal KQ block ``diag(omega_h)`` and a diagonal label block
``diag(mu_h)`` of OV. To first order in ``omega`` the prediction for task ``n`` is then

``y_hat_n = (sum_h mu_{h,n}) ybar_n + 1/L sum_l y_{l,n} sum_j E[n, j] (x_{l,j} - xbar_j) x_{q,j}``,

with the *effective step* ``E[n, j] = sum_h mu_{h,n} omega_{h,j}`` (:func:`multitask_pattern`).
Their findings: with ``H >= 2N`` heads, head pairs are dedicated to tasks and ``E[n, j] ~ 1`` on
``S_n`` and ``0`` off it (``N`` separate debiased GD predictors); with ``H = 2`` one weighted
debiased GD serves every task (the same ``E`` row for both, larger on the shared features); with
``2 < H < 2N`` heads superpose and reach the ``H = 2N`` predictor. These are experimental
findings (no theorem); :func:`train_multitask_attention` reproduces the setting. See
``docs/theory/multihead-icl.md``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._threads import one_thread
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, MissingDependencyError

__all__ = [
    "MultiTaskAttention",
    "MultiTaskPattern",
    "multitask_pattern",
    "multitask_prompts",
    "separate_debiased_gd_predict",
    "train_multitask_attention",
]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_INT2 = Interval(numbers.Integral, 2, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")
PAPER_SUPPORTS: tuple[tuple[int, ...], ...] = ((0, 1, 2, 3), (2, 3, 4, 5))
"""The blog's two tasks on ``d = 6`` features (1-based ``{1,2,3,4}`` and ``{3,4,5,6}``)."""


def _masks(supports: Any, dim: int) -> np.ndarray:
    """``(N, d)`` 0/1 masks of the supports, checked."""
    if not isinstance(supports, Sequence) or not supports:
        raise DataError("supports must be a non-empty sequence of index sequences.", argument="supports")
    masks = np.zeros((len(supports), dim))
    for n, s in enumerate(supports):
        idx = list(s) if isinstance(s, Sequence) else []
        if not idx or any(not isinstance(i, numbers.Integral) or not 0 <= int(i) < dim for i in idx):
            raise DataError(f"supports[{n}] must be non-empty indices in [0, {dim}).", argument="supports")
        masks[n, [int(i) for i in idx]] = 1.0
    return masks


@validate_params(
    {
        "n_prompts": [_INT1],
        "n_context": [_INT2],
        "dim": [_INT1],
        "signal_variance": [_POS, None],
        "noise_variance": [_NONNEG],
        "random_state": ["random_state"],
    }
)
def multitask_prompts(
    n_prompts: int,
    n_context: int = 40,
    dim: int = 6,
    *,
    supports: Sequence[Sequence[int]] = PAPER_SUPPORTS,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    random_state: Any = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Draw multi-task prompts: ``y_n = beta_{S_n}^T x_{S_n} + eps_n``, one ``beta`` per prompt.

    Parameters
    ----------
    n_prompts : int
    n_context, dim : int, default 40, 6
        ``L`` and ``d`` (the blog's setting).
    supports : sequence of index sequences, default ``((0, 1, 2, 3), (2, 3, 4, 5))``
        ``S_n`` (0-based).
    signal_variance : float, optional
        ``tau^2``; default ``1/d``.
    noise_variance : float, default 0.1
    random_state : int, Generator or None, default 0

    Returns
    -------
    X : numpy.ndarray ``(n_prompts, L, d)``
    Y : numpy.ndarray ``(n_prompts, L, N)``
    x_query : numpy.ndarray ``(n_prompts, d)``
    y_query : numpy.ndarray ``(n_prompts, N)``

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (in-context multi-task regression).

    Examples
    --------
    >>> X, Y, xq, yq = multitask_prompts(3)
    >>> X.shape, Y.shape, yq.shape
    ((3, 40, 6), (3, 40, 2), (3, 2))
    """
    masks = _masks(supports, dim)
    rng = make_generator(random_state)
    tau2 = 1.0 / dim if signal_variance is None else float(signal_variance)
    beta = rng.standard_normal((n_prompts, dim)) * math.sqrt(tau2)
    x = rng.standard_normal((n_prompts, n_context + 1, dim))
    y = np.einsum("pld,nd,pd->pln", x, masks, beta)
    y = y + math.sqrt(noise_variance) * rng.standard_normal(y.shape)
    return x[:, :-1], y[:, :-1], x[:, -1], y[:, -1]


@dataclass(frozen=True)
class MultiTaskAttention:
    """A trained one-layer ``H``-head softmax attention with ``N`` outputs.

    Attributes
    ----------
    key_query : numpy.ndarray ``(H, d + N, d)``
        Head ``h`` scores token ``z_i`` by ``z_i^T key_query[h] x_q``.
    output_value : numpy.ndarray ``(H, N, d + N)``
        Rows of ``OV_h`` writing the ``N`` predictions.
    losses : numpy.ndarray
        Training MSE (summed over tasks) per step.

    See Also
    --------
    train_multitask_attention : trains it.
    """

    key_query: np.ndarray
    output_value: np.ndarray
    losses: np.ndarray

    def predict(self, X: Any, Y: Any, x_query: Any) -> np.ndarray:
        """Predictions ``(m, N)`` for each prompt (NumPy forward pass).

        Parameters
        ----------
        X : array-like ``(m, L, d)``
        Y : array-like ``(m, L, N)``
        x_query : array-like ``(m, d)``

        Returns
        -------
        numpy.ndarray ``(m, N)``
        """
        x = check_numeric_array(X, "X", ndim=3)
        t = check_numeric_array(Y, "Y", ndim=3)
        q = check_numeric_array(x_query, "x_query", ndim=2)
        _, n_out, width = self.output_value.shape
        if x.shape[2] + n_out != width or t.shape != (*x.shape[:2], n_out) or q.shape != (len(x), x.shape[2]):
            raise DataError(
                f"prompts must be X (m, L, {width - n_out}), Y (m, L, {n_out}), x_query (m, d).", argument="X"
            )
        z = np.concatenate([x, t], axis=2)
        s = np.matmul(np.einsum("hkd,pd->phk", self.key_query, q), z.transpose(0, 2, 1))
        s = np.exp(s - s.max(axis=2, keepdims=True))
        att = np.matmul(s / s.sum(axis=2, keepdims=True), z)  # (m, H, d + N)
        return np.asarray(np.einsum("phk,hnk->pn", att, self.output_value))


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
    }
)
def train_multitask_attention(
    n_heads: int = 4,
    dim: int = 6,
    n_context: int = 40,
    *,
    supports: Sequence[Sequence[int]] = PAPER_SUPPORTS,
    steps: int = 1500,
    batch_size: int = 256,
    learning_rate: float = 1e-2,
    init_scale: float = 0.1,
    signal_variance: float | None = None,
    noise_variance: float = 0.1,
    random_state: int = 0,
) -> MultiTaskAttention:
    """Train one layer of ``H``-head softmax attention on multi-task prompts (Adam, fresh batches).

    Parameters
    ----------
    n_heads, dim, n_context : int, default 4, 6, 40
    supports : sequence of index sequences, default ``((0, 1, 2, 3), (2, 3, 4, 5))``
    steps, batch_size : int, default 1500, 256
    learning_rate : float, default 1e-2
    init_scale : float, default 0.1
        Gaussian initialisation scale of the merged KQ and OV parameters.
    signal_variance, noise_variance : float, default 1/d, 0.1
    random_state : int, default 0

    Returns
    -------
    MultiTaskAttention

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (multi-task experiments: d 6, N 2, L 40, sigma^2 0.1).

    Examples
    --------
    >>> m = train_multitask_attention(2, steps=2, batch_size=8)
    >>> m.key_query.shape, m.output_value.shape
    ((2, 8, 6), (2, 2, 8))
    """
    n_out = len(_masks(supports, dim))
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the torch extra
        raise MissingDependencyError(
            "train_multitask_attention needs torch: `pip install trustlab[torch]`."
        ) from exc
    rng = np.random.default_rng(random_state)
    torch.manual_seed(random_state)
    kq = torch.nn.Parameter(init_scale * torch.randn(n_heads, dim + n_out, dim, dtype=torch.float64))
    ov = torch.nn.Parameter(init_scale * torch.randn(n_heads, n_out, dim + n_out, dtype=torch.float64))
    opt = torch.optim.Adam([kq, ov], lr=learning_rate)
    losses = np.empty(steps)
    prior: dict[str, Any] = {
        "supports": supports,
        "signal_variance": signal_variance,
        "noise_variance": noise_variance,
    }
    with one_thread():
        for k in range(steps):
            x, y, xq, yq = (
                torch.from_numpy(a)
                for a in multitask_prompts(batch_size, n_context, dim, random_state=rng, **prior)
            )
            z = torch.cat([x, y], dim=2)
            p = torch.softmax(torch.bmm(torch.einsum("hkd,pd->phk", kq, xq), z.transpose(1, 2)), dim=2)
            pred = torch.einsum("phk,hnk->pn", torch.bmm(p, z), ov)
            loss = ((pred - yq) ** 2).sum(dim=1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[k] = float(loss.detach())
    return MultiTaskAttention(kq.detach().numpy().copy(), ov.detach().numpy().copy(), losses)


@dataclass(frozen=True)
class MultiTaskPattern:
    """The diagonal structure of a :class:`MultiTaskAttention` and the steps it implies.

    Attributes
    ----------
    omega : numpy.ndarray ``(H, d)``
        Diagonal of each head's KQ covariate block.
    mu : numpy.ndarray ``(H, N)``
        Diagonal of each head's OV label block (head ``h``'s weight on task ``n``'s labels).
    effective_step : numpy.ndarray ``(N, d)``
        ``E[n, j] = sum_h mu_{h,n} omega_{h,j}``.
    zero_sum : numpy.ndarray ``(N,)``
        ``|sum_h mu_{h,n}| / sum_h |mu_{h,n}|`` per task.
    off_diagonal : float
        Largest off-diagonal KQ covariate entry or off-diagonal OV label entry, relative to the
        largest diagonal one.
    specialisation : numpy.ndarray ``(H,)``
        ``max_n |mu_{h,n}| / sum_n |mu_{h,n}|`` per head (1: serves one task).

    See Also
    --------
    multitask_pattern : computes it.
    """

    omega: np.ndarray
    mu: np.ndarray
    effective_step: np.ndarray
    zero_sum: np.ndarray
    off_diagonal: float
    specialisation: np.ndarray


@validate_params({})  # its one argument, a trained model, is checked by hand (a DataError naming model)
def multitask_pattern(model: MultiTaskAttention) -> MultiTaskPattern:
    """Read the diagonal KQ / diagonal OV pattern and the effective steps off ``model``.

    Parameters
    ----------
    model : MultiTaskAttention

    Returns
    -------
    MultiTaskPattern

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (global pattern ``KQ_11 = diag(omega_h)``,
    ``OV_22 = diag(mu_h)``; first-order predictor per task).

    Examples
    --------
    >>> kq = np.zeros((2, 4, 2)); kq[0, :2], kq[1, :2] = 0.1 * np.eye(2), -0.1 * np.eye(2)
    >>> ov = np.zeros((2, 2, 4)); ov[0, :, 2:], ov[1, :, 2:] = 5 * np.eye(2), -5 * np.eye(2)
    >>> multitask_pattern(MultiTaskAttention(kq, ov, np.zeros(1))).effective_step.tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    if not isinstance(model, MultiTaskAttention):
        raise DataError(f"model must be a MultiTaskAttention, got {type(model).__name__}.", argument="model")
    kq, ov = model.key_query, model.output_value
    d, n_out = kq.shape[2], ov.shape[1]
    blk_kq, blk_ov = kq[:, :d, :d], ov[:, :, d:]
    omega, mu = np.einsum("hii->hi", blk_kq), np.einsum("hii->hi", blk_ov)
    off_kq = blk_kq - np.einsum("hi,ij->hij", omega, np.eye(d))
    off_ov = blk_ov - np.einsum("hi,ij->hij", mu, np.eye(n_out))
    scale = max(float(np.abs(omega).max()), 1e-300), max(float(np.abs(mu).max()), 1e-300)
    off = max(float(np.abs(off_kq).max()) / scale[0], float(np.abs(off_ov).max(initial=0.0)) / scale[1])
    a = np.abs(mu)
    return MultiTaskPattern(
        omega,
        mu,
        np.einsum("hn,hj->nj", mu, omega),
        np.abs(mu.sum(axis=0)) / np.maximum(a.sum(axis=0), 1e-300),
        off,
        a.max(axis=1) / np.maximum(a.sum(axis=1), 1e-300),
    )


@validate_params({"X": ["array-like"], "Y": ["array-like"], "x_query": ["array-like"], "step_size": [_POS]})
def separate_debiased_gd_predict(
    X: Any, Y: Any, x_query: Any, step_size: float, *, supports: Sequence[Sequence[int]] = PAPER_SUPPORTS
) -> np.ndarray:
    """``N`` separate debiased GD predictors, task ``n`` on its own support ``S_n``.

    ``y_hat_n = eta / L sum_l y_{l,n} (x_{l,S_n} - xbar_{S_n})^T x_{q,S_n}``: the predictor the
    blog reports for ``H >= 2N`` heads (and, by superposition, for ``2 < H < 2N``).

    Parameters
    ----------
    X : array-like ``(m, L, d)``
    Y : array-like ``(m, L, N)``
    x_query : array-like ``(m, d)``
    step_size : float
        ``eta`` (``debiased_gd_risk(L, |S_n|, signal_variance=1/d).optimal_step_size`` is the
        best for one task).
    supports : sequence of index sequences, default ``((0, 1, 2, 3), (2, 3, 4, 5))``

    Returns
    -------
    numpy.ndarray ``(m, N)``

    References
    ----------
    He, Pan, Chen & Yang, ICML 2025 (multi-task: ``N`` separate debiased GD predictors).

    Examples
    --------
    >>> X = np.array([[[1.0, 0.0], [-1.0, 0.0]]]); Y = np.array([[[2.0, 2.0], [-2.0, -2.0]]])
    >>> separate_debiased_gd_predict(X, Y, [[1.0, 1.0]], 1.0, supports=[[0], [1]]).tolist()
    [[2.0, 0.0]]
    """
    x = check_numeric_array(X, "X", ndim=3)
    t = check_numeric_array(Y, "Y", ndim=3)
    q = check_numeric_array(x_query, "x_query", ndim=2)
    masks = _masks(supports, x.shape[2])
    if t.shape != (*x.shape[:2], len(masks)) or q.shape != (len(x), x.shape[2]):
        raise DataError(
            f"shapes must be X (m, L, d), Y (m, L, {len(masks)}), x_query (m, d); got {x.shape}, {t.shape}, "
            f"{q.shape}.",
            argument="Y",
        )
    centred = x - x.mean(axis=1, keepdims=True)
    return np.asarray(float(step_size) / x.shape[1] * np.einsum("pln,pld,nd,pd->pn", t, centred, masks, q))
