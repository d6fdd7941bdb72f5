"""Task *decoding* in the sparse-regression mixture of :mod:`trustlab.lm.task_vectors_regression` [1]_.

The paper (section 3.3, App. B and D.1) calls the basis-specific regression algorithm that the model
applies once it has inferred the basis the *task decoding*; it reads it off the error curve over
the number of demonstrations: a model that does not infer the basis can do no better than a
``D``-dimensional regression (error near 0 only after about ``D`` demonstrations), one that does
reaches the ``r``-dimensional bound (near 0 after about ``r``). :func:`regression_baselines` computes
three reference algorithms on the same prompts and :func:`decoding_index` places a model's curve
between the first two of them.

References
----------
.. [1] Han, Song, Gore, Agrawal. "Emergence and Effectiveness of Task Vectors in In-Context
   Learning: An Encoder Decoder Perspective". ICML 2025 (PMLR 267), arXiv:2412.12276.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError
from trustlab.lm._tv_regression_model import RegressionPrompts, sparse_regression_prompts

__all__ = ["BASELINES", "RegressionTaskVectors", "decoding_index", "regression_baselines"]

BASELINES = ("generic", "bayes", "oracle")


def _solve_pred(x: np.ndarray, y: np.ndarray, xq: np.ndarray, noise: float) -> tuple[np.ndarray, np.ndarray]:
    """Posterior-mean prediction at ``xq`` and log evidence for ``y = x w + eps``, ``w ~ N(0, I)``."""
    n, k, _ = x.shape
    if k == 0:
        return np.zeros(n), np.zeros(n)
    a = x @ x.transpose(0, 2, 1) + noise**2 * np.eye(k)[None]
    alpha = np.linalg.solve(a, y[..., None])[..., 0]
    pred = np.einsum("nd,nkd,nk->n", xq, x, alpha)
    _, logdet = np.linalg.slogdet(a)
    return pred, -0.5 * (np.einsum("nk,nk->n", y, alpha) + logdet)


@validate_params({"noise": [Interval(numbers.Real, 0, None, closed="neither")]})
def regression_baselines(prompts: Any, *, noise: float = 0.1) -> np.ndarray:
    """Test MSE per basis and position of three reference regressions (the paper's App. D.1) [1]_.

    On the prompts' own demonstrations, the prediction of each ``y_i`` from ``(x_1, y_1), ...,
    (x_{i-1}, y_{i-1})`` by:

    - ``"generic"``: the Bayes (ridge) regression over all ``D`` coordinates under the mixture's
      covariance of ``w`` (``1 / n_bases`` on every coordinate a basis covers): the best
      predictor linear in the ``y``'s, which does not infer the basis (the paper's
      ``D``-dimensional regression);
    - ``"bayes"``: the Bayes-optimal predictor of the mixture: the posterior over the basis from
      the demonstrations (each basis's Gaussian evidence, uniform prior) weighting each basis's
      ridge prediction (task encoding ``P(z | D)`` and decoding ``P(y* | x*, z)``, the paper's eq. 1);
    - ``"oracle"``: the ridge regression on the true basis's ``r`` coordinates (the paper's
      ``r``-dimensional bound).

    Parameters
    ----------
    prompts : RegressionPrompts
        Test prompts (every basis present).
    noise : float, default=0.1
        Standard deviation of ``eps`` assumed by the three (the prompts' own).

    Returns
    -------
    ndarray of float, shape (3, n_bases, n_points)
        ``[a, b, i]``: mean squared error of baseline :data:`BASELINES` ``[a]`` on ``y_i`` (after
        ``i`` demonstrations) of basis ``b``, divided by ``rank`` (as :func:`basis_losses`).

    Examples
    --------
    >>> from trustlab.lm.task_vectors_regression import sparse_regression_prompts
    >>> b = regression_baselines(sparse_regression_prompts(400, n_dims=8, rank=1, n_bases=8, n_points=4))
    >>> b.shape, b[:, :, 2].mean(axis=1).round(1).tolist()  # generic, Bayes, oracle after 2 demonstrations
    ((3, 8, 4), [0.6, 0.2, 0.0])
    """
    if not isinstance(prompts, RegressionPrompts):
        raise DataError(
            "prompts must be RegressionPrompts (from sparse_regression_prompts).", argument="prompts"
        )
    xs, ys = prompts.xs.astype(float), prompts.ys.astype(float)
    n, kk, _ = xs.shape
    r, nb = prompts.rank, prompts.n_bases
    if len(np.unique(prompts.basis)) < nb:
        raise DataError("prompts must hold every basis; draw more.", argument="prompts")
    covered = nb * r
    scale = np.sqrt(1.0 / nb)
    err = np.zeros((3, n, kk))
    rows = np.arange(n)
    for i in range(kk):
        x, y, xq = xs[:, :i], ys[:, :i], xs[:, i]
        gen, _ = _solve_pred(x[..., :covered] * scale, y, xq[:, :covered] * scale, noise)
        preds, logev = [], []
        for b in range(nb):
            cols = slice(b * r, (b + 1) * r)
            p, e = _solve_pred(x[..., cols], y, xq[:, cols], noise)
            preds.append(p)
            logev.append(e)
        pb, lb = np.stack(preds, axis=1), np.stack(logev, axis=1)
        post = np.exp(lb - lb.max(axis=1, keepdims=True))
        post /= post.sum(axis=1, keepdims=True)
        bayes = (post * pb).sum(axis=1)
        oracle = pb[rows, prompts.basis]
        for a, pred in enumerate((gen, bayes, oracle)):
            err[a, :, i] = (pred - ys[:, i]) ** 2
    return np.stack([err[:, prompts.basis == b].mean(axis=1) for b in range(nb)], axis=1) / r


def decoding_index(curve: Any, baselines: Any) -> np.ndarray:
    """Share of the gap from generic to Bayes-optimal regression that a model's error curve closes [1]_.

    Per basis, ``sum_i (generic_i - model_i) / sum_i (generic_i - bayes_i)`` over the positions
    ``i >= 1`` (at least one demonstration): 0 for a model that regresses without inferring the
    basis (the paper's ``D``-dimensional regression), 1 for the Bayes-optimal basis-conditional
    algorithm (task decoding), negative below the generic regression.

    Parameters
    ----------
    curve : array-like of float, shape (n_bases, n_points)
        The model's :func:`basis_losses` on the prompts of the baselines.
    baselines : array-like of float, shape (3, n_bases, n_points)
        :func:`regression_baselines` of the same prompts.

    Returns
    -------
    ndarray of float, shape (n_bases,)
        The index per basis; NaN where the Bayes baseline does not beat the generic one (too few
        prompts or demonstrations).

    Examples
    --------
    >>> base = np.array([[[1.0, 0.8, 0.6]], [[1.0, 0.2, 0.0]], [[1.0, 0.1, 0.0]]])
    >>> decoding_index(base[0], base).tolist(), decoding_index(base[1], base).tolist()
    ([0.0], [1.0])
    """
    c = np.asarray(curve, dtype=float)
    b = np.asarray(baselines, dtype=float)
    if b.ndim != 3 or b.shape[0] != 3 or c.shape != b.shape[1:]:
        raise DataError(
            f"curve must be (n_bases, n_points) and baselines (3, n_bases, n_points); got {c.shape} "
            f"and {b.shape}.",
            argument="curve",
        )
    gap = (b[0, :, 1:] - b[1, :, 1:]).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, (b[0, :, 1:] - c[:, 1:]).sum(axis=1) / gap, np.nan)


@dataclass(frozen=True)
class RegressionTaskVectors:
    """Task encoding, per-basis loss and patching over checkpoints (:func:`regression_task_vector_formation`).

    Attributes
    ----------
    steps : ndarray of int, shape (c,)
        Checkpoint steps.
    loss : ndarray of float, shape (c, n_bases)
        Test MSE / ``rank`` per basis, averaged over the prompt's positions (the paper's Fig. 2).
    loss_curve : ndarray of float, shape (c, n_bases, n_points)
        The same per number of demonstrations.
    decodability : ndarray of float, shape (c, n_layers)
        TD of the basis per block.
    basis_td : ndarray of float, shape (c, n_layers, n_bases)
        Per basis: the share of its prompts whose basis is recovered.
    td_layer : int
        The block whose TD is used for the coupling (the best TD at the last checkpoint).
    coupling : ndarray of float, shape (n_bases,)
        Per basis: Pearson correlation over checkpoints of its TD at ``td_layer`` and minus its loss.
    td_onset, loss_onset : ndarray of int, shape (n_bases,)
        Per basis: the first checkpoint index where its TD (at ``td_layer``) has covered half of its
        rise from the first checkpoint to its maximum, and where its loss has covered half of its
        fall to its minimum.
    patch_layer, patch_demos : int
        Block patched and demonstrations before the patched query.
    patch_delta, patch_se : ndarray of float, shape (c, n_bases, n_bases)
        :func:`basis_patching` per checkpoint: ``[c, j, i]`` = loss change of basis ``j``'s
        prompts with basis ``i``'s vector, and its standard error.
    patch_base : ndarray of float, shape (c, n_bases)
        Unpatched query loss per basis.
    patch_contrast, patch_contrast_se : ndarray of float, shape (c,)
        :attr:`BasisPatching.contrast` (self minus cross) and its standard error per checkpoint.
    baselines : ndarray of float, shape (3, n_bases, n_points)
        :func:`regression_baselines` of the test prompts (generic, Bayes-optimal, oracle-basis).
    decoding : ndarray of float, shape (c, n_bases)
        :func:`decoding_index` per checkpoint and basis (0: generic regression, 1: Bayes-optimal
        basis-conditional regression): the paper's task decoding read off the error curve.
    td_predicts_loss : float
        Pearson correlation over checkpoint x basis pairs of the basis's TD (at ``td_layer``) and
        minus its loss.
    chance_td : float
        ``1 / n_bases``.
    n_per_basis : int
        Test prompts per basis.
    model : RegressionTransformer
        The trained model (last checkpoint).

    See Also
    --------
    regression_task_vector_formation
    """

    steps: np.ndarray
    loss: np.ndarray
    loss_curve: np.ndarray
    decodability: np.ndarray
    basis_td: np.ndarray
    td_layer: int
    coupling: np.ndarray
    td_onset: np.ndarray
    loss_onset: np.ndarray
    patch_layer: int
    patch_demos: int
    patch_delta: np.ndarray
    patch_se: np.ndarray
    patch_base: np.ndarray
    patch_contrast: np.ndarray
    patch_contrast_se: np.ndarray
    baselines: np.ndarray
    decoding: np.ndarray
    td_predicts_loss: float
    chance_td: float
    n_per_basis: int
    model: Any


def _half_way(curve: np.ndarray, rising: bool) -> int:
    c = curve if rising else -curve
    target = c[0] + 0.5 * (c.max() - c[0])
    return int(np.argmax(c >= target))


def _balanced(n_per_basis: int, seed: int, **kw: Any) -> RegressionPrompts:
    parts = [
        sparse_regression_prompts(n_per_basis, basis=b, seed=seed + b, **kw) for b in range(kw["n_bases"])
    ]
    return RegressionPrompts(
        np.concatenate([p.xs for p in parts]),
        np.concatenate([p.ys for p in parts]),
        np.concatenate([p.basis for p in parts]),
        np.concatenate([p.weights for p in parts]),
        kw["rank"],
        kw["n_bases"],
    )
