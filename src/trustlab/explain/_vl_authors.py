"""The ExpProof authors' own LIME surrogate, step for step (their released code), for comparison.

trustlab's :class:`~trustlab.explain.verifiable.AmenableLime` follows the paper; the
authors' code (``emlaufer/ExpProof``: ``src/graph/lime.rs``, ``src/circuit/modules/lime.rs``,
``src/tensor/ops.rs``) differs in ways the paper does not state. This module offers
their variant as pure functions so a user can reproduce their explanations exactly
(tested against their published ``example-proof/witness.json``: coefficients equal to
7.4e-6, below the ``2^-16`` step of their fixed point):

* perturbations (:func:`expproof_perturbations`): a byte ``u`` per coordinate; uniform
  ``(u - 128)/256 * std`` (so ``+-0.5 std``), Gaussian ``(round(256 Phi^-1(u/256)) -
  128)/256 * std`` (a standard normal shifted by ``-0.5``), each rounded to ``2^-8``;
* kernel (:func:`expproof_sqrt_weights`): squared distance of the scale-``2^7`` integers
  floor-divided by 256, ``round(256 exp(-(s/256)/w^2))`` with ``w = float32(0.75 sqrt(d))``,
  then ``round(256 sqrt(k/256))``;
* Lasso (:func:`expproof_lasso`): on ``X_int sqrt_w / 2^16`` (the scale-``2^7`` inputs read
  at ``2^8``, i.e. at half their value) and ``y sqrt_w / 2^8``, penalty
  ``0.010009765625`` (0.01 on a ``2^-12`` grid), with the **intercept fixed** (their
  circuit takes it as given; the coefficients are the Lasso optimum for it).
"""

from __future__ import annotations

import math
import numbers
import statistics
from typing import Any

import numpy as np
from sklearn.linear_model import Lasso

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError

__all__ = ["EXPPROOF_ALPHA", "expproof_lasso", "expproof_perturbations", "expproof_sqrt_weights"]

EXPPROOF_ALPHA = 0.010009765625  # the authors' Lasso penalty: 0.01 rounded to a multiple of 2^-12


@validate_params(
    {
        "std": [Interval(numbers.Real, 0, None, closed="neither")],
        "sampler": [Options({"gaussian", "uniform"})],
    }
)
def expproof_perturbations(u: Any, std: float, sampler: str = "gaussian") -> np.ndarray:
    """The authors' LIME perturbations from bytes, as floats on the ``2^-8`` grid.

    Parameters
    ----------
    u : array-like of int in [0, 255]
        One byte per perturbed coordinate (their circuit derives them from its seed).
    std : float
        Their ``std`` (quantised to ``2^-8``): the Gaussian scale, or the uniform range.
    sampler : {"gaussian", "uniform"}, default "gaussian"
        ``"uniform"``: ``(u - 128)/256 * std`` in ``[-0.5, 0.5) std``; ``"gaussian"``:
        ``(round(256 Phi^-1(u/256 + eps)) - 128)/256 * std`` (``u = 0`` gives
        ``Phi^-1(eps)``, about ``-8.1``): a standard normal shifted by ``-0.5``.

    Returns
    -------
    numpy.ndarray
        The perturbations, same shape as ``u``.

    References
    ----------
    C. Yadav, E. Laufer, D. Boneh, K. Chaudhuri, "ExpProof: Operationalizing Explanations
    for Confidential Models with ZKPs", ICML 2025; their code ``emlaufer/ExpProof``.

    Examples
    --------
    >>> expproof_perturbations([0, 128, 255], 1.0, "uniform").tolist()
    [-0.5, 0.0, 0.49609375]
    >>> expproof_perturbations([128], 1.0, "gaussian").tolist()  # Phi^-1(1/2) = 0, less 0.5
    [-0.5]
    """
    if sampler not in ("gaussian", "uniform"):
        raise ParameterError(f"sampler must be 'gaussian' or 'uniform', got {sampler!r}.", argument="sampler")
    b = np.asarray(u)
    if b.size and (not np.issubdtype(b.dtype, np.integer) or b.min() < 0 or b.max() > 255):
        raise DataError("u must hold bytes: integers in [0, 255].", argument="u")
    std_q = math.floor(float(std) * 256 + 0.5)
    if sampler == "uniform":
        z = b.astype(np.int64) - 128
    else:
        nd = statistics.NormalDist()
        table = np.array(
            [math.floor(256 * nd.inv_cdf(v / 256 + 2.220446049250313e-16) + 0.5) for v in range(256)]
        )
        z = table[b.astype(np.int64)] - 128
    value = z * std_q  # scale 2^16
    return np.floor(value / 256 + 0.5) / 256  # rounded to scale 2^8


@validate_params({"X_int": ["array-like"], "centre_int": ["array-like"]})
def expproof_sqrt_weights(X_int: Any, centre_int: Any) -> np.ndarray:
    """The authors' square-root kernel weights (integers at scale ``2^8``).

    Parameters
    ----------
    X_int : array-like of int, shape (n, d)
        The perturbed points, integers at scale ``2^7`` (the model's input scale).
    centre_int : array-like of int, shape (d,)
        The kernel's centre (the query, or BorderLIME's border point), same scale.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        ``round(256 sqrt(k / 256))`` with ``k = round(256 exp(-(s / 256) / w^2))``,
        ``s = sum((x - c)^2) // 256`` and ``w = float32(0.75 sqrt(d))``.

    Examples
    --------
    >>> expproof_sqrt_weights([[0, 0], [128, 0]], [0, 0]).tolist()
    [256, 229]
    """
    X = np.asarray(X_int, dtype=np.int64)
    c = np.asarray(centre_int, dtype=np.int64).ravel()
    if X.ndim != 2 or X.shape[1] != c.size:
        raise DataError(f"X_int must be (n, {c.size}) integers, got shape {X.shape}.", argument="X_int")
    s = ((X - c) ** 2).sum(axis=1) // 256
    width = float(np.float32(math.sqrt(X.shape[1]) * 0.75))
    k = np.array([round(math.exp(-(int(v) / 256) / width**2) * 256) for v in s])
    return np.array([round(math.sqrt(int(v) / 256) * 256) for v in k], dtype=np.int64)


@validate_params({"intercept": [numbers.Real], "alpha": [Interval(numbers.Real, 0, None, closed="neither")]})
def expproof_lasso(
    X_int: Any, y: Any, centre_int: Any, intercept: float, *, alpha: float = EXPPROOF_ALPHA
) -> np.ndarray:
    """The authors' surrogate: the Lasso coefficients for a fixed intercept, on their weighted data.

    Minimises ``1/(2n) ||y_w - intercept - X_w beta||^2 + alpha ||beta||_1`` with
    ``X_w = X_int sqrt_w / 2^16`` and ``y_w = y sqrt_w / 2^8``
    (:func:`expproof_sqrt_weights`), solved by coordinate descent to ``1e-15``.

    Parameters
    ----------
    X_int : array-like of int, shape (n, d)
        Perturbed points at scale ``2^7``.
    y : array-like of shape (n,)
        The model's labels on them (0/1).
    centre_int : array-like of int, shape (d,)
        The kernel centre at scale ``2^7``.
    intercept : float
        The fixed intercept (theirs is part of the witness).
    alpha : float, default 0.010009765625
        The penalty.

    Returns
    -------
    numpy.ndarray of shape (d,)
        The coefficients.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(-128, 128, size=(40, 3)); y = (X[:, 0] > 0).astype(float)
    >>> beta = expproof_lasso(X, y, np.zeros(3, dtype=int), 0.1)
    >>> int(np.argmax(np.abs(beta)))
    0
    """
    X = np.asarray(X_int, dtype=np.int64)
    yy = check_numeric_array(y, "y", ndim=1)
    if X.ndim != 2 or yy.size != X.shape[0]:
        raise DataError(f"y must hold one label per row of X_int ({X.shape[0]}).", argument="y")
    sw = expproof_sqrt_weights(X, centre_int)
    Xw = X * sw[:, None] / 2.0**16
    yw = yy * sw / 2.0**8
    model = Lasso(alpha=float(alpha), fit_intercept=False, tol=1e-15, max_iter=10**7)
    return np.asarray(model.fit(Xw, yw - float(intercept)).coef_)
