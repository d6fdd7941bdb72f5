"""Differentially private quantiles: the exponential mechanism, JointExp and the unbounded method.

Three ways to release quantiles of a sensitive numeric sample under pure
``epsilon``-DP:

- :func:`dp_quantile` and :func:`dp_quantiles` with ``method="jointexp"``: the
  exponential mechanism over the intervals between sorted data points (Smith,
  STOC 2011) and its joint version for several levels at once (JointExp,
  Gillenwater, Joseph and Kulesza, ICML 2021). Public bounds are required.
- ``method="independent"``: one exponential mechanism per level, each with
  ``epsilon / m`` (the naive baseline).
- :func:`unbounded_quantile`: the above-threshold scan over geometrically
  growing buckets (Durfee, NeurIPS 2023), which needs only a public lower anchor.

The selection steps draw exactly from their distributions with OpenDP's
Gumbel-max sampler (:func:`~trustlab.privacy.samplers.exponential_select`);
threshold and query noise are OpenDP's exact discrete Laplace. The
uniform draw inside the chosen interval is not privacy noise and uses NumPy's
generator (seeded by ``random_state``).

Neighbouring relations: ``"replace"`` (swap one record; ``n`` is public) and
``"add_remove"`` (add or remove one record).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from scipy.signal import fftconvolve

from trustlab._validation import (
    check_bounds,
    check_choice,
    check_epsilon,
    check_positive_int,
    check_random_state,
)
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace, exponential_select

__all__ = [
    "check_neighbouring",
    "dp_quantile",
    "dp_quantiles",
    "jointexp_sensitivity",
    "unbounded_quantile",
]

NEIGHBOURING = {"replace": "replace one record", "add_remove": "add/remove one record"}

# Weights below exp(-_WINDOW_NATS) relative to the mode are not representable next to
# the mode in float64 (exp(-745) underflows); intervals farther than this many nats
# from a target rank are left out of the computation.
_WINDOW_NATS = 1500.0
_LOG_FLOAT_MAX = math.log(np.finfo(float).max)
_CLIP_NOTE = "inputs clipped to the public bounds (always applied; says nothing about the data)"


def check_neighbouring(neighbouring: Any) -> str:
    """Return ``neighbouring`` after checking it is ``"replace"`` or ``"add_remove"``."""
    return str(check_choice(neighbouring, "neighbouring", NEIGHBOURING))


def _check_sample(x: Any, name: str = "x") -> np.ndarray:
    if isinstance(x, str | bytes) or x is None:
        raise DataError(f"{name} must be a 1-d array of numbers.", argument=name)
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise DataError(f"{name} must be a 1-d array of numbers.", argument=name) from None
    if arr.ndim != 1:
        raise DataError(f"{name} must be 1-dimensional, got shape {arr.shape}.", argument=name)
    if arr.size == 0:
        raise DataError(f"{name} is empty; a DP release needs at least one value.", argument=name)
    if not np.isfinite(arr).all():
        raise DataError(f"{name} contains NaN or infinite values; drop or impute them first.", argument=name)
    return arr


def _check_levels(q: Any) -> np.ndarray:
    try:
        levels = np.atleast_1d(np.asarray(q, dtype=float))
    except (TypeError, ValueError):
        raise ParameterError(f"q must be numbers in (0, 1), got {q!r}.", argument="q") from None
    if levels.ndim != 1 or levels.size == 0:
        raise ParameterError("q must be one level or a 1-d list of levels.", argument="q")
    if not np.all((levels > 0) & (levels < 1)):
        raise ParameterError(f"q must lie strictly between 0 and 1, got {q!r}.", argument="q")
    if np.any(np.diff(levels) <= 0):
        raise ParameterError(f"q must be strictly increasing, got {q!r}.", argument="q")
    return levels


def jointexp_sensitivity(levels: Any, neighbouring: str = "replace") -> float:
    """Sensitivity of JointExp's utility ``-sum_j |gap_j - (q_j - q_{j-1}) n|``.

    Replacing one record moves it from one gap to another: sensitivity 2. Adding a
    record adds 1 to one gap count and ``(q_j - q_{j-1})`` to every target, at most
    ``2 (1 - min_j (q_j - q_{j-1}))`` with ``q_0 = 0`` and ``q_{m+1} = 1``.

    References
    ----------
    Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
    """
    check_neighbouring(neighbouring)
    if neighbouring == "replace":
        return 2.0
    gaps = np.diff(np.concatenate([[0.0], np.asarray(levels, dtype=float), [1.0]]))
    return float(2.0 * (1.0 - gaps.min()))


class _Edges:
    """The interval edges ``[L, z_(1), ..., z_(n), U]`` without copying the sorted sample."""

    def __init__(self, z_sorted: np.ndarray, lower: float, upper: float) -> None:
        self.z, self.lower, self.upper = z_sorted, lower, upper
        self.size = z_sorted.size + 2

    def slice(self, start: int, stop: int) -> np.ndarray:
        """Edges ``start .. stop - 1`` as a new small array."""
        out = np.empty(stop - start)
        lo_z, hi_z = max(start, 1), min(stop, self.size - 1)
        if hi_z > lo_z:
            out[lo_z - start : hi_z - start] = self.z[lo_z - 1 : hi_z - 1]
        if start == 0:
            out[0] = self.lower
        if stop == self.size:
            out[-1] = self.upper
        return out

    def at(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx)
        padded = np.clip(idx - 1, 0, self.z.size - 1)
        vals = self.z[padded] if self.z.size else np.zeros(idx.shape)
        return np.where(idx == 0, self.lower, np.where(idx == self.size - 1, self.upper, vals))


def _log_lengths(edges: _Edges, lo: int, hi: int) -> np.ndarray:
    e = edges.slice(lo, hi + 2)
    with np.errstate(divide="ignore"):
        return np.log(e[1:] - e[:-1])


def _joint_exp_ranks(edges: _Edges, levels: np.ndarray, epsilon: float, sensitivity: float) -> list[int]:
    """Sample interval indices ``i_1 <= ... <= i_m`` from JointExp's distribution.

    ``edges`` is ``[L, x_(1), ..., x_(n), U]``; interval ``i`` is
    ``[edges[i], edges[i + 1]]`` with ``i`` data points below it. The probability of a
    tuple is proportional to ``prod_j len(i_j) / prod_runs k! * exp(-a * sum_j
    |i_j - i_{j-1} - t_j|)`` with ``a = epsilon / (2 * sensitivity)``; the ``1 / k!``
    of a run of ``k`` levels in one interval makes the sorted uniform draws an
    exponential mechanism over ordered outputs.
    """
    n = edges.size - 2
    m = levels.size
    a = epsilon / (2.0 * sensitivity)
    full = np.concatenate([[0.0], levels, [1.0]])
    targets = np.diff(full) * n  # t_1 .. t_{m+1}
    half = math.ceil(_WINDOW_NATS / a)
    centres = levels * n
    lo = [max(0, math.floor(c) - half) for c in centres]
    hi = [min(n, math.ceil(c) + half) for c in centres]
    # logalpha[j] has shape (m, width_j): row r-1 holds runs of length r ending at level j.
    logalpha: list[np.ndarray] = []
    for j in range(m):
        idx = np.arange(lo[j], hi[j] + 1)
        loglen = _log_lengths(edges, lo[j], hi[j])
        cur = np.full((m, idx.size), -np.inf)
        if j == 0:
            cur[0] = loglen - a * np.abs(idx - targets[0])
        else:
            prev = logalpha[j - 1]
            plo, phi = lo[j - 1], hi[j - 1]
            with np.errstate(invalid="ignore"):
                prev_tot = np.logaddexp.reduce(prev, axis=0)
            peak = prev_tot.max()
            dmin, dmax = lo[j] - phi, hi[j] - plo
            d = np.arange(dmin, dmax + 1)
            kernel = np.where(d >= 1, np.exp(-a * np.abs(d - targets[j])), 0.0)
            if np.isfinite(peak):
                with np.errstate(under="ignore"):
                    conv = fftconvolve(np.exp(prev_tot - peak), kernel)
                start = phi - plo
                part = conv[start : start + idx.size]
                # FFT round-off leaves tiny negative values where the weight is ~0.
                floor = 1e-13 * max(part.max(), 0.0)
                with np.errstate(divide="ignore"):
                    cur[0] = np.where(part > floor, np.log(np.maximum(part, 1e-300)), -np.inf)
                cur[0] += peak + loglen
            # Runs: level j in the same interval as level j-1.
            s, e = max(lo[j], plo), min(hi[j], phi)
            if s <= e:
                rs = slice(s - lo[j], e - lo[j] + 1)
                ps = slice(s - plo, e - plo + 1)
                for r in range(1, j + 1):
                    cur[r, rs] = prev[r - 1, ps] - a * targets[j] + loglen[rs] - math.log(r + 1)
        logalpha.append(cur)
    # Final gap to n, then sample backwards.
    last = m - 1
    idx = np.arange(lo[last], hi[last] + 1)
    final = logalpha[last] - a * np.abs(n - idx - targets[m])[None, :]
    flat = exponential_select(final.ravel())
    run, pos = divmod(flat, idx.size)
    ranks = [0] * m
    ranks[last] = lo[last] + pos
    for j in range(last, 0, -1):
        if run > 0:
            ranks[j - 1] = ranks[j]
            run -= 1
            continue
        prev = logalpha[j - 1]
        pidx = np.arange(lo[j - 1], hi[j - 1] + 1)
        dist = ranks[j] - pidx
        with np.errstate(invalid="ignore"):
            w = np.where(dist >= 1, prev - a * np.abs(dist - targets[j])[None, :], -np.inf)
        flat = exponential_select(w.ravel())
        run, pos = divmod(flat, pidx.size)
        ranks[j - 1] = lo[j - 1] + pos
    return ranks


def _sorted_clipped(x: np.ndarray, lower: float, upper: float) -> np.ndarray:
    z = np.clip(x, lower, upper)
    z.sort()
    return z


def _jointexp_values(
    z_sorted: np.ndarray,
    bounds: tuple[float, float],
    levels: np.ndarray,
    epsilon: float,
    neighbouring: str,
    rng: np.random.Generator,
) -> np.ndarray:
    edges = _Edges(z_sorted, *bounds)
    sens = jointexp_sensitivity(levels, neighbouring)
    ranks = np.asarray(_joint_exp_ranks(edges, levels, epsilon, sens))
    lows = edges.at(ranks)
    highs = edges.at(ranks + 1)
    return np.sort(rng.uniform(lows, highs))


def dp_quantiles(
    x: Any,
    q: Any,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    method: str = "jointexp",
    neighbouring: str = "replace",
    random_state: Any = None,
    description: str = "quantiles",
    _presorted: bool = False,
) -> Release:
    """Release several quantiles of ``x`` under pure ``epsilon``-DP.

    Parameters
    ----------
    x : array-like of shape (n,)
        The sensitive sample; finite values.
    q : sequence of float
        Strictly increasing levels in (0, 1).
    epsilon : float
        The privacy budget of the whole release.
    bounds : (float, float)
        Public bounds; values outside are clipped (always, as the release says).
    method : {"jointexp", "independent"}, default "jointexp"
        ``"jointexp"`` samples all levels from one exponential mechanism over
        ordered interval tuples (Gillenwater et al.); ``"independent"`` runs the
        single-quantile exponential mechanism once per level with ``epsilon / m``.
    neighbouring : {"replace", "add_remove"}, default "replace"
        The neighbouring relation the guarantee is stated for.
    random_state : None, int or Generator
        Seeds only the uniform draw inside the chosen intervals (the selection
        noise comes from OpenDP and cannot be seeded).
    description : str
        What the release is, for the ledger.

    Returns
    -------
    Release
        ``value`` is a sorted float array of the released quantiles.

    Notes
    -----
    Divergence from a textbook implementation: intervals whose weight lies more
    than ``1500`` nats below a level's target rank are left out (their weight is
    below what float64 can hold next to the mode), which makes the cost
    independent of ``n`` apart from sorting. The forward pass computes the
    JointExp weights in floating point with FFT convolutions, as the reference
    implementations do; the sampling steps are exact given those weights.

    References
    ----------
    Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
    Smith. "Privacy-preserving statistical estimation with optimal convergence
    rates". STOC 2011.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal(2000)
    >>> r = dp_quantiles(x, [0.25, 0.5, 0.75], epsilon=1.0, bounds=(-10, 10))
    >>> r.value.shape, r.epsilon
    ((3,), 1.0)
    """
    epsilon = check_epsilon(epsilon)
    lower, upper = check_bounds(bounds)
    levels = _check_levels(q)
    neighbouring = check_neighbouring(neighbouring)
    check_choice(method, "method", ("jointexp", "independent"))
    rng = check_random_state(random_state)
    arr = _check_sample(x)
    z = arr if _presorted else _sorted_clipped(arr, lower, upper)
    if method == "jointexp":
        values = _jointexp_values(z, (lower, upper), levels, epsilon, neighbouring, rng)
        sens = jointexp_sensitivity(levels, neighbouring)
        mechanism = "JointExp (exponential mechanism over ordered intervals)"
    else:
        eps_each = epsilon / levels.size
        values = np.sort(
            np.concatenate(
                [
                    _jointexp_values(z, (lower, upper), levels[j : j + 1], eps_each, neighbouring, rng)
                    for j in range(levels.size)
                ]
            )
        )
        sens = (
            2.0
            if neighbouring == "replace"
            else float(max(jointexp_sensitivity(levels[j : j + 1], neighbouring) for j in range(levels.size)))
        )
        mechanism = "exponential mechanism per level (epsilon split equally)"
    return Release(
        value=values,
        epsilon=epsilon,
        mechanism=mechanism,
        parameters={
            "levels": tuple(float(v) for v in levels),
            "bounds": (lower, upper),
            "sensitivity": sens,
            "neighbouring": NEIGHBOURING[neighbouring],
            "note": _CLIP_NOTE,
        },
        description=description,
    )


def dp_quantile(
    x: Any,
    q: float,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    neighbouring: str = "replace",
    random_state: Any = None,
    description: str = "quantile",
) -> Release:
    """Release one quantile of ``x`` with the exponential mechanism (pure ``epsilon``-DP).

    The output is drawn with density proportional to
    ``exp(-epsilon * |#{x_i < y} - q n| / 2)`` on ``[lower, upper]``: an interval between
    consecutive sorted points is chosen with probability proportional to its length
    times that weight (exactly, by Gumbel-max), then a uniform point inside it.

    Returns
    -------
    Release
        ``value`` is a float.

    References
    ----------
    Smith. "Privacy-preserving statistical estimation with optimal convergence
    rates". STOC 2011.

    Examples
    --------
    >>> import numpy as np
    >>> r = dp_quantile(np.arange(1000.0), 0.5, epsilon=1.0, bounds=(0, 1000))
    >>> 400 < r.value < 600
    True
    """
    rel = dp_quantiles(
        x,
        [q],
        epsilon,
        bounds,
        neighbouring=neighbouring,
        random_state=random_state,
        description=description,
    )
    return Release(
        value=float(rel.value[0]),
        epsilon=rel.epsilon,
        mechanism="exponential mechanism (Smith)",
        parameters={**rel.parameters, "sensitivity": 1.0},
        description=description,
    )


def _unbounded_sorted(
    z: np.ndarray,
    level: float,
    epsilon: float,
    anchor: float,
    base: float,
    neighbouring: str,
    n_public: float,
    max_buckets: int,
    mirrored: bool = False,
) -> float:
    """Above-threshold scan on sorted ``z`` (or on ``-z`` when ``mirrored``), no copies."""
    e1 = e2 = epsilon / 2.0
    query_scale = (2.0 if neighbouring == "replace" else 1.0) / e2
    # Integer counts, integer threshold and exact discrete Laplace noise: the
    # above-threshold argument holds verbatim on the integers.
    threshold = int(add_discrete_laplace(math.ceil(level * n_public), 1.0 / e1))
    log_base = math.log(base)
    # Stop where the bucket edges would overflow float64 (a public, data-independent cap):
    # a scan that never fires then returns the last finite edge, not inf.
    max_buckets = min(max_buckets, int((_LOG_FLOAT_MAX - 1.0 - math.log1p(abs(anchor))) / log_base))
    n = z.size
    k, batch = 0, 256
    while k < max_buckets:
        ks = np.arange(k, min(k + batch, max_buckets))
        edges = np.expm1((ks + 1) * log_base) + anchor
        if mirrored:  # count of -z below the edge = count of z above -edge
            counts = n - np.searchsorted(z, -edges, side="right")
        else:
            counts = np.searchsorted(z, edges, side="left")
        noisy = add_discrete_laplace(counts, query_scale)
        hit = np.flatnonzero(noisy > threshold)
        if hit.size:
            return float(edges[hit[0]])
        k += ks.size
        batch = min(batch * 2, 8192)
    return float(np.expm1(max_buckets * log_base) + anchor)


def unbounded_quantile(
    x: Any,
    q: float,
    epsilon: float,
    lower: float,
    *,
    base: float = 1.001,
    neighbouring: str = "replace",
    n: int | None = None,
    max_buckets: int = 10**6,
    description: str = "unbounded quantile",
) -> Release:
    """Release a quantile with only a public lower anchor: Durfee's above-threshold scan.

    Buckets grow geometrically from ``lower``: bucket ``k`` holds the values with
    ``floor(log_base(x - lower + 1)) = k``. A noisy threshold ``ceil(q n) + Lap(1/e1)`` is
    drawn, the cumulative bucket counts are scanned upward and the first ``k`` whose
    count plus fresh noise exceeds it gives ``base**(k+1) - 1 + lower``. Half of
    ``epsilon`` (``e1``) goes to the threshold and half (``e2``) to the queries. The
    noise is the exact discrete Laplace on integer counts (the paper uses
    continuous Laplace; the above-threshold proof holds for both).

    Parameters
    ----------
    x : array-like of shape (n,)
        Finite values; values below ``lower`` are clipped to it.
    q : float
        Level in (0, 1).
    epsilon : float
        Privacy budget.
    lower : float
        Public anchor (lower end of the first bucket).
    base : float, default 1.001
        Bucket growth factor (the paper's default).
    neighbouring : {"replace", "add_remove"}, default "replace"
        Under ``"add_remove"`` the cumulative counts are monotone and the query
        noise is ``Lap(1/e2)`` (Durfee's analysis); under ``"replace"`` they are not,
        and the standard above-threshold query noise ``Lap(2/e2)`` is used.
    n : int, optional
        Public (or previously released) sample size for the threshold ``q n``.
        Required under ``"add_remove"``, where the true size is private; under
        ``"replace"`` it defaults to ``len(x)``, which is public there.
    max_buckets : int, default 1e6
        The scan stops here (the last bucket's edge is returned).

    Returns
    -------
    Release
        ``value`` is a float.

    References
    ----------
    Durfee. "Unbounded Differentially Private Quantile and Maximum Estimation".
    NeurIPS 2023.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(size=5000)
    >>> r = unbounded_quantile(x, 0.9, epsilon=1.0, lower=0.0)
    >>> 1.0 < r.value < 4.0
    True
    """
    epsilon = check_epsilon(epsilon)
    lower = _check_anchor(lower, "lower")
    base = _check_base(base)
    neighbouring = check_neighbouring(neighbouring)
    level = float(_check_levels(q)[0])
    max_buckets = check_positive_int(max_buckets, "max_buckets")
    arr = _check_sample(x)
    n_public = _public_n(n, arr.size, neighbouring)
    z = np.maximum(arr, lower)
    z.sort()
    value = _unbounded_sorted(z, level, epsilon, lower, base, neighbouring, n_public, max_buckets)
    return Release(
        value=value,
        epsilon=epsilon,
        mechanism="above-threshold over geometric buckets (Durfee)",
        parameters={
            "level": level,
            "lower_anchor": lower,
            "base": base,
            "threshold_scale": 2.0 / epsilon,
            "query_scale": (2.0 if neighbouring == "replace" else 1.0) * 2.0 / epsilon,
            "neighbouring": NEIGHBOURING[neighbouring],
            "note": "inputs below the lower anchor clipped to it (always applied)",
        },
        description=description,
    )


def _check_anchor(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise ParameterError(f"{name} must be a finite number, got {value!r}.", argument=name)
    if not math.isfinite(float(value)):
        raise ParameterError(f"{name} must be a finite number, got {value!r}.", argument=name)
    return float(value)


def _check_base(base: Any) -> float:
    if isinstance(base, bool) or not isinstance(base, int | float) or not (math.isfinite(base) and base > 1):
        raise ParameterError(f"base must be a finite number > 1, got {base!r}.", argument="base")
    return float(base)


def _public_n(n: Any, size: int, neighbouring: str) -> float:
    if n is None:
        if neighbouring == "add_remove":
            raise ParameterError(
                "under neighbouring='add_remove' the sample size is private: pass n, a public "
                "or previously released (noisy) count.",
                argument="n",
            )
        return float(size)
    if (
        isinstance(n, bool)
        or not isinstance(n, numbers.Real)
        or not (math.isfinite(float(n)) and float(n) >= 1)
    ):
        raise ParameterError(f"n must be a number >= 1, got {n!r}.", argument="n")
    return float(n)
