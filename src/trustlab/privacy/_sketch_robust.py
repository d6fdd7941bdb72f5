"""Robust bottom-k cardinality estimation with per-key participation accounting."""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab.errors import BudgetExceededError, DataError, ParameterError
from trustlab.privacy._sketch_bottomk import BottomKSketch
from trustlab.privacy._sketch_hash import hashes_to_ranks, make_salt, sorted_unique
from trustlab.privacy._sketch_store import ParticipationStore
from trustlab.privacy.samplers import MAX_INTEGER_SCALE, add_discrete_gaussian


class ParticipationExceededError(BudgetExceededError):
    """A key would take part in more queries than the robust estimator's per-key budget ``r``.

    Raised by :class:`RobustCardinalityEstimator` in ``mode="basic"`` when the caller passes
    key sets and one of them breaks the promise that every key participates in at most
    ``r_`` queries. No estimate is released for the offending query. Use
    ``mode="tracking"`` to deactivate over-exposed keys instead.
    """


class RobustCardinalityEstimator(ParamsValidationMixin):
    """Distinct counts from a bottom-k sketch that stay accurate under adaptive queries.

    The adversary of [1]_ chooses each query set after seeing earlier answers and breaks
    the standard estimator after O(k) queries. This estimator answers each query from
    noisy *rank-window counts* of the sketch and accounts, per key, for how many queries
    the key took part in: as long as every key participates in at most ``r_`` queries,
    each key's rank is protected by zero-concentrated DP of total ``rho_per_key``, so (by
    the generalisation property of DP used by [1]_) the answers stay accurate for any
    number of adaptively chosen queries. ``r_`` grows like ``k**2``: the quadratic
    barrier moves from the number of queries to the number of queries sharing a key.

    Per query (with ``tau_j = 2**-j``, ``j = 0..J``, ``J = ceil(log2(2 n_max / k))``):

    1. ``c_j = min(#{x in sketch : h(x) < tau_j}, k)`` (exact, from the sketch);
    2. ``c_j + N_Z(0, sigma**2)`` with ``sigma = accuracy * k / 4`` (discrete Gaussian
       drawn by OpenDP through :mod:`trustlab.privacy.samplers`, never a seeded generator);
    3. ``j* = argmin_j |noisy c_j - k/2|``; answer ``max(noisy c_{j*} * 2**j*, 1)`` (an
       integer). One key's rank moves each ``c_j`` by at most 1, so a query costs
       ``rho_per_query_ = (J + 1) / (2 sigma**2)`` zCDP to each of its keys and
       ``r_ = floor(rho_per_key / rho_per_query_)``. A set with fewer than ``k`` keys is
       answered exactly (its size is chosen by the querier; no rank is revealed).

    ``mode="basic"`` serves the promise that no key exceeds ``r_`` participations: with
    key sets it counts them and raises :class:`ParticipationExceededError` on a violation
    (externally built sketches can be passed to :meth:`estimate_sketch`, unaccounted).
    ``mode="tracking"`` deactivates a key once it has taken part in ``r_`` queries: later
    queries count deactivated keys exactly and sketch only the active rest, so the
    guarantee holds for every query.

    Parameters
    ----------
    k : int
        Sketch size (at least 2).
    accuracy : float, default 0.3
        ``a`` in ``sigma = a k / 4``; the relative error is about ``a / 2`` plus the
        sketch's own ``sqrt(2 / k)``. Smaller means more accurate answers and smaller ``r_``.
    rho_per_key : float, default 0.5
        zCDP budget each key may spend over all its queries.
    max_participation : int or None, default None
        Overrides ``r_`` (the budget then no longer bounds the privacy of a key's rank).
    n_max : int, default 2**22
        Largest cardinality answered on the grid (sets the number of windows ``J + 1``).
    mode : {"basic", "tracking"}, default "basic"
        How participation beyond ``r_`` is handled (see above).
    salt : None, int or bytes, default None
        Secret hash key; ``None`` draws it from :func:`os.urandom`. Fixed salts are for
        reproducible tests only.

    Attributes
    ----------
    r_ : int
        Participations allowed per key.
    rho_per_query_ : float
        zCDP each query charges to each of its (active) keys.
    sigma_ : float
        Standard deviation of the count noise.
    n_windows_ : int
        ``J + 1``.
    n_queries_ : int
        Queries answered so far.
    n_deactivated_ : int
        Keys deactivated so far (``mode="tracking"``).

    Examples
    --------
    >>> import numpy as np
    >>> est = RobustCardinalityEstimator(k=256, mode="tracking", salt=5)
    >>> answer = est.estimate(np.arange(20_000))
    >>> bool(0.25 < answer / 20_000 < 4), est.r_, est.n_queries_  # noise is never seeded
    (True, 23, 1)
    >>> est.participation([0, 1, 10**9]).tolist()
    [1, 1, 0]

    References
    ----------
    .. [1] E. Cohen, M. Singhal, U. Stemmer, "Breaking the Quadratic Barrier: Robust
       Cardinality Sketches for Adaptive Queries", ICML 2025 (PMLR 267). The rank-window
       statistic, its noise and the deactivation mechanics are trustlab's reconstruction
       of the paper's Basic and Tracking estimators (see docs/privacy/cardinality-sketches.md).
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "k": [Interval(numbers.Integral, 2, 2**31, closed="both")],
        "accuracy": [Interval(numbers.Real, 0, 10, closed="right")],
        "rho_per_key": [Interval(numbers.Real, 0, 1e6, closed="right")],
        "max_participation": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_max": [Interval(numbers.Integral, 1, 2**62, closed="both")],
        "mode": [Options({"basic", "tracking"})],
    }

    def __init__(
        self,
        k: int,
        *,
        accuracy: float = 0.3,
        rho_per_key: float = 0.5,
        max_participation: int | None = None,
        n_max: int = 2**22,
        mode: str = "basic",
        salt: Any = None,
    ) -> None:
        self.k = k
        self.accuracy = accuracy
        self.rho_per_key = rho_per_key
        self.max_participation = max_participation
        self.n_max = n_max
        self.mode = mode
        self.salt = salt
        self._ready = False

    def _setup(self) -> None:
        if self._ready:
            return
        self._validate_params()
        k = int(self.k)
        n_windows = max(math.ceil(math.log2(2 * int(self.n_max) / k)), 0) + 1
        sigma = float(self.accuracy) * k / 4
        if not 0 < sigma <= MAX_INTEGER_SCALE:
            raise ParameterError(
                f"accuracy * k / 4 = {sigma:.3g} must lie in (0, 2**52]; lower accuracy or k.",
                argument="accuracy",
            )
        rho0 = n_windows / (2 * sigma**2)
        if self.max_participation is None:
            r = math.floor(float(self.rho_per_key) / rho0)
            if r < 1:
                raise ParameterError(
                    f"rho_per_key={self.rho_per_key} buys no query (one costs {rho0:.4g} "
                    f"zCDP per key at k={k}, accuracy={self.accuracy}); raise rho_per_key, "
                    "accuracy or k.",
                    argument="rho_per_key",
                )
        else:
            r = int(self.max_participation)
        self._sketch = BottomKSketch(k, salt=make_salt(self.salt))
        self._j = np.arange(n_windows)
        self._store = ParticipationStore()
        self.r_, self.rho_per_query_, self.sigma_, self.n_windows_ = r, rho0, sigma, n_windows
        self.n_queries_, self.n_deactivated_ = 0, 0
        self._ready = True

    # -- the statistic -------------------------------------------------------------------
    def _noisy_answer(self, sketch_hashes: np.ndarray) -> float:
        """The robust answer from the retained hashes of a full sketch."""
        k = int(self.k)
        ranks = hashes_to_ranks(sketch_hashes)
        taus = 2.0 ** -self._j.astype(np.float64)
        counts = np.minimum(np.searchsorted(ranks, taus, side="left"), k).astype(np.int64)
        noisy = add_discrete_gaussian(counts, self.sigma_)
        j_star = int(np.argmin(np.abs(noisy.astype(np.float64) - k / 2)))
        return float(max(int(noisy[j_star]) * 2**j_star, 1))

    def _answer_hashes(self, h: np.ndarray) -> float:
        if h.size == 0:
            return 0.0
        sketch = self._sketch.empty_like().update_hashes(h)
        if sketch.is_exact:
            return float(sketch.hashes_.size)
        return self._noisy_answer(sketch.hashes_)

    # -- public API ----------------------------------------------------------------------
    def estimate(self, keys: Any) -> float:
        """Answer one query: the number of distinct keys in ``keys``, robustly.

        Parameters
        ----------
        keys : array-like of int, str or bytes
            The query set (repeated keys count once). Its keys are charged one
            participation each (in ``mode="tracking"`` only the active ones).

        Returns
        -------
        float
            The estimate (an integer value; exact when the set, or its active part, has
            fewer than ``k`` keys).

        Raises
        ------
        ParticipationExceededError
            ``mode="basic"``: a key of ``keys`` has already taken part in ``r_`` queries.
        DataError
            When ``keys`` is empty.

        Examples
        --------
        >>> est = RobustCardinalityEstimator(k=64, max_participation=2, salt=1)
        >>> est.estimate([1, 2, 3])
        3.0
        """
        self._setup()
        h = sorted_unique(self._sketch.hash(keys))
        if h.size == 0:
            raise DataError(
                "keys is empty: there is nothing to estimate; pass the query set's keys.",
                argument="keys",
            )
        used = self._store.get(h)
        r = self.r_
        if self.mode == "basic":
            if h.size >= int(self.k) and (used >= r).any():  # exact answers reveal no rank
                worst = int(used.max())
                raise ParticipationExceededError(
                    f"keys holds {int((used >= r).sum())} key(s) that already took part in "
                    f"{worst} >= r_={r} queries, which breaks the basic estimator's promise; "
                    "use mode='tracking' (deactivates such keys) or a larger rho_per_key.",
                    argument="keys",
                )
            active, exact = h, 0
        else:
            keep = used < r
            active, exact = h[keep], int((~keep).sum())
        answer = self._answer_hashes(active)
        if active.size >= int(self.k):  # exact answers reveal no rank: charge nothing
            self.n_deactivated_ += int((self._store.charge(active) == r).sum())
        self.n_queries_ += 1
        return float(exact) + answer

    def estimate_sketch(self, sketch: BottomKSketch) -> float:
        """Answer from an externally built sketch (``mode="basic"``; unaccounted).

        The participation promise cannot be checked without the key sets: the caller
        vouches that no key takes part in more than ``r_`` queries.

        Parameters
        ----------
        sketch : BottomKSketch
            A sketch made by :meth:`new_sketch` (same ``k`` and secret salt).

        Returns
        -------
        float
            The robust estimate.

        Examples
        --------
        >>> import numpy as np
        >>> est = RobustCardinalityEstimator(k=64, salt=2)
        >>> s = est.new_sketch().update(np.arange(10))
        >>> est.estimate_sketch(s)
        10.0
        """
        self._setup()
        if self.mode != "basic":
            raise ParameterError(
                "estimate_sketch needs mode='basic': the tracking estimator must see the key "
                "sets to deactivate keys; call estimate(keys) instead.",
                argument="sketch",
            )
        if (
            not isinstance(sketch, BottomKSketch)
            or sketch.k != int(self.k)
            or (sketch._salt != self._sketch._salt)
        ):
            raise ParameterError(
                "sketch must be a BottomKSketch made by this estimator's new_sketch() (same k "
                "and secret salt).",
                argument="sketch",
            )
        if sketch.hashes_.size == 0:
            raise DataError("sketch is empty: add keys before asking for an estimate.", argument="sketch")
        self.n_queries_ += 1
        return self._answer_hashes(sketch.hashes_)

    def new_sketch(self) -> BottomKSketch:
        """An empty sketch under this estimator's secret hash (for :meth:`estimate_sketch`).

        Returns
        -------
        BottomKSketch

        Examples
        --------
        >>> RobustCardinalityEstimator(k=256, salt=0).new_sketch().k
        256
        """
        self._setup()
        return self._sketch.empty_like()

    def participation(self, keys: Any) -> np.ndarray:
        """How many (charged) queries each key has taken part in so far.

        Parameters
        ----------
        keys : array-like of int, str or bytes
            Keys to look up.

        Returns
        -------
        ndarray of int64
            One count per key, input order.

        Examples
        --------
        >>> RobustCardinalityEstimator(k=256, salt=0).participation([1, 2]).tolist()
        [0, 0]
        """
        self._setup()
        h = self._sketch.hash(keys)
        uniq = sorted_unique(h)
        return self._store.get(uniq)[np.searchsorted(uniq, h)]

    def rho_spent(self, keys: Any) -> np.ndarray:
        """The zCDP each key's rank has spent so far (participations x ``rho_per_query_``).

        At most ``rho_per_key`` for every key unless ``max_participation`` overrides ``r_``.

        Parameters
        ----------
        keys : array-like of int, str or bytes
            As in :meth:`participation`.

        Returns
        -------
        ndarray of float64

        Examples
        --------
        >>> est = RobustCardinalityEstimator(k=256, salt=0)
        >>> _ = est.estimate(range(1000))
        >>> bool(est.rho_spent([0])[0] == est.rho_per_query_)
        True
        """
        return self.participation(keys) * self.rho_per_query_

    def deactivated(self, keys: Any) -> np.ndarray:
        """Whether each key is deactivated (took part in ``r_`` queries).

        Parameters
        ----------
        keys : array-like of int, str or bytes
            As in :meth:`participation`.

        Returns
        -------
        ndarray of bool

        Examples
        --------
        >>> RobustCardinalityEstimator(k=256, salt=0).deactivated([1]).tolist()
        [False]
        """
        return self.participation(keys) >= self.r_
