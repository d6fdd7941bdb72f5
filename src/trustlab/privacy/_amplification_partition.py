"""Balanced iteration subsampling and model splitting accountants (private module).

Public names are re-exported by :mod:`trustlab.privacy.amplification`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import check_params
from trustlab._validation import make_generator
from trustlab.errors import ParameterError
from trustlab.privacy import _amplification_rdp as _rdp
from trustlab.privacy._amplification_base import (
    _NOISE,
    _RATE,
    _STEPS,
    PoissonAccountant,
    _check_orders,
    _RenyiAccountant,
)

__all__ = ["BISAccountant", "ModelSplitAccountant", "PoissonAccountant"]


class BISAccountant(_RenyiAccountant):
    """Balanced iteration subsampling: each record joins exactly ``participations`` of ``steps`` iterations.

    The remove-direction Renyi DP of the whole run is bounded by the smallest of
    three valid bounds at each integer order: Poisson subsampling at rate
    ``participations / steps`` over ``steps`` iterations (uniform ``k``-subset
    indicators are negatively associated, so the balanced moment is at most the
    Poisson one); Feldman and Shenfeld's ``participations``-fold composition of the
    exact one-of-``steps // participations`` allocation; and, at order 2, the exact
    hypergeometric moment.

    Parameters
    ----------
    steps : int
        Number of iterations ``T``, >= 1.
    participations : int
        Iterations ``k`` each record joins, ``1 <= k <= steps``.
    noise_multiplier : float
        Noise standard deviation over the clipping norm, >= 1e-3.

    References
    ----------
    Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for
    Privacy Amplification". ICML 2025. Feldman, Shenfeld. "Privacy amplification by
    random allocation". arXiv 2502.08202, 2025. Joag-Dev, Proschan. "Negative
    Association of Random Variables". Annals of Statistics, 1983.

    Examples
    --------
    >>> bis = BISAccountant(steps=10, participations=1, noise_multiplier=1.0)
    >>> poisson = PoissonAccountant(noise_multiplier=1.0, steps=10, sample_rate=0.1)
    >>> [round(float(v), 4) for v in bis.rdp([2, 8])], [round(float(v), 4) for v in poisson.rdp([2, 8])]
    ([0.1586, 1.7075], [0.1704, 13.7836])
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "steps": [_STEPS],
        "participations": [_STEPS],
        "noise_multiplier": [_NOISE],
    }
    participations: int
    scheme = "balanced iteration subsampling"
    mechanism = "Gaussian noise, balanced iteration subsampling (Renyi DP)"

    def __init__(self, steps: int, participations: int, noise_multiplier: float) -> None:
        self._keep(steps=steps, participations=participations, noise_multiplier=noise_multiplier)
        if participations > steps:
            raise ParameterError(
                f"participations of BISAccountant must be at most steps={steps}; got {participations}.",
                argument="participations",
            )

    def _poisson_bound(self, grid: np.ndarray) -> np.ndarray:
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        return t * _rdp.rdp_from_log_moments(grid, _rdp.poisson_gaussian_log_moment(grid, k / t, z))

    def _allocation_bound(self, grid: np.ndarray) -> np.ndarray:
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        log_m = _rdp.balls_in_bins_log_moments(int(grid.max()), t // k, 1.0, z)
        return k * _rdp.rdp_from_log_moments(grid, log_m[grid])

    def rdp(self, orders: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Certified remove-direction Renyi DP of the whole run at integer ``orders``.

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders in ``[2, 1024]`` (default :data:`DEFAULT_ORDERS`).

        Returns
        -------
        numpy.ndarray
            The smallest of the Poisson-domination bound, the allocation-composition
            bound and (order 2) the exact value.
        """
        grid = _check_orders(orders)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.minimum(self._poisson_bound(grid), self._allocation_bound(grid))
            z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
            out = np.where(grid == 2, np.minimum(out, _rdp.hypergeometric_log_moment2(t, k, z)), out)
        return np.asarray(out, dtype=float)

    def rdp_exact(self, orders: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Exact remove-direction Renyi DP (order 2; any order for one participation or tiny ``steps``).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders (default 2..8).

        Returns
        -------
        numpy.ndarray
            ``log(M_alpha) / (alpha - 1)`` at each order.

        Raises
        ------
        ParameterError
            When an order other than 2 is asked for with ``participations > 1`` and the
            exact dynamic program would be too large (use :meth:`rdp`).
        """
        grid = _check_orders(range(2, 9) if orders is None else orders)
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        out = np.empty(grid.size)
        with np.errstate(over="ignore", invalid="ignore"):
            if k == 1 or k == t:
                lm = _rdp.balls_in_bins_log_moments(int(grid.max()), t // k, 1.0, z)
                return k * _rdp.rdp_from_log_moments(grid, lm[grid])
            for i, a in enumerate(grid):
                if a == 2:
                    out[i] = _rdp.hypergeometric_log_moment2(t, k, z)
                    continue
                work = _rdp.small_bis_state_count(int(a), t) * math.comb(t, k)
                if work > 2_000_000:
                    raise ParameterError(
                        f"the exact Renyi DP at order {a} for steps={t}, participations={k} is too large "
                        "to compute; use rdp() (a certified upper bound).",
                        argument="orders",
                    )
                out[i] = _rdp.small_bis_log_moment(int(a), t, k, z) / (a - 1.0)
        return out

    def rdp_reverse_mc(
        self,
        orders: Sequence[int] | np.ndarray | None = None,
        n_samples: int = 100_000,
        random_state: Any = 0,
    ) -> np.ndarray:
        """Monte Carlo *estimate* of the add-direction Renyi DP ``log E_Q[L^-(alpha-1)] / (alpha - 1)``.

        An estimate, not a bound: it checks the assumption that the add direction is
        no larger than the remove direction. Heavy tails make it run low at large
        orders.

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders (default ``[2, 3, 4]``).
        n_samples : int, default 100000
            Monte Carlo samples of ``y ~ N(0, z^2 I_T)``.
        random_state : int, numpy Generator or None, default 0
            Seeds the simulation (an estimate, not a mechanism).

        Returns
        -------
        numpy.ndarray
            The estimated add-direction Renyi divergence at each order.
        """
        grid = _check_orders([2, 3, 4] if orders is None else orders)
        check_params({"n_samples": n_samples}, {"n_samples": [_STEPS]}, "rdp_reverse_mc")
        rng = make_generator(random_state)
        z, t, k = float(self.noise_multiplier), int(self.steps), int(self.participations)
        log_c = math.lgamma(t + 1) - math.lgamma(k + 1) - math.lgamma(t - k + 1)
        chunk = max(1, 2_000_000 // max(t, 1))
        log_l = []
        for start in range(0, int(n_samples), chunk):
            m = min(chunk, int(n_samples) - start)
            y = rng.normal(0.0, z, size=(m, t))
            log_l.append(_rdp.log_elementary_symmetric((2.0 * y - 1.0) / (2.0 * z**2), k) - log_c)
        ll = np.concatenate(log_l)
        from scipy.special import logsumexp

        return np.array([(logsumexp(-(a - 1.0) * ll) - math.log(ll.size)) / (a - 1.0) for a in grid])


class ModelSplitAccountant(_RenyiAccountant):
    """Model splitting: each step a participating record updates one of ``num_blocks`` random disjoint blocks.

    Per-block clipping to the clipping norm, noise on every block: one step is the
    mixture over "no participation" (probability ``1 - sample_rate``) and "block j"
    (probability ``sample_rate / num_blocks`` each); its integer-order Renyi moment is
    exact (a balls-in-bins generating function), and steps compose additively.
    ``num_blocks=1`` is the Poisson-subsampled Gaussian.

    Parameters
    ----------
    num_blocks : int
        Number of disjoint parameter blocks ``d``, >= 1.
    noise_multiplier : float
        Noise standard deviation over the per-block clipping norm, >= 1e-3.
    steps : int
        Number of steps, >= 1.
    sample_rate : float, default 1.0
        Poisson rate at which a record joins a step, in ``(0, 1]``.

    References
    ----------
    Dong, Chen, Ozgur. "Leveraging Randomness in Model and Data Partitioning for
    Privacy Amplification". ICML 2025 (model splitting, Theorem 3.1 with one block
    per record and step).

    Examples
    --------
    >>> split = ModelSplitAccountant(num_blocks=8, noise_multiplier=1.0, steps=1, sample_rate=0.01)
    >>> [f"{v:.3e}" for v in split.rdp([2, 8])]
    ['2.148e-05', '8.771e-05']
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "num_blocks": [_STEPS],
        "noise_multiplier": [_NOISE],
        "steps": [_STEPS],
        "sample_rate": [_RATE],
    }
    num_blocks: int
    sample_rate: float
    scheme = "model splitting"
    mechanism = "Gaussian noise, random model splitting (Renyi DP)"

    def __init__(
        self, num_blocks: int, noise_multiplier: float, steps: int, sample_rate: float = 1.0
    ) -> None:
        self._keep(
            num_blocks=num_blocks, noise_multiplier=noise_multiplier, steps=steps, sample_rate=sample_rate
        )

    def rdp(self, orders: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """Exact remove-direction Renyi DP of the run at integer ``orders`` (worst case: full-norm blocks).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders in ``[2, 1024]`` (default :data:`DEFAULT_ORDERS`).

        Returns
        -------
        numpy.ndarray
            ``steps * log(M_alpha) / (alpha - 1)`` at each order.
        """
        grid = _check_orders(orders)
        z, q, d = float(self.noise_multiplier), float(self.sample_rate), int(self.num_blocks)
        with np.errstate(over="ignore", invalid="ignore"):
            lm = _rdp.balls_in_bins_log_moments(int(grid.max()), d, q, z)
            return self.steps * _rdp.rdp_from_log_moments(grid, lm[grid])

    rdp_exact = rdp

    def rdp_reverse_mc(
        self,
        orders: Sequence[int] | np.ndarray | None = None,
        n_samples: int = 100_000,
        random_state: Any = 0,
    ) -> np.ndarray:
        """Monte Carlo *estimate* of the add-direction Renyi DP of the run (a check, not a bound).

        Parameters
        ----------
        orders : sequence of int, optional
            Integer orders (default ``[2, 3, 4]``).
        n_samples : int, default 100000
            Monte Carlo samples of ``y ~ N(0, z^2 I_d)``.
        random_state : int, numpy Generator or None, default 0
            Seeds the simulation.

        Returns
        -------
        numpy.ndarray
            ``steps`` times the estimated one-step add-direction divergence.
        """
        grid = _check_orders([2, 3, 4] if orders is None else orders)
        check_params({"n_samples": n_samples}, {"n_samples": [_STEPS]}, "rdp_reverse_mc")
        rng = make_generator(random_state)
        z, q, d = float(self.noise_multiplier), float(self.sample_rate), int(self.num_blocks)
        y = rng.normal(0.0, z, size=(int(n_samples), d))
        from scipy.special import logsumexp

        with np.errstate(divide="ignore"):
            blocks = logsumexp((2.0 * y - 1.0) / (2.0 * z**2), axis=1) + math.log(q / d)
            ll = np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, blocks)
        return np.array(
            [self.steps * (logsumexp(-(a - 1.0) * ll) - math.log(ll.size)) / (a - 1.0) for a in grid]
        )
