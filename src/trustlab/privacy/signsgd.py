"""Noisy SignSGD: the sign compressor's privacy amplification, its accountant, and the compressor.

Workers send ``sign(v + xi)`` per coordinate, ``v`` the sum of the clipped per-example
gradients of a Poisson-subsampled batch and ``xi`` Gaussian or logistic noise; the
server majority-votes (or averages) the signs. Standard accounting treats this as the
Gaussian mechanism plus post-processing, so the sign earns no credit.
:class:`SignMechanismAccountant` credits it: per coordinate the release is a
Bernoulli whose Renyi divergence is bounded over every possible value of the other
records' sum, coordinates add, Poisson subsampling enters through Zhu and Wang's
general bound, and the result is never above the post-processing bound (both hold;
the smaller is kept at every order).

The torch optimizer :class:`NoisySignSGD` lives in :mod:`trustlab.privacy._signsgd_optim`
and is imported on first use (``torch`` is an optional dependency).

Privacy unit: one record of one worker, added or removed (each worker's records
are accounted separately; the server's vote is post-processing).

References
----------
Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
ICML 2025 (PMLR 267:27957-27978). Zhu, Wang. "Poisson Subsampled Renyi Differential
Privacy". ICML 2019. Bernstein et al. "signSGD with Majority Vote is Communication
Efficient and Fault Tolerant". ICLR 2019.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import ndtr, ndtri

from trustlab._param_validation import validate_params
from trustlab.errors import DataError, MissingDependencyError
from trustlab.privacy._signsgd_accounting import (
    MAX_ACCOUNTED_NOISE_MULTIPLIER,
    MIN_ACCOUNTED_NOISE_MULTIPLIER,
    NOISES,
    POSITIVE,
    SIGN_ORDERS,
    SignMechanismAccountant,
    scalar_sign_rdp,
)

if TYPE_CHECKING:  # pragma: no cover
    from trustlab.privacy._signsgd_optim import NoisySignSGD

__all__ = [
    "MAX_ACCOUNTED_NOISE_MULTIPLIER",
    "MIN_ACCOUNTED_NOISE_MULTIPLIER",
    "SIGN_ORDERS",
    "NoisySignSGD",
    "SignMechanismAccountant",
    "debiased_sign_mean",
    "matched_logistic_scale",
    "scalar_sign_rdp",
    "sign_compress",
]


def __getattr__(name: str) -> Any:
    if name == "NoisySignSGD":
        try:
            from trustlab.privacy._signsgd_optim import NoisySignSGD
        except ModuleNotFoundError as err:
            if err.name != "torch":
                raise
            raise MissingDependencyError(
                "NoisySignSGD needs torch: pip install 'trustlab[torch]' (torch==2.13.0).", argument="torch"
            ) from None
        return NoisySignSGD
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _secure_generator() -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(32), "little")))


@validate_params({"values": ["array-like"], "noise": [NOISES], "scale": [POSITIVE]})
def sign_compress(values: Any, noise: str = "gaussian", scale: float = 1.0) -> np.ndarray:
    """Return ``sign(values + noise)`` as ``int8`` in ``{-1, +1}`` (``sign(0) = +1``).

    The noise is float noise from a NumPy generator seeded with ``os.urandom`` at each
    call (DP-SGD-style float noise, as Opacus draws it; not on a Mironov grid). The
    output is one bit per coordinate.

    Parameters
    ----------
    values : array-like of float
        The (clipped, summed) gradient coordinates; must be finite.
    noise : {"gaussian", "logistic"}, default "gaussian"
        The noise distribution.
    scale : float, default 1.0
        Gaussian std or logistic scale ``b``, > 0.

    Returns
    -------
    numpy.ndarray
        ``int8`` signs, same shape as ``values``.

    Raises
    ------
    DataError
        When ``values`` is not numeric or holds NaN or infinity.

    References
    ----------
    Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
    ICML 2025.

    Examples
    --------
    >>> s = sign_compress([100.0, -100.0, 0.5], scale=1.0)
    >>> s.dtype, s[:2].tolist()
    (dtype('int8'), [1, -1])
    """
    try:
        v = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise DataError("values must be numeric (a float array).", argument="values") from None
    if not np.all(np.isfinite(v)):
        raise DataError("values must be finite: clip or drop non-finite gradients first.", argument="values")
    rng = _secure_generator()
    if noise == "gaussian":
        xi = rng.normal(0.0, float(scale), size=v.shape)
    else:
        xi = rng.logistic(0.0, float(scale), size=v.shape)
    return np.where(v + xi >= 0, 1, -1).astype(np.int8)


@validate_params({"gaussian_scale": [POSITIVE]})
def matched_logistic_scale(gaussian_scale: float) -> float:
    """Return the logistic scale ``b = s sqrt(pi / 8)`` whose sign has the Gaussian sign's Fisher information.

    The sign of ``v`` plus Gaussian noise of std ``s`` has Fisher information
    ``(2 / pi) / s^2`` about a small shift at ``v = 0``; with logistic noise of scale ``b``
    it is ``1 / (4 b^2)``. Equal Fisher information means equal privacy in the
    Gaussian-DP (central limit) regime of many steps.

    Parameters
    ----------
    gaussian_scale : float
        Gaussian noise std ``s``, > 0.

    Returns
    -------
    float
        The logistic scale ``b``.

    References
    ----------
    Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
    ICML 2025.

    Examples
    --------
    >>> round(matched_logistic_scale(1.0), 4)
    0.6267
    """
    return float(gaussian_scale) * math.sqrt(math.pi / 8.0)


@validate_params({"signs": ["array-like"], "noise": [NOISES], "scale": [POSITIVE]})
def debiased_sign_mean(signs: Any, noise: str = "gaussian", scale: float = 1.0) -> np.ndarray:
    """Estimate the mean of the workers' values from their noisy signs (first-order inversion).

    ``mean(signs) / (2 f(0))`` over axis 0, ``f`` the noise density: ``mean * s sqrt(pi / 2)``
    for Gaussian noise, ``mean * 2 b`` for logistic noise (``E sign = 2 F(x) - 1 ~ 2 f(0) x``).

    Parameters
    ----------
    signs : array-like
        Signs in ``{-1, +1}``, workers along axis 0.
    noise : {"gaussian", "logistic"}, default "gaussian"
        The noise the workers used.
    scale : float, default 1.0
        Its std (Gaussian) or scale (logistic).

    Returns
    -------
    numpy.ndarray
        The estimated mean per coordinate.

    References
    ----------
    Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
    ICML 2025.

    Examples
    --------
    >>> float(debiased_sign_mean([1, 1, -1, 1], scale=2.0).round(4))
    1.2533
    """
    s = np.asarray(signs, dtype=float)
    if s.size == 0 or not np.all(np.isin(s, (-1.0, 1.0))):
        raise DataError("signs must be a non-empty array of -1 and +1.", argument="signs")
    density0 = (
        1.0 / (float(scale) * math.sqrt(2.0 * math.pi)) if noise == "gaussian" else 1.0 / (4.0 * float(scale))
    )
    return np.asarray(s.mean(axis=0) / (2.0 * density0))


def _gaussian_tradeoff(alphas: np.ndarray, mu: float) -> np.ndarray:
    """``G_mu(a) = Phi(Phi^-1(1 - a) - mu)`` (Dong, Roth, Su), for tests and docs."""
    return np.asarray(ndtr(ndtri(1.0 - np.asarray(alphas, dtype=float)) - mu))
