"""The noisy-SignSGD accountant: the sign's Renyi divergence and :class:`SignMechanismAccountant`.

Re-exported by :mod:`trustlab.privacy.signsgd` (see it for the mechanism); it lives
here so that the torch optimizer (:mod:`trustlab.privacy._signsgd_optim`) reads the
accountant without importing the module that lazily re-exports the optimizer.

References
----------
Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
ICML 2025 (PMLR 267:27957-27978). Zhu, Wang. "Poisson Subsampled Renyi Differential
Privacy". ICML 2019.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, check_params, validate_params
from trustlab.errors import ParameterError
from trustlab.privacy import _signsgd_rdp as _sr
from trustlab.privacy._amplification_rdp import poisson_gaussian_log_moment
from trustlab.privacy.release import PrivacyMeasure, Release

__all__ = [
    "MAX_ACCOUNTED_NOISE_MULTIPLIER",
    "MIN_ACCOUNTED_NOISE_MULTIPLIER",
    "NOISES",
    "POSITIVE",
    "SIGN_ORDERS",
    "SignMechanismAccountant",
    "scalar_sign_rdp",
]

SIGN_ORDERS: tuple[int, ...] = tuple(range(2, _sr.MAX_SIGN_ORDER + 1))
"""Integer Renyi orders (2..64) of the sign accountant's own curve."""

MIN_ACCOUNTED_NOISE_MULTIPLIER = 0.1
"""Smallest noise multiplier the sign accountant takes (below it the sign earns no useful credit)."""

NEIGHBOURING = "add/remove one record of one worker"
NOISES = Options({"gaussian", "logistic"})
POSITIVE = Interval(numbers.Real, 0, None, closed="neither")
_RATE = Interval(numbers.Real, 0, 1, closed="right")
_STEPS = Interval(numbers.Integral, 1, None, closed="left")
_DELTA = Interval(numbers.Real, 0, 1, closed="neither")
_MAX_REACH = 2000.0
MAX_ACCOUNTED_NOISE_MULTIPLIER = 1e4
"""Largest noise multiplier the sign accountant takes."""


@validate_params(
    {
        "alpha": [Interval(numbers.Real, 1, 1024, closed="right")],
        "shift": [Interval(numbers.Real, 0, None, closed="left")],
        "scale": [Interval(numbers.Real, 1e-6, 1e6, closed="both")],
        "noise": [NOISES],
    }
)
def scalar_sign_rdp(alpha: float, shift: float, scale: float, noise: str = "gaussian") -> float:
    """Return ``h_alpha(shift)``: worst-case Renyi divergence of a noisy sign whose input moves by ``shift``.

    ``sup_v D_alpha(Bern F(v + shift) || Bern F(v))`` (both directions), ``F`` the CDF of
    the noise (Gaussian of std ``scale`` or logistic of scale ``scale``), over every
    real ``v`` (the other records' sum is unknown): a grid that covers the maximiser
    (for Gaussian noise it sits near ``v = -alpha * shift``), refined by golden-section
    search.

    Parameters
    ----------
    alpha : float
        Renyi order, in ``(1, 1024]``.
    shift : float
        How far one record moves the coordinate, >= 0, with ``alpha * shift / scale <= 2000``.
    scale : float
        Noise std (Gaussian) or scale ``b`` (logistic), in ``[1e-6, 1e6]``.
    noise : {"gaussian", "logistic"}, default "gaussian"
        The noise distribution.

    Returns
    -------
    float
        The divergence; at most ``alpha * shift**2 / (2 scale**2)`` for Gaussian noise
        (post-processing) and at most ``shift / scale`` for logistic noise.

    References
    ----------
    Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
    ICML 2025.

    Examples
    --------
    >>> round(scalar_sign_rdp(2, 1.0, 1.0), 4), round(scalar_sign_rdp(2, 1.0, 1.0, "logistic"), 4)
    (0.6618, 0.2402)
    """
    if float(alpha) * float(shift) / float(scale) > _MAX_REACH:
        raise ParameterError(
            f"alpha * shift / scale must be at most {_MAX_REACH:g} (the search grid would be too large); "
            f"got {float(alpha) * float(shift) / float(scale):.4g}. The Gaussian bound "
            "alpha shift^2 / (2 scale^2) applies there.",
            argument="shift",
        )
    return float(_sr.scalar_sign_rdp_sup(np.array([float(alpha)]), float(shift), float(scale), noise)[0])


class SignMechanismAccountant:
    """Privacy of ``T`` noisy SignSGD steps crediting the sign compressor, beside the post-processing bound.

    Per step, per worker: ``sign(v + xi)`` with ``v`` the sum of clipped gradients of a
    Poisson sample (rate ``sample_rate``) and ``xi`` i.i.d. noise of scale
    ``noise_multiplier`` times the clipping norm. In units of the clipping norm:

    1. ``h_alpha(t)`` (:func:`scalar_sign_rdp`) bounds one coordinate moved by ``t``;
       coordinates add, so with ``||delta||_2 <= 1`` the step's Renyi DP is at most
       ``sup_{0 < t <= 1} h_alpha(t) / t^2`` (orders 2..64);
    2. Poisson subsampling: Zhu and Wang's general upper bound;
    3. at every order the smaller of this and the post-processing bound (the
       subsampled Gaussian, exact, for Gaussian noise; the subsampled continuous
       logistic mechanism for logistic noise), times ``steps``;
    4. dp-accounting's Renyi-to-``(epsilon, delta)`` conversion; for Gaussian noise
       never above dp-accounting's own Poisson-Gaussian epsilon.

    Parameters
    ----------
    noise : {"gaussian", "logistic"}
        The noise distribution.
    noise_multiplier : float
        Noise std (Gaussian) or scale (logistic) over the clipping norm, in ``[0.1, 1e4]``.
    sample_rate : float, default 1.0
        Poisson rate at which a record joins a step, in ``(0, 1]``.

    References
    ----------
    Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
    ICML 2025. Zhu, Wang. "Poisson Subsampled Renyi Differential Privacy". ICML 2019.

    Examples
    --------
    >>> acc = SignMechanismAccountant("gaussian", noise_multiplier=1.0)
    >>> amplified = acc.get_epsilon(1e-5, steps=100)
    >>> baseline = acc.get_epsilon_post_processing(1e-5, steps=100)
    >>> amplified < baseline
    True
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "noise": [NOISES],
        "noise_multiplier": [
            Interval(
                numbers.Real, MIN_ACCOUNTED_NOISE_MULTIPLIER, MAX_ACCOUNTED_NOISE_MULTIPLIER, closed="both"
            )
        ],
        "sample_rate": [_RATE],
    }

    def __init__(self, noise: str, noise_multiplier: float, sample_rate: float = 1.0) -> None:
        self.noise = noise
        self.noise_multiplier = noise_multiplier
        self.sample_rate = sample_rate
        check_params(
            {"noise": noise, "noise_multiplier": noise_multiplier, "sample_rate": sample_rate},
            self._parameter_constraints,
            "SignMechanismAccountant",
        )

    def __repr__(self) -> str:
        return (
            f"SignMechanismAccountant(noise={self.noise!r}, noise_multiplier={self.noise_multiplier!r}, "
            f"sample_rate={self.sample_rate!r})"
        )

    def _orders(self, orders: Any) -> np.ndarray:
        if orders is None:
            return np.asarray(SIGN_ORDERS)
        arr = np.asarray(orders) if isinstance(orders, list | tuple | np.ndarray | range) else np.asarray([])
        if (
            arr.ndim != 1
            or arr.size == 0
            or arr.dtype.kind not in "iuf"
            or not np.all(np.isfinite(arr))
            or not np.all(arr == np.round(arr))
            or not np.all((arr >= 2) & (arr <= _sr.MAX_SIGN_ORDER))
        ):
            raise ParameterError(
                f"orders must be integers in [2, {_sr.MAX_SIGN_ORDER}], got {orders!r:.60}.",
                argument="orders",
            )
        return arr.astype(int)

    def rdp_post_processing(self, orders: Any = None) -> np.ndarray:
        """Per-step Renyi DP of the noisy sum before the sign (the post-processing bound).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders in ``[2, 64]`` (default :data:`SIGN_ORDERS`).

        Returns
        -------
        numpy.ndarray
            The subsampled Gaussian's exact Renyi DP (Gaussian noise), or Zhu and Wang's
            bound on the subsampled logistic mechanism (logistic noise).
        """
        grid = self._orders(orders)
        z, q = float(self.noise_multiplier), float(self.sample_rate)
        with np.errstate(over="ignore"):
            if self.noise == "gaussian":
                return poisson_gaussian_log_moment(grid, q, z) / (grid - 1.0)
            return _sr.zhu_wang_subsampled(grid, np.asarray(_sr.logistic_mechanism_rdp(z)), q)

    def rdp(self, orders: Any = None) -> np.ndarray:
        """Per-step Renyi DP of the noisy sign, never above :meth:`rdp_post_processing`.

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders in ``[2, 64]`` (default :data:`SIGN_ORDERS`).

        Returns
        -------
        numpy.ndarray
            ``min(Zhu-Wang bound of the sign's curve, post-processing bound)`` per order.
        """
        grid = self._orders(orders)
        z, q = float(self.noise_multiplier), float(self.sample_rate)
        with np.errstate(over="ignore"):
            sign = _sr.zhu_wang_subsampled(grid, np.asarray(_sr.base_rdp(self.noise, z)), q)
        return np.asarray(np.minimum(sign, self.rdp_post_processing(grid)))

    def _epsilon(self, curve: np.ndarray, delta: float, steps: int) -> tuple[float, float]:
        from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

        check_params(
            {"delta": delta, "steps": steps},
            {"delta": [_DELTA], "steps": [_STEPS]},
            "SignMechanismAccountant",
        )
        eps, order = compute_epsilon(
            list(map(float, SIGN_ORDERS)), list(map(float, steps * curve)), float(delta)
        )
        return float(eps), float(order) if order is not None else float("nan")

    def get_epsilon_post_processing(self, delta: float, steps: int) -> float:
        """Return the post-processing epsilon of ``steps`` steps (DP-SGD accounting for the same noise).

        Parameters
        ----------
        delta : float
            Target delta, in ``(0, 1)``.
        steps : int
            Number of steps, >= 1.

        Returns
        -------
        float
            Gaussian noise: the Poisson-subsampled Gaussian's epsilon over dp-accounting's
            default orders (:class:`~trustlab.privacy.amplification.PoissonAccountant`,
            equal to dp-accounting's ``RdpAccountant``). Logistic noise: the subsampled
            logistic mechanism over orders 2..64.
        """
        if self.noise == "gaussian":
            from trustlab.privacy.amplification import PoissonAccountant

            check_params(
                {"delta": delta, "steps": steps},
                {"delta": [_DELTA], "steps": [_STEPS]},
                "SignMechanismAccountant",
            )
            return PoissonAccountant(self.noise_multiplier, steps, self.sample_rate).get_epsilon(delta)
        return self._epsilon(self.rdp_post_processing(), delta, steps)[0]

    def get_epsilon(self, delta: float, steps: int) -> float:
        """Return the epsilon of ``steps`` steps of noisy SignSGD with the sign's amplification.

        Parameters
        ----------
        delta, steps
            As in :meth:`get_epsilon_post_processing`.

        Returns
        -------
        float
            The amplified epsilon; never above :meth:`get_epsilon_post_processing`.
        """
        eps = self._epsilon(self.rdp(), delta, steps)[0]
        return min(eps, self.get_epsilon_post_processing(delta, steps))

    def plan(self, delta: float, steps: int, *, description: str = "noisy SignSGD training") -> Release:
        """State the cost of ``steps`` steps as a :class:`~trustlab.privacy.release.Release` plan.

        Parameters
        ----------
        delta : float
            Delta to spend, in ``(0, 1)``.
        steps : int
            Number of steps, >= 1.
        description : str, default "noisy SignSGD training"
            What the run releases, for the ledger.

        Returns
        -------
        Release
            ``measure="approximate"``, the amplified ``(epsilon, delta)``, and the
            post-processing epsilon among the parameters.
        """
        eps = self.get_epsilon(delta, steps)
        return Release(
            None,
            eps,
            float(delta),
            mechanism=f"noisy SignSGD ({self.noise} noise), sign-compressor Renyi accounting",
            parameters={
                "noise": self.noise,
                "noise_multiplier": self.noise_multiplier,
                "sample_rate": self.sample_rate,
                "steps": int(steps),
                "epsilon_post_processing": self.get_epsilon_post_processing(delta, steps),
                "neighbouring": NEIGHBOURING,
                "noise_source": "float noise, os.urandom-seeded generator (DP-SGD-style, as Opacus)",
            },
            description=description,
            measure=PrivacyMeasure.APPROXIMATE,
        )

    @staticmethod
    def tradeoff(alphas: Any, p: float, p_prime: float) -> np.ndarray:
        """Exact f-DP trade-off curve ``T(Bern p, Bern p')`` of one noisy sign at type-I errors ``alphas``.

        ``T(a) = max(0, 1 - r_1 a, r_2 (1 - a))`` where ``r_1 >= r_2`` are the two
        likelihood ratios ``Q(o) / P(o)`` of the outcomes (the most powerful test rejects
        the outcome with the larger ratio first): the line through ``(0, 1)``,
        ``(P(o_1), 1 - Q(o_1))`` and ``(1, 0)``.

        Parameters
        ----------
        alphas : array-like
            Type-I errors in ``[0, 1]``.
        p, p_prime : float
            ``P(+1)`` with and without the record, in ``[0, 1]``.

        Returns
        -------
        numpy.ndarray
            The smallest type-II error at each type-I error.
        """
        unit = Interval(numbers.Real, 0, 1, closed="both")
        check_params({"p": p, "p_prime": p_prime}, {"p": [unit], "p_prime": [unit]}, "tradeoff")
        a = np.clip(np.asarray(alphas, dtype=float), 0.0, 1.0)
        outcomes = [(float(p), float(p_prime)), (1.0 - float(p), 1.0 - float(p_prime))]

        def ratio(o: tuple[float, float]) -> float:
            return math.inf if o[0] == 0 else o[1] / o[0]

        p_f, q_f = max(outcomes, key=ratio)
        if p_f == 0:
            return np.asarray((1.0 - q_f) * (1.0 - a))
        return np.asarray(np.interp(a, [0.0, p_f, 1.0], [1.0, 1.0 - q_f, 0.0]))
