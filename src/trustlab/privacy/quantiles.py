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

**Every release lies on a public grid.** The bounded mechanisms snap the clipped
data to the grid ``lower + k * step``, ``step = (upper - lower) / resolution``,
``k = 0 .. resolution`` (default ``resolution = 2**20``), run the exponential
mechanism over grid points with integer arithmetic (interval weights are integer
counts of grid points) and return ``lower + k * step`` computed from the integer
``k`` alone, so the low bits of an output say nothing about the data (Mironov,
CCS 2012). Ties are broken by a secure uniform jitter of each record inside its
own grid cell on a finer integer grid, which keeps the guarantee exact (see
:func:`dp_quantiles`). All randomness comes from the secure samplers: the
selection steps are exact Gumbel-max draws through OpenDP
(:func:`~trustlab.privacy.samplers.exponential_select`), the jitter and the point
inside the chosen interval are exact uniform integers from the OS generator
(:func:`~trustlab.privacy.samplers.uniform_int`). Nothing is seeded:
``random_state`` is refused. The unbounded scan's outputs are bucket edges, a
public grid as well, and its noise is OpenDP's exact discrete Laplace.

Neighbouring relations: ``"replace"`` (swap one record; ``n`` is public) and
``"add_remove"`` (add or remove one record).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from trustlab._validation import (
    check_bounds,
    check_choice,
    check_epsilon,
    check_positive_int,
)
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace, exponential_select, uniform_int

__all__ = [
    "DEFAULT_RESOLUTION",
    "MAX_RESOLUTION",
    "check_neighbouring",
    "dp_quantile",
    "dp_quantiles",
    "jointexp_sensitivity",
    "unbounded_quantile",
]

NEIGHBOURING = {"replace": "replace one record", "add_remove": "add/remove one record"}

DEFAULT_RESOLUTION = 2**20
"""Default number of grid steps across the public bounds of a bounded quantile release."""

MAX_RESOLUTION = 2**40
"""Largest ``resolution`` accepted: the fine tie-breaking grid keeps at least ``2**21``
sub-positions per grid point inside the 62-bit integer range."""

# The fine grid (grid points times tie-breaking sub-positions) has at most this many
# positions, so every position, difference and uniform draw is an exact int64.
_FINE_TOTAL = 2**62
# Ranks whose tuples weigh less than exp(-_MARGIN_NATS - epsilon) relative to the total
# are left out of the computation (see _joint_exp_ranks); exp(-1400) is far below the
# smallest positive float64 (about exp(-744.4)).
_MARGIN_NATS = 1400.0
# Blocked log-space filters: at most this many nats of kernel decay inside one block.
_BLOCK_NATS = 32.0
_LOG_FLOAT_MAX = math.log(np.finfo(float).max)
_MAX_PUBLIC_N = 2**53
_CLIP_NOTE = "inputs clipped to the public bounds (always applied; says nothing about the data)"
_NO_SEED = (
    "random_state is not accepted: DP quantiles are never seeded. Every random choice (the "
    "selection, the tie-breaking jitter, the point inside the chosen interval) comes from the "
    "secure samplers, because a seeded draw would be part of the mechanism and could give the "
    "data back. Drop the random_state argument."
)


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


def _check_resolution(resolution: Any) -> int:
    if (
        isinstance(resolution, bool)
        or not isinstance(resolution, numbers.Integral)
        or not 1 <= int(resolution) <= MAX_RESOLUTION
    ):
        raise ParameterError(
            f"resolution must be an integer between 1 and 2**40 (the number of grid steps across "
            f"the public bounds), got {resolution!r}; the default is 2**20.",
            argument="resolution",
        )
    return int(resolution)


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


# --------------------------------------------------------------------------------------
# The public grid and the fine tie-breaking grid


class _Grid:
    """The public output grid ``lower + k * step``, ``k = 0 .. resolution``."""

    def __init__(self, bounds: tuple[float, float], resolution: Any) -> None:
        lower, upper = bounds
        self.resolution = _check_resolution(resolution)
        width = upper - lower
        if not math.isfinite(width):
            raise ParameterError(
                f"bounds ({lower!r}, {upper!r}) are too far apart: upper - lower overflows float64. "
                "Rescale the data (e.g. to other units) so that the bounds' width is finite.",
                argument="bounds",
            )
        self.step = width / self.resolution
        if not self.step >= np.finfo(float).tiny:
            raise ParameterError(
                f"resolution {self.resolution} is too fine for bounds ({lower!r}, {upper!r}): the "
                "grid step (upper - lower) / resolution underflows float64. Use a smaller "
                "resolution or rescale the data.",
                argument="resolution",
            )
        self.lower, self.upper = lower, upper

    def snap(self, z: np.ndarray) -> np.ndarray:
        """Nearest grid index of each (clipped) value, as int64; monotone in ``z``."""
        idx = np.rint((np.clip(z, self.lower, self.upper) - self.lower) / self.step)
        return np.clip(idx, 0, self.resolution).astype(np.int64)

    def values(self, idx: np.ndarray) -> np.ndarray:
        """``lower + idx * step`` from the integer indices alone, kept inside the bounds."""
        vals = self.lower + np.asarray(idx, dtype=np.int64).astype(float) * self.step
        return np.clip(vals, self.lower, self.upper)


def _default_jitter(resolution: int) -> int:
    """Sub-positions per grid point: as many as fit the fine grid into ``2**62``."""
    return _FINE_TOTAL // (resolution + 1)


class _FineEdges:
    """Sorted fine-grid positions of the records, with lazily drawn tie-breaking jitter.

    Record ``i`` with grid index ``s_i`` sits at fine position ``s_i * K + u_i``, ``u_i``
    uniform on ``0 .. K - 1`` (independent, secure). Edge ``0`` is ``-1``, edge ``r``
    (``1 <= r <= n``) the ``r``-th smallest fine position, edge ``n + 1`` the last
    fine position ``N - 1``; interval ``r`` holds the fine positions ``o`` with
    ``edge[r] < o <= edge[r + 1]``, exactly those with ``r`` records strictly below.
    Records are snapped and jittered in whole runs of equal grid indices, and only
    for the runs that the computation reaches: records in other runs never
    influence it (their jitter would not change any computed weight).
    """

    def __init__(self, z_sorted: np.ndarray, grid: _Grid, jitter: int) -> None:
        self.z = z_sorted
        self.grid = grid
        self.n = int(z_sorted.size)
        self.jitter = int(jitter)
        self.total = (grid.resolution + 1) * self.jitter
        self.edges = np.empty(self.n + 2, dtype=np.int64)
        self.edges[0], self.edges[-1] = -1, self.total - 1
        self.done = np.zeros(self.n + 2, dtype=bool)
        self.done[0] = self.done[-1] = True

    def _run_start(self, i: int) -> int:
        """First record index of the run (equal grid index) holding record ``i``."""
        cell = self.grid.snap(self.z[i : i + 1])[0]
        lo, step = i, 256
        while lo > 0:
            start = max(0, lo - step)
            same = int(np.count_nonzero(self.grid.snap(self.z[start:lo]) == cell))
            if same < lo - start:
                return lo - same
            lo, step = start, 2 * step
        return 0

    def _run_stop(self, i: int) -> int:
        """One past the last record index of the run holding record ``i``."""
        cell = self.grid.snap(self.z[i : i + 1])[0]
        hi, step = i + 1, 256
        while hi < self.n:
            stop = min(self.n, hi + step)
            same = int(np.count_nonzero(self.grid.snap(self.z[hi:stop]) == cell))
            if same < stop - hi:
                return hi + same
            hi, step = stop, 2 * step
        return self.n

    def ensure(self, lo: int, hi: int) -> None:
        """Make edges ``lo .. hi`` available (drawing the jitter of the runs they touch)."""
        a, b = max(lo, 1), min(hi, self.n)
        if a > b or self.done[a : b + 1].all():
            return
        i0, i1 = self._run_start(a - 1), self._run_stop(b - 1)
        seg = slice(i0 + 1, i1 + 1)
        need = ~self.done[seg]
        vals = self.edges[seg].copy()
        cells = self.grid.snap(self.z[i0:i1][need])
        vals[need] = cells * self.jitter + uniform_int(self.jitter, int(need.sum()))
        # Runs occupy disjoint fine ranges, so sorting the segment only orders each run
        # internally (runs drawn earlier are already sorted and do not move).
        vals.sort()
        self.edges[seg] = vals
        self.done[seg] = True

    def log_lengths(self, lo: int, hi: int) -> np.ndarray:
        """Log of the number of fine positions in intervals ``lo .. hi`` (``-inf`` if none)."""
        self.ensure(lo, hi + 1)
        length = np.diff(self.edges[lo : hi + 2]).astype(float)
        with np.errstate(divide="ignore"):
            return np.log(length)


# --------------------------------------------------------------------------------------
# Exact-in-log-space exponential filters (no subtraction, no floor)


def _block_size(a: float, length: int) -> int:
    """Block length: kernel decay ``a * B <= 32`` nats and at most ``~sqrt(length)`` steps."""
    cap = max(256, math.isqrt(max(length, 1)) + 1)
    by_decay = int(_BLOCK_NATS / a) if a > 0 and _BLOCK_NATS / a < cap else cap
    return max(1, min(by_decay, cap, max(length, 1)))


def _decay_filter(x: np.ndarray, a: float) -> np.ndarray:
    """``y[r, k] = log sum_{p <= k} exp(x[r, p] - a (k - p))`` along the rows of ``x``.

    Computed in blocks: inside a block ``logaddexp.accumulate`` runs on
    ``x[p] + a (p - block start)`` (at most 32 nats of offset, so the values keep
    their precision), and the carry from one block to the next is combined in a
    loop over blocks. Every term is added, none subtracted, so each output has a
    relative error of a few ulps of its own logarithm times the number of steps;
    ``-inf`` entries are exact zeros.
    """
    rows, length = x.shape
    if length == 0:
        return x.copy()
    b = _block_size(a, length)
    nb = -(-length // b)
    padded = np.full((rows, nb * b), -np.inf)
    padded[:, :length] = x
    blocks = padded.reshape(rows, nb, b)
    off = a * np.arange(b)
    acc = np.logaddexp.accumulate(blocks + off, axis=2)
    carries = np.empty((rows, nb))
    carry = np.full(rows, -np.inf)
    tail = a * (b - 1)
    for c in range(nb):
        carries[:, c] = carry
        carry = np.logaddexp(acc[:, c, -1], carry - a) - tail
    out = np.logaddexp(acc, (carries - a)[:, :, None]) - off
    return out.reshape(rows, nb * b)[:, :length]


def _decay_prefix(x: np.ndarray, a: float) -> np.ndarray:
    """``y[r, e] = log sum_{p <= e} exp(x[r, p] - a p)`` along the rows of ``x`` (blocked)."""
    rows, length = x.shape
    if length == 0:
        return x.copy()
    b = _block_size(a, length)
    nb = -(-length // b)
    padded = np.full((rows, nb * b), -np.inf)
    padded[:, :length] = x
    blocks = padded.reshape(rows, nb, b)
    acc = np.logaddexp.accumulate(blocks - a * np.arange(b), axis=2)
    carries = np.empty((rows, nb))
    carry = np.full(rows, -np.inf)
    for c in range(nb):
        carries[:, c] = carry
        carry = np.logaddexp(carry, acc[:, c, -1] - a * c * b)
    out = np.logaddexp(carries[:, :, None], acc - (a * b * np.arange(nb))[None, :, None])
    return out.reshape(rows, nb * b)[:, :length]


def _transition(prev: np.ndarray, plo: int, lo: int, hi: int, a: float, target: float) -> np.ndarray:
    """``log sum_{p < r} exp(prev[p - plo] - a |r - p - target|)`` for ``r = lo .. hi``.

    ``p`` runs over ``plo .. plo + len(prev) - 1``. The kernel is split at ``d = r - p``:
    for ``d > target`` it is ``exp(-a (d - target))``, a causal exponential filter; for
    ``1 <= d <= floor(target)`` it is ``exp(-a (target - d))`` on a window of fixed
    width ``w = floor(target)``, computed van Herk / Gil-Werman style (blocks of ``w``:
    a window is a block suffix plus the next block's prefix), so nothing is subtracted.
    """
    width = prev.size
    phi = plo + width - 1
    r = np.arange(lo, hi + 1)
    out = np.full(r.size, -np.inf)
    peak = prev.max() if width else -np.inf
    if not np.isfinite(peak):
        return out
    p = prev - peak
    d_far = math.floor(target) + 1
    # d >= d_far: sum_{p <= k} exp(P - a (k - p)), k = r - d_far
    filt = _decay_filter(p[None, :], a)[0]
    k = r - d_far
    ok = k >= plo
    kk = np.minimum(k[ok], phi)
    out[ok] = filt[kk - plo] - a * (k[ok] - kk) - a * (d_far - target)
    w = d_far - 1
    if w >= 1:
        bs = min(w, width)
        nseg = -(-width // bs)
        flat = np.full(nseg * bs, -np.inf)
        flat[:width] = p
        segs = flat.reshape(nseg, bs)
        suf = _decay_filter(segs[:, ::-1], a)[:, ::-1].ravel()[:width]
        pre = _decay_prefix(segs, a).ravel()[:width]
        s = r - w  # window start: p in [s, s + w - 1]
        near = np.full(r.size, -np.inf)
        left = (s < plo) & (s + w - 1 >= plo)
        e = np.minimum(s[left] + w - 1, phi)
        near[left] = pre[e - plo] - a * (plo - s[left])
        mid = (s >= plo) & (s <= phi)
        sl = s[mid] - plo
        el = np.minimum(s[mid] + w - 1, phi) - plo
        seg_end = np.minimum((sl // bs + 1) * bs - 1, width - 1)
        val = suf[sl]
        two = el > seg_end
        nxt = (sl[two] // bs + 1) * bs
        val[two] = np.logaddexp(val[two], pre[el[two]] - a * (nxt - sl[two]))
        near[mid] = val
        out = np.logaddexp(out, near - a * (target - w))
    return out + peak


# --------------------------------------------------------------------------------------
# JointExp


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x)) if x.size else -math.inf
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(x - top))))


def _joint_exp_ranks(fine: _FineEdges, levels: np.ndarray, epsilon: float, sensitivity: float) -> list[int]:
    """Sample interval indices ``r_1 <= ... <= r_m`` from JointExp's distribution.

    Interval ``r`` holds the fine positions with ``r`` records strictly below. A tuple
    has weight ``prod_runs len^k / k! * exp(-a * sum_{j=1}^{m+1} |r_j - r_{j-1} - t_j|)``
    with ``a = epsilon / (2 * sensitivity)``, ``r_0 = 0``, ``r_{m+1} = n`` and
    ``t_j = (q_j - q_{j-1}) n``: the exponential mechanism over ``m``-tuples of fine
    positions with the utility of their sorted version (``len^k / k!`` counts the
    tuples whose sorted version puts a run of ``k`` levels in one interval, up to the
    common factor ``m!``).

    Level ``j`` is restricted to ranks within ``half`` of ``q_j n``. Every tuple left
    out has utility below ``-(half + 1)``, so its weight is below
    ``exp(-a (half + 1))``; their total is at most ``N**m / m! * exp(-a (half + 1))``
    (``N`` fine positions). The window is widened until that bound is below
    ``exp(-1400 - epsilon)`` times the computed total: no output's probability moves
    by more than that in absolute terms (far below the smallest float64), and the
    mechanism is ``(epsilon, delta)``-DP with ``delta <= exp(-1400)``.
    """
    n = fine.n
    m = levels.size
    a = epsilon / (2.0 * sensitivity)
    margin = _MARGIN_NATS + epsilon
    log_n_fine = math.log(fine.total)
    targets = np.diff(np.concatenate([[0.0], levels, [1.0]])) * n  # t_1 .. t_{m+1}
    centres = levels * n
    reach = (margin + m * log_n_fine) / a + m
    half = n + 1 if reach >= n + 1 else math.ceil(reach)
    while True:
        lo = [max(0, math.floor(c) - half) for c in centres]
        hi = [min(n, math.ceil(c) + half) for c in centres]
        # Runs that skip gaps of total target above half + 1 have utility below -(half + 1):
        # they are part of the dropped tuples bounded below (and only exist when truncating).
        fwd = _Forward(fine, lo, hi, targets, a, run_cap=None if half > n else half + 1)
        final = [
            (k, st, w - a * np.abs(n - np.arange(st, st + w.size) - targets[m]))
            for k, st, w in fwd.rows(m - 1)
        ]
        flat = np.concatenate([w for _, _, w in final])
        truncated = fwd.capped or any(v > 0 for v in lo) or any(v < n for v in hi)
        if truncated:
            dropped = m * log_n_fine - math.lgamma(m + 1) - a * (half + 1)
            if _logsumexp(flat) - dropped < margin:
                half = min(2 * half + 1, n + 1)
                continue
        break
    return _sample_backward(fwd, final, flat)


class _Forward:
    """JointExp's log forward weights on the windows ``lo[j] .. hi[j]`` (ranks) of each level.

    ``alpha1[j][r]`` is the log total weight of the levels ``1 .. j`` with level ``j`` in
    interval ``r`` and level ``j - 1`` strictly below it. A run of ``k`` levels
    ``s .. j`` (``s = j - k + 1``) in one interval ``r`` weighs
    ``alpha1[s][r] + (k - 1) log len(r) - log k! - a (t_{s+1} + ... + t_j)``
    (the ``1 / k!`` makes the sorted uniform points of a run an exponential mechanism
    over ordered outputs); these rows are formed when needed, so memory is
    ``O(m * width)``. With ``run_cap``, runs whose skipped gaps have targets summing
    above it are left out (their utility is below ``-run_cap``).
    """

    def __init__(
        self,
        fine: _FineEdges,
        lo: list[int],
        hi: list[int],
        targets: np.ndarray,
        a: float,
        run_cap: float | None = None,
    ) -> None:
        self.lo, self.hi, self.targets, self.a = lo, hi, targets, a
        self.run_cap = math.inf if run_cap is None else run_cap
        self.capped = False
        m = len(lo)
        self.cum = np.concatenate([[0.0], np.cumsum(targets[1:m])])  # t_2 + ... + t_{j+1}
        self.loglen = [fine.log_lengths(lo[j], hi[j]) for j in range(m)]
        self.alpha1: list[np.ndarray] = []
        for j in range(m):
            if j == 0:
                self.alpha1.append(self.loglen[0] - a * np.abs(np.arange(lo[0], hi[0] + 1) - targets[0]))
                continue
            total = np.full(hi[j - 1] - lo[j - 1] + 1, -np.inf)
            for _, start, arr in self.rows(j - 1):
                seg = slice(start - lo[j - 1], start - lo[j - 1] + arr.size)
                total[seg] = np.logaddexp(total[seg], arr)
            conv = _transition(total, lo[j - 1], lo[j], hi[j], a, float(targets[j]))
            self.alpha1.append(self.loglen[j] + conv)

    def rows(self, j: int) -> list[tuple[int, int, np.ndarray]]:
        """``(k, start, log weights)`` of runs of ``k`` levels ending at level ``j``."""
        lo, hi = self.lo, self.hi
        out = [(1, lo[j], self.alpha1[j])]
        for k in range(2, j + 2):
            s = j - k + 1
            start, stop = lo[j], hi[s]  # windows move up with the level: the intersection
            if start > stop:
                break
            if self.cum[j] - self.cum[s] > self.run_cap:  # utility below -run_cap: dropped
                self.capped = True
                break
            base = self.alpha1[s][start - lo[s] : stop - lo[s] + 1]
            ll = self.loglen[j][start - lo[j] : stop - lo[j] + 1]
            shift = math.lgamma(k + 1) + self.a * (self.cum[j] - self.cum[s])
            out.append((k, start, base + (k - 1) * ll - shift))
        return out


def _pick(parts: list[tuple[int, int, np.ndarray]], flat: np.ndarray) -> tuple[int, int]:
    """Draw ``(run length, rank)`` with probability proportional to ``exp(flat)``."""
    i = exponential_select(flat)
    for k, start, w in parts:
        if i < w.size:
            return k, start + i
        i -= w.size
    raise AssertionError("index out of range")  # pragma: no cover


def _sample_backward(fwd: _Forward, final: list[tuple[int, int, np.ndarray]], flat: np.ndarray) -> list[int]:
    m = len(fwd.lo)
    ranks = [0] * m
    k, r = _pick(final, flat)
    ranks[m - 1] = r
    for j in range(m - 1, 0, -1):
        if k > 1:  # level j - 1 is in the same interval (a run)
            ranks[j - 1] = r
            k -= 1
            continue
        parts = []
        for kk, start, arr in fwd.rows(j - 1):
            stop = min(start + arr.size, r)  # p < r
            if stop > start:
                p = np.arange(start, stop)
                parts.append((kk, start, arr[: stop - start] - fwd.a * np.abs(r - p - fwd.targets[j])))
        k, r = _pick(parts, np.concatenate([w for _, _, w in parts]))
        ranks[j - 1] = r
    return ranks


def _jointexp_values(
    z_sorted: np.ndarray,
    bounds: tuple[float, float],
    levels: np.ndarray,
    epsilon: float,
    neighbouring: str,
    *,
    resolution: int = DEFAULT_RESOLUTION,
    _jitter: int | None = None,
) -> np.ndarray:
    """JointExp on sorted ``z`` (values outside ``bounds`` are clipped); sorted grid values.

    ``_jitter`` (tests only) sets the number of tie-breaking sub-positions per grid point.
    """
    grid = _Grid(bounds, resolution)
    jitter = _default_jitter(grid.resolution) if _jitter is None else int(_jitter)
    fine = _FineEdges(np.asarray(z_sorted, dtype=float), grid, jitter)
    sens = jointexp_sensitivity(levels, neighbouring)
    ranks = _joint_exp_ranks(fine, np.asarray(levels, dtype=float), epsilon, sens)
    points = []
    for r in ranks:
        fine.ensure(r, r + 1)
        left, right = int(fine.edges[r]), int(fine.edges[r + 1])
        points.append(left + 1 + int(uniform_int(right - left, 1)[0]))
    cells = np.sort(np.asarray(points, dtype=np.int64)) // jitter
    return grid.values(cells)


def _sorted_clipped(x: np.ndarray, lower: float, upper: float) -> np.ndarray:
    z = np.clip(x, lower, upper)
    z.sort()
    return z


def dp_quantiles(
    x: Any,
    q: Any,
    epsilon: float,
    bounds: tuple[float, float],
    *,
    method: str = "jointexp",
    neighbouring: str = "replace",
    resolution: int = DEFAULT_RESOLUTION,
    random_state: Any = None,
    description: str = "quantiles",
    _presorted: bool = False,
    _jitter: int | None = None,
) -> Release:
    """Release several quantiles of ``x`` under pure ``epsilon``-DP, on a public grid.

    The clipped data are snapped to the grid ``lower + k * step`` with
    ``step = (upper - lower) / resolution``; JointExp (or one exponential mechanism
    per level) then selects grid points, and the release is ``lower + k * step``
    computed from the selected integers ``k``.

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
        ordered tuples (Gillenwater et al.); ``"independent"`` runs the
        single-quantile exponential mechanism once per level with ``epsilon / m``.
    neighbouring : {"replace", "add_remove"}, default "replace"
        The neighbouring relation the guarantee is stated for.
    resolution : int, default 2**20
        Number of grid steps across the bounds (``1 .. 2**40``). For integer data
        pass ``int(upper - lower)`` (with integer bounds) so that the grid is the
        integers; a power of two keeps every grid value exact in float64.
    random_state : None
        Not accepted (a :class:`~trustlab.errors.ParameterError` is raised when it is
        anything but ``None``): DP quantiles are never seeded.
    description : str
        What the release is, for the ledger.

    Returns
    -------
    Release
        ``value`` is a sorted float array of grid values inside ``bounds``.

    Notes
    -----
    *Ties.* The exponential mechanism over intervals between sorted points gives an
    interval of zero length zero weight, so with many tied values the ranks inside
    a tie cannot be chosen and the estimate is pushed off the tie (5,000 draws from
    {1, 2, 3} gave quartiles 1.8 / 2.1 / 2.3). Each record is therefore placed at a
    secure uniform sub-position of its grid cell on a finer integer grid
    (``K = 2**62 // (resolution + 1)`` sub-positions per grid point); the mechanism
    runs on the fine grid and the selected fine position is mapped back to its grid
    point by integer division. The jitter is an independent randomised map applied
    to each record, so the guarantee is exact: couple the jitter of the records two
    neighbouring datasets share; for every value of it the jittered datasets are
    neighbours, and averaging ``P[M(D_u) in S] <= exp(epsilon) P[M(D'_u) in S]``
    over the common jitter distribution gives the same inequality for the mechanism.

    *Arithmetic.* Positions, interval lengths and draws are exact int64. The forward
    pass runs in log space (blocked exponential filters, no FFT, no floor), so every
    weight has a relative error of order ``1e-12``. Ranks more than about
    ``(1400 + epsilon + 43 m) / a`` from a level's target are left out, with
    ``a = epsilon / (2 * sensitivity)``: their total probability is below
    ``exp(-1400 - epsilon)`` (checked at run time and widened otherwise), far
    below the smallest float64, so the release is ``(epsilon, delta)``-DP with
    ``delta < exp(-1400)``.

    References
    ----------
    Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
    Smith. "Privacy-preserving statistical estimation with optimal convergence
    rates". STOC 2011. Mironov. "On Significance of the Least Significant Bits for
    Differential Privacy". CCS 2012.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal(2000)
    >>> r = dp_quantiles(x, [0.25, 0.5, 0.75], epsilon=1.0, bounds=(-10, 10))
    >>> r.value.shape, r.epsilon, r.parameters["grid_step"] == 20 / 2**20
    ((3,), 1.0, True)
    """
    if random_state is not None:
        raise ParameterError(_NO_SEED, argument="random_state")
    epsilon = check_epsilon(epsilon)
    lower, upper = check_bounds(bounds)
    grid = _Grid((lower, upper), resolution)
    levels = _check_levels(q)
    neighbouring = check_neighbouring(neighbouring)
    check_choice(method, "method", ("jointexp", "independent"))
    arr = _check_sample(x)
    z = arr if _presorted else _sorted_clipped(arr, lower, upper)
    res = grid.resolution
    if method == "jointexp":
        values = _jointexp_values(
            z, (lower, upper), levels, epsilon, neighbouring, resolution=res, _jitter=_jitter
        )
        sens = jointexp_sensitivity(levels, neighbouring)
        mechanism = "JointExp (exponential mechanism over ordered grid tuples)"
        eps_each = epsilon
    else:
        eps_each = epsilon / levels.size
        values = np.sort(
            np.concatenate(
                [
                    _jointexp_values(
                        z,
                        (lower, upper),
                        levels[j : j + 1],
                        eps_each,
                        neighbouring,
                        resolution=res,
                        _jitter=_jitter,
                    )
                    for j in range(levels.size)
                ]
            )
        )
        sens = float(max(jointexp_sensitivity(levels[j : j + 1], neighbouring) for j in range(levels.size)))
        mechanism = "exponential mechanism per level (epsilon split equally)"
    return Release(
        value=values,
        epsilon=epsilon,
        mechanism=mechanism,
        parameters={
            "levels": tuple(float(v) for v in levels),
            "bounds": (lower, upper),
            "sensitivity": sens,
            "epsilon_per_selection": eps_each,
            "neighbouring": NEIGHBOURING[neighbouring],
            "resolution": grid.resolution,
            "grid_step": grid.step,
            "note": _CLIP_NOTE
            + f"; outputs on the public grid lower + k * {grid.step!r}, k = 0 .. {grid.resolution}; "
            "ties broken by secure jitter inside each grid cell",
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
    resolution: int = DEFAULT_RESOLUTION,
    random_state: Any = None,
    description: str = "quantile",
) -> Release:
    """Release one quantile of ``x`` with the exponential mechanism (pure ``epsilon``-DP).

    The output is a grid point ``y = lower + k * step`` drawn with probability
    proportional to ``exp(-epsilon * |#{x_i < y} - q n| / (2 * s))`` (``s = 1`` under
    replace-one, ``max(q, 1 - q)`` under add/remove), ties broken as in
    :func:`dp_quantiles`: a run of grid points between consecutive records is chosen
    with probability proportional to its number of points times that weight (exactly,
    by Gumbel-max), then a uniform point inside it (exact uniform integers).

    Parameters
    ----------
    x, q, epsilon, bounds, neighbouring, resolution, description
        As in :func:`dp_quantiles` (``q`` one level).
    random_state : None
        Not accepted: DP quantiles are never seeded.

    Returns
    -------
    Release
        ``value`` is a float on the grid.

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
    if random_state is not None:
        raise ParameterError(_NO_SEED, argument="random_state")
    rel = dp_quantiles(
        x,
        [q],
        epsilon,
        bounds,
        neighbouring=neighbouring,
        resolution=resolution,
        description=description,
    )
    return Release(
        value=float(rel.value[0]),
        epsilon=rel.epsilon,
        mechanism="exponential mechanism (Smith) on the public grid",
        parameters={**rel.parameters, "sensitivity": rel.parameters["sensitivity"] / 2.0},
        description=description,
    )


# --------------------------------------------------------------------------------------
# Durfee's unbounded quantile


def _scan_cap(anchor: float, base: float, name: str) -> int:
    """Buckets that fit before the edges ``anchor + base**k - 1`` overflow float64 (public)."""
    if math.log(base) > _LOG_FLOAT_MAX - 1.0:
        raise ParameterError(
            f"base {base!r} is too large: the first bucket edge would overflow float64.", argument="base"
        )
    cap = math.floor((_LOG_FLOAT_MAX - 1.0 - math.log1p(abs(anchor))) / math.log(base))
    if cap < 1:
        raise ParameterError(
            f"the anchor {anchor!r} (with base {base!r}) leaves no room for the bucket scan: its edges "
            "would overflow float64 at once. Rescale the data so the anchor is well below 1e300 in "
            "magnitude, or use a smaller base.",
            argument=name,
        )
    return int(cap)


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
    *,
    anchor_name: str = "lower",
) -> float:
    """Above-threshold scan on sorted ``z`` (or on ``-z`` when ``mirrored``), no copies.

    Outputs are bucket edges ``expm1((k + 1) log(base)) + anchor`` of an integer ``k``:
    a public grid. Raises :class:`~trustlab.errors.ParameterError` (naming
    ``anchor_name``) when the anchor leaves no room for a single bucket.
    """
    e1 = e2 = epsilon / 2.0
    query_scale = (2.0 if neighbouring == "replace" else 1.0) / e2
    # Stop where the bucket edges would overflow float64 (a public, data-independent cap):
    # a scan that never fires then returns the last finite edge, not inf.
    max_buckets = min(max_buckets, _scan_cap(anchor, base, anchor_name))
    # Integer counts, integer threshold and exact discrete Laplace noise: the
    # above-threshold argument holds verbatim on the integers.
    threshold = int(add_discrete_laplace(math.ceil(level * n_public), 1.0 / e1))
    log_base = math.log(base)
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
    continuous Laplace; the above-threshold proof holds for both). The output is a
    bucket edge, a function of the integer ``k`` alone: a public grid.

    Parameters
    ----------
    x : array-like of shape (n,)
        Finite values; values below ``lower`` are clipped to it.
    q : float
        Level in (0, 1).
    epsilon : float
        Privacy budget.
    lower : float
        Public anchor (lower end of the first bucket); its magnitude must leave room
        for the bucket edges in float64 (about ``|lower| < 1e307``).
    base : float, default 1.001
        Bucket growth factor (the paper's default).
    neighbouring : {"replace", "add_remove"}, default "replace"
        Under ``"add_remove"`` the cumulative counts are monotone and the query
        noise is ``Lap(1/e2)`` (Durfee's analysis); under ``"replace"`` they are not,
        and the standard above-threshold query noise ``Lap(2/e2)`` is used.
    n : int, optional
        Public (or previously released) sample size for the threshold ``q n``
        (at most ``2**53``). Required under ``"add_remove"``, where the true size is
        private; under ``"replace"`` it defaults to ``len(x)``, which is public there.
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
    _scan_cap(lower, base, "lower")
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
            "note": "inputs below the lower anchor clipped to it (always applied); outputs are "
            "bucket edges lower + base**(k+1) - 1 of an integer k (a public grid)",
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
        or not (math.isfinite(float(n)) and 1 <= float(n) <= _MAX_PUBLIC_N)
    ):
        raise ParameterError(f"n must be a number between 1 and 2**53, got {n!r}.", argument="n")
    return float(n)
