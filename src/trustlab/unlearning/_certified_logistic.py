"""L2-regularised (multinomial) logistic regression as one flat parameter vector, in NumPy.

Parameters ``x = [W.ravel(), b]`` with ``W`` of shape ``(n_out, d)`` and ``b`` of shape
``(n_out,)``; ``n_out = 1`` for two classes (sigmoid), else the number of classes
(softmax), as scikit-learn's ``LogisticRegression`` stores ``coef_`` and ``intercept_``.
Every gradient call reports how many per-example gradients it evaluated, so compute is
counted, not timed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_softmax


@dataclass
class LogisticShape:
    """Layout of the flat parameter vector."""

    n_features: int
    n_out: int
    fit_intercept: bool

    @property
    def size(self) -> int:
        return self.n_out * self.n_features + (self.n_out if self.fit_intercept else 0)

    def split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        W = x[: self.n_out * self.n_features].reshape(self.n_out, self.n_features)
        b = x[self.n_out * self.n_features :] if self.fit_intercept else np.zeros(self.n_out)
        return W, b

    def join(self, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        parts = [np.asarray(W, dtype=float).ravel()]
        if self.fit_intercept:
            parts.append(np.asarray(b, dtype=float).ravel())
        return np.concatenate(parts)


def per_example_loss(shape: LogisticShape, x: np.ndarray, X: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Cross-entropy of each row (``codes`` are class indices)."""
    W, b = shape.split(x)
    z = X @ W.T + b
    if shape.n_out == 1:
        s = z[:, 0]
        return np.logaddexp(0.0, s) - codes * s
    return -log_softmax(z, axis=1)[np.arange(X.shape[0]), codes]


def mean_loss_grad(
    shape: LogisticShape, x: np.ndarray, X: np.ndarray, codes: np.ndarray
) -> tuple[float, np.ndarray]:
    """Mean cross-entropy over the rows and its gradient (no regularisation)."""
    W, b = shape.split(x)
    n = X.shape[0]
    z = X @ W.T + b
    if shape.n_out == 1:
        s = z[:, 0]
        loss = float(np.mean(np.logaddexp(0.0, s) - codes * s))
        r = (expit(s) - codes)[:, None] / n
    else:
        logp = log_softmax(z, axis=1)
        loss = float(-np.mean(logp[np.arange(n), codes]))
        r = np.exp(logp)
        r[np.arange(n), codes] -= 1.0
        r /= n
    gW = r.T @ X
    gb = r.sum(axis=0)
    return loss, shape.join(gW, gb)


def predict_codes(shape: LogisticShape, x: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Predicted class indices."""
    W, b = shape.split(x)
    z = X @ W.T + b
    if shape.n_out == 1:
        return (z[:, 0] > 0).astype(np.int64)
    return np.argmax(z, axis=1)


def fit_lbfgs(
    shape: LogisticShape,
    x0: np.ndarray,
    X: np.ndarray,
    codes: np.ndarray,
    l2: float,
    *,
    max_iter: int,
    tol: float = 1e-6,
) -> tuple[np.ndarray, int]:
    """Minimise ``mean loss + l2/2 ||W||^2`` (intercept not penalised) by L-BFGS from ``x0``.

    Returns the parameters and the number of per-example gradients evaluated
    (function evaluations times rows).
    """
    penalised = np.zeros(shape.size)
    penalised[: shape.n_out * shape.n_features] = 1.0

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = mean_loss_grad(shape, x, X, codes)
        return loss + 0.5 * l2 * float(np.sum(penalised * x * x)), grad + l2 * penalised * x

    if max_iter <= 0:
        return x0.copy(), 0
    res = minimize(
        fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": tol, "ftol": 0.0}
    )
    return np.asarray(res.x, dtype=float), int(res.nfev) * X.shape[0]
